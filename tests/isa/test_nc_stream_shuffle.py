"""nc_stream_shuffle: semantics vs NumPy, each constraint's message, cost growth."""

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
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["nc_stream_shuffle"]
KEEP = 255
masks = st.lists(st.one_of(st.integers(0, 31), st.just(KEEP)), min_size=32, max_size=32)


@settings(deadline=None)
@given(
    quadrants=st.integers(1, 4),
    free=st.integers(1, 64),
    dtype=st.sampled_from(FLOATS + INTS),
    mask=masks,
    seed=seeds,
)
def test_nc_stream_shuffle_moves_partitions_within_each_quadrant(
    quadrants: int, free: int, dtype: str, mask: list[int], seed: int
) -> None:
    p = 32 * quadrants
    src = random_array(seed, (p, free), dtype, -1e6, 1e6)
    dst = random_array(seed + 1, (p, free), dtype, -1e6, 1e6)
    expected = dst.copy()
    for q in range(quadrants):
        for i, m in enumerate(mask):
            if m != KEEP:
                expected[32 * q + i] = src[32 * q + m]
    out = SPEC.semantics(src=src, dst=dst, shuffle_mask=mask)
    assert_bits_equal(cast_to(np.asarray(out), NP_DTYPES[dtype]), expected)


def test_nc_stream_shuffle_broadcasts_one_partition_like_the_doc_example() -> None:
    # nki.isa.nc_stream_shuffle example 2: mask [0] * 32 copies partition 0 to 32 partitions.
    src = np.arange(8, dtype=np.float32).reshape(1, 8)
    dst = np.zeros((32, 8), dtype=np.float32)
    out = np.asarray(SPEC.semantics(src=src, dst=dst, shuffle_mask=[0] * 32))
    assert_bits_equal(out, np.repeat(src, 32, axis=0))


def test_nc_stream_shuffle_in_place_rotation_reads_the_old_rows() -> None:
    # Example 1: in place, partition i takes partition (i - 1) % 32.
    a = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    out = np.asarray(SPEC.semantics(src=a, dst=a, shuffle_mask=[(i - 1) % 32 for i in range(32)]))
    assert_bits_equal(out, np.roll(a, 1, axis=0))


ROTATE = [(i + 1) % 32 for i in range(32)]


def _check(target: str = "trn2", mask: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (64, 128), "bfloat16", SBUF),
        "src": tile("src", (64, 128), "bfloat16", PSUM),
    }
    attrs = {"shuffle_mask": ROTATE if mask is None else mask, "reads_dst": True}
    return make_check(target, Engine.VECTOR, operands | ops, attrs)


@pytest.mark.parametrize("target", TARGETS)
def test_nc_stream_shuffle_accepts_rotation_broadcast_and_keep(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    one = {"src": tile("src", (1, 128), "bfloat16"), "dst": tile("dst", (32, 128), "bfloat16")}
    assert fired(SPEC, _check(target, [0] * 32, **one)) == []
    assert fired(SPEC, _check(target, [0] + [KEEP] * 31, **one)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"src": tile("src", (64, 128), "float32")},
        ["dst is bfloat16", "src is float32", "same dtype"],
        id="dtype",
    ),
    pytest.param(
        {"dst": tile("dst", (64, 64), "bfloat16")},
        ["elements per partition differ", "dst 64", "src 128"],
        id="free",
    ),
    pytest.param(
        {"mask": list(range(16))}, ["shuffle_mask", "list of 32", "tile_quadrant_partitions"],
        id="mask-length",
    ),
    pytest.param(
        {"mask": [0] * 31 + [40]}, ["shuffle_mask[31] is 40", "0..31 or 255"], id="mask-value"
    ),
    pytest.param(
        {"src": tile("src", (16, 128), "bfloat16")},
        ["dst partition 15 reads src partition 16", "shuffle_mask[15] = 16", "src has 16"],
        id="missing-source",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_nc_stream_shuffle_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_nc_stream_shuffle_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int, dtype: str = "float32") -> int:
    tiles = {"dst": tile("dst", (128, free), dtype), "src": tile("src", (128, free), dtype)}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {"shuffle_mask": ROTATE}))


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    dtype=st.sampled_from(FLOATS),
    f1=st.integers(1, 65536),
    f2=st.integers(1, 65536),
)
def test_nc_stream_shuffle_cost_grows_with_free_size(
    target: str, dtype: str, f1: int, f2: int
) -> None:
    assert_cost_grows(
        lambda f: _cost(target, f, dtype), f1, f2, floor_cycles(target, Engine.VECTOR)
    )


def test_nc_stream_shuffle_broadcast_from_one_partition_fills_only_the_first_quadrant() -> None:
    c = _check("trn2", [0] * 32, src=tile("src", (1, 128), "bfloat16"))
    assert_single_message(SPEC, c, ["dst partition 32 reads src partition 32", "src has 1"])


def test_nc_stream_shuffle_cost_is_max_64_n_on_trn1() -> None:
    assert _cost("trn1", 10) == 64
    assert _cost("trn1", 1000) == 1000
