"""dma_copy: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    HBM,
    INTS,
    NP_DTYPES,
    SBUF,
    TARGETS,
    assert_bits_equal,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, accepted, checker, priced, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["dma_copy"]


# Semantics -------------------------------------------------------------------------------


def _copy(x: np.ndarray, dst: str) -> np.ndarray:
    """What a copy of `x` writes into a `dst` tile of its shape."""
    return cast_to(np.asarray(SPEC.semantics(src=x)).reshape(x.shape), NP_DTYPES[dst])


@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(FLOATS), seed=seeds)
def test_dma_copy_converts_floats_through_fp32(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -1e4, 1e4)
    out = _copy(x, dst)
    assert_bits_equal(out, x.astype(np.float32).astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(shape=tile_shapes(), dtype=st.sampled_from(FLOATS + INTS), seed=seeds)
def test_dma_copy_between_equal_dtypes_is_bit_exact(
    shape: tuple[int, ...], dtype: str, seed: int
) -> None:
    x = random_array(seed, shape, dtype, -1e6, 1e6)
    out = _copy(x, dtype)
    assert_bits_equal(out, x)


def test_dma_copy_of_equal_dtypes_keeps_nan_payloads_and_signed_zeros() -> None:
    bits = np.array([[0x7FC00001, 0xFFC00123, 0x80000000, 0x00000001]], dtype=np.uint32)
    x = bits.view(np.float32)
    out = cast_to(np.asarray(SPEC.semantics(src=x)), np.dtype(np.float32))
    np.testing.assert_array_equal(out.view(np.uint32), bits)


@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(INTS), seed=seeds)
def test_dma_copy_float_to_int_rounds_half_even_and_saturates(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -70000.0, 70000.0)
    ties = np.array([2.5, -3.5, 0.5], dtype=np.float32).astype(x.dtype)
    x.reshape(-1)[:3] = ties[: x.size]
    info = np.iinfo(NP_DTYPES[dst])
    exact = np.rint(x.astype(np.float64))  # rint: round half to even
    expected = np.clip(exact, info.min, info.max).astype(NP_DTYPES[dst])
    out = _copy(x, dst)
    assert_bits_equal(out, expected)


@settings(deadline=None)
@given(shape=tile_shapes(), dst=st.sampled_from(FLOATS), seed=seeds)
def test_dma_copy_int_to_float_rounds_through_fp32(
    shape: tuple[int, ...], dst: str, seed: int
) -> None:
    x = random_array(seed, shape, "int32", -(2**31), 2**31 - 1)
    with np.errstate(over="ignore"):  # int32 beyond float16's range becomes inf
        out = _copy(x, dst)
        expected = x.astype(np.float32).astype(NP_DTYPES[dst])
    assert_bits_equal(out, expected)


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.DMA,
    dst=tile("dst", (128, 256), "bfloat16", SBUF),
    src=tile("src", (128, 256), "float32", HBM),
)


ACCEPTED: list[Any] = [
    accepted("hbm-to-sbuf"),
    accepted(
        "reshaped",
        dst=tile("dst", (64, 512), "float32", SBUF),
        src=tile("src", (32768,), "float32", HBM),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "counts",
        ["src has 256 elements [2, 128]", "dst 128 [1, 128]", "must be equal"],
        dst=tile("dst", (1, 128), "float32", SBUF),
        src=tile("src", (2, 128), "float32", HBM),
    ),
    violation(
        "counts-1d-in-hbm",
        ["src has 4 elements [4]", "dst 3 [3]"],
        dst=tile("dst", (3,), "float32", HBM),
        src=tile("src", (4,), "float32", HBM),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, partitions: int, free: int, dtype: str = "float32", bufs: Any = (HBM, SBUF)
) -> Any:
    """A copy of [partitions, free] from bufs[0] to bufs[1]."""
    tiles = {
        "dst": tile("dst", (partitions, free), dtype, bufs[1]),
        "src": tile("src", (partitions, free), dtype, bufs[0]),
    }
    return make_check(target, Engine.DMA, tiles, {})


def _cost(
    target: str,
    partitions: int,
    free: int,
    dtype: str = "float32",
    src_buf: Any = HBM,
    dst_buf: Any = SBUF,
) -> int:
    return priced(SPEC, _sized(target, partitions, free, dtype, (src_buf, dst_buf)))


COST_GROWTH = Growth(
    _sized,
    sizes=(1, 16384),
    params={
        "target": TARGETS,
        "partitions": range(1, 129),
        "dtype": FLOATS,
        "bufs": [(HBM, SBUF), (SBUF, HBM), (SBUF, SBUF), (HBM, HBM)],
    },
    slack=1,
)


@pytest.mark.parametrize("target", TARGETS)
def test_dma_copy_cost_is_strictly_larger_past_the_knee(target: str) -> None:
    costs = [_cost(target, 128, f) for f in (1, 4096, 8192, 16384)]
    assert costs[0] < costs[1] < costs[2] < costs[3]


@pytest.mark.parametrize("target", TARGETS)
def test_dma_copy_from_hbm_is_capped_by_hbm_bandwidth(target: str) -> None:
    hbm_rate = load_arch(target).dma_hbm_bytes_per_ns  # B/ns per core
    nbytes = 128 * 16384 * 4
    assert _cost(target, 128, 16384) >= math.floor(nbytes / hbm_rate)


def test_dma_copy_on_trn2_is_faster_than_on_trn1_for_sbuf_to_sbuf() -> None:
    assert _cost("trn2", 128, 8192, "float32", SBUF, SBUF) < _cost(
        "trn1", 128, 8192, "float32", SBUF, SBUF
    )
