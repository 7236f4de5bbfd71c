"""rand_set_state: per-lane XORWOW state loaded from a uint32 tile, by engine and generation."""

from __future__ import annotations

import numpy as np
from _isa_testing import PSUM, SBUF, tile
from _spec_testing import accepted, checker, violation
from hypothesis import given
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["rand_set_state"]


@given(st.integers(1, 128), st.sampled_from([6, 24]), st.integers(0, 2**32 - 1))
def test_state_is_loaded_lane_by_lane(lanes, words, seed):
    seeds = np.random.default_rng(seed).integers(0, 2**32, size=(lanes, words), dtype=np.uint32)
    state = SPEC.semantics(seeds, rng_state_shape=(128, words))
    assert state.dtype == np.uint32
    np.testing.assert_array_equal(state[:lanes], seeds)
    assert (state[lanes:] == 1).all()


CHECK = checker(
    Engine.GPSIMD, src_seeds=tile("src_seeds", (128, 6), "uint32", SBUF), rng_state=None
)


_VECTOR_STATE = tile("src_seeds", (128, 24), "uint32", SBUF)
ACCEPTED = [
    accepted("gpsimd-trn2"),
    accepted("vector-trn3", target="trn3", engine=Engine.VECTOR, src_seeds=_VECTOR_STATE),
]
VIOLATIONS = [
    violation("trn1", ["needs NC-v3"], target="trn1"),
    violation(
        "vector-trn2", ["Vector engine from NC-v4"], engine=Engine.VECTOR, src_seeds=_VECTOR_STATE
    ),
    violation("state-size", ["takes uint32 with 6 elements"], src_seeds=_VECTOR_STATE),
    violation("gpsimd-psum", ["in PSUM"], src_seeds=tile("src_seeds", (128, 6), "uint32", PSUM)),
]
COST_GROWTH = None  # one short instruction, whatever the shapes
