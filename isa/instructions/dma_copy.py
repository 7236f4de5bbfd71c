"""dma_copy: dst = src through the DMA engines, converting src -> fp32 -> dst.

Ref: nki.isa.dma_copy. Each side in HBM or SBUF (never PSUM); equal element counts; a copy
between equal dtypes is bit-exact. Between different dtypes the DMA casts src -> fp32 -> dst
(nki.isa.dma_copy "Data types"; nki-dma-overview.rst, which warns about integer types), also
between integers of one width: uint32 0xFFFFFFFF written to int32 is 2**32 in fp32, saturated
to 2147483647, not -1; a kernel that wants the bits DMAs a `.view(nl.int32)` of the source.
nl.load/nl.store are this copy. The conversion itself is `cast_to`.
"""

from __future__ import annotations

import math

from neuronemu_isa.dma import engines_used, hbm_bytes
from neuronemu_isa.spec import HBM, SBUF, Attr, Check, Engine, In, InstrSpec, Out


def semantics(src, **_modes):
    return src  # the write converts: cast_to's rule for an NKI dtype's values


def cost(c: Check) -> int:
    """Nanoseconds each engine of the transfer is busy (the DMA "cycle" is 1 ns).

    nki-dma-overview.rst: the bytes are split evenly over the engines in use, each moving
    ~23 B/ns on Trn2 (32 KiB on one engine in 1,416 ns; 2 KiB in ~97 ns); a per-descriptor
    cost (inferred, ~7 ns for a 4-byte transfer in nki_perf_guide.rst fig29) comes first. The
    core's HBM share caps one transfer's rate; the fixed ~1.3 us trigger-to-start latency and
    HBM sharing between transfers are the scheduler's.
    """
    src, dst = c.tile("src"), c.tile("dst")
    engines = engines_used(c.arch, src, dst)
    nbytes = max(src.nbytes, dst.nbytes)
    move_ns = nbytes / engines / c.arch.dma_bytes_per_ns_per_engine
    hbm_ns = hbm_bytes(src, dst) / c.arch.dma_hbm_bytes_per_ns
    # A gather or scatter moves each dynamically addressed row as its own descriptor
    # (inferred from nki.isa.dma_copy: indirection gives each partition its own row).
    rows = max(src.indirect_rows, dst.indirect_rows, 1)
    descriptors = math.ceil(rows / engines)
    return int(math.ceil(descriptors * c.arch.dma_descriptor_ns + max(move_ns, hbm_ns)))


def _equal_elements(c: Check) -> str | None:
    src, dst = c.tile("src"), c.tile("dst")
    if math.prod(src.shape) != math.prod(dst.shape):
        return (
            f"src has {math.prod(src.shape)} elements {list(src.shape)} and dst "
            f"{math.prod(dst.shape)} {list(dst.shape)}; they must be equal"
        )
    return None


SPEC = InstrSpec(
    name="dma_copy",
    engines=(Engine.DMA,),
    operands=(Out("dst", HBM, SBUF), In("src", HBM, SBUF)),
    attrs=(
        Attr("oob_mode", None, choices=(None, "error", "skip")),
        Attr("dge_mode", None),
        Attr("priority", None),
    ),
    constraints=(_equal_elements,),
    pure_copy=True,
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    packed="copy",
    positional=("dst", "src", "priority", "oob_mode", "dge_mode", "engine"),
    indirect=True,
)
