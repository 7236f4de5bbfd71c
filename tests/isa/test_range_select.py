"""range_select: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["range_select"]
F32 = np.float32
FP32_MIN = float(np.finfo(np.float32).min)
CMP = {
    "equal": np.equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    f=st.integers(1, 300),
    ops=st.tuples(st.sampled_from(sorted(CMP)), st.sampled_from(sorted(CMP))),
    start=st.integers(-100, 100),
    src=st.sampled_from(FLOATS),
    seed=seeds,
)
def test_range_select_keeps_indices_inside_the_bounds(
    p: int, f: int, ops: tuple[str, str], start: int, src: str, seed: int
) -> None:
    x = random_array(seed, (p, f), src, -50, 50)
    b0 = np.floor(random_array(seed + 1, (p, 1), "float32", -100, 300))
    b1 = np.floor(random_array(seed + 2, (p, 1), "float32", -100, 300))
    expected = np.empty((p, f), dtype=F32)
    for row in range(p):
        for i in range(f):
            idx = F32(start + i)
            ok = CMP[ops[0]](idx, b0[row, 0]) and CMP[ops[1]](idx, b1[row, 0])
            expected[row, i] = F32(x[row, i]) if ok else F32(FP32_MIN)
    out = SPEC.semantics(x, b0, b1, comp_op0=ops[0], comp_op1=ops[1], range_start=start)
    assert_bits_equal(np.asarray(out["dst"]).reshape(p, f), expected)
    assert_bits_equal(np.asarray(out["reduce_res"]).reshape(p), expected.max(axis=1))


def test_range_select_fill_becomes_minus_inf_in_bf16() -> None:
    # The doc's stability note: FP32_MIN downcast to bf16 becomes -inf.
    x = np.ones((1, 4), dtype=F32)
    b = np.array([[10.0]], dtype=F32)
    out = SPEC.semantics(x, b, b, comp_op0="greater", comp_op1="greater")
    got = cast_to(np.asarray(out["dst"]), NP_DTYPES["bfloat16"])
    assert np.all(np.isneginf(got.astype(F32)))
    assert np.asarray(out["reduce_res"])[0] == F32(FP32_MIN)


CHECK = checker(
    Engine.VECTOR,
    attrs={
        "comp_op0": "greater_equal",
        "comp_op1": "less",
        "reduce_cmd": "reset_reduce",
        "range_start": 0,
        "on_false_value": FP32_MIN,
    },
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    reduce_res=tile("reduce_res", (128, 1), "float32", SBUF),
    on_true_tile=tile("on_true_tile", (128, 512), "float32", PSUM),
    bound0=tile("bound0", (128, 1), "float32", SBUF),
    bound1=tile("bound1", (128, 1), "float32", SBUF),
)


# A window, on NC-v3 and later.
ACCEPTED: list[Any] = [
    *on_each_target("reset-reduce", targets=("trn2", "trn3")),
    *on_each_target(
        "idle", targets=("trn2", "trn3"), attrs={"reduce_cmd": "idle"}, reduce_res=None
    ),
]
VIOLATIONS: list[Any] = [
    violation("trn1", ["range_select needs NC-v3+ (trn2/trn3)", "trn1 is NC-v2"], target="trn1"),
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
    violation("b0", ["bound0 has shape [128, 2]", "[128, 1]"], bound0=tile("bound0", (128, 2))),
    violation("b1", ["bound1 has shape [64, 1]", "[128, 1]"], bound1=tile("bound1", (64, 1))),
    violation("res", ["reduce_res has shape [128, 8]"], reduce_res=tile("reduce_res", (128, 8))),
    violation("stateful", ["reduce_cmd='reduce'", "not supported"], attrs={"reduce_cmd": "reduce"}),
    violation("on-false", ["on_false_value 0.0", "FP32_MIN"], attrs={"on_false_value": 0.0}),
    violation(
        "range",
        ["range_start 16777216", "16777216 (tile_fp32_exact_int_max)"],
        attrs={"range_start": 2**24},
    ),
]


def _sized(target: str, free: int) -> Any:
    return CHECK(target, **{n: tile(n, (128, free)) for n in ("dst", "on_true_tile")})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), params={"target": ("trn2", "trn3")})
