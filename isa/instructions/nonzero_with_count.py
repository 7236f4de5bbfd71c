"""nonzero_with_count: per GpSimd core, the positions of src's nonzero elements and their count.

Ref: nki.isa.nonzero_with_count (docs 2.33). NC-v3+, GpSimd. Each of the 8 GpSimd cores works
on its first partition only (0, 16, ..., 112): of that partition's T elements (free axes
flattened) it writes the N nonzero positions plus index_offset, then padding_val for the other
T - N slots, then N, so dst has T + 1 elements per partition. The other partitions of dst are
left as they were (the instruction reads dst). src is float32 or int32 in SBUF, dst int32.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import needs_nc_version, rows, streaming_cycles
from neuronemu_isa.spec import SBUF, Attr, Check, Engine, In, InstrSpec, Out

# nki.isa.nonzero_with_count: each GpSimd core reads and writes its 0-th partition.
CORE_PARTITIONS = 16


def semantics(src, dst, *, index_offset=0, padding_val=-1):
    x = rows(src)
    out = rows(dst).astype(np.int64).copy()
    t = x.shape[1]
    for p in range(0, x.shape[0], CORE_PARTITIONS):
        found = np.flatnonzero(x[p] != 0)
        row = np.full(t + 1, padding_val, dtype=np.int64)
        row[: found.size] = found + index_offset
        row[t] = found.size
        out[p] = row
    return out


def cost(c: Check) -> int:
    """One pass over each core's T elements on GpSimd (inferred: the docs give no cost)."""
    src = c.tile("src")
    return streaming_cycles(c, src.free_size, src, c.tile("dst"))


def _layout(c: Check) -> str | None:
    src, dst = c.tile("src"), c.tile("dst")
    if src.partition_size != dst.partition_size:
        return (
            f"src has {src.partition_size} partitions and dst {dst.partition_size}; they "
            "must be equal"
        )
    if dst.free_size != src.free_size + 1:
        return (
            f"dst has {dst.free_size} elements per partition; it needs src's "
            f"{src.free_size} plus one for the count ({src.free_size + 1})"
        )
    return None


def _int_attrs(c: Check) -> str | None:
    for name in ("index_offset", "padding_val"):
        v = c.attrs.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not -(2**31) <= v < 2**31:
            return f"{name} is {v!r}; it must be an int32"
    return None


SPEC = InstrSpec(
    name="nonzero_with_count",
    engines=(Engine.GPSIMD,),
    operands=(
        Out("dst", SBUF, dtypes=("int32",), reads_if=lambda attrs: True, merge=True),
        In("src", SBUF, dtypes=("float32", "int32")),
    ),
    attrs=(Attr("index_offset", 0), Attr("padding_val", -1)),
    constraints=(needs_nc_version(3, "nonzero_with_count"), _layout, _int_attrs),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "index_offset", "padding_val"),
)
