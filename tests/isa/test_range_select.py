"""range_select: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    assert_bits_equal,
    assert_cost_grows,
    fired,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

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


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 512), "bfloat16", SBUF),
        "reduce_res": tile("reduce_res", (128, 1), "float32", SBUF),
        "on_true_tile": tile("on_true_tile", (128, 512), "float32", PSUM),
        "bound0": tile("bound0", (128, 1), "float32", SBUF),
        "bound1": tile("bound1", (128, 1), "float32", SBUF),
    }
    base = {
        "comp_op0": "greater_equal",
        "comp_op1": "less",
        "reduce_cmd": "reset_reduce",
        "range_start": 0,
        "on_false_value": FP32_MIN,
    }
    return make_check(target, Engine.VECTOR, operands | ops, base | (attrs or {}))


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_range_select_accepts_a_window_on_nc_v3_and_later(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    assert fired(SPEC, _check(target, {"reduce_cmd": "idle"}, reduce_res=None)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"target": "trn1"}, ["range_select needs NC-v3+ (trn2/trn3)", "trn1 is NC-v2"], id="trn1"
    ),
    pytest.param({"dst": tile("dst", (64, 512))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"dst": tile("dst", (128, 256))}, ["elements per partition differ", "dst 256"], id="free"
    ),
    pytest.param(
        {"bound0": tile("bound0", (128, 2))}, ["bound0 has shape [128, 2]", "[128, 1]"], id="b0"
    ),
    pytest.param(
        {"bound1": tile("bound1", (64, 1))}, ["bound1 has shape [64, 1]", "[128, 1]"], id="b1"
    ),
    pytest.param(
        {"reduce_res": tile("reduce_res", (128, 8))}, ["reduce_res has shape [128, 8]"], id="res"
    ),
    pytest.param(
        {"attrs": {"reduce_cmd": "reduce"}},
        ["reduce_cmd='reduce'", "not supported"],
        id="stateful",
    ),
    pytest.param(
        {"attrs": {"on_false_value": 0.0}}, ["on_false_value 0.0", "FP32_MIN"], id="on-false"
    ),
    pytest.param(
        {"attrs": {"range_start": 2**24}},
        ["range_start 16777216", "16777216 (tile_fp32_exact_int_max)"],
        id="range",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_range_select_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_range_select_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int) -> int:
    tiles = {n: tile(n, (128, free)) for n in ("dst", "on_true_tile")}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {}))


@settings(deadline=None)
@given(target=st.sampled_from(["trn2", "trn3"]), f1=st.integers(1, 65536), f2=st.integers(1, 65536))
def test_range_select_cost_grows_with_free_size(target: str, f1: int, f2: int) -> None:
    assert_cost_grows(lambda f: _cost(target, f), f1, f2, floor_cycles(target, Engine.VECTOR))
