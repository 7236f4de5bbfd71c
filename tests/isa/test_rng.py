"""rng: random bits from the engine's XORWOW state, checked against a scalar XORWOW."""

from __future__ import annotations

import numpy as np
from _isa_testing import PSUM, SBUF, fired, make_check, tile
from _xorwow import lane
from hypothesis import given
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["rng"]


@given(st.integers(1, 8), st.integers(1, 40), st.sampled_from([6, 24]), st.integers(0, 2**32 - 1))
def test_rng_bits_follow_xorwow_per_lane(lanes, count, words, seed):
    rng = np.random.default_rng(seed)
    state = rng.integers(1, 2**32, size=(lanes, words), dtype=np.uint32)
    out = SPEC.semantics(state, dst_shape=(lanes, count))
    for p in range(lanes):
        expected, after = lane([int(w) for w in state[p]], count)
        assert out["dst"][p].tolist() == expected
        assert out["rng_state"][p].tolist() == after


def test_rng_writes_the_low_bits_of_each_value():
    from neuronemu_isa._numerics import cast_to

    bits = np.array([[0x12345678, 0xFFFFFFFF]], dtype=np.uint32)
    assert cast_to(bits.view(np.uint32), np.dtype(np.uint32)).tolist() == [[0x12345678, 0xFFFFFFFF]]
    low = bits.astype(np.uint16)  # what a uint16 dst keeps
    assert low.tolist() == [[0x5678, 0xFFFF]]


def _check(target="trn2", engine=Engine.VECTOR, **ops):
    operands = {"dst": tile("dst", (128, 16), "uint32", SBUF),
                "rng_state": tile("rng_state", (128, 24), "uint32", SBUF)}
    operands.update(ops)
    return make_check(target, engine, operands, {})


def test_rng_constraints():
    assert fired(SPEC, _check()) == []
    [(_, msg)] = fired(SPEC, _check("trn1", Engine.GPSIMD))
    assert "rng runs on GpSimd from NC-v3" in msg and "trn1" in msg
    [(_, msg)] = fired(SPEC, _check("trn2", Engine.GPSIMD, dst=tile("dst", (128, 16), "uint32",
                                                                    PSUM)))
    assert "dst is in PSUM" in msg


def test_rng_cost_grows_with_size():
    small = SPEC.cost(_check(dst=tile("dst", (128, 64), "uint32", SBUF)))
    big = SPEC.cost(_check(dst=tile("dst", (128, 4096), "uint32", SBUF)))
    assert big > small
