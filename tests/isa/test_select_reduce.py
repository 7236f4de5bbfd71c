"""select_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
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
    tile_shapes,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["select_reduce"]
F32 = np.float32


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS + ("int8", "int16")),
    dst=st.sampled_from(FLOATS),
    pred=st.sampled_from(["int8", "uint8", "int16", "uint16"]),
    column=st.booleans(),
    reverse=st.booleans(),
    seed=seeds,
)
def test_select_reduce_selects_then_takes_the_row_maximum(
    shape: tuple[int, ...], src: str, dst: str, pred: str, column: bool, reverse: bool, seed: int
) -> None:
    p = shape[0]
    on_true = random_array(seed, shape, src, -100, 100)
    predicate = random_array(seed + 1, shape, pred, 0, 2)
    on_false: Any = random_array(seed + 2, (p, 1), "float32") if column else -7.5
    t = on_true.astype(F32).reshape(p, -1)
    mask = (predicate.reshape(p, -1) != 0) != reverse
    fill = np.broadcast_to(on_false if column else F32(on_false), t.shape)
    expected = np.where(mask, t, fill).astype(F32)
    out = SPEC.semantics(predicate, on_true, on_false, reverse_pred=reverse)
    got = cast_to(np.asarray(out["dst"]).reshape(p, -1), NP_DTYPES[dst])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))
    assert_bits_equal(np.asarray(out["reduce_res"]).reshape(p), expected.max(axis=1))


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 512), "bfloat16", SBUF),
        "reduce_res": tile("reduce_res", (128, 1), "float32", SBUF),
        "predicate": tile("predicate", (128, 512), "uint8", SBUF),
        "on_true": tile("on_true", (128, 512), "float32", PSUM),
        "on_false": -1.0,
    }
    return make_check(
        target, Engine.VECTOR, operands | ops, {"reduce_cmd": "reset_reduce"} | (attrs or {})
    )


@pytest.mark.parametrize("target", TARGETS)
def test_select_reduce_accepts_select_with_and_without_reduction(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    assert fired(SPEC, _check(target, {"reduce_cmd": "idle"}, reduce_res=None)) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 512))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"predicate": tile("predicate", (128, 256), "uint8")},
        ["elements per partition differ", "predicate 256"],
        id="free",
    ),
    pytest.param(
        {"on_false": tile("on_false", (128, 2))}, ["on_false has shape [128, 2]"], id="on-false"
    ),
    pytest.param(
        {"reduce_res": tile("reduce_res", (128, 4))}, ["reduce_res has shape [128, 4]"], id="res"
    ),
    pytest.param(
        {"reduce_res": tile("reduce_res", (128, 1), "int32")},
        ["reduce_res is int32", "float"],
        id="res-dtype",
    ),
    pytest.param(
        {"predicate": tile("predicate", (128, 512), "uint8", PSUM)},
        ["on_true and predicate are both in PSUM"],
        id="both-psum",
    ),
    pytest.param(
        {"attrs": {"reduce_cmd": "idle"}}, ["reduce_res is given but reduce_cmd is idle"], id="idle"
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_select_reduce_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_select_reduce_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int) -> int:
    tiles = {n: tile(n, (128, free)) for n in ("dst", "on_true")}
    tiles["predicate"] = tile("predicate", (128, free), "uint8")
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {}))


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), f1=st.integers(1, 65536), f2=st.integers(1, 65536))
def test_select_reduce_cost_grows_with_free_size(target: str, f1: int, f2: int) -> None:
    assert_cost_grows(lambda f: _cost(target, f), f1, f2, floor_cycles(target, Engine.VECTOR))
