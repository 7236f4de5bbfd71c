"""nc_n_gather: dst[p, j] = data[p, indices[p, j]] (data's free axes flattened), on GpSimd.

Ref: nki.isa.nc_n_gather (docs 2.33). Each partition gathers independently from its own
flattened free axes; indices are uint32 in [0, data's elements per partition); dst has data's
dtype (a bit-exact copy) and indices' elements per partition. All three tiles are in SBUF and
span the same partitions. The ISA runs it as n = ceil(elements per partition / 512) groups of
instructions; out-of-range indices are undefined on hardware and give NaN (floats) or 0
(integers) here, as local_gather does.
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import rows, same_dtype, streaming_cycles
from neuronemu_isa.spec import SBUF, Check, Engine, In, InstrSpec, Out

# nki.isa.nc_n_gather: one instruction of the underlying ISA per 512 gathered elements.
GROUP_ELEMS = 512


def semantics(data, indices):
    x, idx = rows(data), rows(indices).astype(np.int64)
    fill = 0 if x.dtype.kind in "iub" else np.nan
    padded = np.concatenate([x, np.full((x.shape[0], 1), fill).astype(x.dtype)], axis=1)
    inside = (idx >= 0) & (idx < x.shape[1])
    picked = np.where(inside, idx, x.shape[1])
    return np.take_along_axis(padded, picked, axis=1)


def cost(c: Check) -> int:
    """Each group of up to 512 gathered elements is one GpSimd instruction: its start-up plus
    the elements streamed at the GpSimd rate (inferred: the docs give no cost)."""
    dst = c.tile("dst")
    groups = max(1, math.ceil(dst.free_size / GROUP_ELEMS))
    startup = c.arch.cost_gpsimd_startup_cycles
    return int(streaming_cycles(c, dst.free_size, c.tile("data"), dst) + (groups - 1) * startup)


def _layout(c: Check) -> str | None:
    data, indices, dst = c.tile("data"), c.tile("indices"), c.tile("dst")
    sizes = {t.partition_size for t in (data, indices, dst)}
    if len(sizes) > 1:
        return (
            f"data, indices and dst have {data.partition_size}, {indices.partition_size} "
            f"and {dst.partition_size} partitions; they must be equal"
        )
    if dst.free_size != indices.free_size:
        return (
            f"dst has {dst.free_size} elements per partition and indices "
            f"{indices.free_size}; they must be equal"
        )
    return None


SPEC = InstrSpec(
    name="nc_n_gather",
    engines=(Engine.GPSIMD,),
    operands=(
        Out("dst", SBUF),
        In("data", SBUF),
        In("indices", SBUF, dtypes=("uint32",)),
    ),
    attrs=(),
    constraints=(same_dtype("dst", "data"), _layout),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "indices"),
)
