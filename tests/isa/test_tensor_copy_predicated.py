"""tensor_copy_predicated: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
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


CHECK = checker(
    Engine.VECTOR,
    attrs={"reverse_pred": False, "reads_dst": True},
    dst=tile("dst", (128, 64), "bfloat16", SBUF),
    src=tile("src", (128, 64), "bfloat16", PSUM),
    predicate=tile("predicate", (128, 64), "uint8", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("tile-src"),
    *on_each_target("scalar-src", src=3.0),
]
VIOLATIONS: list[Any] = [
    violation(
        "partitions",
        ["partition sizes differ", "predicate 64"],
        predicate=tile("predicate", (64, 64), "uint8"),
    ),
    violation(
        "free",
        ["elements per partition differ", "dst 32", "src 64"],
        dst=tile("dst", (128, 32), "bfloat16"),
    ),
    violation(
        "dtype",
        ["src is float32", "dst is bfloat16", "same dtype"],
        src=tile("src", (128, 64), "float32", PSUM),
    ),
    violation(
        "both-psum",
        ["src and predicate are both in PSUM"],
        predicate=tile("predicate", (128, 64), "uint8", PSUM),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int, src_buffer: Any = SBUF) -> Any:
    return CHECK(
        target,
        dst=tile("dst", (128, free), "float32"),
        src=tile("src", (128, free), "float32", src_buffer),
        predicate=tile("predicate", (128, free), "uint16"),
    )


def _cost(target: str, free: int, src_buffer: Any) -> int:
    return SPEC.cost(_sized(target, free, src_buffer))


COST_GROWTH = Growth(
    _sized, least_cost(Engine.VECTOR), params={"target": TARGETS, "src_buffer": (SBUF, PSUM)}
)


def test_tensor_copy_predicated_split_buffers_halve_the_cost_on_trn1() -> None:
    # ISA-old: max(MIN_II, N) when src and predicate sit in different buffers, else 2N.
    assert _cost("trn1", 4096, PSUM) == 4096
    assert _cost("trn1", 4096, SBUF) == 8192
