"""reciprocal: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["reciprocal"]
F32 = np.float32


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS + ("int16",)),
    dst=st.sampled_from(FLOATS),
    seed=seeds,
)
def test_reciprocal_is_one_fp32_divide(
    shape: tuple[int, ...], src: str, dst: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -1000, 1000)
    with np.errstate(divide="ignore"):
        expected = (F32(1) / x.astype(F32)).astype(NP_DTYPES[dst])
    got = cast_to(np.asarray(SPEC.semantics(x)).reshape(shape), NP_DTYPES[dst])
    assert_bits_equal(got, expected)


def test_reciprocal_of_zero_is_signed_infinity() -> None:
    out = SPEC.semantics(np.array([[0.0, -0.0]], dtype=F32))
    np.testing.assert_array_equal(out, [[np.inf, -np.inf]])


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    data=tile("data", (128, 512), "float32", PSUM),
)


ACCEPTED: list[Any] = on_each_target("matching-tiles")
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
]


def _sized(target: str, free: int) -> Any:
    return CHECK(target, **{n: tile(n, (128, free)) for n in ("dst", "data")})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR))


def test_reciprocal_cost_is_max_64_8n_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 4)) == 64
    assert SPEC.cost(_sized("trn1", 100)) == 800
