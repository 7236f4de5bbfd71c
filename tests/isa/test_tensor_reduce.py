"""tensor_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
)
from _spec_testing import (
    ARITH,
    Growth,
    checker,
    least_cost,
    on_each_target,
    sequential_fold,
    violation,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

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


CHECK = checker(
    Engine.VECTOR,
    attrs={"op": "add", "axis": [2], "negate": False, "keepdims": True},
    dst=tile("dst", (128, 4, 1), "bfloat16", SBUF),
    data=tile("data", (128, 4, 32), "float32", PSUM),
)


ACCEPTED: list[Any] = [
    *on_each_target("last-axis"),
    *on_each_target("both-free-axes", attrs={"axis": (1, 2)}, dst=tile("dst", (128, 1), "float32")),
]
_INT = {"dst": tile("dst", (128, 4), "int32"), "data": tile("data", (128, 4, 32), "int32")}
VIOLATIONS: list[Any] = [
    violation(
        "partitions",
        ["partition sizes differ", "dst 64", "data 128"],
        dst=tile("dst", (64, 4), "float32"),
    ),
    violation("axis-1", ["axis [1]", "last contiguous free axes"], attrs={"axis": [1]}),
    violation("axis-0", ["axis [0, 1, 2]", "axis 0 cannot"], attrs={"axis": [0, 1, 2]}),
    violation("axis-type", ["axis 'x'", "int"], attrs={"axis": "x"}),
    violation(
        "dst-size",
        ["dst has 8 elements", "axis [2]", "leaves 4"],
        dst=tile("dst", (128, 8), "float32"),
    ),
    violation(
        "negate-bitvec",
        ["negate=True", "bitvec op 'bitwise_or'"],
        attrs={"op": "bitwise_or", "negate": True},
        **_INT,
    ),
    violation("bitvec", ["bitwise_or", "integer", "data is float32"], attrs={"op": "bitwise_or"}),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int, dtype: str = "float32", op: str = "add") -> Any:
    tiles = {"dst": tile("dst", (128, 1), dtype), "data": tile("data", (128, free), dtype)}
    return CHECK(target, {"op": op, "axis": 1}, **tiles)


def _cost(target: str, free: int, dtype: str, op: str) -> int:
    return SPEC.cost(_sized(target, free, dtype, op))


COST_GROWTH = Growth(
    _sized,
    least_cost(Engine.VECTOR),
    params={"target": TARGETS, "dtype": FLOATS, "op": ("add", "maximum", "multiply")},
)


def test_tensor_reduce_bf16_add_is_twice_as_fast_on_trn1() -> None:
    # ISA-old: N/2 cycles for bf16 in/out with add or maximum, else N.
    assert _cost("trn1", 4096, "bfloat16", "add") == 2048
    assert _cost("trn1", 4096, "bfloat16", "multiply") == 4096
    assert _cost("trn1", 4096, "float32", "maximum") == 4096
