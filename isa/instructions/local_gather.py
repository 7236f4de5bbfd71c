"""local_gather: per 16-partition GpSimd core, dst[p, j*k:(j+1)*k] = src_buffer[p, i_j : i_j + k].

Ref: nki.isa.local_gather (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.local_gather.html) and its NumPy reference (nki/test/
test_nki_isa_local_gather.py). Each core flattens its 16 partitions of `index` (uint16)
partition-first and takes the first `num_valid_indices` as i_j, element offsets into each
partition's flattened free axes; every partition of the core gathers k = num_elem_per_idx
contiguous elements at each i_j. dst keeps src_buffer's dtype (no casting). Out-of-bound reads
are undefined on hardware; here they give NaN (floats) or 0 (integers).
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import rows, same_dtype
from neuronemu_isa.spec import SBUF, Attr, Check, Engine, In, InstrSpec, Out, Result

# nki.isa.local_gather: each of the 8 GpSimd cores is wired to 16 contiguous partitions (the
# constraints read the same number from the arch key tile_gpsimd_core_partitions).
CORE_PARTITIONS = 16
ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)


def _valid(num_valid_indices, index_free: int) -> int:
    return CORE_PARTITIONS * index_free if num_valid_indices is None else num_valid_indices


def semantics(src_buffer, index, *, num_elem_per_idx=1, num_valid_indices=None):
    x, idx, k = rows(src_buffer), rows(index), num_elem_per_idx
    n = _valid(num_valid_indices, idx.shape[1])
    fill = 0 if x.dtype.kind in "iub" else np.nan
    padded = np.concatenate([x, np.full((x.shape[0], k), fill).astype(x.dtype)], axis=1)
    out = np.empty((x.shape[0], n, k), dtype=x.dtype)
    for first in range(0, x.shape[0], CORE_PARTITIONS):
        core = slice(first, first + CORE_PARTITIONS)
        starts = idx[core].flatten(order="F")[:n].astype(np.int64)
        starts = np.where(starts + k <= x.shape[1], starts, x.shape[1])  # out of bounds: padding
        out[core] = padded[core][:, starts[:, None] + np.arange(k)]
    return out.reshape(x.shape[0], -1)


def cost(c: Check) -> int:
    # ISA-old: 150 + (num_valid_indices * k) / C GpSimd cycles, with
    # C = ((28 + t*k) / (t*k)) / min(4 / dtype_size, k) and t = 4.
    src, index = c.tile("src_buffer"), c.tile("index")
    k = c.attrs.get("num_elem_per_idx", 1)
    n = _valid(c.attrs.get("num_valid_indices"), index.free_size)
    t, overhead = c.arch.cost_local_gather_t, c.arch.cost_local_gather_overhead
    per = ((overhead + t * k) / (t * k)) / min(4 / src.itemsize, k)
    return int(c.arch.cost_gpsimd_startup_cycles + math.ceil(n * k / per))


def _partitions(c: Check) -> str | None:
    src, index = c.tile("src_buffer"), c.tile("index")
    group = c.arch.tile_gpsimd_core_partitions
    if src.partition_size != index.partition_size:
        return (
            f"src_buffer has {src.partition_size} partitions and index "
            f"{index.partition_size}; they must be equal"
        )
    if src.partition_size % group:
        return (
            f"src_buffer has {src.partition_size} partitions; it must be a multiple of "
            f"{group} (tile_gpsimd_core_partitions)"
        )
    return None


def _valid_indices(c: Check) -> str | None:
    index = c.tile("index")
    given = c.attrs.get("num_valid_indices")
    most = c.arch.tile_gpsimd_core_partitions * index.free_size
    if given is not None and (
        isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= most
    ):
        return (
            f"num_valid_indices is {given!r}; it must be an int from 1 to {most} (the indices "
            f"in one core's {c.arch.tile_gpsimd_core_partitions} partitions of index)"
        )
    n = _valid(given, index.free_size)
    limit = c.arch.tile_local_gather_indices_max
    if n > limit:
        return (
            f"{n} indices per GpSimd core exceed {limit} (tile_local_gather_indices_max); "
            "pass fewer with num_valid_indices or a smaller index"
        )
    return None


def _dst_shape(c: Check) -> str | None:
    if _valid_indices(c) is not None:
        return None  # reported by _valid_indices
    src, index, dst = c.tile("src_buffer"), c.tile("index"), c.tile("dst")
    n = _valid(c.attrs.get("num_valid_indices"), index.free_size)
    k = c.attrs.get("num_elem_per_idx", 1)
    if dst.partition_size != src.partition_size or dst.free_size != n * k:
        return (
            f"dst has shape {list(dst.shape)}; gathering {n} indices x {k} elements gives "
            f"[{src.partition_size}, {n * k}]"
        )
    return None


def result(c: Check) -> Result:
    """The tile the older value-returning form makes: [P, index free..., 16, k] when every
    index is valid (the nki.isa.local_gather example annotates [128, 4, 16, 4] for a [128, 4]
    index and k = 4: gather j = f * 16 + q is index[q, f], partition first), else [P, n, k]
    (inferred: the docs give no shape for fewer valid indices)."""
    src, index = c.tile("src_buffer"), c.tile("index")
    k = c.attrs.get("num_elem_per_idx", 1)
    n = c.attrs.get("num_valid_indices")
    if n is None or n == CORE_PARTITIONS * index.free_size:
        shape = (src.partition_size, *index.shape[1:], CORE_PARTITIONS, k)
    else:
        shape = (src.partition_size, n, k)
    return tuple(shape), src.dtype, SBUF


SPEC = InstrSpec(
    name="local_gather",
    engines=(Engine.GPSIMD,),
    operands=(
        Out("dst", SBUF),
        In("src_buffer", SBUF),
        In("index", SBUF, dtypes=("uint16",)),
    ),
    attrs=(Attr("num_elem_per_idx", 1, ELEMS_PER_INDEX), Attr("num_valid_indices", None)),
    constraints=(same_dtype("dst", "src_buffer"), _partitions, _valid_indices, _dst_shape),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src_buffer", "index", "num_elem_per_idx", "num_valid_indices"),
    result=result,
)
