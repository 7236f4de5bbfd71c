"""nc_find_index8: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    PSUM,
    SBUF,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["nc_find_index8"]
F32 = np.float32


def reference(data: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Per row: each val (in order) takes the first equal position not yet taken."""
    out = np.full(vals.shape, 0xFFFFFFFF, dtype=np.int64)
    for r in range(data.shape[0]):
        taken: set[int] = set()
        for j in range(vals.shape[1]):
            for k, v in enumerate(data[r]):
                if v == vals[r, j] and k not in taken:
                    out[r, j] = k
                    taken.add(k)
                    break
    return out


@settings(deadline=None)
@given(
    p=st.integers(1, 16),
    f=st.integers(8, 200),
    dtype=st.sampled_from(["uint16", "uint32"]),
    seed=seeds,
)
def test_nc_find_index8_finds_first_unclaimed_matches(
    p: int, f: int, dtype: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 12, size=(p, f)).astype(F32)
    vals = rng.integers(0, 14, size=(p, 8)).astype(F32)  # 12, 13 are never found
    out = np.asarray(SPEC.semantics(data, vals)).reshape(p, 8)
    np.testing.assert_array_equal(out, reference(data, vals))
    np.testing.assert_array_equal(
        cast_to(out, np.dtype(dtype)), np.minimum(reference(data, vals), np.iinfo(dtype).max)
    )


def test_nc_find_index8_pairs_duplicate_vals_ascending() -> None:
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], dtype=F32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], dtype=F32)
    np.testing.assert_array_equal(SPEC.semantics(data, vals), [[2, 4, 5, 6, 7, 8, 9, 10]])


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 8), "uint32", SBUF),
    data=tile("data", (128, 1024), "float32", PSUM),
    vals=tile("vals", (128, 8), "float32", SBUF),
)


ACCEPTED: list[Any] = on_each_target("eight-vals")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "vals 64"], vals=tile("vals", (64, 8))),
    violation("small", ["data has 4 elements", "8..16384"], data=tile("data", (128, 4))),
    violation("vals", ["vals has 9 elements", "8"], vals=tile("vals", (128, 9))),
]


def _sized(target: str, free: int) -> Any:
    return CHECK(target, data=tile("data", (128, free)), vals=tile("vals", (128, 8)))


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), sizes=(8, 16384))
