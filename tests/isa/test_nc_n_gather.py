"""nc_n_gather: semantics vs NumPy, each constraint's message, cost growth, a kernel run."""

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
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["nc_n_gather"]


@settings(deadline=None)
@given(
    p=st.integers(1, 128),
    a=st.integers(1, 6),
    b=st.integers(1, 6),
    n=st.integers(1, 40),
    dtype=st.sampled_from(FLOATS + INTS),
    seed=seeds,
)
def test_each_partition_gathers_from_its_own_flattened_elements(
    p: int, a: int, b: int, n: int, dtype: str, seed: int
) -> None:
    data = random_array(seed, (p, a, b), dtype, -1e3, 1e3)
    indices = random_array(seed + 1, (p, n), "uint32", 0, a * b - 1)
    expected = np.empty((p, n), dtype=data.dtype)
    for r in range(p):
        flat = data[r].ravel()
        for j in range(n):
            expected[r, j] = flat[int(indices[r, j])]
    out = SPEC.semantics(data, indices)
    assert_bits_equal(cast_to(np.asarray(out), NP_DTYPES[dtype]), expected)


def test_indices_past_the_partition_give_nan_or_zero() -> None:
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    idx = np.array([[0, 4], [3, 100]], dtype=np.uint32)
    out = np.asarray(SPEC.semantics(data, idx))
    np.testing.assert_array_equal(out[:, 0], [0.0, 7.0])
    assert np.isnan(out[:, 1]).all()
    ints = np.asarray(SPEC.semantics(data.astype(np.int32), idx))
    np.testing.assert_array_equal(ints, [[0, 0], [7, 0]])


CHECK = checker(
    Engine.GPSIMD,
    dst=tile("dst", (128, 2, 32), "bfloat16", SBUF),
    data=tile("data", (128, 1024), "bfloat16", SBUF),
    indices=tile("indices", (128, 64), "uint32", SBUF),
)


ACCEPTED: list[Any] = on_each_target("matching-tiles")
VIOLATIONS: list[Any] = [
    violation(
        "dtype",
        ["dst is float32", "data is bfloat16", "same dtype"],
        dst=tile("dst", (128, 64), "float32"),
    ),
    violation(
        "partitions",
        ["128, 64 and 128 partitions", "must be equal"],
        indices=tile("indices", (64, 64), "uint32"),
    ),
    violation(
        "count",
        ["dst has 32 elements per partition and indices 64"],
        dst=tile("dst", (128, 32), "bfloat16"),
    ),
]


def _sized(target: str, n: int) -> Any:
    tiles = {
        "dst": tile("dst", (128, n)),
        "data": tile("data", (128, 4096)),
        "indices": tile("indices", (128, n), "uint32"),
    }
    return make_check(target, Engine.GPSIMD, tiles, {})


# Every gather costs at least the start-up and the minimum initiation interval.
COST_GROWTH = Growth(_sized, least_cost(Engine.GPSIMD), "n", (1, 8192))


@pytest.mark.parametrize("target", TARGETS)
def test_nc_n_gather_costs_one_more_startup_per_512_element_group(target: str) -> None:
    one, two = SPEC.cost(_sized(target, 512)), SPEC.cost(_sized(target, 513))
    assert two - one >= load_arch(target).cost_gpsimd_startup_cycles


def test_a_kernel_gathers_per_partition(kernel_file) -> None:
    data = np.random.default_rng(4).standard_normal((128, 16, 8)).astype(np.float32)
    idx = np.random.default_rng(5).integers(0, 128, (128, 24)).astype(np.uint32)
    path = kernel_file("""import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(data, idx):
    out = nl.ndarray((128, 24), dtype=data.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    i = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=data)
    nisa.dma_copy(dst=i, src=idx)
    g = nl.ndarray((128, 24), dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=g, data=d, indices=i)
    nisa.dma_copy(dst=out, src=g)
    return out
""")
    result = neuronemu.run(path, {"data": data, "idx": idx})
    want = np.take_along_axis(data.reshape(128, -1), idx.astype(np.int64), axis=1)
    np.testing.assert_array_equal(result.outputs["out"], want)
    (gather,) = [i for i in result.program.instrs if i.spec.name == "nc_n_gather"]
    assert gather.engine.value == "gpsimd"
