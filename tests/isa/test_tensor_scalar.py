"""tensor_scalar: semantics vs NumPy, each constraint's message, cost growth."""

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
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["tensor_scalar"]
F32 = np.float32


def _python_mod(a, b):
    """Python's % on floats: C's fmod, moved to the divisor's sign (a zero too)."""
    r = np.fmod(a, b)
    r = np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    return np.where(r == 0, np.copysign(np.zeros_like(r), b), r)


# The test's own fp32 binary ops (lhs, rhs): one IEEE operation each.
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "equal": lambda a, b: (a == b).astype(F32),
    "not_equal": lambda a, b: (a != b).astype(F32),
    "greater": lambda a, b: (a > b).astype(F32),
    "greater_equal": lambda a, b: (a >= b).astype(F32),
    "less": lambda a, b: (a < b).astype(F32),
    "less_equal": lambda a, b: (a <= b).astype(F32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(F32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(F32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(F32),
    "mod": lambda a, b: _python_mod(a, b),
    "fmod": np.fmod,
}
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "square": lambda x: x * x,
    "relu": lambda x: np.maximum(x, F32(0)),
    "bypass": lambda x: x,
    "reciprocal": lambda x: F32(1) / x,
    "rsqrt": lambda x: F32(1) / np.sqrt(x),
    "floor": np.floor,
    "ceil": lambda x: -np.floor(-x),
    "trunc": lambda x: np.where(x < 0, -np.floor(-x), np.floor(x)),
}


BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"}


def test_tensor_scalar_tests_cover_every_op_it_accepts() -> None:
    choices = {a.name: a.choices for a in SPEC.attrs}
    assert set(choices["op0"]) == set(BINARY) | set(UNARY) | {"power"} | BITVEC


def _apply(op: str, x: np.ndarray, operand: np.ndarray, reverse: bool) -> np.ndarray:
    lhs, rhs = (operand, x) if reverse else (x, operand)
    return np.asarray(BINARY[op](lhs, rhs), dtype=F32)


@st.composite
def operands(draw: Any, partitions: int, seed: int) -> Any:
    """An immediate (a Python float) or a [P, 1] column tile in a float dtype."""
    if draw(st.booleans()):
        return draw(st.floats(-8, 8).filter(lambda v: abs(v) > 1e-3))
    dtype = draw(st.sampled_from(FLOATS))
    col = random_array(seed, (partitions, 1), dtype, -8, 8)
    col[np.abs(col.astype(F32)) < 1e-3] = 1  # keep divisors away from zero
    return col


def _as_f32(operand: Any) -> np.ndarray:
    return np.asarray(operand).astype(F32)


def _raw(data: np.ndarray, **kwargs: Any) -> np.ndarray:
    """The fp32 result the engine computes, before the write casts it."""
    with np.errstate(all="ignore"):
        result = np.asarray(SPEC.semantics(data=data, **kwargs))
    assert result.dtype == F32, result.dtype
    assert result.size == data.size
    return result.reshape(data.shape)


def _run(data: np.ndarray, dst: str, **kwargs: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        return cast_to(_raw(data, **kwargs), NP_DTYPES[dst])


# Semantics -------------------------------------------------------------------------------


@pytest.mark.parametrize("op0", sorted(BINARY))
@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op1=st.sampled_from(sorted(BINARY)),
    reverse0=st.booleans(),
    reverse1=st.booleans(),
    seed=seeds,
    data=st.data(),
)
def test_tensor_scalar_two_ops_match_numpy(
    op0: str,
    shape: tuple[int, ...],
    src: str,
    dst: str,
    op1: str,
    reverse0: bool,
    reverse1: bool,
    seed: int,
    data: st.DataObject,
) -> None:
    x = random_array(seed, shape, src, -100, 100)
    s0 = data.draw(operands(shape[0], seed + 1), label="operand0")
    s1 = data.draw(operands(shape[0], seed + 2), label="operand1")
    rows = x.astype(F32).reshape(shape[0], -1)
    with np.errstate(all="ignore"):
        step = _apply(op0, rows, _as_f32(s0), reverse0)
        expected = _apply(op1, step, _as_f32(s1), reverse1)
        expected = np.broadcast_to(expected, rows.shape).reshape(shape)
    kwargs = {
        "operand0": s0,
        "op0": op0,
        "reverse0": reverse0,
        "operand1": s1,
        "op1": op1,
        "reverse1": reverse1,
    }
    assert_bits_equal(_raw(x, **kwargs), expected)
    with np.errstate(over="ignore"):  # fp32 results beyond float16's range become inf
        assert_bits_equal(_run(x, dst, **kwargs), expected.astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op0=st.sampled_from(sorted(BINARY)),
    reverse0=st.booleans(),
    seed=seeds,
    data=st.data(),
)
def test_tensor_scalar_one_op_matches_numpy(
    shape: tuple[int, ...],
    src: str,
    dst: str,
    op0: str,
    reverse0: bool,
    seed: int,
    data: st.DataObject,
) -> None:
    x = random_array(seed, shape, src, -100, 100)
    s0 = data.draw(operands(shape[0], seed + 1), label="operand0")
    rows = x.astype(F32).reshape(shape[0], -1)
    with np.errstate(all="ignore"):
        expected = _apply(op0, rows, _as_f32(s0), reverse0)
        expected = np.broadcast_to(expected, rows.shape).reshape(shape).astype(NP_DTYPES[dst])
    assert_bits_equal(_run(x, dst, operand0=s0, op0=op0, reverse0=reverse0), expected)


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    exponent=st.floats(-3, 3),
    seed=seeds,
)
def test_tensor_scalar_power_matches_numpy(
    shape: tuple[int, ...], src: str, dst: str, exponent: float, seed: int
) -> None:
    x = random_array(seed, shape, src, 0.1, 4.0)
    e = np.float64(np.float32(exponent))
    expected = (x.astype(np.float64) ** e).astype(F32).astype(NP_DTYPES[dst])
    assert_close(_run(x, dst, operand0=exponent, op0="power"), expected, dst)


