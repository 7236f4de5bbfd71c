"""affine_select: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    SBUF,
    assert_bits_equal,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["affine_select"]
F32 = np.float32
CMP = {
    "equal": lambda a: a == 0,
    "not_equal": lambda a: a != 0,
    "greater": lambda a: a > 0,
    "greater_equal": lambda a: a >= 0,
    "less": lambda a: a < 0,
    "less_equal": lambda a: a <= 0,
}


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    f=st.integers(1, 300),
    mult=st.integers(-3, 3),
    offset=st.integers(-200, 200),
    cmp=st.sampled_from(sorted(CMP)),
    src=st.sampled_from(FLOATS + ("int8", "int16")),
    dst=st.sampled_from(FLOATS),
    seed=seeds,
)
def test_affine_select_masks_by_the_affine_predicate(
    p: int, f: int, mult: int, offset: int, cmp: str, src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, (p, f), src, -100, 100)
    expected = np.empty((p, f), dtype=F32)
    for ch in range(p):
        for i in range(f):
            value = offset + ch * mult - i
            expected[ch, i] = F32(x[ch, i]) if CMP[cmp](value) else F32(-60000.0)
    out = SPEC.semantics(
        x,
        pattern=[[-1, f]],
        channel_multiplier=mult,
        on_false_value=-60000.0,
        cmp_op=cmp,
        offset=offset,
    )
    got = cast_to(np.asarray(out).reshape(p, f), NP_DTYPES[dst])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))


def test_affine_select_causal_mask() -> None:
    x = np.ones((3, 3), dtype=F32)
    out = SPEC.semantics(
        x, pattern=[[-1, 3]], channel_multiplier=1, on_false_value=0.0, cmp_op="greater_equal"
    )
    np.testing.assert_array_equal(out, np.tril(np.ones((3, 3))))


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.GPSIMD,
    attrs={"pattern": [[-1, 128]], "channel_multiplier": 1, "on_false_value": -9984.0},
    dst=tile("dst", (128, 128), "float32", SBUF),
    on_true_tile=tile("on_true_tile", (128, 128), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = on_each_target("causal-mask")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 128), "float32")),
    violation(
        "free",
        ["elements per partition differ", "on_true_tile 64"],
        on_true_tile=tile("on_true_tile", (128, 64), "float32"),
    ),
    violation("pattern", ["covers 64 elements", "dst has 128"], attrs={"pattern": [[1, 64]]}),
    violation("on-false", ["on_false_value 'x'", "fp32"], attrs={"on_false_value": "x"}),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int) -> Any:
    tiles = {n: tile(n, (128, free), "float32") for n in ("dst", "on_true_tile")}
    attrs = {"pattern": [[-1, free]], "channel_multiplier": 1, "on_false_value": -9984.0}
    return make_check(target, Engine.GPSIMD, tiles, attrs)


COST_GROWTH = Growth(_sized, least_cost(Engine.GPSIMD))


def test_affine_select_cost_is_startup_plus_n() -> None:
    assert SPEC.cost(_sized("trn1", 512)) == 150 + 512
