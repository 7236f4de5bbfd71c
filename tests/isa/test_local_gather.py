"""local_gather: semantics vs NumPy, each constraint's message, cost growth."""

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
    fired,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa._numerics import cast_to
from neuronemu_isa.instructions.local_gather import CORE_PARTITIONS

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


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 4, 16, 4), "float32", SBUF),
        "src_buffer": tile("src_buffer", (128, 512, 4), "float32", SBUF),
        "index": tile("index", (128, 4), "uint16", SBUF),
    }
    base = {"num_elem_per_idx": 4, "num_valid_indices": 64}
    return make_check(target, Engine.GPSIMD, operands | ops, base | (attrs or {}))


@pytest.mark.parametrize("target", TARGETS)
def test_local_gather_accepts_the_doc_example_and_defaults(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    default = {"dst": tile("dst", (32, 64), "float32")}
    small = {"src_buffer": tile("src_buffer", (32, 100)), "index": tile("index", (32, 4), "uint16")}
    assert fired(SPEC, _check(target, {"num_elem_per_idx": 1, "num_valid_indices": None},
                              **default, **small)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"dst": tile("dst", (128, 256), "bfloat16")},
        ["dst is bfloat16", "src_buffer is float32", "same dtype"],
        id="dtype",
    ),
    pytest.param(
        {"index": tile("index", (64, 4), "uint16")},
        ["src_buffer has 128 partitions and index 64", "must be equal"],
        id="index-partitions",
    ),
    pytest.param(
        {
            "src_buffer": tile("src_buffer", (24, 2048)),
            "index": tile("index", (24, 4), "uint16"),
            "dst": tile("dst", (24, 256)),
        },
        ["src_buffer has 24 partitions", "multiple of 16", "tile_gpsimd_core_partitions"],
        id="multiple-of-16",
    ),
    pytest.param(
        {"attrs": {"num_valid_indices": 65}},
        ["num_valid_indices is 65", "from 1 to 64"],
        id="valid-count",
    ),
    pytest.param(
        {
            "attrs": {"num_valid_indices": None, "num_elem_per_idx": 1},
            "index": tile("index", (128, 512), "uint16"),
            "dst": tile("dst", (128, 8192)),
        },
        ["8192 indices per GpSimd core exceed 4096", "tile_local_gather_indices_max"],
        id="too-many",
    ),
    pytest.param(
        {"dst": tile("dst", (128, 128))},
        ["dst has shape [128, 128]", "64 indices x 4 elements", "[128, 256]"],
        id="dst-shape",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_local_gather_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_local_gather_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, n: int, k: int, dtype: str = "float32") -> int:
    tiles = {
        "dst": tile("dst", (128, n * k), dtype),
        "src_buffer": tile("src_buffer", (128, 4096), dtype),
        "index": tile("index", (128, 256), "uint16"),
    }
    attrs = {"num_elem_per_idx": k, "num_valid_indices": n}
    return SPEC.cost(make_check(target, Engine.GPSIMD, tiles, attrs))


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    k=st.sampled_from([1, 2, 4, 8, 16, 32]),
    dtype=st.sampled_from(FLOATS),
    n1=st.integers(1, 4096),
    n2=st.integers(1, 4096),
)
def test_local_gather_cost_grows_with_indices(
    target: str, k: int, dtype: str, n1: int, n2: int
) -> None:
    small, large = sorted((n1, n2))
    startup = load_arch(target).cost_gpsimd_startup_cycles
    assert startup < _cost(target, small, k, dtype) <= _cost(target, large, k, dtype)
    if large >= 2 * small + 64:
        assert _cost(target, small, k, dtype) < _cost(target, large, k, dtype)


def test_local_gather_cost_follows_the_isa_formula() -> None:
    # 150 + n*k / C, C = ((28 + 4k) / (4k)) / min(4 / 4, k): k = 4 gives C = 44/16 / 1.
    assert _cost("trn1", 64, 4) == 150 + int(np.ceil(64 * 4 / (44 / 16)))
