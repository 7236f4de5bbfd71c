"""The DMA engines' shared model: how a transfer spreads over the core's engines, and the
HBM bytes it moves (every DMA-class instruction and the scheduler use it)."""

from __future__ import annotations

import math
from typing import Any

from neuronemu_isa.spec import HBM, SBUF, OperandInfo

__all__ = ["engines_used", "hbm_bytes", "packets_per_engine"]


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


def packets_per_engine(arch: Any, src: OperandInfo, dst: OperandInfo) -> int:
    """DMA packets each engine of a transfer moves: one per contiguous run of its HBM side
    (the more fragmented one of two HBM sides; SBUF rows for an SBUF-to-SBUF copy).

    nki-dma-overview.rst example 2: a contiguous [128, 128] bf16 tensor gives each engine a
    single 2 KiB read across its 8 partitions; nki-dma-bandwidth-guide.rst: each packet has
    an overhead of its own, so that small or fragmented transfers are bound by the packet
    rate, not by bandwidth.
    """
    hbm = [t.runs for t in (src, dst) if t.buffer == HBM]
    runs = max(hbm) if hbm else max(src.runs, dst.runs)
    return max(1, math.ceil(runs / engines_used(arch, src, dst)))
