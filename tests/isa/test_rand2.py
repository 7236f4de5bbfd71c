"""rand2: uniform values in [min, max] from XORWOW bits (NC-v4)."""

from __future__ import annotations

import numpy as np
from _isa_testing import SBUF, tile
from _spec_testing import Growth, accepted, checker, least_cost, violation
from _xorwow import lane
from hypothesis import given
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["rand2"]


@given(
    st.integers(1, 4),
    st.integers(1, 30),
    st.floats(-100, 100),
    st.floats(0.01, 50),
    st.integers(0, 2**32 - 1),
)
def test_rand2_scales_the_top_24_bits_into_the_range(lanes, count, low, width, seed):
    state = np.random.default_rng(seed).integers(1, 2**32, size=(lanes, 24), dtype=np.uint32)
    out = SPEC.semantics(state, min=low, max=low + width, dst_shape=(lanes, count))
    for p in range(lanes):
        bits, _ = lane([int(w) for w in state[p]], count)
        unit = np.array([b >> 8 for b in bits], np.float32) * np.float32(2.0**-24)
        expected = np.float32(low) + unit * (np.float32(low + width) - np.float32(low))
        np.testing.assert_array_equal(out["dst"][p], expected)
    assert (out["dst"] >= np.float32(low)).all()


CHECK = checker(
    Engine.VECTOR,
    "trn3",
    dst=tile("dst", (128, 64), "float32", SBUF),
    min=0.0,
    max=1.0,
    rng_state=None,
)


ACCEPTED = [
    accepted("immediates"),
    accepted("column-min", min=tile("min", (128, 1), "float32", SBUF)),
]
VIOLATIONS = [
    violation("trn2", ["rand2 needs NC-v4"], target="trn2"),
    violation("min-shape", ["min has shape [64, 1]"], min=tile("min", (64, 1), "float32", SBUF)),
    violation("max-shape", ["max has shape [128, 2]"], max=tile("max", (128, 2), "float32", SBUF)),
    violation("order", ["min 2.0 must be below max 1.0"], min=2.0, max=1.0),
]


def _sized(target, free):
    return CHECK(target, dst=tile("dst", (128, free), "float32", SBUF))


COST_GROWTH = Growth(
    _sized, least_cost(Engine.VECTOR), sizes=(1, 8192), params={"target": ("trn3",)}
)


def test_rand2_cost_grows_with_size():
    assert SPEC.cost(_sized("trn3", 8192)) > SPEC.cost(_sized("trn3", 64))
