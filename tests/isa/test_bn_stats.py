"""bn_stats: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
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

SPEC = REGISTRY["bn_stats"]


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    a=st.integers(1, 4),
    b=st.integers(2, 128),
    dtype=st.sampled_from(FLOATS),
    seed=seeds,
)
def test_bn_stats_gives_count_mean_and_m2_of_even_and_odd_elements(
    p: int, a: int, b: int, dtype: str, seed: int
) -> None:
    x = random_array(seed, (p, a, b), dtype, -3.0, 5.0)
    flat = x.astype(np.float64).reshape(p, -1)
    expected = []
    for half in (flat[:, 0::2], flat[:, 1::2]):
        mean = half.mean(axis=1)
        m2 = ((half - mean[:, None]) ** 2).sum(axis=1)
        expected += [np.full(p, half.shape[1]), mean, m2]
    out = np.asarray(SPEC.semantics(x)).reshape(p, 6)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.stack(expected, axis=1), rtol=1e-5, atol=1e-4)


def test_bn_stats_of_one_element_has_an_empty_odd_half() -> None:
    out = SPEC.semantics(np.array([[3.0]], dtype=np.float32))
    np.testing.assert_array_equal(out, [[1.0, 3.0, 0.0, 0.0, 0.0, 0.0]])


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 6), "float32", SBUF),
    data=tile("data", (128, 512), "bfloat16", PSUM),
)


ACCEPTED: list[Any] = on_each_target("512-elements")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 6))),
    violation(
        "fmax",
        ["data free size 513 exceeds 512", "tile_bn_stats_fmax"],
        data=tile("data", (128, 513)),
    ),
    violation("dst-size", ["dst has 4 elements", "writes 6"], dst=tile("dst", (128, 2, 2))),
]


def _sized(target: str, free: int) -> Any:
    tiles = {"dst": tile("dst", (128, 6)), "data": tile("data", (128, free))}
    return make_check(target, Engine.VECTOR, tiles, {})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), sizes=(1, 512))


def test_bn_stats_cost_is_max_64_n_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 500)) == 500
