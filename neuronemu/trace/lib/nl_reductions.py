"""`nl.*` reductions over free axes: `sum`/`max`/..., `var`, `loop_reduce`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from neuronemu.errors import KernelTypeError, shown
from neuronemu.ir import ALL_DTYPES, BUFFERS, PatternView, Tensor, View, restrict
from neuronemu.trace import tensor_api
from neuronemu.trace.lib.assign import LoopReduce
from neuronemu.trace.lib.emit import (
    _mask_ranges,
    attr_value,
    emit,
    masked_off,
    tensor_arg,
    tile_name,
)
from neuronemu.trace.tensor_api import as_dtype, as_view
from neuronemu_isa import REGISTRY

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def reduce(name: str, op: str) -> Callable[..., Tensor]:
    def call(ctx: Context, span, x, axis, dtype=None, keepdims=False, mask=None, **_):
        v = tensor_arg(x, "x", span)
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        rank = len(v.shape)
        axes = tuple(a + rank if isinstance(a, int) and a < 0 else a for a in axes)
        if 0 in axes:
            raise KernelTypeError(
                f"nl.{name}: axis 0 is the partition axis; only free axes can be reduced",
                span,
                hint="transpose first (nl.transpose), or reduce across partitions "
                "with a matmul against a ones vector",
            )
        kept = [d for i, d in enumerate(v.shape) if i not in axes]
        shape = (
            tuple(1 if i in axes else d for i, d in enumerate(v.shape)) if keepdims else tuple(kept)
        )
        if len(shape) < 2:  # a tile keeps a free dim: [P] is [P, 1]
            shape = (*shape, 1)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        out = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
        dst: Tensor | View | None
        data, dst, trailing = v, out, list(axes)
        if all(isinstance(a, int) for a in axes) and sorted(axes) != list(
            range(rank - len(axes), rank)
        ):
            # tensor_reduce takes trailing axes: a permuted pattern walks the others
            # first. The mask narrows data and dst by the original positions, as it does
            # when the reduced axes are the last ones.
            ranges = {} if masked_off(mask) else _mask_ranges(mask, span) or {}
            data = None if masked_off(mask) else as_view(v, ranges)
            if data is None:
                return out
            order = [i for i in range(rank) if i not in axes] + sorted(axes)
            offset, pairs = data.as_pattern()
            data = PatternView.build(
                data.tensor, offset, [list(pairs[i]) for i in order], span, internal=True
            )
            kept_pos = [i for i in range(rank) if i not in axes]
            dst = (
                restrict(out.full(), {k: ranges[p] for k, p in enumerate(kept_pos) if p in ranges})
                if not keepdims
                else restrict(out.full(), {p: r for p, r in ranges.items() if p not in axes})
            )
            if dst is None:
                return out
            if keepdims:  # dst keeps size-1 reduced dims: walk it in data's order too
                d_off, d_pairs = dst.as_pattern()
                dst = PatternView.build(
                    out, d_off, [list(d_pairs[i]) for i in order], span, internal=True
                )
            trailing, mask = list(range(rank - len(axes), rank)), None
        emit(
            ctx,
            REGISTRY["tensor_reduce"],
            span,
            {"dst": dst, "data": data, "op": op, "axis": trailing, "keepdims": keepdims},
            mask=mask,
        )
        if name == "mean":
            count = math.prod(v.shape[a] for a in axes if isinstance(a, int))
            emit(
                ctx,
                REGISTRY["tensor_scalar"],
                span,
                {"dst": out, "data": out, "op0": "multiply", "operand0": 1.0 / count},
                mask=mask,
            )
        return out

    return call


def loop_reduce(ctx: Context, span, x, op, loop_indices, dtype=None, mask=None, **_):
    """Only as the value assigned to a tile (`b = ...` or `b[...] = ...`); the loop
    indices are a hint to the compiler's loop optimizations, the loops being unrolled."""
    v = tensor_arg(x, "x", span)
    return LoopReduce(v, str(attr_value(op)), mask)


def var(ctx: Context, span, x, axis, dtype=None, keepdims=False, mask=None, **_):
    """Population variance over the last free axes (nki.language.var: axis is [1], [1, 2],
    ...; the result always has the keepdims shape). Two passes, in fp32: the row mean on
    Vector, then square(x - mean) on Scalar with the negated mean as its bias, summed on
    Vector and scaled by 1/n (lowering inferred; the docs give only the math)."""
    v = tensor_arg(x, "x", span)
    rank = len(v.shape)
    axes = sorted(
        a + rank if a < 0 else a
        for a in (axis if isinstance(axis, (list, tuple)) else (axis,))
        if isinstance(a, int) and not isinstance(a, bool)
    )
    if not axes or axes != list(range(axes[0], rank)) or axes[0] != 1:
        raise KernelTypeError(
            f"nl.var: axis must be the last free dims of the tile "
            f"([1], [1, 2], ...), got {shown(axis)} for shape {list(v.shape)}",
            span,
        )
    n = math.prod(v.shape[1:])
    flat = tensor_api.reshape(v, (v.shape[0], n), span) if rank > 2 else v
    f32 = ALL_DTYPES["float32"]
    col = (v.shape[0], 1)
    neg_mean = ctx.builder.alloc(tile_name(ctx, None), col, f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_reduce"],
        span,
        {"dst": neg_mean, "data": flat, "op": "add", "axis": [1]},
        mask=mask,
    )
    emit(
        ctx,
        REGISTRY["tensor_scalar"],
        span,
        {"dst": neg_mean, "data": neg_mean, "op0": "multiply", "operand0": -1.0 / n},
        mask=mask,
    )
    squares = ctx.builder.alloc(tile_name(ctx, None), tuple(flat.shape), f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["activation"],
        span,
        {"dst": squares, "op": "square", "data": flat, "bias": neg_mean},
        mask=mask,
    )
    total = ctx.builder.alloc(tile_name(ctx, None), col, f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_reduce"],
        span,
        {"dst": total, "data": squares, "op": "add", "axis": [1]},
        mask=mask,
    )
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    out = ctx.builder.alloc(
        tile_name(ctx, None), (v.shape[0],) + (1,) * (rank - 1), dt, BUFFERS["sbuf"], span
    )
    emit(
        ctx,
        REGISTRY["tensor_scalar"],
        span,
        {
            "dst": tensor_api.reshape(out.full(), col, span),
            "data": total,
            "op0": "multiply",
            "operand0": 1.0 / n,
        },
        mask=mask,
    )
    return out
