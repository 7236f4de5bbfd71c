"""Hypothesis: the reference check, read a block at a time in the narrowest exact type, gives
every figure of the whole-array float64 computation written out here (the check as it was):
errors, ulps, tolerance used, mismatches and the first one, NaN and inf counts."""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from neuronemu.report.reference import BLOCK_ELEMENTS, compare, default_tolerance
from neuronemu_isa.numerics import DTYPES, ulps_apart

OUTPUT_DTYPES = ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "int32")
# A reference returns its own dtype: the output's, or a wider or narrower one.
REFERENCE_DTYPES = ("same", "float32", "float64", "bfloat16", "int64")
SPECIAL = (
    0.0,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    1.0,
    -3.0,
    2.0**-140,  # a float32 subnormal
    5e-324,  # the least float64 subnormal
    65504.0,
    3e38,
    1.5 * 2.0**-126,
    2.0**10 * (1 - 2.0**-45),  # float64s where log2 rounds up to the next binade
    2.0**-30 * (1 - 2.0**-50),
    16777217.0,  # integers float32 cannot hold
    2.0**40 + 1,
)


def _np_dtype(name: str) -> np.dtype:
    return (
        np.dtype(np.float64)
        if name == "float64"
        else np.dtype(name)
        if name == "int64"
        else DTYPES[name]
    )


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":  # (no NaN, inf or out of range values in an integer array)
        info = np.iinfo(dtype)
        values = np.clip(np.nan_to_num(values), info.min, info.max)
        return np.rint(values).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype)


