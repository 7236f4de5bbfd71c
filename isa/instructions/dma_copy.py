"""dma_copy: dst = src through the DMA engines, converting src -> fp32 -> dst.

Ref: nki.isa.dma_copy. Each side in HBM or SBUF (never PSUM); equal element counts; a copy
between equal dtypes is bit-exact.
"""

from __future__ import annotations

import math

from isa._spec import HBM, SBUF, Attr, Check, Engine, In, InstrSpec, Out


def semantics(src, **_modes):
    return src


def cost(c: Check) -> int:
    """Transfer time in ns (the DMA "cycle" is 1 ns); the fixed latency is the scheduler's.

    nki-dma-overview.rst: a transfer is split over the 16 DMA engines by 8-partition groups,
    each moving ~23 B/ns (Trn2); below ~2.4 KB per partition the transfer time stops
    shrinking (fit of the efficiency curve, inferred). HBM bandwidth per core caps the rate.
    """
    src, dst = c.tile("src"), c.tile("dst")
    on_chip = src if src.buffer == SBUF else dst
    partitions = on_chip.partition_size if on_chip.buffer == SBUF else 128
    engines = min(c.arch.dma_queues, max(1, math.ceil(partitions / 8)))
    rate = engines * c.arch.dma_bytes_per_ns_per_engine
    if HBM in (src.buffer, dst.buffer):
        rate = min(rate, c.arch.dma_hbm_bytes_per_ns)
    nbytes = max(src.nbytes, dst.nbytes)
    floor_bytes = c.arch.dma_knee_bytes_per_partition * min(partitions, 8 * engines)
    return int(math.ceil(max(nbytes, floor_bytes) / rate))


def _equal_elements(c: Check) -> str | None:
    src, dst = c.tile("src"), c.tile("dst")
    if math.prod(src.shape) != math.prod(dst.shape):
        return (f"src has {math.prod(src.shape)} elements {list(src.shape)} and dst "
                f"{math.prod(dst.shape)} {list(dst.shape)}; they must be equal")
    return None


SPEC = InstrSpec(
    name="dma_copy",
    engines=(Engine.DMA,),
    operands=(Out("dst", HBM, SBUF), In("src", HBM, SBUF)),
    attrs=(Attr("oob_mode", None), Attr("dge_mode", None), Attr("priority", None)),
    constraints=(_equal_elements,),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "priority", "oob_mode", "dge_mode", "engine"),
)
