"""tensor_partition_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
    SBUF,
    TARGETS,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import ARITH, Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["tensor_partition_reduce"]
F32 = np.float32
BITWISE = {
    "bitwise_or": np.bitwise_or,
    "bitwise_and": np.bitwise_and,
    "bitwise_xor": np.bitwise_xor,
}


def _down_partitions(fn: Any, x: np.ndarray) -> np.ndarray:
    """Combine the rows of [P, F] one partition at a time, from partition 0."""
    acc = x[0].copy()
    for row in x[1:]:
        acc = fn(acc, row)
    return acc


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=128),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op=st.sampled_from(["add", "maximum", "average", "mean"]),
    seed=seeds,
)
def test_tensor_partition_reduce_combines_partitions_in_fp32(
    shape: tuple[int, ...], src: str, dst: str, op: str, seed: int
) -> None:
    x = random_array(seed, shape, src, -100, 100)
    flat = x.astype(F32).reshape(shape[0], -1)
    expected = _down_partitions(ARITH["maximum" if op == "maximum" else "add"], flat)
    if op in ("average", "mean"):
        expected = expected / F32(shape[0])
    out = cast_to(np.asarray(SPEC.semantics(x, op=op)), NP_DTYPES[dst])
    assert out.shape == (1, flat.shape[1])
    assert_bits_equal(out, expected.reshape(1, -1).astype(NP_DTYPES[dst]))


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=64),
    dtype=st.sampled_from(INTS),
    op=st.sampled_from(sorted(BITWISE)),
    seed=seeds,
)
def test_tensor_partition_reduce_bitwise_ops_combine_raw_bits(
    shape: tuple[int, ...], dtype: str, op: str, seed: int
) -> None:
    x = random_array(seed, shape, dtype, -(2**31), 2**31 - 1)
    expected = _down_partitions(BITWISE[op], x.reshape(shape[0], -1)).reshape(1, -1)
    out = cast_to(np.asarray(SPEC.semantics(x, op=op)), NP_DTYPES[dtype])
    assert_bits_equal(out, expected)


def test_tensor_partition_reduce_matches_the_doc_example() -> None:
    # nki.isa.tensor_partition_reduce example: (128, 32, 4) summed to (1, 32, 4).
    x = np.arange(128 * 32 * 4, dtype=F32).reshape(128, 32, 4) / 1024
    out = np.asarray(SPEC.semantics(x, op="add")).reshape(1, 32, 4)
    np.testing.assert_allclose(out, x.sum(axis=0, keepdims=True), rtol=1e-6)


CHECK = checker(
    Engine.GPSIMD,
    attrs={"op": "add"},
    dst=tile("dst", (1, 32, 4), "float32", SBUF),
    data=tile("data", (128, 32, 4), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("add"),
    *on_each_target(
        "bitwise-xor",
        attrs={"op": "bitwise_xor"},
        dst=tile("dst", (1, 8), "int32"),
        data=tile("data", (64, 8), "int32"),
    ),
]
VIOLATIONS: list[Any] = [
    violation("dst-partitions", ["dst has 2 partitions", "leaves 1"], dst=tile("dst", (2, 32, 4))),
    violation(
        "free", ["elements per partition differ", "dst 32", "data 128"], dst=tile("dst", (1, 32))
    ),
    violation(
        "rank",
        ["dst has 5 free dimensions", "at most 4", "tile_partition_reduce_free_dims_max"],
        dst=tile("dst", (1, 2, 2, 2, 2, 8)),
        data=tile("data", (8, 2, 2, 2, 2, 8)),
    ),
    violation(
        "bitvec", ["bitwise_or", "needs integer dtypes", "bfloat16"], attrs={"op": "bitwise_or"}
    ),
]


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {"dst": tile("dst", (1, free), dtype), "data": tile("data", (128, free), dtype)}
    return CHECK(target, **tiles)


COST_GROWTH = Growth(_sized, least_cost(Engine.GPSIMD), params={"target": TARGETS, "dtype": FLOATS})
