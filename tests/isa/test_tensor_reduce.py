"""tensor_reduce: semantics vs NumPy, each constraint's message, cost growth."""

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
    assert_cost_grows,
    fired,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import (
    ARITH,
    assert_every_constraint_hit,
    assert_single_message,
    floor_cycles,
    sequential_fold,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["tensor_reduce"]
F32 = np.float32


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    dims=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    p=st.integers(1, 128),
    n_axes=st.integers(1, 3),
    op=st.sampled_from(sorted(ARITH)),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    negate=st.booleans(),
    seed=seeds,
)
def test_tensor_reduce_folds_trailing_axes_in_fp32(
    dims: list[int], p: int, n_axes: int, op: str, src: str, dst: str, negate: bool, seed: int
) -> None:
    shape = (p, *dims)
    rank = len(shape)
    axes = list(range(rank - min(n_axes, rank - 1), rank))
    x = random_array(seed, shape, src, -2.0, 2.0)
    kept = shape[: rank - len(axes)]
    flat = x.astype(F32).reshape(int(np.prod(kept)), -1)
    expected = sequential_fold(ARITH[op], flat).reshape(kept)
    if negate:
        expected = -expected
    out = SPEC.semantics(data=x, op=op, axis=axes, negate=negate)
    got = cast_to(np.asarray(out).reshape(kept), NP_DTYPES[dst])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(
    p=st.integers(1, 64),
    f=st.integers(1, 200),
    op=st.sampled_from(["bitwise_and", "bitwise_or", "bitwise_xor"]),
    dtype=st.sampled_from(INTS),
    seed=seeds,
)
def test_tensor_reduce_bitvec_ops_fold_raw_bits(
    p: int, f: int, op: str, dtype: str, seed: int
) -> None:
    info = np.iinfo(NP_DTYPES[dtype])
    x = random_array(seed, (p, f), dtype, int(info.min), int(info.max))
    fn = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
    expected = np.array([fn[op].reduce(row) for row in x], dtype=x.dtype)
    out = cast_to(np.asarray(SPEC.semantics(data=x, op=op, axis=1)), NP_DTYPES[dtype])
    assert_bits_equal(out.reshape(p), expected)


def test_tensor_reduce_sums_left_to_right_not_pairwise() -> None:
    # 1 + 2^24 rounds back to 2^24 in fp32; summed in order the three ones are all lost.
    x = np.array([[2.0**24, 1.0, 1.0, 1.0]], dtype=F32)
    out = np.asarray(SPEC.semantics(data=x, op="add", axis=(1,)))
    assert out.reshape(-1)[0] == F32(2.0**24)


def test_tensor_reduce_logical_and_and_subtract() -> None:
    x = np.array([[5.0, 2.0, 0.0], [1.0, -1.0, 3.0]], dtype=F32)
    np.testing.assert_array_equal(SPEC.semantics(data=x, op="logical_and", axis=1), [0.0, 1.0])
    np.testing.assert_array_equal(SPEC.semantics(data=x, op="subtract", axis=1), [3.0, -1.0])


# Constraints -----------------------------------------------------------------------------


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 4, 1), "bfloat16", SBUF),
        "data": tile("data", (128, 4, 32), "float32", PSUM),
    }
    operands.update(ops)
    base = {"op": "add", "axis": [2], "negate": False, "keepdims": True}
    return make_check(target, Engine.VECTOR, operands, base | (attrs or {}))


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_reduce_accepts_trailing_axes(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    both = _check(target, {"axis": (1, 2)}, dst=tile("dst", (128, 1), "float32"))
    assert fired(SPEC, both) == []


_INT = {"dst": tile("dst", (128, 4), "int32"), "data": tile("data", (128, 4, 32), "int32")}
VIOLATIONS: list[Any] = [
    pytest.param(
        {"dst": tile("dst", (64, 4), "float32")},
        ["partition sizes differ", "dst 64", "data 128"],
        id="partitions",
    ),
    pytest.param({"attrs": {"axis": [1]}}, ["axis [1]", "last contiguous free axes"], id="axis-1"),
    pytest.param({"attrs": {"axis": [0, 1, 2]}}, ["axis [0, 1, 2]", "axis 0 cannot"], id="axis-0"),
    pytest.param({"attrs": {"axis": "x"}}, ["axis 'x'", "int"], id="axis-type"),
    pytest.param(
        {"dst": tile("dst", (128, 8), "float32")},
        ["dst has 8 elements", "axis [2]", "leaves 4"],
        id="dst-size",
    ),
    pytest.param(
        {"attrs": {"op": "bitwise_or", "negate": True}, **_INT},
        ["negate=True", "bitvec op 'bitwise_or'"],
        id="negate-bitvec",
    ),
    pytest.param(
        {"attrs": {"op": "bitwise_or"}}, ["bitwise_or", "integer", "data is float32"], id="bitvec"
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_tensor_reduce_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_tensor_reduce_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


# Cost ------------------------------------------------------------------------------------


def _cost(target: str, free: int, dtype: str = "float32", op: str = "add") -> int:
    c = make_check(
        target,
        Engine.VECTOR,
        {"dst": tile("dst", (128, 1), dtype), "data": tile("data", (128, free), dtype)},
        {"op": op, "axis": 1},
    )
    return SPEC.cost(c)


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    dtype=st.sampled_from(FLOATS),
    op=st.sampled_from(["add", "maximum", "multiply"]),
    f1=st.integers(1, 65536),
    f2=st.integers(1, 65536),
)
def test_tensor_reduce_cost_grows_with_free_size(
    target: str, dtype: str, op: str, f1: int, f2: int
) -> None:
    assert_cost_grows(
        lambda f: _cost(target, f, dtype, op), f1, f2, floor_cycles(target, Engine.VECTOR)
    )


def test_tensor_reduce_bf16_add_is_twice_as_fast_on_trn1() -> None:
    # ISA-old: N/2 cycles for bf16 in/out with add or maximum, else N.
    assert _cost("trn1", 4096, "bfloat16", "add") == 2048
    assert _cost("trn1", 4096, "bfloat16", "multiply") == 4096
    assert _cost("trn1", 4096, "float32", "maximum") == 4096
