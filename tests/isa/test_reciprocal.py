"""reciprocal: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    assert_cost_grows,
    fired,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

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


def _check(target: str = "trn2", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 512), "bfloat16", SBUF),
        "data": tile("data", (128, 512), "float32", PSUM),
    }
    return make_check(target, Engine.VECTOR, operands | ops, {})


@pytest.mark.parametrize("target", TARGETS)
def test_reciprocal_accepts_matching_tiles(target: str) -> None:
    assert fired(SPEC, _check(target)) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 512))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"dst": tile("dst", (128, 256))}, ["elements per partition differ", "dst 256"], id="free"
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_reciprocal_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_reciprocal_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int) -> int:
    tiles = {n: tile(n, (128, free)) for n in ("dst", "data")}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {}))


@settings(deadline=None)
@given(target=st.sampled_from(TARGETS), f1=st.integers(1, 65536), f2=st.integers(1, 65536))
def test_reciprocal_cost_grows_with_free_size(target: str, f1: int, f2: int) -> None:
    assert_cost_grows(lambda f: _cost(target, f), f1, f2, floor_cycles(target, Engine.VECTOR))


def test_reciprocal_cost_is_max_64_8n_on_trn1() -> None:
    assert _cost("trn1", 4) == 64
    assert _cost("trn1", 100) == 800
