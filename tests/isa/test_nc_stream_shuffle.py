"""nc_stream_shuffle: semantics vs NumPy, each constraint's message, cost growth."""

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
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

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


CHECK = checker(
    Engine.VECTOR,
    attrs={"shuffle_mask": ROTATE, "reads_dst": True},
    dst=tile("dst", (64, 128), "bfloat16", SBUF),
    src=tile("src", (64, 128), "bfloat16", PSUM),
)


_ONE = {"src": tile("src", (1, 128), "bfloat16"), "dst": tile("dst", (32, 128), "bfloat16")}
ACCEPTED: list[Any] = [
    *on_each_target("rotation"),
    *on_each_target("broadcast", attrs={"shuffle_mask": [0] * 32}, **_ONE),
    *on_each_target("keep", attrs={"shuffle_mask": [0] + [KEEP] * 31}, **_ONE),
]
VIOLATIONS: list[Any] = [
    violation(
        "dtype",
        ["dst is bfloat16", "src is float32", "same dtype"],
        src=tile("src", (64, 128), "float32"),
    ),
    violation(
        "free",
        ["elements per partition differ", "dst 64", "src 128"],
        dst=tile("dst", (64, 64), "bfloat16"),
    ),
    violation(
        "mask-length",
        ["shuffle_mask", "list of 32", "tile_quadrant_partitions"],
        attrs={"shuffle_mask": list(range(16))},
    ),
    violation(
        "mask-value",
        ["shuffle_mask[31] is 40", "0..31 or 255"],
        attrs={"shuffle_mask": [0] * 31 + [40]},
    ),
    violation(
        "missing-source",
        ["dst partition 15 reads src partition 16", "shuffle_mask[15] = 16", "src has 16"],
        src=tile("src", (16, 128), "bfloat16"),
    ),
    violation(
        "broadcast-past-the-first-quadrant",
        ["dst partition 32 reads src partition 32", "src has 1"],
        attrs={"shuffle_mask": [0] * 32},
        src=tile("src", (1, 128), "bfloat16"),
    ),
]


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {"dst": tile("dst", (128, free), dtype), "src": tile("src", (128, free), dtype)}
    return make_check(target, Engine.VECTOR, tiles, {"shuffle_mask": ROTATE})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), params={"target": TARGETS, "dtype": FLOATS})


def test_nc_stream_shuffle_cost_is_max_64_n_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 10)) == 64
    assert SPEC.cost(_sized("trn1", 1000)) == 1000
