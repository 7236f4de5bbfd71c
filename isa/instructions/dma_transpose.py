"""dma_transpose: dst = src transposed by `axes`, through the DMA engines.

Ref: nki.isa.dma_transpose (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.dma_transpose.html). src in HBM or SBUF, dst in SBUF, same dtype (so the bits
move unchanged). axes (1, 0), (2, 1, 0) or (3, 1, 2, 0), by default the one for src's rank;
dst[i...] = src permuted so that dst axis k is src axis axes[k] (dst may flatten its free axes).
dge_mode unknown or hwdge; hwdge (NC-v3+) adds the doc's shape and 2-byte dtype limits. The
indirect (gathering) form is not supported.
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.dma import engines_used, hbm_bytes
from neuronemu_isa.instructions._common import needs_nc_version, same_dtype
from neuronemu_isa.spec import HBM, SBUF, Attr, Check, Engine, In, InstrSpec, Out, Result

AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _axes(axes, rank: int) -> tuple:
    if axes is None:
        return AXES.get(rank, ())
    return tuple(axes) if isinstance(axes, (list, tuple)) else ()


def semantics(src, *, axes=None, **_modes):
    return np.transpose(src, _axes(axes, src.ndim))


def cost(c: Check) -> int:
    """Nanoseconds each DMA engine is busy: a dma_copy of the same bytes at the transpose's
    share of copy throughput (trainium2_arch.rst: up to 90% from HBM, 50% SBUF to SBUF)."""
    src, dst = c.tile("src"), c.tile("dst")
    key = "dma_transpose_efficiency_hbm" if src.buffer == HBM else "dma_transpose_efficiency_sbuf"
    rate = c.arch.dma_bytes_per_ns_per_engine * c.arch[key]
    move_ns = src.nbytes / engines_used(c.arch, src, dst) / rate
    hbm_ns = hbm_bytes(src, dst) / c.arch.dma_hbm_bytes_per_ns
    return int(math.ceil(c.arch.dma_descriptor_ns + max(move_ns, hbm_ns)))


def _axes_supported(c: Check) -> str | None:
    src = c.tile("src")
    axes = _axes(c.attrs.get("axes"), len(src.shape))
    if axes not in AXES.values():
        shown = ", ".join(str(a) for a in AXES.values())
        return (
            f"axes {c.attrs.get('axes')!r} for src of rank {len(src.shape)} is not supported;"
            f" use one of {shown}"
        )
    if len(axes) != len(src.shape):
        return (
            f"axes {axes} has {len(axes)} entries; src {list(src.shape)} has rank {len(src.shape)}"
        )
    return None


def _dst_shape(c: Check) -> str | None:
    if _axes_supported(c) is not None:
        return None  # reported by _axes_supported
    src, dst = c.tile("src"), c.tile("dst")
    want = [src.shape[a] for a in _axes(c.attrs.get("axes"), len(src.shape))]
    if dst.partition_size != want[0] or dst.free_size != math.prod(want[1:]):
        return f"dst has shape {list(dst.shape)}; transposing src {list(src.shape)} gives {want}"
    return None


def _dge_mode(c: Check) -> str | None:
    mode = c.attrs.get("dge_mode") or "unknown"
    if mode not in ("unknown", "hwdge"):
        return f"dge_mode {mode} is not supported for a direct transpose; use unknown or hwdge"
    return None


def _hwdge_limits(c: Check) -> str | None:
    if c.attrs.get("dge_mode") != "hwdge":
        return None
    src = c.tile("src")
    group, free_max = c.arch.dma_hwdge_transpose_partitions, c.arch.dma_hwdge_transpose_free_max
    first = src.shape[0]
    if len(src.shape) == 2 and first != group:
        return (
            f"hwdge transpose: src.shape[0] is {first}; a 2-D src needs exactly {group} "
            "(dma_hwdge_transpose_partitions)"
        )
    if len(src.shape) > 2:
        if first > group or first & (first - 1):
            return (
                f"hwdge transpose: src.shape[0] is {first}; it must be a power of two up to "
                f"{group} (dma_hwdge_transpose_partitions)"
            )
        if first * src.shape[-2] % group:
            return (
                f"hwdge transpose: src.shape[0] * src.shape[-2] is {first * src.shape[-2]}; "
                f"it must be a multiple of {group} (dma_hwdge_transpose_partitions)"
            )
    if src.shape[-1] > free_max:
        return (
            f"hwdge transpose: src.shape[-1] is {src.shape[-1]}; it must be at most "
            f"{free_max} (dma_hwdge_transpose_free_max)"
        )
    if src.itemsize != c.arch.dma_hwdge_transpose_itemsize:
        return (
            f"hwdge transpose: src is {src.dtype} ({src.itemsize} bytes); it must have a "
            f"{c.arch.dma_hwdge_transpose_itemsize}-byte dtype (dma_hwdge_transpose_itemsize)"
        )
    return None


def _hwdge_needs_v3(c: Check) -> str | None:
    if c.attrs.get("dge_mode") != "hwdge":
        return None
    return needs_nc_version(3, "dge_mode=hwdge")(c)


def result(c: Check) -> Result:
    """The tile the older value-returning form makes (`b = nisa.dma_transpose(a)`): src's
    shape permuted by `axes`, in SBUF."""
    src = c.tile("src")
    axes = _axes(c.attrs.get("axes"), len(src.shape)) or tuple(range(len(src.shape)))
    return tuple(src.shape[a] for a in axes), src.dtype, SBUF


SPEC = InstrSpec(
    name="dma_transpose",
    engines=(Engine.DMA,),
    operands=(Out("dst", SBUF), In("src", HBM, SBUF)),
    attrs=(
        Attr("axes", None),
        Attr("priority", None),
        Attr("dge_mode", "unknown"),
        Attr("oob_mode", "error"),
    ),
    constraints=(
        same_dtype("dst", "src"),
        _axes_supported,
        _dst_shape,
        _dge_mode,
        _hwdge_needs_v3,
        _hwdge_limits,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "axes", "priority", "dge_mode", "oob_mode"),
    result=result,
)
