"""dropout: elements dropped with probability prob, the rest unchanged (not rescaled)."""

from __future__ import annotations

import numpy as np
from _isa_testing import NP_DTYPES, SBUF, make_check, tile
from _spec_testing import Growth, accepted, checker, least_cost, violation
from _xorwow import lane
from hypothesis import given
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["dropout"]


@given(
    st.integers(1, 6),
    st.integers(1, 60),
    st.sampled_from(["float32", "bfloat16", "int32"]),
    st.integers(0, 2**32 - 1),
)
def test_dropout_drops_where_the_uniform_draw_is_below_prob(parts, free, dtype, seed):
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal((parts, free)) * 10).astype(np.float32).astype(NP_DTYPES[dtype])
    state = rng.integers(1, 2**32, size=(parts, 24), dtype=np.uint32)
    prob = rng.uniform(0, 1, size=(parts, 1)).astype(np.float32)
    prob[0, 0] = 0.0
    out = SPEC.semantics(data, prob, state)["dst"]
    for p in range(parts):
        bits, _ = lane([int(w) for w in state[p]], free)
        unit = np.array([b >> 8 for b in bits], np.float32) * np.float32(2.0**-24)
        expected = np.where(unit < prob[p, 0], np.zeros((), data.dtype), data[p])
        assert out[p].tobytes() == expected.tobytes()
    assert out[0].tobytes() == data[0].tobytes()  # prob 0 keeps everything


def test_dropout_fraction_is_near_prob():
    state = np.random.default_rng(4).integers(1, 2**32, size=(128, 24), dtype=np.uint32)
    out = SPEC.semantics(np.ones((128, 512), np.float32), 0.25, state)["dst"]
    assert abs((out == 0).mean() - 0.25) < 0.01


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 64), "float32", SBUF),
    data=tile("data", (128, 64), "float32", SBUF),
    prob=0.5,
    rng_state=None,
)


ACCEPTED = [
    accepted("immediate-prob"),
    accepted("column-prob", prob=tile("prob", (128, 1), "float32", SBUF)),
]
VIOLATIONS = [
    violation(
        "par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 64), "float32", SBUF)
    ),
    violation(
        "free",
        ["elements per partition differ", "dst 32"],
        dst=tile("dst", (128, 32), "float32", SBUF),
    ),
    violation("dtype", ["dtype"], dst=tile("dst", (128, 64), "bfloat16", SBUF)),
    violation("prob", ["prob has shape [128, 2]"], prob=tile("prob", (128, 2), "float32", SBUF)),
]


def _sized(target, free):
    tiles = {n: tile(n, (128, free), "float32", SBUF) for n in ("dst", "data")}
    return make_check(target, Engine.VECTOR, tiles | {"prob": 0.5, "rng_state": None}, {})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), sizes=(1, 8192))


def test_dropout_cost_grows_with_size():
    assert SPEC.cost(_sized("trn2", 8192)) > SPEC.cost(CHECK())
