"""Hypothesis: the machine's casts round like the hardware, checked against independent oracles.

Float targets: every bit pattern of each 8- and 16-bit format is decoded (ml_dtypes only
decodes) into a table, and the nearest table entry (ties to an even mantissa) is the expected
result; ml_dtypes' own conversion must agree bit for bit. The NKI documents found say nothing
of the engines saturating floats (nki.api.shared lists the formats; float8_e4m3fn: "no inf,
NaN represented by 0bS111'1111"), so overflow gives inf, or NaN where a format has no inf.
Integer targets: Python's round() (half to even), clamped; NaN is 0.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neuronemu_isa.numerics import DTYPES, LOW_PRECISION, cast_to, round_tf32, ulp

NARROW_FLOATS = ("bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")
INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")

# Any fp32 bit pattern: every NaN payload, both zeros and infinities, subnormals.
fp32_bits = arrays(np.uint32, st.integers(1, 64), elements=st.integers(0, 2**32 - 1))


def _table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(finite values sorted ascending, their bit patterns) of a narrow float format."""
    dt = DTYPES[name]
    bits = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint8 if dt.itemsize == 1 else np.uint16)
    with np.errstate(invalid="ignore"):
        values = bits.view(dt).astype(np.float64)
    finite = np.isfinite(values) & ~((values == 0) & np.signbit(values))  # one zero: +0
    order = np.argsort(values[finite], kind="stable")
    return values[finite][order], bits[finite][order]


_TABLES = {name: _table(name) for name in NARROW_FLOATS}


def _nearest_even(x: float, name: str) -> tuple[float, bool]:
    """The RNE rounding of finite `x` in `name` by table search: (value, overflowed)."""
    values, bits = _TABLES[name]
    top, step = values[-1], values[-1] - values[-2]
    if abs(x) >= top + step / 2:  # past the largest finite value by half a step or more
        return math.copysign(math.inf, x), True
    i = int(np.searchsorted(values, x))
    lo, hi = max(i - 1, 0), min(i, len(values) - 1)
    d_lo, d_hi = abs(x - values[lo]), abs(values[hi] - x)
    if d_lo == d_hi:
        pick = lo if int(bits[lo]) % 2 == 0 else hi
    else:
        pick = lo if d_lo < d_hi else hi
    return float(values[pick]), False


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)


@pytest.mark.parametrize("name", NARROW_FLOATS)
@given(raw=fp32_bits)
@example(
    raw=np.array(
        [
            0x7F7FFFFF,
            0xFF7FFFFF,
            0x00000001,
            0x80000000,
            0x7FC00001,
            0xFFFFFFFF,
            0x7F800000,
            0xFF800000,
        ],
        dtype=np.uint32,
    )
)
def test_fp32_to_narrow_float_rounds_to_nearest_even_like_ml_dtypes(name: str, raw: np.ndarray):
    x = raw.view(np.float32)
    got = cast_to(x, DTYPES[name])
    assert got.dtype == DTYPES[name]
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(_bits(got), _bits(x.astype(DTYPES[name])))
    no_inf = not np.isinf(np.array(np.inf, np.float32).astype(DTYPES[name]))
    for v, out in zip(x.astype(np.float64), got.astype(np.float64)):
        if math.isnan(v):
            assert math.isnan(out)
            continue
        want, overflowed = (v, False) if math.isinf(v) else _nearest_even(v, name)
        if no_inf and (overflowed or math.isinf(v)):
            assert math.isnan(out), f"{v!r} -> {out!r}: {name} has no inf, so NaN"
        elif want == 0:
            assert out == 0 and math.copysign(1, out) == math.copysign(1, v)
        else:
            assert out == want, f"{v!r} -> {out!r}, expected {want!r}"


@pytest.mark.parametrize("name", NARROW_FLOATS)
def test_subnormals_and_their_halfway_points_round_to_even(name: str):
    values, _ = _TABLES[name]
    tiny = float(ml_dtypes.finfo(DTYPES[name]).smallest_subnormal)
    x = np.array(
        [tiny, tiny / 2, 1.5 * tiny, 2.5 * tiny, tiny * 0.625, -tiny / 2], dtype=np.float32
    )
    got = cast_to(x, DTYPES[name]).astype(np.float64)
    assert list(got) == [tiny, 0.0, 2 * tiny, 2 * tiny, tiny, -0.0]
    assert math.copysign(1, got[-1]) == -1
    assert tiny in values


