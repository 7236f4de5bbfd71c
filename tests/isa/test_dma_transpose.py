"""dma_transpose: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    HBM,
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
from _spec_testing import Growth, accepted, checker, priced, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["dma_transpose"]
DEFAULT_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@settings(deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    dtype=st.sampled_from(FLOATS + INTS),
    explicit=st.booleans(),
    seed=seeds,
)
def test_dma_transpose_permutes_axes_bit_exactly(
    shape: list[int], dtype: str, explicit: bool, seed: int
) -> None:
    x = random_array(seed, tuple(shape), dtype, -1e6, 1e6)
    axes = DEFAULT_AXES[len(shape)]
    expected = np.empty(tuple(shape[a] for a in axes), dtype=x.dtype)
    for idx in itertools.product(*(range(n) for n in shape)):
        expected[tuple(idx[a] for a in axes)] = x[idx]
    out = SPEC.semantics(src=x, axes=axes if explicit else None)
    assert_bits_equal(cast_to(np.asarray(out), NP_DTYPES[dtype]), expected)


CHECK = checker(
    Engine.DMA,
    attrs={"axes": (1, 0), "dge_mode": "hwdge"},
    dst=tile("dst", (128, 16), "bfloat16", SBUF),
    src=tile("src", (16, 128), "bfloat16", HBM),
)


_FOUR = {
    "dst": tile("dst", (32, 3, 5, 4), "float32"),
    "src": tile("src", (4, 3, 5, 32), "float32", SBUF),
}
ACCEPTED: list[Any] = [
    accepted("2d"),
    accepted(
        "3d-default-axes",
        attrs={"axes": None},
        dst=tile("dst", (64, 8, 2), "float16"),
        src=tile("src", (2, 8, 64), "float16"),
    ),
    accepted(
        "4d-trn1", target="trn1", attrs={"axes": (3, 1, 2, 0), "dge_mode": "unknown"}, **_FOUR
    ),
    accepted(
        "4d-into-flat-dst",
        attrs={"axes": (3, 1, 2, 0), "dge_mode": None},
        dst=tile("dst", (32, 60), "float32"),
        src=_FOUR["src"],
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "dtype",
        ["dst is float32", "src is bfloat16", "same dtype"],
        dst=tile("dst", (128, 16), "float32"),
    ),
    violation("axes", ["axes (0, 1)", "not supported", "(1, 0)"], attrs={"axes": (0, 1)}),
    violation("rank", ["axes (2, 1, 0) has 3 entries", "rank 2"], attrs={"axes": (2, 1, 0)}),
    violation(
        "dst-shape",
        ["dst has shape [16, 128]", "gives [128, 16]"],
        dst=tile("dst", (16, 128), "bfloat16"),
    ),
    violation("dge", ["dge_mode swdge", "unknown or hwdge"], attrs={"dge_mode": "swdge"}),
    violation("hwdge-v2", ["dge_mode=hwdge needs NC-v3+", "target trn1 is NC-v2"], target="trn1"),
    violation(
        "hwdge-2d",
        ["src.shape[0] is 8", "exactly 16", "dma_hwdge_transpose_partitions"],
        dst=tile("dst", (128, 8), "bfloat16"),
        src=tile("src", (8, 128), "bfloat16", HBM),
    ),
    violation(
        "hwdge-3d-first",
        ["src.shape[0] is 3", "power of two up to 16"],
        dst=tile("dst", (8, 16, 3), "bfloat16"),
        src=tile("src", (3, 16, 8), "bfloat16", HBM),
        attrs={"axes": (2, 1, 0)},
    ),
    violation(
        "hwdge-3d-group",
        ["src.shape[0] * src.shape[-2] is 8", "multiple of 16"],
        dst=tile("dst", (8, 4, 2), "bfloat16"),
        src=tile("src", (2, 4, 8), "bfloat16", HBM),
        attrs={"axes": (2, 1, 0)},
    ),
    violation(
        "hwdge-free",
        ["src.shape[-1] is 256", "at most 128", "dma_hwdge_transpose_free_max"],
        dst=tile("dst", (256, 16), "bfloat16"),
        src=tile("src", (16, 256), "bfloat16", HBM),
    ),
    violation(
        "hwdge-itemsize",
        ["src is float32 (4 bytes)", "2-byte dtype"],
        dst=tile("dst", (128, 16), "float32"),
        src=tile("src", (16, 128), "float32", HBM),
    ),
]


def _sized(target: str, partitions: int, free: int, src_buf: Any = HBM, middle: int = 1) -> Any:
    tiles = {
        "dst": tile("dst", (free, middle, partitions), "bfloat16"),
        "src": tile("src", (partitions, middle, free), "bfloat16", src_buf),
    }
    return make_check(target, Engine.DMA, tiles, {"axes": (2, 1, 0)})


def _cost(target: str, partitions: int, free: int, src_buf: Any = HBM) -> int:
    return priced(SPEC, _sized(target, partitions, free, src_buf))


# The middle axis grows the bytes without changing how many DMA engines share them.
COST_GROWTH = Growth(
    _sized,
    size="middle",
    sizes=(1, 256),
    params={
        "target": TARGETS,
        "partitions": range(1, 129),
        "free": range(1, 129),
        "src_buf": (HBM, SBUF),
    },
    slack=1,
)


@pytest.mark.parametrize("target", TARGETS)
def test_dma_transpose_is_slower_than_a_copy_and_slowest_from_sbuf(target: str) -> None:
    copy = REGISTRY["dma_copy"].cost(
        make_check(
            target,
            Engine.DMA,
            {
                "dst": tile("dst", (128, 128), "bfloat16"),
                "src": tile("src", (128, 128), "bfloat16", HBM),
            },
            {},
        )
    )
    from_hbm, from_sbuf = _cost(target, 128, 128, HBM), _cost(target, 128, 128, SBUF)
    assert copy < from_hbm < from_sbuf
