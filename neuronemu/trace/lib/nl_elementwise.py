"""`nl.*` elementwise operations: binary and unary tile arithmetic, `where`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from neuronemu.errors import KernelTypeError, shown
from neuronemu.ir import ALL_DTYPES, BUFFERS, DType, Tensor
from neuronemu.trace.lib import nl_composite
from neuronemu.trace.lib.assign import NO_FIT
from neuronemu.trace.lib.emit import emit, tensor_arg, through_sbuf, tile_name
from neuronemu.trace.tensor_api import as_dtype
from neuronemu.trace.values import is_tensor_like
from neuronemu_isa import REGISTRY, Buffer
from neuronemu_isa.ops import ACTIVATIONS, BITVEC_OPS

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def promote(a: DType, b: DType) -> DType:
    """Legacy nl.* result dtype: float beats int, wider wins, fp16 + bf16 -> fp32."""
    if a == b:
        return a
    fa, fb = a.np.kind == "f" or "float" in a.name, b.np.kind == "f" or "float" in b.name
    if fa != fb:
        return a if fa else b
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return ALL_DTYPES["float32"]
    return a if a.itemsize >= b.itemsize else b


def result(ctx: Context, span, shape, dt, into, cast: bool = False):
    """The tile an nl.* call writes: `into` (the slice `t[...] = nl.f(...)` assigns) when
    it has the call's own tile's shape and dtype, else a new SBUF tile; NO_FIT when
    `into` was given and does not fit (the caller then copies the call's tile in).

    With the write-in-place pass (`Builder.write_in_place`), an fp32 result also goes
    straight into an `into` of another dtype when `cast` (the instruction computes in fp32
    and casts what it writes; not a bit-pattern op): nki.isa.tensor_tensor, "performs the
    element-wise operation in float32 math. The float32 results are cast to the target data
    type before written into the output tile", so the values are those an fp32 tile and a
    copy of it into `into` would hold."""
    if into is None:
        return ctx.builder.alloc(tile_name(ctx, None), tuple(shape), dt, BUFFERS["sbuf"], span)
    if tuple(into.shape) != tuple(shape) or into.buffer == Buffer.HBM:
        return NO_FIT
    if into.dtype == dt or (cast and dt.name == "float32" and ctx.builder.write_in_place):
        return into
    return NO_FIT


def _broadcast(ctx: Context, span, x, y) -> tuple:
    """Two tiles of one rank whose shapes broadcast (NumPy's rule) and are not the
    tile-and-[P, 1]-column case (tensor_scalar's): both as the common shape. A size-1 free
    dim is read with a stride-0 access pattern; a size-1 partition dim is spread across the
    partitions as nl.broadcast_to does (a matmul with a ones row)."""
    sx, sy = tuple(x.shape), tuple(y.shape)
    if len(sx) != len(sy) or not all(a == b or 1 in (a, b) for a, b in zip(sx, sy)):
        return x, y
    column = (sx[0] == sy[0]) and (x.size == sx[0] or y.size == sy[0])
    if column:
        return x, y
    shape = tuple(max(a, b) for a, b in zip(sx, sy))

    def stretch(v):
        if tuple(v.shape) == shape:
            return v
        if v.shape[0] == shape[0]:
            return nl_composite.free_broadcast_view(tensor_arg(v, "x", span), shape, 0, span)
        return nl_composite.broadcast_to(ctx, span, v, shape)

    return stretch(x), stretch(y)


def binary(op: str) -> Callable[..., Tensor]:
    cast = op not in BITVEC_OPS  # (bitvec ops write bit patterns, not fp32 values)

    def call(ctx: Context, span, x, y, dtype=None, mask=None, _into=None, **_):
        x = x.item() if isinstance(x, np.generic) else x  # np.int32(9): a number
        y = y.item() if isinstance(y, np.generic) else y
        tx, ty = is_tensor_like(x), is_tensor_like(y)
        if not tx and not ty:
            raise KernelTypeError(f"nl.{op} needs at least one tile argument", span)
        if tx and ty and tuple(x.shape) != tuple(y.shape):
            x, y = _broadcast(ctx, span, x, y)
        if tx and ty and tuple(x.shape) == tuple(y.shape):
            dt = as_dtype(dtype, span) if dtype is not None else promote(x.dtype, y.dtype)
            if x.buffer == Buffer.PSUM and y.buffer == Buffer.PSUM:
                # (tensor_tensor reads at most one PSUM tile, nki.isa.tensor_tensor: the
                # other goes through SBUF first, as a PSUM tile stored does; inferred)
                y = through_sbuf(ctx, tensor_arg(y, "y", span), span, mask)
            out = result(ctx, span, x.shape, dt, _into, cast)
            if out is NO_FIT:
                return out
            emit(
                ctx,
                REGISTRY["tensor_tensor"],
                span,
                {"dst": out, "data1": x, "data2": y, "op": op},
                mask=mask,
            )
            return out
        # One full tile and one scalar or [P, 1] column: tensor_scalar, reversed if needed.
        wide = tx and (not ty or x.size >= y.size)
        data, other, reverse = (x, y, False) if wide else (y, x, True)
        if is_tensor_like(other):
            if not (other.shape[0] == data.shape[0] and other.size == other.shape[0]):
                raise KernelTypeError(
                    f"nl.{op}: shapes {list(x.shape)} and {list(y.shape)} do not broadcast "
                    "(supported: equal shapes, a scalar, or a [P, 1] column)",
                    span,
                )
            other_dtype = other.dtype
        elif isinstance(other, (int, float)) and not isinstance(other, bool):
            other_dtype = ALL_DTYPES["float32"] if isinstance(other, float) else data.dtype
        else:
            raise KernelTypeError(f"nl.{op}: unsupported operand {shown(other)}", span)
        dt = as_dtype(dtype, span) if dtype is not None else promote(data.dtype, other_dtype)
        out = result(ctx, span, data.shape, dt, _into, cast)
        if out is NO_FIT:
            return out
        emit(
            ctx,
            REGISTRY["tensor_scalar"],
            span,
            {"dst": out, "data": data, "op0": op, "operand0": other, "reverse0": reverse},
            mask=mask,
        )
        return out

    call.takes_into = True  # type: ignore[attr-defined]
    return call


def negative(ctx: Context, span, x, dtype=None, mask=None, _into=None, **_):
    """-x (nki.language.negative): x times -1 on the Vector engine, in x's kind of number
    (lowering inferred)."""
    v = tensor_arg(x, "x", span)
    minus_one = -1 if v.dtype.np.kind in "iu" else -1.0
    return binary("multiply")(ctx, span, v, minus_one, dtype=dtype, mask=mask, _into=_into)


negative.takes_into = True  # type: ignore[attr-defined]


def unary(op: str) -> Callable[..., Tensor]:
    cast = op not in BITVEC_OPS

    def call(ctx: Context, span, x, dtype=None, mask=None, _into=None, **_):
        v = tensor_arg(x, "x", span)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        out = result(ctx, span, v.shape, dt, _into, cast)
        if out is NO_FIT:
            return out
        if op == "copy":
            emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": v}, mask=mask)
        elif op not in ACTIVATIONS:  # an ALU op only (floor, ceil): one Vector pass
            operands = {"dst": out, "data": v, "op0": op}
            emit(ctx, REGISTRY["tensor_scalar"], span, operands, mask=mask)
        else:
            emit(ctx, REGISTRY["activation"], span, {"dst": out, "data": v, "op": op}, mask=mask)
        return out

    call.takes_into = True  # type: ignore[attr-defined]
    return call


def where(ctx: Context, span, condition, x, y, dtype=None, mask=None, **_):
    """x where condition is nonzero, else y (nki.language.where: condition holds 1.0/0.0).
    Lowered to a uint8 predicate (condition != 0), y copied into the result, then
    tensor_copy_predicated of x over it (lowering inferred)."""
    cond = tensor_arg(condition, "condition", span)
    shape = tuple(cond.shape)
    for name, val in (("x", x), ("y", y)):
        if is_tensor_like(val) and tuple(val.shape) != shape:
            raise KernelTypeError(
                f"nl.where: {name} has shape {list(val.shape)}, the "
                f"condition {list(shape)}; they must be equal",
                span,
            )
        if not is_tensor_like(val) and (isinstance(val, bool) or not isinstance(val, (int, float))):
            raise KernelTypeError(
                f"nl.where: {name} must be a tile or a number, got {shown(val)}", span
            )
    if dtype is not None:
        dt = as_dtype(dtype, span)
    elif is_tensor_like(x):
        dt = x.dtype
    else:
        dt = y.dtype if is_tensor_like(y) else ALL_DTYPES["float32"]
    pred = ctx.builder.alloc(
        tile_name(ctx, None), shape, ALL_DTYPES["uint8"], BUFFERS["sbuf"], span
    )
    emit(
        ctx,
        REGISTRY["tensor_scalar"],
        span,
        {"dst": pred, "data": cond, "op0": "not_equal", "operand0": 0.0},
        mask=mask,
    )
    out = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
    if is_tensor_like(y):
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": y}, mask=mask)
    else:
        emit(ctx, REGISTRY["memset"], span, {"dst": out, "value": y}, mask=mask)
    src = x
    if is_tensor_like(x) and x.dtype != dt:  # the predicated copy moves dst's dtype only
        src = ctx.builder.alloc(tile_name(ctx, None), shape, dt, BUFFERS["sbuf"], span)
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": src, "src": x}, mask=mask)
    emit(
        ctx,
        REGISTRY["tensor_copy_predicated"],
        span,
        {"dst": out, "src": src, "predicate": pred},
        mask=mask,
    )
    return out


def dropout(ctx: Context, span, x, rate, dtype=None, mask=None, _into=None, **_):
    """x with each element zeroed with probability `rate`, the kept ones unchanged, by the
    Vector engine's `dropout` instruction and its PRNG (nki.language.dropout: `rate` a
    number or an (x.shape[0], 1) tile of per-partition rates, or a tile of one element;
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
    nki.language.dropout.html). The instruction writes x's dtype; another `dtype` is a
    copy after it."""
    v = tensor_arg(x, "x", span)
    if v.buffer == Buffer.HBM:
        raise KernelTypeError("nl.dropout takes a tile in SBUF or PSUM; load it first", span)
    if is_tensor_like(rate):
        prob = tensor_arg(rate, "rate", span)
        if prob.size == 1 and v.shape[0] > 1:  # one rate for every partition
            prob = nl_composite.broadcast_to(ctx, span, prob, (v.shape[0], 1))
    elif isinstance(rate, (int, float, np.floating)) and not isinstance(rate, bool):
        if not 0.0 <= float(rate) <= 1.0:
            raise KernelTypeError(f"nl.dropout: rate {rate} is not a probability in [0, 1]", span)
        prob = float(rate)
    else:
        raise KernelTypeError(
            f"nl.dropout: rate must be a number or a tile, got {shown(rate)}", span
        )
    dt = as_dtype(dtype, span) if dtype is not None else v.dtype
    out = result(ctx, span, v.shape, dt, _into)
    if out is NO_FIT:
        return out
    dropped = out if dt == v.dtype else result(ctx, span, v.shape, v.dtype, None)
    emit(ctx, REGISTRY["dropout"], span, {"dst": dropped, "data": v, "prob": prob}, mask=mask)
    if dropped is not out:
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": out, "src": dropped}, mask=mask)
    return out


dropout.takes_into = True  # type: ignore[attr-defined]
