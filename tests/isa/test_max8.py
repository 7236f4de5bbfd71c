"""max8: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
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

SPEC = REGISTRY["max8"]
F32 = np.float32


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    a=st.integers(1, 4),
    b=st.integers(8, 300),
    src=st.sampled_from(FLOATS + ("int16", "uint8")),
    dst=st.sampled_from(FLOATS),
    seed=seeds,
)
def test_max8_returns_the_eight_largest_descending(
    p: int, a: int, b: int, src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, (p, a, b), src, -100, 100)
    expected = np.array(
        [sorted(row.tolist(), reverse=True)[:8] for row in x.astype(F32).reshape(p, -1)], dtype=F32
    )
    got = cast_to(np.asarray(SPEC.semantics(x)).reshape(p, 8), NP_DTYPES[dst])
    assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 8), "float32", SBUF),
    src=tile("src", (128, 4, 512), "bfloat16", PSUM),
)


ACCEPTED: list[Any] = on_each_target("3d-source")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 8))),
    violation("src-small", ["src has 7 elements", "8..16384"], src=tile("src", (128, 7))),
    violation(
        "big", ["src has 16385 elements", "tile_top8_free_max"], src=tile("src", (128, 16385))
    ),
    violation("dst", ["dst has 16 elements", "8 (tile_top8_count)"], dst=tile("dst", (128, 16))),
]


def _sized(target: str, free: int) -> Any:
    tiles = {"dst": tile("dst", (128, 8)), "src": tile("src", (128, free))}
    return make_check(target, Engine.VECTOR, tiles, {})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), sizes=(8, 16384))
