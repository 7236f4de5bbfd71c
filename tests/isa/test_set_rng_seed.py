"""set_rng_seed: one seed fills every lane's state, the same seed always the same way."""

from __future__ import annotations

import numpy as np
from _isa_testing import SBUF, fired, make_check, tile
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


def test_seed_must_be_one_32_bit_value():
    check = make_check("trn2", Engine.VECTOR, {"src_seeds": tile("s", (1, 2), "uint32", SBUF),
                                                "rng_state": None}, {})
    [(_, msg)] = fired(SPEC, check)
    assert "src_seeds has shape [1, 2]" in msg
    check = make_check("trn2", Engine.VECTOR, {"src_seeds": tile("s", (1, 1), "uint16", SBUF),
                                                "rng_state": None}, {})
    [(_, msg)] = fired(SPEC, check)
    assert "32-bit" in msg


def test_set_rng_seed_cost_is_positive():
    check = make_check("trn2", Engine.VECTOR, {"src_seeds": tile("s", (1, 1), "uint32", SBUF),
                                                "rng_state": None}, {})
    assert SPEC.cost(check) > 0
