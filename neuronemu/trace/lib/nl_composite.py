"""`nl.*` calls that lower to several instructions: `matmul`, `transpose`, `softmax`,
`broadcast_to`, `rms_norm` (the lowerings are inferred; the docs give only the math)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from neuronemu.errors import KernelTypeError, shown
from neuronemu.ir import ALL_DTYPES, BUFFERS, PatternView
from neuronemu.trace.lib.emit import emit, tensor_arg, through_sbuf, tile_name
from neuronemu.trace.lib.nl_tensors import constant_tensor
from neuronemu.trace.tensor_api import as_dtype, reshape
from neuronemu_isa import REGISTRY, Buffer, Engine

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def transpose(ctx: Context, span, x, dtype=None, mask=None, **_):
    """[P, F] -> [F, P] on the Tensor engine; the result lands in PSUM (nki.language)."""
    v = tensor_arg(x, "x", span)
    if len(v.shape) != 2:
        raise KernelTypeError(f"nl.transpose takes a 2-d tile, got shape {list(v.shape)}", span)
    out = ctx.builder.alloc(
        tile_name(ctx, None),
        (v.shape[1], v.shape[0]),
        as_dtype(dtype, span) if dtype is not None else v.dtype,
        BUFFERS["psum"],
        span,
    )
    emit(ctx, REGISTRY["nc_transpose"], span, {"dst": out, "data": v}, Engine.TENSOR, mask)
    return out


def matmul(ctx: Context, span, x, y, transpose_x=False, mask=None, *, _dst=None, **_):
    """x @ y into PSUM (fp32); with transpose_x=False x is [M, K] and is transposed first
    (an extra nc_transpose, as nki.language.matmul documents). `_dst`: accumulate into
    this PSUM view instead (`psum += nl.matmul(...)`)."""
    vx, vy = tensor_arg(x, "x", span), tensor_arg(y, "y", span)
    if transpose_x:
        stationary = through_sbuf(ctx, vx, span, mask)
    else:
        xt = transpose(ctx, span, vx, mask=mask)
        stationary = ctx.builder.alloc(
            tile_name(ctx, None), tuple(xt.shape), vx.dtype, BUFFERS["sbuf"], span
        )
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": stationary, "src": xt})
    moving = through_sbuf(ctx, vy, span, mask)
    if (stationary.dtype.name == "float32") != (moving.dtype.name == "float32"):
        # The PE array takes fp32 on both sides or neither: widen the other one (exact;
        # inferred: the docs do not say which way the compiler converts).
        def widen(v):
            if v.dtype.name == "float32":
                return v
            w = ctx.builder.alloc(
                tile_name(ctx, None), tuple(v.shape), ALL_DTYPES["float32"], BUFFERS["sbuf"], span
            )
            emit(ctx, REGISTRY["tensor_copy"], span, {"dst": w, "src": v}, mask=mask)
            return w

        stationary, moving = widen(stationary), widen(moving)
    k = stationary.shape[0]
    if _dst is not None:
        emit(
            ctx,
            REGISTRY["nc_matmul"],
            span,
            {"dst": _dst, "stationary": stationary, "moving": moving, "accumulate": None},
            mask=mask,
        )
        return _dst
    out = ctx.builder.alloc(
        tile_name(ctx, None),
        (stationary.size // k, moving.size // moving.shape[0]),
        ALL_DTYPES["float32"],
        BUFFERS["psum"],
        span,
    )
    emit(
        ctx,
        REGISTRY["nc_matmul"],
        span,
        {"dst": out, "stationary": stationary, "moving": moving},
        mask=mask,
    )
    return out


def _free_axis(axis: Any) -> bool:
    """Is `axis` a 2-d tile's free axis: 1 or -1, alone or as a one-item list or tuple (as
    nl.sum and the other reductions take it)?"""
    if isinstance(axis, (list, tuple)) and len(axis) == 1:
        axis = axis[0]
    return not isinstance(axis, bool) and axis in (1, -1)


def softmax(ctx: Context, span, x, axis=-1, dtype=None, mask=None, **_):
    """exp(x - max) / sum(exp(x - max)) along the free axis: max and sum on Vector, the
    exponential on Scalar with the row max as its bias (one pass)."""
    v = tensor_arg(x, "x", span)
    if len(v.shape) != 2 or not _free_axis(axis):
        raise KernelTypeError(
            "nl.softmax supports 2-d tiles along axis 1 (the free axis) for now", span
        )
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    f32 = ALL_DTYPES["float32"]
    col = (v.shape[0], 1)
    neg_max = ctx.builder.alloc(tile_name(ctx, None), col, f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_reduce"],
        span,
        {"dst": neg_max, "data": v, "op": "maximum", "axis": [1], "negate": True},
        mask=mask,
    )
    e = ctx.builder.alloc(tile_name(ctx, None), tuple(v.shape), f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["activation"],
        span,
        {"dst": e, "op": "exp", "data": v, "bias": neg_max},
        mask=mask,
    )
    total = ctx.builder.alloc(tile_name(ctx, None), col, f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_reduce"],
        span,
        {"dst": total, "data": e, "op": "add", "axis": [1]},
        mask=mask,
    )
    emit(ctx, REGISTRY["reciprocal"], span, {"dst": total, "data": total}, mask=mask)
    out = ctx.builder.alloc(tile_name(ctx, None), tuple(v.shape), dt, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_scalar"],
        span,
        {"dst": out, "data": e, "op0": "multiply", "operand0": total},
        mask=mask,
    )
    return out


def free_broadcast_view(v, shape: tuple[int, ...], pad: int, span) -> PatternView:
    """`v` read as `shape` along its free dims: a size-1 free dim is repeated by a stride-0
    access pattern (no copy); `pad` trailing size-1 dims are added first. The partition dim
    is v's own."""
    offset, pairs = v.as_pattern()
    pairs = [*pairs, *[(0, 1)] * pad]
    stretched = [pairs[0]] + [
        (0 if m == 1 and n > 1 else stride, n) for (stride, m), n in zip(pairs[1:], shape[1:])
    ]
    return PatternView.build(v.tensor, offset, stretched, span)


