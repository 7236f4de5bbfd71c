"""tensor_tensor_scan: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import ARITH, Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["tensor_tensor_scan"]
F32 = np.float32


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=64),
    dtypes=st.tuples(*[st.sampled_from(FLOATS)] * 3),
    ops=st.tuples(st.sampled_from(sorted(ARITH)), st.sampled_from(sorted(ARITH))),
    reverse=st.tuples(st.booleans(), st.booleans()),
    column=st.booleans(),
    seed=seeds,
)
def test_tensor_tensor_scan_runs_the_documented_recurrence(
    shape: tuple[int, ...],
    dtypes: tuple[str, str, str],
    ops: tuple[str, str],
    reverse: tuple[bool, bool],
    column: bool,
    seed: int,
) -> None:
    p = shape[0]
    data0 = random_array(seed, shape, dtypes[0], -1.5, 1.5)
    data1 = random_array(seed + 1, shape, dtypes[1], -1.5, 1.5)
    initial: Any = random_array(seed + 2, (p, 1), "float32") if column else 0.5
    d0 = data0.astype(F32).reshape(p, -1)
    d1 = data1.astype(F32).reshape(p, -1)
    expected = np.empty_like(d0)
    for row in range(p):
        prev = F32(initial[row, 0]) if column else F32(initial)
        for i in range(d0.shape[1]):
            a = ARITH[ops[0]](prev, d0[row, i]) if reverse[0] else ARITH[ops[0]](d0[row, i], prev)
            prev = ARITH[ops[1]](d1[row, i], a) if reverse[1] else ARITH[ops[1]](a, d1[row, i])
            expected[row, i] = prev
    with np.errstate(all="ignore"):
        out = SPEC.semantics(
            data0, data1, initial, op0=ops[0], op1=ops[1], reverse0=reverse[0], reverse1=reverse[1]
        )
    got = cast_to(np.asarray(out).reshape(p, -1), NP_DTYPES[dtypes[2]])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dtypes[2]]))


def test_tensor_tensor_scan_cumulative_sum() -> None:
    # op0 = multiply by 1 ... as a running sum: r[i] = (1 * r[i-1]) + x[i].
    ones = np.ones((1, 4), dtype=F32)
    x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=F32)
    out = SPEC.semantics(ones, x, 0.0, op0="multiply", op1="add")
    np.testing.assert_array_equal(out, [[1.0, 3.0, 6.0, 10.0]])


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    attrs={"op0": "multiply", "op1": "add"},
    dst=tile("dst", (128, 512), "float32", SBUF),
    data0=tile("data0", (128, 512), "bfloat16", SBUF),
    data1=tile("data1", (128, 512), "float32", PSUM),
    initial=tile("initial", (128, 1), "float32", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("column-initial"),
    *on_each_target("immediate-initial", initial=0.0),
]
VIOLATIONS: list[Any] = [
    violation(
        "partitions", ["partition sizes differ", "dst 32"], dst=tile("dst", (32, 512), "float32")
    ),
    violation(
        "free",
        ["elements per partition differ", "data0 256"],
        data0=tile("data0", (128, 256), "bfloat16"),
    ),
    violation(
        "initial-shape",
        ["initial has shape [128, 4]", "[128, 1]"],
        initial=tile("initial", (128, 4), "float32"),
    ),
    violation(
        "both-psum",
        ["data0 and data1 are both in PSUM"],
        data0=tile("data0", (128, 512), "bfloat16", PSUM),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {n: tile(n, (128, free), dtype) for n in ("dst", "data0", "data1")}
    return CHECK(target, **tiles, initial=0.0)


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), params={"target": TARGETS, "dtype": FLOATS})


def test_tensor_tensor_scan_cost_is_max_64_2n_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 10)) == 64
    assert SPEC.cost(_sized("trn1", 1000)) == 2000
