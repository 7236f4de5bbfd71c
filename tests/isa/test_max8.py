"""max8: semantics vs NumPy, each constraint's message, cost growth."""

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
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

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


def _check(target: str = "trn2", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 8), "float32", SBUF),
        "src": tile("src", (128, 4, 512), "bfloat16", PSUM),
    }
    return make_check(target, Engine.VECTOR, operands | ops, {})


@pytest.mark.parametrize("target", TARGETS)
def test_max8_accepts_a_3d_source(target: str) -> None:
    assert fired(SPEC, _check(target)) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 8))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"src": tile("src", (128, 7))}, ["src has 7 elements", "8..16384"], id="src-small"
    ),
    pytest.param(
        {"src": tile("src", (128, 16385))},
        ["src has 16385 elements", "tile_top8_free_max"],
        id="big",
    ),
    pytest.param(
        {"dst": tile("dst", (128, 16))}, ["dst has 16 elements", "8 (tile_top8_count)"], id="dst"
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_max8_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_max8_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int) -> int:
    tiles = {"dst": tile("dst", (128, 8)), "src": tile("src", (128, free))}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {}))


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), f1=st.integers(8, 16384), f2=st.integers(8, 16384))
def test_max8_cost_grows_with_free_size(target: str, f1: int, f2: int) -> None:
    assert_cost_grows(lambda f: _cost(target, f), f1, f2, floor_cycles(target, Engine.VECTOR))