def broadcast_to(ctx: Context, span, x, shape, dtype=None, **_):
    """x repeated along its size-1 dims to `shape` (same rank), as a new SBUF tile. Free
    dims are read through a stride-0 view by a Vector copy; a size-1 partition dim is
    spread by a matmul with a ones row (an engine reads lane i from partition i only, and
    an access pattern cannot repeat a partition). Lowering inferred."""
    v = tensor_arg(x, "x", span)
    if v.buffer == Buffer.HBM:
        raise KernelTypeError("nl.broadcast_to takes a tile in SBUF or PSUM; load it first", span)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    src_shape = tuple(v.shape)
    # A partition-only view (`t[i_p, 0]`, older NKI) is a [P, 1] tile: it keeps a free dim.
    pad = len(shape) - 1 if len(src_shape) == 1 and len(shape) > 1 else 0
    src_shape += (1,) * pad
    if len(shape) != len(src_shape) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 and m in (1, n)
        for m, n in zip(src_shape, shape)
    ):
        raise KernelTypeError(
            f"nl.broadcast_to: cannot broadcast {list(src_shape)} to "
            f"{shown(shape)}; give the same rank, each dim equal or from 1",
            span,
        )
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    if shape == src_shape and dt == v.dtype:
        return v
    if shape[0] > ctx.arch.tile_pmax:
        raise KernelTypeError(
            f"nl.broadcast_to: partition dim {shape[0]} exceeds {ctx.arch.tile_pmax}", span
        )
    src = free_broadcast_view(v, shape, pad, span)
    out = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
    if shape[0] == src_shape[0]:
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": src})
        return out
    # Across partitions: ones[1, P].T @ row[1, N] on the Tensor engine, by PSUM banks; an
    # N-d tile's free dims as one row (nki.language.broadcast_to: numpy's rules, the same
    # rank, each dim equal or from 1; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
    # nki/api/generated/nki.language.broadcast_to.html).
    matmul_dtypes = REGISTRY["nc_matmul"].operand("moving").dtypes or frozenset()
    if v.dtype.name not in matmul_dtypes:
        # A tile the Tensor engine does not take (int32 block tables, iota offsets): partition
        # 0 copied onto each 32-partition quadrant of the result by nc_stream_shuffle with an
        # all-zero mask, bits unchanged (nki-library's documented stream_shuffle_broadcast,
        # nki/library/kernel-utils/stream-shuffle-broadcast.rst; that nl.broadcast_to lowers
        # an integer tile this way is inferred).
        row = _one_row(ctx, span, src, shape)
        spread = out
        if dt != v.dtype:  # (the shuffle keeps the bits: cast after it)
            spread = ctx.builder.alloc(tile_name(ctx, None), shape, v.dtype, BUFFERS["sbuf"], span)
        flat = reshape(spread.full(), (shape[0], row.shape[1]), span)
        quadrant = ctx.arch.tile_quadrant_partitions
        for q0 in range(0, shape[0], quadrant):
            part = flat.subscript((slice(q0, min(q0 + quadrant, shape[0])),), span)
            emit(
                ctx,
                REGISTRY["nc_stream_shuffle"],
                span,
                {"dst": part, "src": row, "shuffle_mask": [0] * quadrant},
            )
        if spread is not out:
            emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": spread})
        return out
    dst = out.full()
    if len(shape) > 2:
        row = math.prod(shape[1:])
        src, dst = _one_row(ctx, span, src, shape), reshape(dst, (shape[0], row), span)
    ones = constant_tensor(ctx, span, np.ones((1, shape[0])), v.dtype, "")
    bank = ctx.arch.tile_psum_fmax
    for c0 in range(0, dst.shape[1], bank):
        n = min(bank, dst.shape[1] - c0)
        acc = ctx.builder.alloc(
            tile_name(ctx, None), (shape[0], n), ALL_DTYPES["float32"], BUFFERS["psum"], span
        )
        emit(
            ctx,
            REGISTRY["nc_matmul"],
            span,
            {
                "dst": acc,
                "stationary": ones.full(),
                "moving": src.subscript((slice(None), slice(c0, c0 + n)), span),
            },
        )
        emit(
            ctx,
            REGISTRY["tensor_copy"],
            span,
            {"dst": dst.subscript((slice(None), slice(c0, c0 + n)), span), "src": acc},
        )
    return out


