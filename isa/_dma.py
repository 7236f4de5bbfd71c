"""The DMA engines' shared model: how a transfer spreads over the core's engines, and the
HBM bytes it moves (every DMA-class instruction and the scheduler use it)."""

from __future__ import annotations

import math
from typing import Any

from neuronemu_isa._spec import HBM, SBUF, OperandInfo

__all__ = ["engines_used", "hbm_bytes"]


def engines_used(arch: Any, src: OperandInfo, dst: OperandInfo) -> int:
    """DMA engines a transfer is split over: one per `dma_partitions_per_engine` SBUF partitions.

    nki-dma-overview.rst: each engine moves 8 partitions (example 1: 4 partitions use one
    engine; example 2: 128 partitions use all 16). HBM to HBM copies use every engine (inferred).
    """
    sides = [t.partition_size for t in (src, dst) if t.buffer == SBUF]
    if not sides:
        return int(arch.dma_queues)
    return min(int(arch.dma_queues), math.ceil(max(sides) / arch.dma_partitions_per_engine))


def hbm_bytes(src: OperandInfo, dst: OperandInfo) -> int:
    """Bytes this transfer reads from plus writes to HBM."""
    return sum(t.nbytes for t in (src, dst) if t.buffer == HBM)
