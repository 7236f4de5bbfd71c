"""`nl.*` tensor creation: `ndarray`, `zeros`/`ones`/`full`, `*_like`, constants."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from neuronemu.build.allocator import partition_offset
from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import ALL_DTYPES, BUFFERS, BufferKind, Tensor
from neuronemu.replay import journal, moving
from neuronemu.trace.lib.compiler import directly_placed
from neuronemu.trace.lib.emit import emit, tensor_arg, tile_name
from neuronemu.trace.tensor_api import as_dtype
from neuronemu.trace.values import BlockTensor, DirectAlloc, Namespace, ParDim, no_block_dims
from neuronemu_isa import REGISTRY, Buffer

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def buffer_of(value: Any, span: SourceSpan) -> BufferKind:
    if value is None:
        return BUFFERS["sbuf"]
    if isinstance(value, BufferKind):
        return value
    if isinstance(value, Namespace) and value.name in ("nki.compiler.sbuf", "nki.compiler.psum"):
        return BUFFERS[value.name.rsplit(".", 1)[1]]  # an alias of auto_alloc()
    raise KernelTypeError(
        f"buffer must be nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm, got {shown(value)}", span
    )


def ndarray(ctx: Context, span, shape, dtype, buffer=None, name="", address=None, **_):
    kind = buffer_of(buffer, span)
    at = (
        next((i for i, d in enumerate(shape) if isinstance(d, ParDim)), 0)
        if isinstance(shape, (tuple, list))
        else 0
    )
    if isinstance(kind, DirectAlloc):
        return directly_placed(
            ctx, span, tuple(shape), at, as_dtype(dtype, span), kind, tile_name(ctx, name)
        )
    if at and kind.buffer != Buffer.HBM:
        no_block_dims(ctx, span)
        if address is not None:
            raise KernelTypeError(
                "address= with block dims is not supported; use "
                "nki.compiler allocation or one tile per block",
                span,
            )
        dt = as_dtype(dtype, span)
        tile_shape = tuple(int(d) for d in shape[at:])
        made = BlockTensor(
            tile_name(ctx, name),
            tuple(int(d) for d in shape[:at]),
            tile_shape,
            dt,
            kind,
            span,
            lambda label, _index: ctx.builder.alloc(label, tile_shape, dt, kind, span),
        )
        if ctx.meter.journals:  # (made in an iteration being recorded: a replay makes it too)
            journal.holder(ctx.meter, made)
        return made
    t = ctx.builder.alloc(tile_name(ctx, name), shape, as_dtype(dtype, span), kind, span)
    if address is not None:
        # nl.ndarray(address=(partition_offset, free_offset)) on SBUF/PSUM.
        if not t.on_chip:
            raise KernelTypeError("address= places SBUF or PSUM tensors only", span)
        if not (
            isinstance(address, tuple)
            and len(address) == 2
            and all(isinstance(a, int) and a >= 0 for a in address)
        ):
            raise KernelTypeError(
                f"address must be (partition_offset, free_offset) ints, got {shown(address)}", span
            )
        t.partition_offset = partition_offset(address[0], t, ctx.arch, span)
        t.address = address[1]
    return t


def filled(value: float) -> Callable[..., Tensor]:
    def make(ctx: Context, span, shape, dtype, buffer=None, name="", **_):
        t = ndarray(ctx, span, shape, dtype, buffer, name)
        if isinstance(t, BlockTensor):  # every block, now (taken as `t[index]` takes it)
            for index in np.ndindex(*t.blocks):
                tile = (
                    moving.recorded_block(ctx.meter, t, index, span)[0]
                    if ctx.meter.journals
                    else t.block(index)
                )
                emit(ctx, REGISTRY["memset"], span, {"dst": tile, "value": value})
            return t
        fill = functools.partial(emit, ctx, REGISTRY["memset"], span, {"dst": t, "value": value})
        if value == 0:  # (a PSUM accumulation group's first matmul may take it over)
            ctx.builder.hold_zero_fill(t, fill)
        else:
            fill()
        return t

    return make


def full(ctx: Context, span, shape, fill_value, dtype, buffer=None, name="", **_):
    return filled(fill_value)(ctx, span, shape, dtype, buffer, name)


def like(value: float | None) -> Callable[..., Tensor]:
    def make(ctx: Context, span, x, dtype=None, buffer=None, name="", **_):
        v = tensor_arg(x, "x", span)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        kind = buffer if buffer is not None else v.tensor.kind_of_buffer
        if value is None:
            return ndarray(ctx, span, v.shape, dt, kind, name)
        return filled(value)(ctx, span, v.shape, dt, kind, name)

    return make


def constant_tensor(ctx: Context, span, value: Any, dtype: Any, name: str) -> Tensor:
    """A tensor whose contents are known at trace time (loaded with the model): an SBUF
    tile when it fits the partitions, else HBM."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype.kind not in "biuf" or array.ndim == 0:
        raise KernelTypeError(
            f"a constant must be a numeric array (e.g. np.identity(128)), got {shown(value)}", span
        )
    if array.ndim == 1:
        array = array[:, None]
    dt = (
        as_dtype(dtype, span)
        if dtype is not None
        else ALL_DTYPES[
            {"b": "uint8", "i": "int32", "u": "uint32", "f": "float32"}[array.dtype.kind]
        ]
    )
    kind = "sbuf" if array.shape[0] <= ctx.arch.tile_pmax else "shared_hbm"
    t = ctx.builder.alloc(
        tile_name(ctx, name),
        tuple(int(d) for d in array.shape),
        dt,
        BUFFERS[kind],
        span,
        kind="constant",
    )
    t.data = (
        array.astype(np.float64).astype(dt.np) if array.dtype.kind == "b" else array.astype(dt.np)
    )
    return t


def shared_constant(ctx: Context, span, constant, dtype=None, name="", **_):
    return constant_tensor(ctx, span, constant, dtype, name)


def shared_identity_matrix(ctx: Context, span, n, dtype="uint8", name="", **_):
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise KernelTypeError(f"n must be a positive int, got {shown(n)}", span)
    return constant_tensor(ctx, span, np.identity(n), dtype, name)
