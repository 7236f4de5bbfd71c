"""nc_stream_shuffle: dst[q*32 + i] = src[q*32 + shuffle_mask[i]] in each 32-partition quadrant q.

Ref: nki.isa.nc_stream_shuffle (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.nc_stream_shuffle.html). Vector engine, SBUF/PSUM either side, in place
allowed. shuffle_mask has one source partition (0..31) per output partition of a quadrant, the
same for every quadrant; 255 leaves that dst partition unmodified. dst has src's dtype and
elements per partition, so the bits move unchanged. The start-partition rules of the doc are the
allocator's (operands carry no start partition here).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from neuronemu_isa.instructions._common import rows, same_dtype, streaming_cycles
from neuronemu_isa.spec import ON_CHIP, Attr, Check, Engine, In, InstrSpec, Out, same_free_size

KEEP = 255  # nki.isa.nc_stream_shuffle: shuffle_mask[i] = 255 leaves dst partition i unmodified


def _keeps_some(attrs) -> bool:
    """dst is read only where the mask keeps a partition: a full shuffle just overwrites."""
    mask = attrs.get("shuffle_mask")
    return not isinstance(mask, (list, tuple)) or KEEP in mask


def semantics(src, dst=None, *, shuffle_mask, dst_shape=None):
    x = rows(src)
    out = np.zeros((dst_shape[0], x.shape[1]), x.dtype) if dst is None else rows(dst).copy()
    quadrant = len(shuffle_mask)
    for p in range(out.shape[0]):
        source = shuffle_mask[p % quadrant]
        if source != KEEP:
            out[p] = x[p - p % quadrant + int(source)]
    return out


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N) Vector cycles, N the elements per partition of src.
    src = c.tile("src")
    return streaming_cycles(c, src.free_size, src, c.tile("dst"))


def _mask(c: Check) -> str | None:
    mask = c.attrs.get("shuffle_mask")
    n = c.arch.tile_quadrant_partitions
    if not isinstance(mask, (list, tuple)) or len(mask) != n:
        return (
            f"shuffle_mask {mask!r} must be a list of {n} partition numbers "
            "(tile_quadrant_partitions)"
        )
    for i, m in enumerate(mask):
        if isinstance(m, bool) or not isinstance(m, Integral) or not (0 <= int(m) < n or m == KEEP):
            return f"shuffle_mask[{i}] is {m!r}; it must be an int in 0..{n - 1} or {KEEP} (keep)"
    return None


def _sources_exist(c: Check) -> str | None:
    """Every shuffled dst partition reads a partition that src has."""
    if _mask(c) is not None:
        return None  # reported by _mask
    src, dst = c.tile("src"), c.tile("dst")
    mask = c.attrs["shuffle_mask"]
    for p in range(dst.partition_size):
        lane = p % len(mask)
        source = p - lane + int(mask[lane])
        if mask[lane] != KEEP and source >= src.partition_size:
            return (
                f"dst partition {p} reads src partition {source} (shuffle_mask[{lane}] = "
                f"{mask[lane]}), but src has {src.partition_size} partitions"
            )
    return None


SPEC = InstrSpec(
    name="nc_stream_shuffle",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP, reads_if=_keeps_some), In("src", *ON_CHIP)),
    attrs=(Attr("shuffle_mask"),),
    constraints=(same_dtype("dst", "src"), same_free_size("dst", "src"), _mask, _sources_exist),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "shuffle_mask"),
)
