"""The DMA engines' shared model: how a transfer spreads over the core's engines, and the
HBM bytes it moves (every DMA-class instruction and the scheduler use it)."""

from __future__ import annotations

import math
from typing import Any

from neuronemu_isa.spec import HBM, SBUF, OperandInfo

__all__ = ["engines_used", "hbm_bytes", "packet_overhead_ns", "packets_per_engine"]


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


def packet_overhead_ns(arch: Any, src: OperandInfo, dst: OperandInfo) -> float:
    """Time each engine of a transfer spends, after its bytes, on its packets' overhead.

    nki-dma-bandwidth-guide.rst: every packet has an overhead of its own, packets of 4 KiB or
    more per partition amortize it and run at the engine's peak of the table (17 / 23 / 33
    B/ns, TRN1 / TRN2 / TRN3), smaller ones run below it; nki-dma-overview.rst gives the
    engine's theoretical rate (27.2 / 27.2 / 38.4 GB/s). Inferred: a packet moves its bytes at
    the theoretical rate and then pays an overhead, the one that brings a `dma_packet_bytes`
    packet down to the table's rate: `packet_bytes * (1/table - 1/theoretical)` (trn1 ~90 ns,
    trn2 ~27 ns, trn3 ~17 ns). Since `cost` already moves the bytes at the table's rate, what
    is left per packet of r bytes is `(packet_bytes - r) * (1/table - 1/theoretical)`, nothing
    for packets of `packet_bytes` or more (a longer run is cut into packets of that size).
    """
    engines = engines_used(arch, src, dst)
    per_engine = max(src.nbytes, dst.nbytes) / engines
    packets = packets_per_engine(arch, src, dst)
    short = max(0.0, packets * arch.dma_packet_bytes - per_engine)
    per_byte = 1.0 / arch.dma_bytes_per_ns_per_engine - (
        1.0 / arch.dma_theoretical_bytes_per_ns_per_engine
    )
    return short * per_byte
