"""bn_aggr: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    PSUM,
    SBUF,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
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


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 2), "float32", SBUF),
    data=tile("data", (128, 4, 6), "float32", PSUM),
)


ACCEPTED: list[Any] = on_each_target("four-stats")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 2))),
    violation("triples", ["data has 7 elements", "multiple of 3"], data=tile("data", (128, 7))),
    violation("dst", ["dst has 6 elements", "writes 2"], dst=tile("dst", (128, 6))),
]


def _sized(target: str, groups: int) -> Any:
    tiles = {"dst": tile("dst", (128, 2)), "data": tile("data", (128, 3 * groups))}
    return make_check(target, Engine.VECTOR, tiles, {})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), "groups", (1, 4096))


def test_bn_aggr_cost_is_max_64_13n_over_3_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 2)) == 64
    assert SPEC.cost(_sized("trn1", 100)) == 1300
