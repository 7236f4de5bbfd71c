"""tensor_tensor: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from collections.abc import Callable
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
    assert_close,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["tensor_tensor"]
F32 = np.float32


def _f32(fn: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., np.ndarray]:
    return lambda a, b: np.asarray(fn(a, b)).astype(F32)


# The test's own fp32 definitions: one IEEE operation each, so results must match bit for bit.
def _python_mod(a, b):
    """Python's % on floats: C's fmod, moved to the divisor's sign (a zero too)."""
    r = np.fmod(a, b)
    r = np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    return np.where(r == 0, np.copysign(np.zeros_like(r), b), r)


EXACT_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": _f32(lambda a, b: a + b),
    "subtract": _f32(lambda a, b: a - b),
    "multiply": _f32(lambda a, b: a * b),
    "divide": _f32(lambda a, b: a / b),
    "maximum": _f32(np.maximum),
    "minimum": _f32(np.minimum),
    "abs_max": _f32(lambda a, b: np.maximum(np.abs(a), np.abs(b))),
    "abs_min": _f32(lambda a, b: np.minimum(np.abs(a), np.abs(b))),
    "equal": _f32(lambda a, b: a == b),
    "not_equal": _f32(lambda a, b: a != b),
    "greater": _f32(lambda a, b: a > b),
    "greater_equal": _f32(lambda a, b: a >= b),
    "less": _f32(lambda a, b: a < b),
    "less_equal": _f32(lambda a, b: a <= b),
    "logical_and": _f32(lambda a, b: (a != 0) & (b != 0)),
    "logical_or": _f32(lambda a, b: (a != 0) | (b != 0)),
    "logical_xor": _f32(lambda a, b: (a != 0) ^ (b != 0)),
    "mod": _f32(lambda a, b: _python_mod(a, b)),
    "fmod": _f32(np.fmod),
}

INT_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor")
SHIFTS = ("left_shift", "right_shift")


def test_tensor_tensor_tests_cover_every_op_it_accepts() -> None:
    choices = {a.name: a.choices for a in SPEC.attrs}
    assert set(choices["op"]) == set(EXACT_OPS) | {"power"} | set(BITWISE) | set(SHIFTS)


def _inputs(
    seed: int, shape: tuple[int, ...], d1: str, d2: str, coarse: bool
) -> tuple[np.ndarray, np.ndarray]:
    if coarse:  # few distinct values (zeros, ties) so comparisons and logic see every case
        rng = np.random.default_rng(seed)
        a = (rng.integers(-3, 4, size=shape) / 2).astype(F32).astype(NP_DTYPES[d1])
        b = (rng.integers(-3, 4, size=shape) / 2).astype(F32).astype(NP_DTYPES[d2])
        return a, b
    return random_array(seed, shape, d1, -100, 100), random_array(seed + 1, shape, d2, -100, 100)


def _run(a: np.ndarray, b: np.ndarray, op: str, dst: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        result = np.asarray(SPEC.semantics(data1=a, data2=b, op=op))
        assert result.size == a.size
        return cast_to(result.reshape(a.shape), NP_DTYPES[dst])


# Semantics -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(EXACT_OPS))
@settings(deadline=None)
@given(
    shape=tile_shapes(),
    d1=st.sampled_from(FLOATS),
    d2=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    coarse=st.booleans(),
    seed=seeds,
)
def test_tensor_tensor_float_ops_match_numpy_in_fp32(
    op: str, shape: tuple[int, ...], d1: str, d2: str, dst: str, coarse: bool, seed: int
) -> None:
    a, b = _inputs(seed, shape, d1, d2, coarse)
    with np.errstate(all="ignore"):
        expected = EXACT_OPS[op](a.astype(F32), b.astype(F32))
        raw = np.asarray(SPEC.semantics(data1=a, data2=b, op=op)).reshape(shape)
        assert_bits_equal(raw.astype(F32), expected)
        assert_bits_equal(_run(a, b, op, dst), expected.astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(shape=tile_shapes(), d1=st.sampled_from(FLOATS), dst=st.sampled_from(FLOATS), seed=seeds)
def test_tensor_tensor_power_matches_numpy(
    shape: tuple[int, ...], d1: str, dst: str, seed: int
) -> None:
    a = random_array(seed, shape, d1, 0.1, 4.0)
    b = random_array(seed + 1, shape, "float32", -3.0, 3.0)
    expected = (a.astype(np.float64) ** b.astype(np.float64)).astype(F32).astype(NP_DTYPES[dst])
    assert_close(_run(a, b, "power", dst), expected, dst)


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    op=st.sampled_from(INT_OPS),
    d1=st.sampled_from(INTS),
    d2=st.sampled_from(INTS),
    dst=st.sampled_from(INTS),
    seed=seeds,
)
def test_tensor_tensor_int_arithmetic_is_exact_then_saturates(
    shape: tuple[int, ...], op: str, d1: str, d2: str, dst: str, seed: int
) -> None:
    # |a|, |b| <= 2048: every sum and product is exact in fp32, as in exact integer arithmetic.
    a = random_array(seed, shape, d1, -2048, 2048)
    b = random_array(seed + 1, shape, d2, -2048, 2048)
    fns = {
        "add": np.add,
        "subtract": np.subtract,
        "multiply": np.multiply,
        "maximum": np.maximum,
        "minimum": np.minimum,
    }
    exact = fns[op](a.astype(np.int64), b.astype(np.int64))
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(exact, info.min, info.max).astype(NP_DTYPES[dst])
    assert_bits_equal(_run(a, b, op, dst), expected)


# The tests' own bitvec ops on raw bits widened to uint64 (masked back to the dtype's width).
BITVEC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    op=st.sampled_from(BITWISE + SHIFTS),
    dtype=st.sampled_from(INTS),
    seed=seeds,
)
def test_tensor_tensor_bitvec_ops_work_on_the_raw_bits(
    shape: tuple[int, ...], op: str, dtype: str, seed: int
) -> None:
    # Shifts move bit patterns: left_shift drops high bits, right_shift is logical (zero-fill)
    # on signed types too (nki.isa: bitvec ops treat elements as bit patterns).
    info = np.iinfo(NP_DTYPES[dtype])
    width = 8 * NP_DTYPES[dtype].itemsize
    a = random_array(seed, shape, dtype, int(info.min), int(info.max))
    b_range = (0, width - 1) if op in SHIFTS else (int(info.min), int(info.max))
    b = random_array(seed + 1, shape, dtype, *b_range)
    unsigned = np.dtype(f"uint{width}")
    wide_a, wide_b = (v.view(unsigned).astype(np.uint64) for v in (a, b))
    result = BITVEC[op](wide_a, wide_b) & np.uint64(2**width - 1)
    assert_bits_equal(_run(a, b, op, dtype), result.astype(unsigned).view(NP_DTYPES[dtype]))


