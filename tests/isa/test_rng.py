"""rng: random bits from the engine's XORWOW state, checked against a scalar XORWOW."""

from __future__ import annotations

import numpy as np
from _isa_testing import PSUM, SBUF, tile
from _spec_testing import Growth, accepted, checker, least_cost, violation
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
    from neuronemu_isa.numerics import cast_to

    bits = np.array([[0x12345678, 0xFFFFFFFF]], dtype=np.uint32)
    assert cast_to(bits.view(np.uint32), np.dtype(np.uint32)).tolist() == [[0x12345678, 0xFFFFFFFF]]
    low = bits.astype(np.uint16)  # what a uint16 dst keeps
    assert low.tolist() == [[0x5678, 0xFFFF]]


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 16), "uint32", SBUF),
    rng_state=tile("rng_state", (128, 24), "uint32", SBUF),
)


ACCEPTED = [
    accepted("vector"),
    accepted("gpsimd-trn2", engine=Engine.GPSIMD),
    accepted("vector-psum-trn1", target="trn1", dst=tile("dst", (128, 16), "int8", PSUM)),
]
VIOLATIONS = [
    violation(
        "gpsimd-trn1",
        ["rng runs on GpSimd from NC-v3", "trn1"],
        target="trn1",
        engine=Engine.GPSIMD,
    ),
    violation(
        "gpsimd-psum",
        ["dst is in PSUM"],
        engine=Engine.GPSIMD,
        dst=tile("dst", (128, 16), "uint32", PSUM),
    ),
]


def _sized(target, engine, free):
    return CHECK(target, engine=engine, dst=tile("dst", (128, free), "uint32", SBUF))


COST_GROWTH = Growth(
    _sized,
    least_cost(),
    sizes=(1, 4096),
    params={"target": ("trn2", "trn3"), "engine": (Engine.VECTOR, Engine.GPSIMD)},
)


def test_rng_cost_grows_with_size():
    assert SPEC.cost(_sized("trn2", Engine.VECTOR, 4096)) > SPEC.cost(
        _sized("trn2", Engine.VECTOR, 64)
    )
