"""nonzero_with_count: semantics vs the doc's example and a NumPy loop, each constraint's
message, cost growth, and a kernel run (only partitions 0, 16, ... are written)."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import SBUF, random_array, seeds, tile
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["nonzero_with_count"]


def test_the_docs_example() -> None:
    src = np.zeros((16, 8), np.float32)
    src[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    dst = np.full((16, 9), 7, np.int32)
    out = np.asarray(SPEC.semantics(src, dst, index_offset=16, padding_val=-1))
    np.testing.assert_array_equal(out[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    np.testing.assert_array_equal(out[1:], 7)  # partitions 1..15: untouched


@settings(deadline=None)
@given(
    cores=st.integers(1, 8),
    t=st.integers(1, 64),
    offset=st.integers(-1000, 1000),
    pad=st.integers(-5, 5),
    seed=seeds,
)
def test_each_cores_first_partition_lists_its_nonzeros(
    cores: int, t: int, offset: int, pad: int, seed: int
) -> None:
    p = 16 * cores
    src = random_array(seed, (p, t), "int32", -2, 2)
    dst = random_array(seed + 1, (p, t + 1), "int32", -9, 9)
    out = np.asarray(SPEC.semantics(src, dst, index_offset=offset, padding_val=pad))
    for r in range(p):
        if r % 16:
            assert list(out[r]) == list(dst[r])
            continue
        hits = [j + offset for j in range(t) if src[r, j] != 0]
        assert list(out[r]) == hits + [pad] * (t - len(hits)) + [len(hits)]


CHECK = checker(
    Engine.GPSIMD,
    attrs={"index_offset": 0, "padding_val": -1},
    dst=tile("dst", (128, 65), "int32", SBUF),
    src=tile("src", (128, 64), "float32", SBUF),
)


ACCEPTED: list[Any] = on_each_target("documented-tiles", targets=("trn2", "trn3"))
VIOLATIONS: list[Any] = [
    violation("nc-version", ["needs NC-v3+", "trn1 is NC-v2"], target="trn1"),
    violation(
        "partitions", ["src has 128 partitions and dst 64"], dst=tile("dst", (64, 65), "int32")
    ),
    violation(
        "count-slot",
        ["dst has 64 elements per partition", "plus one for the count (65)"],
        dst=tile("dst", (128, 64), "int32"),
    ),
    violation("padding", ["padding_val is 2.5", "int32"], attrs={"padding_val": 2.5}),
]


def _sized(target: str, t: int) -> Any:
    return CHECK(target, dst=tile("dst", (128, t + 1), "int32"), src=tile("src", (128, t)))


# Every search costs at least the start-up and the minimum initiation interval.
COST_GROWTH = Growth(
    _sized, least_cost(Engine.GPSIMD), "t", (1, 16384), {"target": ("trn2", "trn3")}
)


def test_a_kernel_finds_the_nonzeros_of_partition_0(kernel_file) -> None:
    x = np.zeros((1, 32), np.float32)
    x[0, [3, 4, 20]] = [1.0, -2.0, 0.5]
    path = kernel_file("""import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(x):
    out = nl.ndarray((1, 33), dtype=nl.int32, buffer=nl.shared_hbm)
    s = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0.0)
    nisa.dma_copy(dst=s[0:1, :], src=x)
    d = nl.ndarray((16, 33), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=0)
    nisa.nonzero_with_count(dst=d, src=s, index_offset=100, padding_val=-1)
    nisa.dma_copy(dst=out, src=d[0:1, :])
    return out
""")
    got = neuronemu.run(path, {"x": x}, target="trn2").outputs["out"]
    np.testing.assert_array_equal(got[0], [103, 104, 120] + [-1] * 29 + [3])
