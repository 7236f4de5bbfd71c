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
    fired,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa._numerics import cast_to

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


def _check(target: str = "trn2", engine: Engine = Engine.TENSOR, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (64, 128), "bfloat16", PSUM),
        "data": tile("data", (128, 64), "bfloat16", SBUF),
    }
    operands.update(ops)
    return make_check(target, engine, operands, {})


@pytest.mark.parametrize("target", TARGETS)
def test_nc_transpose_accepts_tensor_and_vector_shapes(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    vec = {
        "dst": tile("dst", (32, 16), "float32", SBUF),
        "data": tile("data", (16, 4, 8), "float32", PSUM),
    }
    assert fired(SPEC, _check(target, Engine.VECTOR, **vec)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"dst": tile("dst", (64, 128), "float32", PSUM)},
        ["dst is float32", "data is bfloat16", "same dtype"],
        id="dtype",
    ),
    pytest.param(
        {"dst": tile("dst", (128, 64), "bfloat16", PSUM)},
        ["dst has shape [128, 64]", "[64, 128]"],
        id="dst-shape",
    ),
    pytest.param(
        {
            "dst": tile("dst", (256, 128), "bfloat16", PSUM),
            "data": tile("data", (128, 256), "bfloat16", SBUF),
        },
        ["data is [128, 256]", "[128, 128]", "tile_transpose_tensor_max"],
        id="tensor-size",
    ),
    pytest.param(
        {"engine": Engine.VECTOR},
        ["data is [128, 64]", "vector", "[32, 32]", "tile_transpose_vector_max"],
        id="vector-size",
    ),
    pytest.param(
        {"dst": tile("dst", (64, 128), "bfloat16", SBUF)},
        ["Tensor engine", "PSUM", "dst in SBUF"],
        id="tensor-dst-sbuf",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_nc_transpose_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_nc_transpose_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


# Cost ------------------------------------------------------------------------------------


def _cost(target: str, engine: Engine, p: int, f: int, dtype: str = "float32") -> int:
    return SPEC.cost(
        make_check(
            target,
            engine,
            {"dst": tile("dst", (f, p), dtype, PSUM), "data": tile("data", (p, f), dtype)},
            {},
        )
    )


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), p1=st.integers(1, 128), p2=st.integers(1, 128))
def test_nc_transpose_tensor_cost_is_max_p_min_64_f(target: str, p1: int, p2: int) -> None:
    # ISA-old: max(P, min(64, F)) Tensor engine cycles; it grows with the partition count.
    for p in (p1, p2):
        assert _cost(target, Engine.TENSOR, p, 128) == max(p, 64)
        assert _cost(target, Engine.TENSOR, p, 8) == max(p, 8)
    small, large = sorted((p1, p2))
    assert _cost(target, Engine.TENSOR, small, 100) <= _cost(target, Engine.TENSOR, large, 100)
    assert _cost(target, Engine.TENSOR, 128, 128) > _cost(target, Engine.TENSOR, 64, 128)


@pytest.mark.parametrize("target", TARGETS)
def test_nc_transpose_vector_cost_is_the_minimum_ii(target: str) -> None:
    # Vector transposes are at most 32 elements per partition: max(64, N) is always 64.
    arch = load_arch(target)
    assert _cost(target, Engine.VECTOR, 32, 32) == arch.cost_min_ii_cycles
