"""bn_aggr: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    PSUM,
    SBUF,
    TARGETS,
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

SPEC = REGISTRY["bn_aggr"]


@settings(deadline=None)
@given(
    p=st.integers(1, 64),
    sizes=st.lists(st.integers(2, 512), min_size=1, max_size=4),
    seed=seeds,
)
def test_bn_aggr_of_bn_stats_chunks_is_the_mean_and_variance(
    p: int, sizes: list[int], seed: int
) -> None:
    x = random_array(seed, (p, sum(sizes)), "float32", -2.0, 6.0)
    stats, start = [], 0
    for n in sizes:
        stats.append(np.asarray(REGISTRY["bn_stats"].semantics(x[:, start : start + n])))
        start += n
    out = np.asarray(SPEC.semantics(np.concatenate(stats, axis=1))).reshape(p, 2)
    ref = x.astype(np.float64)
    np.testing.assert_allclose(out[:, 0], ref.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], ref.var(axis=1), rtol=1e-4, atol=1e-5)


def test_bn_aggr_combines_triples_by_the_documented_formula() -> None:
    # Two groups: (2 values, mean 1, M2 2) and (1 value, mean 4, M2 0) -> n 3, mean 2.
    data = np.array([[2.0, 1.0, 2.0, 1.0, 4.0, 0.0]], dtype=np.float32)
    out = np.asarray(SPEC.semantics(data))
    np.testing.assert_allclose(out, [[2.0, (2.0 + 2 * 1.0 + 1 * 4.0) / 3]])


def _check(target: str = "trn2", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 2), "float32", SBUF),
        "data": tile("data", (128, 4, 6), "float32", PSUM),
    }
    return make_check(target, Engine.VECTOR, operands | ops, {})


@pytest.mark.parametrize("target", TARGETS)
def test_bn_aggr_accepts_several_stats(target: str) -> None:
    assert fired(SPEC, _check(target)) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 2))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"data": tile("data", (128, 7))}, ["data has 7 elements", "multiple of 3"], id="triples"
    ),
    pytest.param({"dst": tile("dst", (128, 6))}, ["dst has 6 elements", "writes 2"], id="dst"),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_bn_aggr_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_bn_aggr_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int) -> int:
    tiles = {"dst": tile("dst", (128, 2)), "data": tile("data", (128, free))}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {}))


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), g1=st.integers(1, 4096), g2=st.integers(1, 4096))
def test_bn_aggr_cost_grows_with_free_size(target: str, g1: int, g2: int) -> None:
    assert_cost_grows(lambda g: _cost(target, 3 * g), g1, g2, floor_cycles(target, Engine.VECTOR))


def test_bn_aggr_cost_is_max_64_13n_over_3_on_trn1() -> None:
    assert _cost("trn1", 6) == 64
    assert _cost("trn1", 300) == 1300
