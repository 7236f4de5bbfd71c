"""rand_set_state: per-lane XORWOW state loaded from a uint32 tile, by engine and generation."""

from __future__ import annotations

import numpy as np
from _isa_testing import PSUM, SBUF, fired, make_check, tile
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


def _check(target, engine, shape, dtype="uint32", buffer=SBUF):
    return make_check(target, engine, {"src_seeds": tile("src_seeds", shape, dtype, buffer),
                                       "rng_state": None}, {})


def test_rand_set_state_rules():
    assert fired(SPEC, _check("trn2", Engine.GPSIMD, (128, 6))) == []
    assert fired(SPEC, _check("trn3", Engine.VECTOR, (128, 24))) == []
    messages = {
        "needs NC-v3": _check("trn1", Engine.GPSIMD, (128, 6)),
        "Vector engine from NC-v4": _check("trn2", Engine.VECTOR, (128, 24)),
        "takes uint32 with 6 elements": _check("trn2", Engine.GPSIMD, (128, 24)),
        "in PSUM": _check("trn2", Engine.GPSIMD, (128, 6), buffer=PSUM),
    }
    for words, check in messages.items():
        found = fired(SPEC, check)
        assert any(words in m for _, m in found), (words, found)


def test_rand_set_state_cost_is_positive():
    assert SPEC.cost(_check("trn2", Engine.GPSIMD, (128, 6))) > 0