def test_tensor_scalar_reverse_swaps_the_operands() -> None:
    x = np.array([[8.0, 2.0]], dtype=F32)
    col = np.array([[4.0]], dtype=F32)
    fwd = _run(x, "float32", operand0=col, op0="subtract", operand1=2.0, op1="divide")
    rev = _run(
        x,
        "float32",
        operand0=col,
        op0="subtract",
        reverse0=True,
        operand1=2.0,
        op1="divide",
        reverse1=True,
    )
    np.testing.assert_array_equal(fwd, [[2.0, -1.0]])  # (x - 4) / 2
    np.testing.assert_array_equal(rev, [[-0.5, 1.0]])  # 2 / (4 - x)


def test_tensor_scalar_column_operand_is_per_partition() -> None:
    x = np.ones((3, 2, 2), dtype=F32)
    col = np.array([[1.0], [2.0], [3.0]], dtype=F32)
    out = _run(x, "float32", operand0=col, op0="multiply")
    np.testing.assert_array_equal(
        out, np.array([1, 2, 3], dtype=F32)[:, None, None] * np.ones((3, 2, 2), dtype=F32)
    )


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op0=st.sampled_from(sorted(UNARY)),
    seed=seeds,
)
def test_tensor_scalar_unary_op_ignores_the_missing_operand(
    shape: tuple[int, ...], src: str, dst: str, op0: str, seed: int
) -> None:
    x = random_array(seed, shape, src, 0.01, 100)
    x.reshape(-1)[::2] *= -1  # both signs (rsqrt of a negative: NaN on both sides)
    with np.errstate(all="ignore"):
        expected = UNARY[op0](x.astype(F32)).astype(F32).astype(NP_DTYPES[dst])
    assert_bits_equal(_run(x, dst, op0=op0), expected)


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(INTS),
    dst=st.sampled_from(INTS),
    op0=st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]),
    value=st.integers(-64, 64),
    seed=seeds,
)
def test_tensor_scalar_on_ints_is_exact_then_saturates(
    shape: tuple[int, ...], src: str, dst: str, op0: str, value: int, seed: int
) -> None:
    x = random_array(seed, shape, src, -4096, 4096)
    fns = {
        "add": np.add,
        "subtract": np.subtract,
        "multiply": np.multiply,
        "maximum": np.maximum,
        "minimum": np.minimum,
    }
    exact = fns[op0](x.astype(np.int64), np.int64(value))
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(exact, info.min, info.max).astype(NP_DTYPES[dst])
    assert_bits_equal(_run(x, dst, operand0=float(value), op0=op0), expected)


# nki.isa.tensor_scalar: bitvec operators (bitwise_and, shifts...) run on the Vector engine on
# integer dtypes, treating elements as bit patterns; right_shift is a logical shift.
SHIFTS = ("left_shift", "right_shift")


def _bits(x: np.ndarray) -> np.ndarray:
    """The raw bits of an integer array, widened to uint64 for exact shifting."""
    return x.view(np.dtype(f"uint{8 * x.itemsize}")).astype(np.uint64)


