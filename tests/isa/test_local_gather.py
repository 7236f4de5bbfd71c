"""local_gather: semantics vs NumPy, each constraint's message, cost growth."""

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
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.instructions.local_gather import CORE_PARTITIONS
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["local_gather"]


@settings(deadline=None)
@given(
    cores=st.integers(1, 8),
    rows=st.integers(1, 16),
    cols=st.integers(1, 4),
    k=st.sampled_from([1, 2, 4, 8, 16, 32]),
    index_cols=st.integers(1, 4),
    valid=st.one_of(st.none(), st.integers(1, 64)),
    dtype=st.sampled_from(FLOATS + INTS),
    seed=seeds,
)
def test_local_gather_takes_contiguous_runs_at_each_cores_indices(
    cores: int, rows: int, cols: int, k: int, index_cols: int, valid: Any, dtype: str, seed: int
) -> None:
    p, free = 16 * cores, rows * cols * k
    src = random_array(seed, (p, rows, cols * k), dtype, -1e4, 1e4)
    # Indices are element offsets into the flattened free axes (the doc's index * k).
    index = (random_array(seed + 1, (p, index_cols), "uint16", 0, free // k - 1) * k).astype(
        np.uint16
    )
    n = min(valid, 16 * index_cols) if valid is not None else 16 * index_cols
    flat = src.reshape(p, free)
    expected = np.empty((p, n, k), dtype=src.dtype)
    for core in range(cores):
        part = index[16 * core : 16 * core + 16]
        order = [int(part[r, c]) for c in range(index_cols) for r in range(16)][:n]
        for r in range(16 * core, 16 * core + 16):
            for j, start in enumerate(order):
                expected[r, j] = flat[r, start : start + k]
    out = SPEC.semantics(src, index, num_elem_per_idx=k, num_valid_indices=n if valid else None)
    assert_bits_equal(cast_to(np.asarray(out), NP_DTYPES[dtype]), expected.reshape(p, n * k))


def test_local_gather_out_of_bound_reads_give_nan() -> None:
    src = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    index = np.zeros((16, 1), dtype=np.uint16)
    index[1, 0] = 3  # a run of 2 from element 3 passes the end of the 4-element partition
    out = np.asarray(SPEC.semantics(src, index, num_elem_per_idx=2, num_valid_indices=2))
    np.testing.assert_array_equal(out[:, :2], src[:, :2])
    assert np.isnan(out[:, 2:]).all()


def test_local_gather_core_size_matches_every_target() -> None:
    for target in TARGETS:
        assert load_arch(target).tile_gpsimd_core_partitions == CORE_PARTITIONS


CHECK = checker(
    Engine.GPSIMD,
    attrs={"num_elem_per_idx": 4, "num_valid_indices": 64},
    dst=tile("dst", (128, 4, 16, 4), "float32", SBUF),
    src_buffer=tile("src_buffer", (128, 512, 4), "float32", SBUF),
    index=tile("index", (128, 4), "uint16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("doc-example"),
    *on_each_target(
        "defaults",
        attrs={"num_elem_per_idx": 1, "num_valid_indices": None},
        dst=tile("dst", (32, 64), "float32"),
        src_buffer=tile("src_buffer", (32, 100)),
        index=tile("index", (32, 4), "uint16"),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "dtype",
        ["dst is bfloat16", "src_buffer is float32", "same dtype"],
        dst=tile("dst", (128, 256), "bfloat16"),
    ),
    violation(
        "index-partitions",
        ["src_buffer has 128 partitions and index 64", "must be equal"],
        index=tile("index", (64, 4), "uint16"),
    ),
    violation(
        "multiple-of-16",
        ["src_buffer has 24 partitions", "multiple of 16", "tile_gpsimd_core_partitions"],
        src_buffer=tile("src_buffer", (24, 2048)),
        index=tile("index", (24, 4), "uint16"),
        dst=tile("dst", (24, 256)),
    ),
    violation(
        "valid-count", ["num_valid_indices is 65", "from 1 to 64"], attrs={"num_valid_indices": 65}
    ),
    violation(
        "too-many",
        ["8192 indices per GpSimd core exceed 4096", "tile_local_gather_indices_max"],
        attrs={"num_valid_indices": None, "num_elem_per_idx": 1},
        index=tile("index", (128, 512), "uint16"),
        dst=tile("dst", (128, 8192)),
    ),
    violation(
        "dst-shape",
        ["dst has shape [128, 128]", "64 indices x 4 elements", "[128, 256]"],
        dst=tile("dst", (128, 128)),
    ),
]


def _sized(target: str, n: int, k: int, dtype: str = "float32") -> Any:
    tiles = {
        "dst": tile("dst", (128, n * k), dtype),
        "src_buffer": tile("src_buffer", (128, 4096), dtype),
        "index": tile("index", (128, 256), "uint16"),
    }
    attrs = {"num_elem_per_idx": k, "num_valid_indices": n}
    return make_check(target, Engine.GPSIMD, tiles, attrs)


def _past_startup(target: str, **_: Any) -> int:
    return int(load_arch(target).cost_gpsimd_startup_cycles) + 1


# Every gather costs more than the start-up; strictly more for n past 2 * n + 64.
COST_GROWTH = Growth(
    _sized,
    _past_startup,
    "n",
    (1, 4096),
    {"target": TARGETS, "k": (1, 2, 4, 8, 16, 32), "dtype": FLOATS},
    slack=-1,
    gap=64,
)


def test_local_gather_cost_follows_the_isa_formula() -> None:
    # 150 + n*k / C, C = ((28 + 4k) / (4k)) / min(4 / 4, k): k = 4 gives C = 44/16 / 1.
    assert SPEC.cost(_sized("trn1", 64, 4)) == 150 + int(np.ceil(64 * 4 / (44 / 16)))
