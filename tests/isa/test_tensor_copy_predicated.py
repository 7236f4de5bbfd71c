"""tensor_copy_predicated: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    INTS,
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

SPEC = REGISTRY["tensor_copy_predicated"]


# Semantics -------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    shape=tile_shapes(),
    dtype=st.sampled_from(FLOATS + INTS),
    pred=st.sampled_from(["uint8", "uint16", "uint32"]),
    reverse=st.booleans(),
    seed=seeds,
)
def test_tensor_copy_predicated_copies_where_predicate_is_set(
    shape: tuple[int, ...], dtype: str, pred: str, reverse: bool, seed: int
) -> None:
    src = random_array(seed, shape, dtype, -1e6, 1e6)
    dst = random_array(seed + 1, shape, dtype, -1e6, 1e6)
    predicate = random_array(seed + 2, shape, pred, 0, 3)
    expected = dst.copy()
    for idx in np.ndindex(shape):
        if (predicate[idx] != 0) != reverse:
            expected[idx] = src[idx]
    out = SPEC.semantics(src=src, predicate=predicate, dst=dst, reverse_pred=reverse)
    assert_bits_equal(cast_to(np.asarray(out).reshape(shape), NP_DTYPES[dtype]), expected)


def test_tensor_copy_predicated_scalar_src_is_cast_to_dst() -> None:
    dst = np.array([[1, 2, 3]], dtype=np.int16)
    predicate = np.array([[0, 1, 7]], dtype=np.uint8)
    out = SPEC.semantics(src=2.5, predicate=predicate, dst=dst)
    np.testing.assert_array_equal(np.asarray(out), np.array([[1, 2, 2]], dtype=np.int16))


# Constraints -----------------------------------------------------------------------------


def _check(target: str = "trn2", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 64), "bfloat16", SBUF),
        "src": tile("src", (128, 64), "bfloat16", PSUM),
        "predicate": tile("predicate", (128, 64), "uint8", SBUF),
    }
    operands.update(ops)
    return make_check(target, Engine.VECTOR, operands, {"reverse_pred": False, "reads_dst": True})


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_copy_predicated_accepts_tile_and_scalar_src(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    assert fired(SPEC, _check(target, src=3.0)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"predicate": tile("predicate", (64, 64), "uint8")},
        ["partition sizes differ", "predicate 64"],
        id="partitions",
    ),
    pytest.param(
        {"dst": tile("dst", (128, 32), "bfloat16")},
        ["elements per partition differ", "dst 32", "src 64"],
        id="free",
    ),
    pytest.param(
        {"src": tile("src", (128, 64), "float32", PSUM)},
        ["src is float32", "dst is bfloat16", "same dtype"],
        id="dtype",
    ),
    pytest.param(
        {"predicate": tile("predicate", (128, 64), "uint8", PSUM)},
        ["src and predicate are both in PSUM"],
        id="both-psum",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_tensor_copy_predicated_constraint_message(
    change: dict[str, Any], expected: list[str]
) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_tensor_copy_predicated_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


# Cost ------------------------------------------------------------------------------------


def _cost(target: str, free: int, src_buffer: Any = SBUF, dtype: str = "float32") -> int:
    return SPEC.cost(
        make_check(
            target,
            Engine.VECTOR,
            {
                "dst": tile("dst", (128, free), dtype),
                "src": tile("src", (128, free), dtype, src_buffer),
                "predicate": tile("predicate", (128, free), "uint16"),
            },
            {},
        )
    )


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    buffer=st.sampled_from([SBUF, PSUM]),
    f1=st.integers(1, 65536),
    f2=st.integers(1, 65536),
)
def test_tensor_copy_predicated_cost_grows_with_free_size(
    target: str, buffer: Any, f1: int, f2: int
) -> None:
    assert_cost_grows(
        lambda f: _cost(target, f, buffer), f1, f2, floor_cycles(target, Engine.VECTOR)
    )


def test_tensor_copy_predicated_split_buffers_halve_the_cost_on_trn1() -> None:
    # ISA-old: max(MIN_II, N) when src and predicate sit in different buffers, else 2N.
    assert _cost("trn1", 4096, PSUM) == 4096
    assert _cost("trn1", 4096, SBUF) == 8192