@st.composite
def _values(draw: st.DrawFn, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(expected, got) as float64: equal, a few units apart, or unrelated."""
    base = st.one_of(
        st.sampled_from(SPECIAL), st.floats(-1e6, 1e6), st.floats(allow_nan=True, width=64)
    )
    want, got = [], []
    for _ in range(n):
        w = draw(base)
        how = draw(st.sampled_from(("equal", "equal", "near", "other")))
        if how == "equal":
            g = w
        elif how == "near":
            g = w * (1 + draw(st.floats(-0.05, 0.05))) + draw(
                st.sampled_from((0.0, 1e-3, -0.2, 1.0, -1.0))
            )
        else:
            g = draw(base)
        want.append(w)
        got.append(g)
    return np.array(want, np.float64), np.array(got, np.float64)


@st.composite
def _case(draw: st.DrawFn) -> tuple:
    n_outputs = draw(st.integers(1, 2))
    outputs, expected, dtypes = {}, [], {}
    for k in range(n_outputs):
        shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
        if draw(st.booleans()):
            shape = tuple(max(d, 1) for d in shape)
        size = math.prod(shape)
        want, got = draw(_values(size))
        name = draw(st.sampled_from(OUTPUT_DTYPES))
        ref_name = draw(st.sampled_from(REFERENCE_DTYPES))
        ref_dtype = _np_dtype(name if ref_name == "same" else ref_name)
        g = _cast(got, DTYPES[name]).reshape(shape)
        w = _cast(want, ref_dtype).reshape(shape)
        if draw(st.booleans()) and w.ndim >= 2:  # a reference's strided view
            w = np.ascontiguousarray(np.swapaxes(w, 0, 1)).swapaxes(0, 1)
        if draw(st.booleans()) and size:  # the reference's shape differs, its size does not
            w = w.reshape(-1)
        outputs[f"out{k}"] = g
        expected.append(w)
        dtypes[f"out{k}"] = name
    rtol = draw(st.sampled_from((None, None, 0.0, 1e-3, 0.02, 1.0, -0.5)))
    atol = draw(st.sampled_from((None, None, 0.0, 1e-4, 0.5, -1.0)))
    block = draw(st.sampled_from((1, 2, 3, 5, 7, 16, BLOCK_ELEMENTS)))
    return outputs, expected, dtypes, rtol, atol, block


def _exactly(value):
    """`value` with each float as its exact text (NaN equal to NaN, -0.0 not 0.0), but for
    the sign of a tolerance_used of 0: with a negative tolerance (0/negative is -0.0), the
    sign of the largest of +0.0s and -0.0s is NumPy's choice, not the check's."""
    if isinstance(value, dict):
        value = dict(value)
        if value.get("tolerance_used") == 0:
            value["tolerance_used"] = 0.0
        return {k: _exactly(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exactly(v) for v in value]
    return value.hex() if isinstance(value, float) else value


def _float64_figures(got, want, name, rtol, atol) -> dict:
    """One output's figures, whole arrays in float64 (the check before it was blocked)."""
    got = np.asarray(got).astype(np.float64)
    want = np.asarray(want).astype(np.float64).reshape(got.shape)
    default = default_tolerance(name)
    if atol is None:
        finite = np.abs(want[np.isfinite(want)])
        top = float(finite.max()) if finite.size else 0.0
        atol = default[1] * (top if top > 0 else 1.0)
    rtol = default[0] if rtol is None else rtol
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        rel = np.where(np.isnan(rel), np.inf, rel)
        used = diff / (atol + rtol * np.abs(want))
        bad = (diff > atol + rtol * np.abs(want)) | (np.isnan(got) != np.isnan(want))
        bad |= ~same & np.isinf(want)  # (an expected inf is met by that inf alone)
    used = np.where(np.isnan(used), np.inf, used)
    figures = {
        "dtype": name,
        "passed": not bad.any(),
        "rtol": rtol,
        "atol": atol,
        "max_abs_err": float(diff.max()) if diff.size else 0.0,
        "max_rel_err": float(np.nanmax(rel)) if diff.size else 0.0,
        "max_ulp_err": float(ulps_apart(got, want, name).max()) if diff.size else 0.0,
        "tolerance_used": float(used.max()) if diff.size else 0.0,
        "mismatches": int(bad.sum()),
        "first_mismatch": None,
        "got": None,
        "expected": None,
        "nan": {"got": int(np.isnan(got).sum()), "expected": int(np.isnan(want).sum())},
        "inf": {"got": int(np.isinf(got).sum()), "expected": int(np.isinf(want).sum())},
    }
    if bad.any():
        first = np.unravel_index(int(np.argmax(bad)), bad.shape)
        figures["first_mismatch"] = [int(i) for i in first]
        figures["got"], figures["expected"] = float(got[first]), float(want[first])
    return figures


@given(_case())
@example(  # a block boundary inside a row, a ragged last block, NaN, inf and -0.0
    (
        {"y": np.array([[0.0, np.nan, np.inf, 1.0, 2.0], [-0.0, np.nan, -np.inf, 1.5, 7.0]])},
        [np.array([[-0.0, np.nan, np.inf, 1.0, 2.5], [0.0, 1.0, np.inf, 1.5, np.nan]])],
        {"y": "float32"},
        None,
        None,
        3,
    )
)
def test_blocked_check_gives_the_float64_figures(case):
    outputs, expected, dtypes, rtol, atol, block = case
    check = compare(outputs, expected, dtypes, rtol, atol, block_elements=block)
    wants = {
        name: _float64_figures(outputs[name], want, dtypes[name], rtol, atol)
        for name, want in zip(outputs, expected)
    }
    for name, want in wants.items():
        assert _exactly(check.outputs[name].to_json()) == _exactly(want), name
    assert check.mismatches == sum(w["mismatches"] for w in wants.values())
    assert check.passed == all(w["passed"] for w in wants.values())
    for figure in ("max_abs_err", "max_rel_err", "max_ulp_err"):
        assert getattr(check, figure) == max(w[figure] for w in wants.values())
    firsts = [(n, w) for n, w in wants.items() if w["first_mismatch"] is not None]
    assert _exactly(check.first_mismatch) == _exactly(
        None
        if not firsts
        else {
            "output": firsts[0][0],
            "index": firsts[0][1]["first_mismatch"],
            "got": firsts[0][1]["got"],
            "expected": firsts[0][1]["expected"],
        }
    )


def test_ulps_of_float64_references_just_below_a_power_of_two_are_those_of_log2():
    # log2(2**k * (1 - 2**-j)) rounds to k for large j: `ulp` then takes the binade above.
    k = np.arange(-300, 300, 7, dtype=np.float64)
    want = np.concatenate([np.ldexp(1 - 2.0**-j, k.astype(int)) for j in range(38, 54)])
    got = (want * (1 + 2.0**-20)).astype(np.float32)
    check = compare({"y": got}, [want], {"y": "float32"}, 1e-3, 1e-3, block_elements=64)
    assert check.max_ulp_err == float(ulps_apart(got, want, "float32").max())
    for j, k in itertools.product(range(38, 54), (100, 20, -50)):
        one = np.array([np.ldexp(1 - 2.0**-j, k)])
        g = (one * (1 + 2.0**-20)).astype(np.float32)
        c = compare({"y": g}, [one], {"y": "float32"}, 1e-3, 1e-3)
        assert c.max_ulp_err == float(ulps_apart(g, one, "float32")[0]), (j, k)


def test_bfloat16_outputs_against_their_own_rounding_in_float32():
    rng = np.random.default_rng(3)
    want = rng.standard_normal((64, 50), dtype=np.float32)
    want[3, 4], want[60, 1] = np.nan, -np.inf
    got = want.astype(ml_dtypes.bfloat16)
    got[7, 7] = 9.0
    for block in (1, 7, 50, 333, BLOCK_ELEMENTS):
        check = compare({"y": got}, [want], {"y": "bfloat16"}, None, None, block_elements=block)
        want_figures = _float64_figures(got, want, "bfloat16", None, None)
        assert _exactly(check.outputs["y"].to_json()) == _exactly(want_figures)


def test_integers_float32_cannot_hold_are_compared_exactly():
    got = np.array([16777217, 2**31 - 1, 5], np.int32)
    want = np.array([16777216, 2**31 - 2, 5], np.int32)
    check = compare({"y": got}, [want], {"y": "int32"}, None, None, block_elements=2)
    assert _exactly(check.outputs["y"].to_json()) == _exactly(
        _float64_figures(got, want, "int32", None, None)
    )
    assert check.mismatches == 2 and check.max_abs_err == 1.0