@pytest.mark.parametrize("name", INTS)
@given(
    x=arrays(
        np.float32,
        st.integers(1, 32),
        elements=st.floats(width=32, allow_nan=True, allow_infinity=True),
    )
)
@example(
    x=np.array(
        [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e10, -1e10, np.nan, np.inf, -np.inf], dtype=np.float32
    )
)
def test_fp32_to_int_rounds_half_to_even_and_saturates(name: str, x: np.ndarray):
    info = np.iinfo(DTYPES[name])
    got = cast_to(x, DTYPES[name])
    assert got.dtype == DTYPES[name]
    for v, out in zip(x.tolist(), got.tolist()):
        want = (
            0
            if math.isnan(v)
            else (int(info.max) if v > info.max else int(info.min) if v < info.min else round(v))
        )
        assert out == min(max(want, int(info.min)), int(info.max)), (v, out)


def test_bool_is_stored_as_uint8_so_it_converts_like_uint8():
    x = np.array([0.0, 0.4, 0.5, 0.6, 1.0, 2.0, -3.0, np.nan], dtype=np.float32)
    assert cast_to(x, DTYPES["bool_"]).tolist() == [
        False,
        False,
        False,
        True,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize("name", ("int8", "uint16", "uint32", "bfloat16", "float8_e5m2"))
@given(v=arrays(np.int32, st.integers(1, 16), elements=st.integers(-(2**31), 2**31 - 1)))
@example(v=np.array([2**24 + 2**16 + 1, 2**24 + 1, -(2**31), 2**31 - 1], dtype=np.int32))
def test_a_conversion_between_machine_dtypes_goes_through_fp32(name: str, v: np.ndarray):
    # neuroncore.md B4: DMA and copies between different dtypes go src -> fp32 -> dst.
    got = cast_to(v, DTYPES[name])
    via = cast_to(v.astype(np.float32), DTYPES[name])
    assert np.array_equal(got.view(np.uint8), via.view(np.uint8))
    assert np.array_equal(cast_to(v, DTYPES["int32"]), v)  # same dtype: bit-exact


def test_the_fp32_trip_changes_a_bfloat16_result_that_direct_rounding_gets_otherwise():
    v = np.array([2**24 + 2**16 + 1], dtype=np.int32)  # fp32 rounds to 2^24+2^16, a bf16 tie
    assert float(cast_to(v, DTYPES["bfloat16"])[0]) == 2.0**24
    assert _nearest_even(float(v[0]), "bfloat16") == (2.0**24 + 2**17, False)


def test_exact_integer_results_convert_exactly_and_saturate():
    wide = np.array([2**24 + 1, 70000, -5, 2**40], dtype=np.int64)  # integer datapath values
    assert cast_to(wide, DTYPES["int32"]).tolist() == [2**24 + 1, 70000, -5, 2**31 - 1]
    assert cast_to(wide, DTYPES["uint16"]).tolist() == [65535, 65535, 0, 65535]


def _tf32_oracle(x: float) -> float:
    """RNE to 10 mantissa bits by float64 arithmetic (exponent floor -126, as fp32's)."""
    if x == 0 or math.isinf(x):
        return x
    step = 2.0 ** (max(math.floor(math.log2(abs(x))), -126) - 10)
    return float(np.rint(x / step) * step)


@given(raw=fp32_bits)
@example(
    raw=np.array([0x3F801000, 0x3F803000, 0x7F7FFFFF, 0x00000FFF, 0x7FC00000], dtype=np.uint32)
)
def test_round_tf32_keeps_ten_mantissa_bits_with_ties_to_even(raw: np.ndarray):
    x = raw.view(np.float32)
    got = round_tf32(x)
    assert got.dtype == np.float32
    for v, out in zip(x.astype(np.float64), got.astype(np.float64)):
        if math.isnan(v):
            assert math.isnan(out)
            continue
        want = _tf32_oracle(v)
        if abs(want) > float(np.finfo(np.float32).max):
            want = math.copysign(math.inf, v)
        assert out == want, (v, out, want)


@pytest.mark.parametrize("name", NARROW_FLOATS)
def test_ulp_is_the_gap_to_the_next_representable_value(name: str):
    values, _ = _TABLES[name]
    positive = values[values >= 0]
    gaps = np.diff(positive)
    assert np.array_equal(ulp(positive[:-1], name), gaps)


def test_low_precision_names_every_float_narrower_than_fp32_and_tf32():
    assert LOW_PRECISION == {
        "bfloat16",
        "float16",
        "float8_e4m3",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e8m0fnu",
        "tfloat32",
    }
    assert DTYPES["tfloat32"] == np.float32
