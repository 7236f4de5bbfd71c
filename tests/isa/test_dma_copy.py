"""dma_copy: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import math
from typing import Any

import pytest
from _isa_testing import (
    FLOATS,
    HBM,
    SBUF,
    TARGETS,
    make_check,
    tile,
)
from _spec_testing import Growth, accepted, checker, priced, violation

from neuronemu_isa import REGISTRY, Engine, load_arch

SPEC = REGISTRY["dma_copy"]


# Semantics: tests/isa/test_copy_semantics.py (shared with the other plain copy).


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.DMA,
    dst=tile("dst", (128, 256), "bfloat16", SBUF),
    src=tile("src", (128, 256), "float32", HBM),
)


ACCEPTED: list[Any] = [
    accepted("hbm-to-sbuf"),
    accepted(
        "reshaped",
        dst=tile("dst", (64, 512), "float32", SBUF),
        src=tile("src", (32768,), "float32", HBM),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "counts",
        ["src has 256 elements [2, 128]", "dst 128 [1, 128]", "must be equal"],
        dst=tile("dst", (1, 128), "float32", SBUF),
        src=tile("src", (2, 128), "float32", HBM),
    ),
    violation(
        "counts-1d-in-hbm",
        ["src has 4 elements [4]", "dst 3 [3]"],
        dst=tile("dst", (3,), "float32", HBM),
        src=tile("src", (4,), "float32", HBM),
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, partitions: int, free: int, dtype: str = "float32", bufs: Any = (HBM, SBUF)
) -> Any:
    """A copy of [partitions, free] from bufs[0] to bufs[1]."""
    tiles = {
        "dst": tile("dst", (partitions, free), dtype, bufs[1]),
        "src": tile("src", (partitions, free), dtype, bufs[0]),
    }
    return make_check(target, Engine.DMA, tiles, {})


def _cost(
    target: str,
    partitions: int,
    free: int,
    dtype: str = "float32",
    src_buf: Any = HBM,
    dst_buf: Any = SBUF,
) -> int:
    return priced(SPEC, _sized(target, partitions, free, dtype, (src_buf, dst_buf)))


COST_GROWTH = Growth(
    _sized,
    sizes=(1, 16384),
    params={
        "target": TARGETS,
        "partitions": range(1, 129),
        "dtype": FLOATS,
        "bufs": [(HBM, SBUF), (SBUF, HBM), (SBUF, SBUF), (HBM, HBM)],
    },
    slack=1,
)


@pytest.mark.parametrize("target", TARGETS)
def test_dma_copy_cost_is_strictly_larger_past_the_knee(target: str) -> None:
    costs = [_cost(target, 128, f) for f in (1, 4096, 8192, 16384)]
    assert costs[0] < costs[1] < costs[2] < costs[3]


@pytest.mark.parametrize("target", TARGETS)
def test_dma_copy_from_hbm_is_capped_by_hbm_bandwidth(target: str) -> None:
    hbm_rate = load_arch(target).dma_hbm_bytes_per_ns  # B/ns per core
    nbytes = 128 * 16384 * 4
    assert _cost(target, 128, 16384) >= math.floor(nbytes / hbm_rate)


def test_dma_copy_on_trn2_is_faster_than_on_trn1_for_sbuf_to_sbuf() -> None:
    assert _cost("trn2", 128, 8192, "float32", SBUF, SBUF) < _cost(
        "trn1", 128, 8192, "float32", SBUF, SBUF
    )
