"""tensor_copy: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import (
    Growth,
    accepted,
    checker,
    least_cost,
    on_each_target,
    violation,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["tensor_copy"]


# Semantics -------------------------------------------------------------------------------


def _copy(x: np.ndarray, dst: str) -> np.ndarray:
    """What a copy of `x` writes into a `dst` tile of its shape."""
    return cast_to(np.asarray(SPEC.semantics(src=x)).reshape(x.shape), NP_DTYPES[dst])


@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(FLOATS), seed=seeds)
def test_tensor_copy_casts_floats_through_fp32(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -3e4, 3e4)
    out = _copy(x, dst)
    assert_bits_equal(out, x.astype(np.float32).astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(shape=tile_shapes(), dtype=st.sampled_from(FLOATS + INTS), seed=seeds)
def test_tensor_copy_of_equal_dtypes_is_bit_exact(
    shape: tuple[int, ...], dtype: str, seed: int
) -> None:
    x = random_array(seed, shape, dtype, -1e9, 1e9)
    out = _copy(x, dtype)
    assert_bits_equal(out, x)


@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(INTS), dst=st.sampled_from(INTS), seed=seeds)
def test_tensor_copy_between_int_dtypes_saturates(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    # Small enough that the fp32 detour is exact; wide enough to overflow narrow targets.
    x = random_array(seed, shape, src, -70000, 70000)
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(x.astype(np.int64), info.min, info.max).astype(NP_DTYPES[dst])
    out = _copy(x, dst)
    assert_bits_equal(out, expected)


@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(INTS), seed=seeds)
def test_tensor_copy_float_to_int_rounds_half_even(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -300.0, 300.0)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -2.5], dtype=np.float32).astype(x.dtype)
    x.reshape(-1)[:5] = ties[: x.size]
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(np.rint(x.astype(np.float64)), info.min, info.max).astype(NP_DTYPES[dst])
    out = _copy(x, dst)
    assert_bits_equal(out, expected)


def test_tensor_copy_to_int_sends_nan_to_zero_and_inf_to_the_limits() -> None:
    x = np.array([[np.nan, np.inf, -np.inf, 1e10]], dtype=np.float32)
    out = cast_to(np.asarray(SPEC.semantics(src=x)), np.dtype(np.int16))
    np.testing.assert_array_equal(out, np.array([[0, 32767, -32768, 32767]], dtype=np.int16))


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 64), "bfloat16", SBUF),
    src=tile("src", (128, 64), "float32", PSUM),
)


_SRC = tile("src", (128, 4, 16), "float32", SBUF)
ACCEPTED: list[Any] = [
    *on_each_target("vector", engine=Engine.VECTOR, src=_SRC),
    *on_each_target("gpsimd", engine=Engine.GPSIMD, src=_SRC),
    accepted("scalar-trn2", target="trn2", engine=Engine.SCALAR),
]
VIOLATIONS: list[Any] = [
    violation(
        "partition-sizes",
        ["partition sizes differ", "dst 64", "src 128"],
        dst=tile("dst", (64, 64), "float32"),
    ),
    violation(
        "free-sizes",
        ["elements per partition differ", "dst 32", "src 64"],
        dst=tile("dst", (128, 32), "float32"),
    ),
    violation("gpsimd-psum-src", ["src is in PSUM", "GpSimd"], engine=Engine.GPSIMD),
    violation(
        "gpsimd-psum-dst",
        ["dst is in PSUM", "GpSimd"],
        engine=Engine.GPSIMD,
        dst=tile("dst", (128, 64), "float32", PSUM),
        src=tile("src", (128, 64), "float32", SBUF),
    ),
    violation(
        "scalar-on-trn1",
        ["Scalar engine", "tensor_copy", "NC-v2"],
        target="trn1",
        engine=Engine.SCALAR,
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, engine: Engine, free: int, dtype: str = "float32", dst_dtype: str | None = None
) -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dst_dtype or dtype),
        "src": tile("src", (128, free), dtype),
    }
    return make_check(target, engine, tiles, {})


def _cost(*args: Any, **kwargs: Any) -> int:
    return SPEC.cost(_sized(*args, **kwargs))


# Priced on every engine and target, the Scalar engine on trn1 included.
COST_GROWTH = Growth(
    _sized,
    least_cost(),
    params={"target": TARGETS, "engine": SPEC.engines, "dtype": FLOATS + ("int32",)},
    knee=(64, 4096),
    accepted=False,
)


@pytest.mark.parametrize("free", [1, 63, 64, 65, 512, 4096])
def test_tensor_copy_cost_on_trn1_vector_is_max_64_n(free: int) -> None:
    # nki.isa cost notes (NC-v2): most Vector instructions take max(64, N) cycles.
    assert _cost("trn1", Engine.VECTOR, free) == max(64, free)


def test_tensor_copy_of_16bit_tiles_is_faster_on_trn2_vector() -> None:
    assert _cost("trn2", Engine.VECTOR, 8192, "bfloat16") < _cost(
        "trn2", Engine.VECTOR, 8192, "float32"
    )
    assert _cost("trn2", Engine.VECTOR, 8192, "bfloat16", "float32") == _cost(
        "trn2", Engine.VECTOR, 8192, "float32"
    )