def test_tensor_tensor_right_shift_is_logical_on_signed_ints() -> None:
    a = np.array([[-8, -1, 8]], dtype=np.int32)
    b = np.array([[1, 4, 1]], dtype=np.int32)
    out = _run(a, b, "right_shift", "int32")
    np.testing.assert_array_equal(
        out.view(np.uint32), np.array([[0x7FFFFFFC, 0x0FFFFFFF, 4]], dtype=np.uint32)
    )


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    attrs={"op": "add"},
    dst=tile("dst", (128, 512), "float32", SBUF),
    data1=tile("data1", (128, 512), "bfloat16", PSUM),
    data2=tile("data2", (128, 512), "float32", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("add"),
    *on_each_target(
        "gpsimd-bitwise-xor",
        engine=Engine.GPSIMD,
        attrs={"op": "bitwise_xor"},
        **{n: tile(n, (128, 8, 64), "int32", SBUF) for n in ("dst", "data1", "data2")},
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "partition-sizes",
        ["partition sizes differ", "dst 128", "data1 128", "data2 64"],
        data2=tile("data2", (64, 512), "float32"),
    ),
    violation(
        "free-sizes",
        ["elements per partition differ", "dst 256", "data1 512", "data2 512"],
        dst=tile("dst", (128, 256), "float32"),
    ),
    violation(
        "both-psum",
        ["data1 and data2 are both in PSUM"],
        data2=tile("data2", (128, 512), "float32", PSUM),
    ),
    violation("gpsimd-psum-data1", ["data1 is in PSUM", "GpSimd"], engine=Engine.GPSIMD),
    violation(
        "gpsimd-psum-dst",
        ["dst is in PSUM", "GpSimd"],
        engine=Engine.GPSIMD,
        dst=tile("dst", (128, 512), "float32", PSUM),
        data1=tile("data1", (128, 512), "float32", SBUF),
    ),
    violation(
        "power-on-vector", ["op=power", "GpSimd engine only", "not vector"], attrs={"op": "power"}
    ),
    violation(
        "bitvec-on-floats",
        ["bitvec op 'bitwise_and'", "integer dtypes", "data1 is bfloat16"],
        attrs={"op": "bitwise_and"},
    ),
    violation(
        "bitvec-float-dst",
        ["bitvec op 'left_shift'", "dst is float16"],
        attrs={"op": "left_shift"},
        dst=tile("dst", (128, 512), "float16"),
        data1=tile("data1", (128, 512), "int32"),
        data2=tile("data2", (128, 512), "uint8"),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str,
    engine: Engine,
    free: int,
    dtype: str = "float32",
    op: str = "add",
    bufs: tuple[Any, Any] = (SBUF, SBUF),
) -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "data1": tile("data1", (128, free), dtype, bufs[0]),
        "data2": tile("data2", (128, free), dtype, bufs[1]),
    }
    return make_check(target, engine, tiles, {"op": op})


def _cost(*args: Any, **kwargs: Any) -> int:
    return SPEC.cost(_sized(*args, **kwargs))


# Priced on every engine with an input in PSUM too (which GpSimd could not read).
COST_GROWTH = Growth(
    _sized,
    least_cost(),
    params={
        "target": TARGETS,
        "engine": SPEC.engines,
        "dtype": FLOATS,
        "op": ("add", "multiply", "maximum"),
        "bufs": ((SBUF, SBUF), (PSUM, SBUF), (SBUF, PSUM)),
    },
    knee=(1, 4096),
    accepted=False,
)


def test_tensor_tensor_cost_on_trn1_follows_the_one_or_two_pass_rule() -> None:
    # nki.isa cost notes (NC-v2): max(64, N) when an input is in PSUM or for bf16 add/mul/sub
    # from SBUF, otherwise max(64, 2N).
    assert _cost("trn1", Engine.VECTOR, 1000, "bfloat16", "add") == 1000
    assert _cost("trn1", Engine.VECTOR, 1000, "bfloat16", "maximum") == 2000
    assert _cost("trn1", Engine.VECTOR, 1000, "float32", "add") == 2000
    assert _cost("trn1", Engine.VECTOR, 1000, "float32", "add", (PSUM, SBUF)) == 1000
    assert _cost("trn1", Engine.VECTOR, 20, "float32", "add") == 64