def _one_row(ctx: Context, span, src, shape: tuple[int, ...]):
    """A one-partition view [1, A, B, ...] as one row [1, A * B * ...]: itself when its free
    dims are contiguous, else a copy of it (a stride-0 broadcast dim, a strided slice)."""
    _, pairs = src.as_pattern()
    stride, contiguous = 1, True
    for step, count in reversed(pairs[1:]):
        contiguous &= count == 1 or step == stride
        stride *= count
    if not contiguous:
        row = ctx.builder.alloc(
            tile_name(ctx, None), (1, *shape[1:]), src.dtype, BUFFERS["sbuf"], span
        )
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": row, "src": src})
        src = row.full()
    return reshape(src, (1, math.prod(shape[1:])), span)


def rms_norm(
    ctx: Context, span, x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None, mask=None, **_
):
    """x / sqrt(sum(x^2) / n + epsilon) * w along the free axis of a 2-d tile (nki.language
    .rms_norm), in fp32: squares on Scalar, the row sum on Vector, rsqrt on Scalar, then
    one scalar_tensor_tensor for x * rinv * w (lowering inferred; compute_dtype ignored,
    the engines compute in fp32)."""
    v, vw = tensor_arg(x, "x", span), tensor_arg(w, "w", span)
    if len(v.shape) != 2 or not _free_axis(axis):
        raise KernelTypeError(
            "nl.rms_norm supports 2-d tiles along axis 1 (the free axis) for now", span
        )
    if tuple(vw.shape) != tuple(v.shape):
        raise KernelTypeError(
            f"nl.rms_norm: w has shape {list(vw.shape)}, x {list(v.shape)}; they must be equal",
            span,
        )
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise KernelTypeError(f"nl.rms_norm: n must be a positive int, got {shown(n)}", span)
    f32 = ALL_DTYPES["float32"]
    col = (v.shape[0], 1)
    squares = ctx.builder.alloc(tile_name(ctx, None), tuple(v.shape), f32, BUFFERS["sbuf"], span)
    emit(ctx, REGISTRY["activation"], span, {"dst": squares, "op": "square", "data": v}, mask=mask)
    rinv = ctx.builder.alloc(tile_name(ctx, None), col, f32, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["tensor_reduce"],
        span,
        {"dst": rinv, "data": squares, "op": "add", "axis": [1]},
        mask=mask,
    )
    emit(
        ctx,
        REGISTRY["tensor_scalar"],
        span,
        {
            "dst": rinv,
            "data": rinv,
            "op0": "multiply",
            "operand0": 1.0 / n,
            "op1": "add",
            "operand1": float(epsilon),
        },
        mask=mask,
    )
    emit(ctx, REGISTRY["activation"], span, {"dst": rinv, "op": "rsqrt", "data": rinv}, mask=mask)
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    out = ctx.builder.alloc(tile_name(ctx, None), tuple(v.shape), dt, BUFFERS["sbuf"], span)
    emit(
        ctx,
        REGISTRY["scalar_tensor_tensor"],
        span,
        {
            "dst": out,
            "data": v,
            "op0": "multiply",
            "operand0": rinv,
            "op1": "multiply",
            "operand1": vw,
        },
        mask=mask,
    )
    return out