def _bitvec_ref(op: str, a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    mask = np.uint64(2**width - 1)
    fns = {
        "bitwise_and": lambda: a & b,
        "bitwise_or": lambda: a | b,
        "bitwise_xor": lambda: a ^ b,
        "left_shift": lambda: (a << b) & mask,
        "right_shift": lambda: a >> b,
    }
    return fns[op]()


@pytest.mark.parametrize("op0", sorted(BITVEC - {"invert"}))
@settings(deadline=None)
@given(
    shape=tile_shapes(),
    dtype=st.sampled_from(INTS),
    op1=st.sampled_from([None, "bitwise_and", "bitwise_or", "bitwise_xor", *SHIFTS]),
    reverse0=st.booleans(),
    reverse1=st.booleans(),
    column0=st.booleans(),
    seed=seeds,
    data=st.data(),
)
def test_tensor_scalar_bitvec_ops_work_on_the_raw_bits(
    op0: str,
    shape: tuple[int, ...],
    dtype: str,
    op1: str | None,
    reverse0: bool,
    reverse1: bool,
    column0: bool,
    seed: int,
    data: st.DataObject,
) -> None:
    info = np.iinfo(NP_DTYPES[dtype])
    width = 8 * NP_DTYPES[dtype].itemsize
    full, small = (int(info.min), int(info.max)), (0, width - 1)
    reverse1 = reverse1 and op1 not in SHIFTS  # would shift by op0's (unbounded) result
    x = random_array(seed, shape, dtype, *(small if op0 in SHIFTS else full))
    # Immediates reach the semantics as Python floats (the tracer converts numbers).
    lo0, hi0 = small if op0 in SHIFTS else full
    if column0:
        s0: Any = random_array(seed + 1, (shape[0], 1), dtype, lo0, hi0)
    else:
        s0 = float(data.draw(st.integers(lo0, hi0), label="operand0"))
    lo1, hi1 = small if op1 in SHIFTS else full
    s1 = None if op1 is None else float(data.draw(st.integers(lo1, hi1), label="operand1"))

    def operand_bits(v: Any) -> np.ndarray:
        return _bits(np.asarray(v).astype(NP_DTYPES[dtype]))

    rows = _bits(x).reshape(shape[0], -1)
    a, b = (operand_bits(s0), rows) if reverse0 else (rows, operand_bits(s0))
    out = np.broadcast_to(_bitvec_ref(op0, a, b, width), rows.shape)
    if op1 is not None:
        a, b = (operand_bits(s1), out) if reverse1 else (out, operand_bits(s1))
        out = _bitvec_ref(op1, a, b, width)
    unsigned = np.dtype(f"uint{width}")
    expected = out.astype(unsigned).view(NP_DTYPES[dtype]).reshape(shape)
    kwargs = {"operand0": s0, "op0": op0, "reverse0": reverse0}
    if op1 is not None:
        kwargs |= {"operand1": s1, "op1": op1, "reverse1": reverse1}
    result = np.asarray(SPEC.semantics(data=x, **kwargs))
    assert result.size == x.size
    assert_bits_equal(cast_to(result.reshape(shape), NP_DTYPES[dtype]), expected)


@pytest.mark.parametrize("dtype", INTS)
def test_tensor_scalar_invert_flips_every_bit(dtype: str) -> None:
    info = np.iinfo(NP_DTYPES[dtype])
    x = random_array(3, (4, 16), dtype, int(info.min), int(info.max))
    out = np.asarray(SPEC.semantics(data=x, op0="invert")).reshape(x.shape)
    assert_bits_equal(cast_to(out, NP_DTYPES[dtype]), np.bitwise_not(x))


def test_tensor_scalar_right_shift_is_logical_on_signed_ints() -> None:
    x = np.array([[-8, -1, 8]], dtype=np.int32)
    out = np.asarray(SPEC.semantics(data=x, operand0=1.0, op0="right_shift"))
    written = cast_to(out.reshape(1, 3), np.dtype(np.int32))  # what an int32 dst holds
    np.testing.assert_array_equal(
        written.view(np.uint32), np.array([[0x7FFFFFFC, 0x7FFFFFFF, 4]], dtype=np.uint32)
    )


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    attrs={"op0": "multiply", "op1": "add"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    data=tile("data", (128, 512), "float32", PSUM),
    operand0=tile("operand0", (128, 1), "float32", SBUF),
    operand1=2.0,
)


ACCEPTED: list[Any] = [
    *on_each_target("multiply-add-vector", engine=Engine.VECTOR),
    *on_each_target("multiply-add-scalar", engine=Engine.SCALAR),
    accepted(
        "unary-without-operands", attrs={"op0": "abs", "op1": None}, operand0=None, operand1=None
    ),
    accepted("gpsimd-sbuf", engine=Engine.GPSIMD, data=tile("data", (128, 512))),
]
_INT = {n: tile(n, (128, 512), "int32", SBUF) for n in ("dst", "data")}
VIOLATIONS: list[Any] = [
    violation(
        "partition-sizes",
        ["partition sizes differ", "dst 96", "data 128"],
        dst=tile("dst", (96, 512)),
    ),
    violation(
        "free-sizes",
        ["elements per partition differ", "dst 256", "data 512"],
        dst=tile("dst", (128, 4, 64)),
    ),
    violation(
        "operand0-wide",
        ["operand0 has shape [128, 2]", "[128, 1]", "data"],
        operand0=tile("operand0", (128, 2)),
    ),
    violation(
        "operand1-partitions",
        ["operand1 has shape [64, 1]", "[128, 1]"],
        operand1=tile("operand1", (64, 1)),
    ),
    violation("op1-without-operand1", ["op1 and operand1 must be given together"], operand1=None),
    violation(
        "operand1-without-op1",
        ["op1 and operand1 must be given together"],
        attrs={"op1": None},
    ),
    violation(
        "binary-op0-no-operand",
        ["op0 'add' is binary", "operand0 is required"],
        attrs={"op0": "add", "op1": "add"},
        operand0=None,
    ),
    violation(
        "scalar-engine-subtract",
        ["Scalar engine", "(multiply, add)", "('subtract', None)"],
        engine=Engine.SCALAR,
        attrs={"op0": "subtract", "op1": None},
        operand1=None,
    ),
    violation(
        "scalar-engine-add-multiply",
        ["Scalar engine", "('add', 'multiply')"],
        engine=Engine.SCALAR,
        attrs={"op0": "add", "op1": "multiply"},
    ),
    violation("gpsimd-psum-data", ["data is in PSUM", "GpSimd"], engine=Engine.GPSIMD),
    violation(
        "gpsimd-psum-operand0",
        ["operand0 is in PSUM", "GpSimd"],
        engine=Engine.GPSIMD,
        data=tile("data", (128, 512)),
        operand0=tile("operand0", (128, 1), "float32", PSUM),
    ),
    violation(
        "bitvec-on-float-data",
        ["bitwise_and", "integer", "data is float32"],
        attrs={"op0": "bitwise_and", "op1": None},
        operand1=None,
        data=tile("data", (128, 512), "float32", SBUF),
    ),
    violation(
        "bitvec-on-gpsimd",
        ["bitwise_and", "Vector engine", "gpsimd"],
        engine=Engine.GPSIMD,
        attrs={"op0": "bitwise_and", "op1": None},
        operand1=None,
        **_INT,
    ),
    violation(
        "bitvec-then-arithmetic",
        ["bitwise_and", "'add'", "bitvec and arithmetic"],
        attrs={"op0": "bitwise_and", "op1": "add"},
        **_INT,
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, engine: Engine, free: int, dtype: str = "float32", two_ops: bool = True
) -> Any:
    attrs = {"op0": "multiply", "op1": "add"} if two_ops else {"op0": "multiply"}
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "data": tile("data", (128, free), dtype),
        "operand0": tile("operand0", (128, 1), "float32"),
        "operand1": 1.0 if two_ops else None,
    }
    return make_check(target, engine, tiles, attrs)


def _cost(*args: Any, **kwargs: Any) -> int:
    return SPEC.cost(_sized(*args, **kwargs))


# One op or two, on every engine (a single op on the Scalar engine included).
COST_GROWTH = Growth(
    _sized,
    least_cost(),
    params={"target": TARGETS, "engine": SPEC.engines, "dtype": FLOATS, "two_ops": (True, False)},
    knee=(1, 4096),
    accepted=False,
)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("free", [1, 100, 5000])
def test_tensor_scalar_second_op_is_free(target: str, free: int) -> None:
    # nki.isa cost notes: max(64, N) for one or two ops alike.
    assert _cost(target, Engine.VECTOR, free, two_ops=True) == _cost(
        target, Engine.VECTOR, free, two_ops=False
    )


def test_tensor_scalar_unary_op_applies_to_data_even_when_reversed() -> None:
    data = np.array([[-2.0, 3.0]], dtype=np.float32)
    for reverse0 in (False, True):
        out = SPEC.semantics(data, operand0=5.0, op0="abs", reverse0=reverse0)
        np.testing.assert_array_equal(out, np.abs(data))
