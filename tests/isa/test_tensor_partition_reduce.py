"""tensor_partition_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
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
from _spec_testing import ARITH, assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["tensor_partition_reduce"]
F32 = np.float32
BITWISE = {"bitwise_or": np.bitwise_or, "bitwise_and": np.bitwise_and,
           "bitwise_xor": np.bitwise_xor}


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


def _check(target: str = "trn2", op: str = "add", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (1, 32, 4), "float32", SBUF),
        "data": tile("data", (128, 32, 4), "bfloat16", SBUF),
    }
    return make_check(target, Engine.GPSIMD, operands | ops, {"op": op})


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_partition_reduce_accepts_arithmetic_and_bitwise_ops(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    ints = {"dst": tile("dst", (1, 8), "int32"), "data": tile("data", (64, 8), "int32")}
    assert fired(SPEC, _check(target, "bitwise_xor", **ints)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"dst": tile("dst", (2, 32, 4))}, ["dst has 2 partitions", "leaves 1"], id="dst-partitions"
    ),
    pytest.param(
        {"dst": tile("dst", (1, 32))}, ["elements per partition differ", "dst 32", "data 128"],
        id="free",
    ),
    pytest.param(
        {"dst": tile("dst", (1, 2, 2, 2, 2, 8)), "data": tile("data", (8, 2, 2, 2, 2, 8))},
        ["dst has 5 free dimensions", "at most 4", "tile_partition_reduce_free_dims_max"],
        id="rank",
    ),
    pytest.param(
        {"op": "bitwise_or"}, ["bitwise_or", "needs integer dtypes", "bfloat16"], id="bitvec"
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_tensor_partition_reduce_constraint_message(
    change: dict[str, Any], expected: list[str]
) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_tensor_partition_reduce_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int, dtype: str = "float32") -> int:
    tiles = {"dst": tile("dst", (1, free), dtype), "data": tile("data", (128, free), dtype)}
    return SPEC.cost(make_check(target, Engine.GPSIMD, tiles, {"op": "add"}))


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    dtype=st.sampled_from(FLOATS),
    f1=st.integers(1, 65536),
    f2=st.integers(1, 65536),
)
def test_tensor_partition_reduce_cost_grows_with_free_size(
    target: str, dtype: str, f1: int, f2: int
) -> None:
    assert_cost_grows(
        lambda f: _cost(target, f, dtype), f1, f2, floor_cycles(target, Engine.GPSIMD)
    )
