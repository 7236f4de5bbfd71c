"""`nl.*` data movement: `load`, `store` (DMA) and `device_print`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuronemu.errors import KernelTypeError, shown
from neuronemu.ir import BUFFERS
from neuronemu.program.pseudo import DEVICE_PRINT
from neuronemu.trace.lib.emit import emit, tensor_arg, through_sbuf, tile_name
from neuronemu.trace.tensor_api import as_dtype
from neuronemu_isa import REGISTRY, Buffer

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def load(ctx: Context, span, src, dtype=None, mask=None, **_):
    v = tensor_arg(src, "src", span)
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    shape = _tile_shape(v.shape)
    t = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
    emit(ctx, REGISTRY["dma_copy"], span, {"dst": t, "src": v}, mask=mask)
    return t


def load_transpose2d(ctx: Context, span, src, dtype=None, mask=None, **_):
    """`nl.load_transpose2d(src)`: HBM [F, P] into a new SBUF tile [P, F], transposed by the
    DMA engines (a dma_transpose; a cast to `dtype` after it, on the Vector engine)."""
    v = tensor_arg(src, "src", span)
    if len(v.shape) != 2:
        raise KernelTypeError(
            f"nl.load_transpose2d takes a 2-d view, got shape {list(v.shape)}", span
        )
    if mask is not None:
        raise KernelTypeError(
            "nl.load_transpose2d with mask= is not supported by neuronemu yet", span
        )
    shape = (v.shape[1], v.shape[0])
    t = ctx.builder.alloc(tile_name(ctx, None), shape, v.dtype, BUFFERS["sbuf"], span)
    emit(ctx, REGISTRY["dma_transpose"], span, {"dst": t, "src": v})
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    if dt == v.dtype:
        return t
    out = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
    emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": t})
    return out


def store(ctx: Context, span, dst, value, mask=None, **_):
    d = tensor_arg(dst, "dst", span)
    v = through_sbuf(ctx, tensor_arg(value, "value", span), span, mask)
    emit(ctx, REGISTRY["dma_copy"], span, {"dst": d, "src": v}, mask=mask)


def load_into(ctx: Context, span, dst, src, dtype=None, mask=None, **_):
    """`t[...] = nl.load(src)`: the DMA writes the slice itself when the load's own tile
    would have its shape and dtype (else the tile is copied in)."""
    v = tensor_arg(src, "src", span)
    shape = _tile_shape(v.shape)
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    if dst.buffer != Buffer.SBUF or tuple(dst.shape) != shape or dt != dst.dtype:
        return False
    emit(ctx, REGISTRY["dma_copy"], span, {"dst": dst, "src": v}, mask=mask)
    return True


def device_print(ctx: Context, span, prefix, x, mask=None, **_):
    """Print x's values when the kernel runs (not at trace time, unlike print)."""
    if not isinstance(prefix, str):
        raise KernelTypeError(
            f"nl.device_print(prefix, x): prefix must be a string, got {shown(prefix)}", span
        )
    emit(ctx, DEVICE_PRINT, span, {"src": tensor_arg(x, "x", span), "prefix": prefix}, mask=mask)


def _tile_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The tile a load makes: the view's shape; a 1-d view's one dim is the partition dim
    (older NKI: `nl.load(a[c0:c1, i])` is a [c1 - c0, 1] column)."""
    return tuple(shape) if len(shape) >= 2 else (*shape, 1)
