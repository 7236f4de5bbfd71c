"""nc_transpose: semantics vs NumPy, each constraint's message, cost growth."""

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
)
from _spec_testing import Growth, checker, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["nc_transpose"]


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    a=st.integers(1, 8),
    b=st.integers(1, 16),
    dtype=st.sampled_from(FLOATS + INTS),
    seed=seeds,
)
def test_nc_transpose_swaps_partition_and_flattened_free_axes(
    p: int, a: int, b: int, dtype: str, seed: int
) -> None:
    x = random_array(seed, (p, a, b), dtype, -1e6, 1e6)
    expected = np.empty((a * b, p), dtype=x.dtype)
    for i in range(p):
        for j in range(a):
            for k in range(b):
                expected[j * b + k, i] = x[i, j, k]
    out = cast_to(np.asarray(SPEC.semantics(data=x)).reshape(a * b, p), NP_DTYPES[dtype])
    assert_bits_equal(out, expected)


def test_nc_transpose_keeps_nan_and_inf_bits() -> None:
    x = np.array([[np.nan, np.inf], [-np.inf, -0.0]], dtype=np.float32)
    out = np.asarray(SPEC.semantics(data=x))
    assert_bits_equal(out, np.ascontiguousarray(x.T))


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.TENSOR,
    dst=tile("dst", (64, 128), "bfloat16", PSUM),
    data=tile("data", (128, 64), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("tensor"),
    *on_each_target(
        "vector",
        engine=Engine.VECTOR,
        dst=tile("dst", (32, 16), "float32", SBUF),
        data=tile("data", (16, 4, 8), "float32", PSUM),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "dtype",
        ["dst is float32", "data is bfloat16", "same dtype"],
        dst=tile("dst", (64, 128), "float32", PSUM),
    ),
    violation(
        "dst-shape",
        ["dst has shape [128, 64]", "[64, 128]"],
        dst=tile("dst", (128, 64), "bfloat16", PSUM),
    ),
    violation(
        "tensor-size",
        ["data is [128, 256]", "[128, 128]", "tile_transpose_tensor_max"],
        dst=tile("dst", (256, 128), "bfloat16", PSUM),
        data=tile("data", (128, 256), "bfloat16", SBUF),
    ),
    violation(
        "vector-size",
        ["data is [128, 64]", "vector", "[32, 32]", "tile_transpose_vector_max"],
        engine=Engine.VECTOR,
    ),
    violation(
        "tensor-dst-sbuf",
        ["Tensor engine", "PSUM", "dst in SBUF"],
        dst=tile("dst", (64, 128), "bfloat16", SBUF),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, engine: Engine, p: int, f: int, dtype: str = "float32") -> Any:
    tiles = {"dst": tile("dst", (f, p), dtype, PSUM), "data": tile("data", (p, f), dtype)}
    return make_check(target, engine, tiles, {})


def _cost(target: str, engine: Engine, p: int, f: int) -> int:
    return SPEC.cost(_sized(target, engine, p, f))


# A Tensor-engine transpose grows with the partition count (a Vector one is at most 32x32).
COST_GROWTH = Growth(
    _sized,
    size="p",
    sizes=(1, 128),
    params={"target": TARGETS, "engine": (Engine.TENSOR,), "f": (128, 100)},
)


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), p1=st.integers(1, 128), p2=st.integers(1, 128))
def test_nc_transpose_tensor_cost_is_max_p_min_64_f(target: str, p1: int, p2: int) -> None:
    # ISA-old: max(P, min(64, F)) Tensor engine cycles.
    for p in (p1, p2):
        assert _cost(target, Engine.TENSOR, p, 128) == max(p, 64)
        assert _cost(target, Engine.TENSOR, p, 8) == max(p, 8)
    assert _cost(target, Engine.TENSOR, 128, 128) > _cost(target, Engine.TENSOR, 64, 128)


@pytest.mark.parametrize("target", TARGETS)
def test_nc_transpose_vector_cost_is_the_minimum_ii(target: str) -> None:
    # Vector transposes are at most 32 elements per partition: max(64, N) is always 64.
    arch = load_arch(target)
    assert _cost(target, Engine.VECTOR, 32, 32) == arch.cost_min_ii_cycles
