"""Shared builders for the ISA tests: operand infos, Checks, seeded arrays and exact compares.

Deliberately independent of `neuronemu_isa.numerics` and `neuronemu_isa.instructions._common`:
the dtype table and the array helpers here are the tests' own, so that they can disagree with
the code under test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from neuronemu_isa import Buffer, Engine, InstrSpec, load_arch
from neuronemu_isa.spec import Check, OperandInfo

F32 = np.float32

NP_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    # The packed MX dtypes, as the words that hold them (four values each).
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint16),
}
FLOATS = ("float32", "bfloat16", "float16")
INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
TARGETS = ("trn1", "trn2")

# Relative tolerance of one result rounded to each float dtype (one unit in the last place).
ULP_RTOL = {"float32": 1e-6, "bfloat16": 2.0**-7, "float16": 2.0**-10}

SBUF, PSUM, HBM = Buffer.SBUF, Buffer.PSUM, Buffer.HBM


def tile(
    name: str, shape: tuple[int, ...], dtype: str = "float32", buffer: Buffer = SBUF
) -> OperandInfo:
    return OperandInfo(name, tuple(shape), dtype, buffer, NP_DTYPES[dtype].itemsize)


def make_check(
    target: str, engine: Engine, operands: dict[str, Any], attrs: dict[str, Any]
) -> Check:
    return Check(load_arch(target), engine, dict(operands), dict(attrs))


def fired(spec: InstrSpec, check: Check) -> list[tuple[int, str]]:
    """(index, message) of every constraint of `spec` that rejects `check`."""
    out = []
    for i, constraint in enumerate(spec.constraints):
        msg = constraint(check)
        if msg is not None:
            out.append((i, msg))
    return out


def random_array(
    seed: int, shape: tuple[int, ...], dtype: str, low: float = -4.0, high: float = 4.0
) -> np.ndarray:
    """Seeded values in [low, high], rounded to `dtype` (integers: the whole-number range)."""
    rng = np.random.default_rng(seed)
    dt = NP_DTYPES[dtype]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(int(low), int(info.min)), min(int(high), int(info.max))
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)
    limit = float(ml_dtypes.finfo(dt).max)
    low, high = max(low, -limit), min(high, limit)
    return rng.uniform(low, high, size=shape).astype(F32).astype(dt)


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, same shape, same bits (any NaN matches any NaN)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "iub":
        bad = actual != expected
    else:
        view = np.dtype(f"uint{8 * actual.dtype.itemsize}")
        a32, e32 = actual.astype(F32), expected.astype(F32)
        bad = (actual.view(view) != expected.view(view)) & ~(np.isnan(a32) & np.isnan(e32))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{int(bad.sum())} of {bad.size} elements differ; first at {idx}: "
            f"got {actual[idx]!r}, expected {expected[idx]!r}"
        )


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, atol: float = 1e-6) -> None:
    assert np.asarray(actual).dtype == NP_DTYPES[dtype]
    np.testing.assert_allclose(
        np.asarray(actual).astype(np.float64),
        np.asarray(expected).astype(np.float64),
        rtol=ULP_RTOL[dtype],
        atol=atol,
    )


# Hypothesis strategies ---------------------------------------------------------------------

seeds = st.integers(0, 2**32 - 1)
partitions = st.integers(1, 128)


@st.composite
def tile_shapes(draw: Any, max_free: int = 512) -> tuple[int, ...]:
    """[P, F] or [P, a, b] with P in 1..128 and F (or a*b) in 1..max_free."""
    p = draw(partitions)
    if draw(st.booleans()):
        return (p, draw(st.integers(1, max_free)))
    a = draw(st.integers(1, 16))
    b = draw(st.integers(1, max(1, max_free // a)))
    return (p, a, b)


def assert_cost_grows(
    cost_of: Callable[[int], int],
    f1: int,
    f2: int,
    floor: int,
    slack: int = 0,
    ratio: int = 2,
    gap: int = 0,
) -> None:
    """cost_of(size) is an int, never shrinks as the size grows, never drops below `floor`, and
    grows strictly once past `floor + slack` when the larger size is at least `ratio` times the
    smaller plus `gap` (doubling the size, by default, leaves no room for rounding ties)."""
    small, large = sorted((f1, f2))
    c_small, c_large = cost_of(small), cost_of(large)
    assert isinstance(c_small, int) and isinstance(c_large, int)
    assert 1 <= floor <= c_small <= c_large, f"cost({small})={c_small}, cost({large})={c_large}"
    if c_small > floor + slack and large >= ratio * small + gap:
        assert c_large > c_small, f"cost({small})={c_small} == cost({large})"
