"""scalar_tensor_tensor: semantics vs NumPy, each constraint's message, cost growth."""

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
    make_check,
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

SPEC = REGISTRY["scalar_tensor_tensor"]
F32 = np.float32


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    dtypes=st.tuples(*[st.sampled_from(FLOATS)] * 4),
    ops=st.tuples(st.sampled_from(sorted(ARITH)), st.sampled_from(sorted(ARITH))),
    reverse=st.tuples(st.booleans(), st.booleans()),
    column=st.booleans(),
    seed=seeds,
)
def test_scalar_tensor_tensor_matches_two_fp32_steps(
    shape: tuple[int, ...],
    dtypes: tuple[str, str, str, str],
    ops: tuple[str, str],
    reverse: tuple[bool, bool],
    column: bool,
    seed: int,
) -> None:
    d_t, o0_t, o1_t, dst_t = dtypes
    data = random_array(seed, shape, d_t)
    operand1 = random_array(seed + 1, shape, o1_t)
    p = shape[0]
    operand0: Any = random_array(seed + 2, (p, 1), o0_t) if column else 1.75
    x = data.astype(F32).reshape(p, -1)
    y = operand1.astype(F32).reshape(p, -1)
    s = operand0.astype(F32) if column else F32(operand0)
    t = ARITH[ops[0]](s, x) if reverse[0] else ARITH[ops[0]](x, s)
    expected = ARITH[ops[1]](y, t) if reverse[1] else ARITH[ops[1]](t, y)
    out = SPEC.semantics(
        data,
        operand0,
        operand1,
        op0=ops[0],
        op1=ops[1],
        reverse0=reverse[0],
        reverse1=reverse[1],
    )
    got = cast_to(np.asarray(out).reshape(p, -1), NP_DTYPES[dst_t])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dst_t]))


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    attrs={"op0": "subtract", "op1": "multiply"},
    dst=tile("dst", (128, 256), "bfloat16", SBUF),
    data=tile("data", (128, 256), "float32", PSUM),
    operand0=tile("operand0", (128, 1), "float32", SBUF),
    operand1=tile("operand1", (128, 256), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("column-operand0"),
    *on_each_target("immediate-operand0", operand0=-1.0),
]
VIOLATIONS: list[Any] = [
    violation(
        "partitions",
        ["partition sizes differ", "operand1 64"],
        operand1=tile("operand1", (64, 256), "bfloat16"),
    ),
    violation(
        "free",
        ["elements per partition differ", "operand1 128", "data 256"],
        operand1=tile("operand1", (128, 128), "bfloat16"),
    ),
    violation(
        "operand0-shape",
        ["operand0 has shape [128, 2]", "[128, 1]"],
        operand0=tile("operand0", (128, 2), "float32"),
    ),
    violation(
        "both-psum",
        ["data and operand1 are both in PSUM"],
        operand1=tile("operand1", (128, 256), "bfloat16", PSUM),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, free: int, dtype: str = "float32", ops: tuple[str, str] = ("add", "add")
) -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "data": tile("data", (128, free), dtype),
        "operand0": 1.0,
        "operand1": tile("operand1", (128, free), dtype),
    }
    return make_check(target, Engine.VECTOR, tiles, {"op0": ops[0], "op1": ops[1]})


def _cost(target: str, free: int, dtype: str, ops: tuple[str, str]) -> int:
    return SPEC.cost(_sized(target, free, dtype, ops))


def _even(target: str, half: int, dtype: str) -> Any:
    return _sized(target, 2 * half, dtype)


COST_GROWTH = Growth(
    _even, least_cost(Engine.VECTOR), "half", (1, 32768), {"target": TARGETS, "dtype": FLOATS}
)


def test_scalar_tensor_tensor_bf16_subtract_multiply_is_one_pass_on_trn1() -> None:
    # ISA-old: N for bf16 data/operand1 with (subtract, multiply) and even N; otherwise 2N.
    assert _cost("trn1", 4096, "bfloat16", ("subtract", "multiply")) == 4096
    assert _cost("trn1", 4095, "bfloat16", ("subtract", "multiply")) == 8190
    assert _cost("trn1", 4096, "float32", ("subtract", "multiply")) == 8192
