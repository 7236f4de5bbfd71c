"""set_rng_seed: one seed fills every lane's state, the same seed always the same way."""

from __future__ import annotations

import numpy as np
from _isa_testing import SBUF, tile
from _spec_testing import checker, on_each_target, violation
from hypothesis import given
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["set_rng_seed"]


@given(st.integers(0, 2**32 - 1))
def test_same_seed_same_state_and_lanes_differ(seed):
    a = SPEC.semantics(np.array([[seed]], np.uint32), rng_state_shape=(128, 24))
    b = SPEC.semantics(np.array([[seed]], np.uint32), rng_state_shape=(128, 24))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.uint32 and a.shape == (128, 24)
    assert len({tuple(row) for row in a.tolist()}) == 128  # every lane its own stream
    assert (a != 0).all()
    other = SPEC.semantics(np.array([[seed ^ 1]], np.uint32), rng_state_shape=(128, 24))
    assert not np.array_equal(a, other)


CHECK = checker(Engine.VECTOR, src_seeds=tile("src_seeds", (1, 1), "uint32", SBUF), rng_state=None)


ACCEPTED = on_each_target(targets=("trn1", "trn2", "trn3"))
# The seed must be one 32-bit value.
VIOLATIONS = [
    violation(
        "two-values",
        ["src_seeds has shape [1, 2]"],
        src_seeds=tile("src_seeds", (1, 2), "uint32", SBUF),
    ),
    violation("16-bit", ["32-bit"], src_seeds=tile("src_seeds", (1, 1), "uint16", SBUF)),
]
COST_GROWTH = None  # one short instruction, whatever the shapes
