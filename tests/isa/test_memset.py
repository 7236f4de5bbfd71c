"""memset: semantics vs NumPy, each constraint's message, cost growth."""

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
    tile,
    tile_shapes,
)
from _spec_testing import Growth, accepted, checker, least_cost, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["memset"]


def _write(value: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """What the machine stores: the one result broadcast over dst, cast to dst's dtype."""
    result = np.asarray(SPEC.semantics(value=value))
    assert result.size == 1, f"memset semantics returned {result.size} values"
    return cast_to(np.broadcast_to(result.reshape(()), shape), NP_DTYPES[dtype])


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    dtype=st.sampled_from(FLOATS),
    value=st.one_of(st.floats(-1e5, 1e5), st.integers(-(2**40), 2**40)),
)
def test_memset_fills_floats_with_the_value_rounded_via_fp32(
    shape: tuple[int, ...], dtype: str, value: float
) -> None:
    with np.errstate(over="ignore"):  # beyond float16's range the fill is inf
        out = _write(value, shape, dtype)
        expected = np.full(shape, np.float32(value), dtype=np.float32).astype(NP_DTYPES[dtype])
    assert_bits_equal(out, expected)


@settings(deadline=None)
@given(shape=tile_shapes(), dtype=st.sampled_from(INTS), value=st.integers(-(2**33), 2**33))
def test_memset_fills_ints_exactly_or_saturated(
    shape: tuple[int, ...], dtype: str, value: int
) -> None:
    info = np.iinfo(NP_DTYPES[dtype])
    expected = np.full(shape, min(max(value, int(info.min)), int(info.max)), dtype=NP_DTYPES[dtype])
    assert_bits_equal(_write(value, shape, dtype), expected)


@pytest.mark.parametrize(("value", "expected"), [(2.5, 2), (3.5, 4), (-2.5, -2), (0.49, 0)])
def test_memset_float_into_int_rounds_half_even(value: float, expected: int) -> None:
    np.testing.assert_array_equal(
        _write(value, (2, 3), "int32"), np.full((2, 3), expected, dtype=np.int32)
    )


@pytest.mark.parametrize(
    ("value", "dtype"), [(1 + 2.0**-11 + 2.0**-40, "float16"), (1 + 2.0**-8 + 2.0**-30, "bfloat16")]
)
def test_memset_rounds_the_value_to_fp32_before_the_dst_dtype(value: float, dtype: str) -> None:
    # The value is a tie in the dst dtype once rounded to fp32, so it rounds to even (1.0);
    # rounding the float64 straight to dst would round up instead.
    out = _write(value, (2, 2), dtype)
    np.testing.assert_array_equal(out.astype(np.float32), np.ones((2, 2), dtype=np.float32))


def test_memset_zero_gives_positive_zero_bits() -> None:
    out = _write(0, (4, 8), "bfloat16")
    assert (out.view(np.uint16) == 0).all()


# Constraints -----------------------------------------------------------------------------


CHECK = checker(Engine.VECTOR, attrs={"value": 0.0}, dst=tile("dst", (128, 64), "float32", PSUM))


_SBUF_GPSIMD = {"engine": Engine.GPSIMD, "dst": tile("dst", (128, 64), "bfloat16", SBUF)}
ACCEPTED: list[Any] = [
    case
    for value in (0, 1, -3, 2.5, float("inf"))
    for case in (
        accepted(f"vector-psum-{value}", attrs={"value": value}),
        accepted(f"gpsimd-sbuf-{value}", attrs={"value": value}, **_SBUF_GPSIMD),
    )
]
VIOLATIONS: list[Any] = [
    violation(
        "value-str", ["value must be a compile-time int or float", "got str"], attrs={"value": "x"}
    ),
    violation("value-bool", ["value must be", "got bool"], attrs={"value": True}),
    violation("value-none", ["value must be", "got NoneType"], attrs={"value": None}),
    violation("gpsimd-psum", ["dst is in PSUM", "GpSimd"], engine=Engine.GPSIMD),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, engine: Engine, free: int, dtype: str = "float32", value: Any = 1.0) -> Any:
    return CHECK(target, {"value": value}, engine, dst=tile("dst", (128, free), dtype))


def _cost(target: str, engine: Engine, free: int, dtype: str = "float32", value: Any = 1.0) -> int:
    return SPEC.cost(_sized(target, engine, free, dtype, value))


COST_GROWTH = Growth(
    _sized,
    least_cost(),
    params={
        "target": TARGETS,
        "engine": SPEC.engines,
        "dtype": FLOATS + ("int32", "int8"),
        "value": (0, 1.0),
    },
    knee=(1, 8192),
)


@pytest.mark.parametrize("free", [1, 64, 65, 1000, 4096])
def test_memset_cost_on_trn1_vector_is_max_64_n(free: int) -> None:
    assert _cost("trn1", Engine.VECTOR, free, "float32", 1.0) == max(64, free)


def test_memset_zeroing_16bit_tiles_on_vector_takes_half_the_time() -> None:
    # nki.isa cost notes (NC-v2): memset of zero on a 16-bit tile is max(64, N/2).
    assert _cost("trn1", Engine.VECTOR, 4096, "bfloat16", 0) == 2048
    assert _cost("trn1", Engine.VECTOR, 4096, "bfloat16", 1.0) == 4096
    assert _cost("trn1", Engine.VECTOR, 4096, "float32", 0) == 4096
    assert _cost("trn1", Engine.GPSIMD, 4096, "bfloat16", 0) == _cost(
        "trn1", Engine.GPSIMD, 4096, "bfloat16", 1.0
    )
