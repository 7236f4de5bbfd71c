"""select_reduce: semantics vs NumPy, each constraint's message, cost growth."""

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
    tile_shapes,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

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


CHECK = checker(
    Engine.VECTOR,
    attrs={"reduce_cmd": "reset_reduce"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    reduce_res=tile("reduce_res", (128, 1), "float32", SBUF),
    predicate=tile("predicate", (128, 512), "uint8", SBUF),
    on_true=tile("on_true", (128, 512), "float32", PSUM),
    on_false=-1.0,
)


ACCEPTED: list[Any] = [
    *on_each_target("with-reduction"),
    *on_each_target("without", attrs={"reduce_cmd": "idle"}, reduce_res=None),
]
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation(
        "free",
        ["elements per partition differ", "predicate 256"],
        predicate=tile("predicate", (128, 256), "uint8"),
    ),
    violation("on-false", ["on_false has shape [128, 2]"], on_false=tile("on_false", (128, 2))),
    violation("res", ["reduce_res has shape [128, 4]"], reduce_res=tile("reduce_res", (128, 4))),
    violation(
        "res-dtype",
        ["reduce_res is int32", "float"],
        reduce_res=tile("reduce_res", (128, 1), "int32"),
    ),
    violation(
        "both-psum",
        ["on_true and predicate are both in PSUM"],
        predicate=tile("predicate", (128, 512), "uint8", PSUM),
    ),
    violation("idle", ["reduce_res is given but reduce_cmd is idle"], attrs={"reduce_cmd": "idle"}),
]


def _sized(target: str, free: int) -> Any:
    tiles = {n: tile(n, (128, free)) for n in ("dst", "on_true")}
    tiles["predicate"] = tile("predicate", (128, free), "uint8")
    return CHECK(target, **tiles)


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR))
