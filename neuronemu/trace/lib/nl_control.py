"""Run-time control: scalars in registers and the loops and branches the device runs.

`nisa.scalar_load` / `scalar_store` / `scalar_alu` and NkiScalar operators (NKI 0.7), the
older `nisa.register_*` API, `nl.fori_loop`, `nl.while_loop` and `nl.if_else`. A device
loop's body is traced once (its tiles are allocated once, for the whole loop); the machine
runs it as the registers say (`neuronemu.sim.loops`).

Refs: nki.language.fori_loop / while_loop / if_else, nki.isa.NkiScalar / scalar_load /
scalar_store / scalar_alu / register_alloc, the NKI Loops and NKI Control Flow deep dives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import ALL_DTYPES, REGISTERS, View
from neuronemu.program import Loop
from neuronemu.program.control import COMPARISONS, INT64_OPS, SCALAR_ALU_OPS, SPECS
from neuronemu.trace.lib.emit import attr_value, engine_of
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import Scalar, is_tensor_like
from neuronemu_isa import Buffer, Engine

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context

__all__ = ["scalar_binop", "isa_members", "language_members"]

# Python operators on NkiScalars and the scalar_alu op each one is (nki.isa.scalar_alu:
# "Python operators map to it"). `//` and `%` are left out: the ALU truncates toward zero,
# Python floors, and no document says which one the operators mean.
_OPERATORS = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
    "==": "equal",
    "!=": "not_equal",
}
# `int op scalar` as `scalar op' int`: the ops whose operands may swap, and what they become.
_SWAPPED = {
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
    **{op: op for op in ("equal", "not_equal", "add", "multiply", "maximum", "minimum")},
}
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
# Immediates travel as float operands (exact up to 2**53; larger ints would lose bits).
_EXACT_IMMEDIATE = 2**53


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _register(
    ctx: Context, dtype: str, span: SourceSpan, kind: str = "tile", name: str | None = None
) -> View:
    name = ctx.unique_name(name or ctx.pending_name or "scalar")
    t = ctx.builder.alloc(name, (1, 1), ALL_DTYPES[dtype], REGISTERS, span, kind)
    return t.full()


def _emit(ctx: Context, name: str, operands: dict[str, Any], attrs: dict[str, Any], span) -> None:
    ctx.builder.emit(SPECS[name], Engine.SYNC, operands, attrs, span)


def _one_element(value: Any, what: str, span: SourceSpan) -> View:
    view = as_view(value) if is_tensor_like(value) else None
    if view is None or view.size != 1:
        raise KernelTypeError(f"{what} must be a 1x1 SBUF or HBM tensor, got {shown(value)}", span)
    return view


def _int_dtype(view: View, what: str, span: SourceSpan) -> str:
    if view.dtype.name not in _INT_RANGE:
        raise KernelTypeError(
            f"{what} must be nl.int32 or nl.int64, not {view.dtype.name} (use the signed type "
            "of the same width)",
            span,
        )
    return view.dtype.name


def _immediate(ctx: Context, value: int, dtype: str, span: SourceSpan) -> View:
    """A Python int as a register of `dtype` (register_move of the immediate)."""
    lo, hi = _INT_RANGE[dtype]
    if not lo <= value <= hi or abs(value) > _EXACT_IMMEDIATE:
        raise KernelTypeError(f"{value} does not fit a {dtype} scalar immediate", span)
    reg = _register(ctx, dtype, span)
    _emit(ctx, "register_move", {"src": float(value), "dst": reg}, {}, span)
    return reg


# NKI 0.7 scalars ------------------------------------------------------------------------


def scalar_load(ctx: Context, span: SourceSpan, src: Any) -> Scalar:
    view = _one_element(src, "scalar_load(src)", span)
    dtype = _int_dtype(view, "scalar_load(src)", span)
    reg = _register(ctx, dtype, span)
    _emit(ctx, "scalar_load", {"src": view, "dst": reg}, {}, span)
    return Scalar(reg)


def scalar_store(ctx: Context, span: SourceSpan, dst: Any, value: Any) -> None:
    view = _one_element(dst, "scalar_store(dst)", span)
    dtype = _int_dtype(view, "scalar_store(dst)", span)
    if not isinstance(value, Scalar):
        raise KernelTypeError(
            f"scalar_store(value) takes an NkiScalar, got {shown(value)}; store a constant "
            "with nisa.memset",
            span,
        )
    if value.dtype.name != dtype:
        raise KernelTypeError(
            f"scalar_store: dst is {dtype} but the value is {value.dtype.name}; widths must match",
            span,
        )
    _emit(ctx, "scalar_store", {"src": value.view, "dst": view}, {}, span)


def scalar_alu(ctx: Context, span: SourceSpan, data1: Any, data2: Any, op: Any, name=None) -> Any:
    op_name = attr_value(op)
    if op_name not in SCALAR_ALU_OPS:
        raise KernelTypeError(
            f"scalar_alu: op {shown(op)} is not a scalar ALU op ({', '.join(SCALAR_ALU_OPS)})",
            span,
        )
    return _alu(ctx, span, op_name, data1, data2)


def _alu(ctx: Context, span: SourceSpan, op: str, a: Any, b: Any) -> Any:
    for v in (a, b):
        if not (isinstance(v, Scalar) or _is_int(v)):
            raise KernelTypeError(
                f"scalar {op}: operands are NkiScalars or ints, got {shown(v)}", span
            )
    if _is_int(a) and _is_int(b):  # folded when tracing
        if op in ("divide", "fmod") and b == 0:
            raise KernelTypeError("scalar division by zero", span)
        return int(SCALAR_ALU_OPS[op](np.int64(a), np.int64(b)))
    if _is_int(a):
        if op in _SWAPPED:
            return _alu(ctx, span, _SWAPPED[op], b, a)
        a = Scalar(_immediate(ctx, a, b.dtype.name, span))
    dtype = a.dtype.name
    if isinstance(b, Scalar) and b.dtype.name != dtype:
        raise KernelTypeError(
            f"scalar {op}: operand dtypes differ ({dtype}, {b.dtype.name}); they must match",
            span,
        )
    if dtype == "int64" and op not in INT64_OPS:
        raise KernelTypeError(
            f"scalar {op} is not available on int64 scalars (only add, subtract, multiply)",
            span,
        )
    if _is_int(b):
        lo, hi = _INT_RANGE[dtype]
        if not lo <= b <= hi or abs(b) > _EXACT_IMMEDIATE:
            raise KernelTypeError(f"{b} does not fit a {dtype} scalar operand", span)
        operand: Any = float(b)
    else:
        operand = b.view
    out = _register(ctx, "int32" if op in COMPARISONS else dtype, span)
    _emit(ctx, "scalar_alu", {"data1": a.view, "data2": operand, "dst": out}, {"op": op}, span)
    return Scalar(out, older=a.older)


def scalar_binop(ctx: Context, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
    """`a op b` where one side is an NkiScalar: a register instruction."""
    alu = _OPERATORS.get(op)
    if alu is None:
        hint = (
            "; use nisa.scalar_alu(a, b, nl.divide) or nl.fmod (they truncate toward zero)"
            if op in ("//", "%", "/")
            else ""
        )
        raise KernelTypeError(f"operator {shown(op)} is not defined on NkiScalars{hint}", span)
    return _alu(ctx, span, alu, a, b)


def scalar_negate(ctx: Context, value: Scalar, span: SourceSpan) -> Scalar:
    return _alu(ctx, span, "multiply", value, -1)


# The older register API ------------------------------------------------------------------


def register_alloc(ctx: Context, span: SourceSpan, x: Any = None) -> Scalar:
    if x is None:
        return Scalar(_register(ctx, "int32", span), older=True)
    if _is_int(x):
        return Scalar(_immediate(ctx, x, "int32", span), older=True)
    reg = _register(ctx, "int32", span)
    _emit(
        ctx,
        "scalar_load",
        {"src": _one_element(x, "register_alloc(x)", span), "dst": reg},
        {},
        span,
    )
    return Scalar(reg, older=True)


def _writable(reg: Any, what: str, span: SourceSpan) -> Scalar:
    if not isinstance(reg, Scalar):
        raise KernelTypeError(
            f"{what} must be a register (nisa.register_alloc()), got {shown(reg)}", span
        )
    if reg.frozen:
        raise KernelTypeError(f"{what}: a loop's variable cannot be written", span)
    return reg


def register_move(
    ctx: Context, span: SourceSpan, dst: Any, src: Any = None, imm: Any = None
) -> None:
    reg = _writable(dst, "register_move(dst)", span)
    value = imm if src is None else src
    if _is_int(value):
        lo, hi = _INT_RANGE[reg.dtype.name]
        if not lo <= value <= hi:
            raise KernelTypeError(f"{value} does not fit the {reg.dtype.name} register", span)
        _emit(ctx, "register_move", {"src": float(value), "dst": reg.view}, {}, span)
    elif isinstance(value, Scalar):
        _emit(ctx, "register_move", {"src": value.view, "dst": reg.view}, {}, span)
    else:
        raise KernelTypeError(
            f"register_move(src) takes an int or a register, got {shown(value)}", span
        )


def register_load(ctx: Context, span: SourceSpan, dst: Any, src: Any) -> None:
    reg = _writable(dst, "register_load(dst)", span)
    _emit(
        ctx,
        "scalar_load",
        {"src": _one_element(src, "register_load(src)", span), "dst": reg.view},
        {},
        span,
    )


def register_store(ctx: Context, span: SourceSpan, dst: Any, src: Any) -> None:
    if not isinstance(src, Scalar):
        raise KernelTypeError(f"register_store(src) must be a register, got {shown(src)}", span)
    _emit(
        ctx,
        "scalar_store",
        {"src": src.view, "dst": _one_element(dst, "register_store(dst)", span)},
        {},
        span,
    )


# Device loops and branches ---------------------------------------------------------------


def _bound(value: Any, what: str, span: SourceSpan) -> int | View:
    if _is_int(value):
        lo, hi = _INT_RANGE["int32"]
        if not lo <= value <= hi:
            raise KernelTypeError(
                f"{what} {value} does not fit 32 bits (the loop's compare-and-branch is 32-bit)",
                span,
            )
        return value
    if isinstance(value, Scalar):
        if value.dtype.name != "int32":
            raise KernelTypeError(
                f"{what} must be a 32-bit scalar, not {value.dtype.name}: the loop compiles into a "
                "compare-and-branch that has no 64-bit form",
                span,
            )
        return value.view
    raise KernelTypeError(f"{what} must be an int or an NkiScalar, got {shown(value)}", span)


def open_for(ctx: Context, span: SourceSpan, lower: Any, upper: Any, step: Any) -> Scalar:
    """Open a device for-loop (its body is what is traced until `close`); its variable."""
    if not _is_int(step) or step <= 0 or step > _INT_RANGE["int32"][1]:
        raise KernelTypeError(
            f"a device loop's step must be a positive 32-bit int, got {shown(step)}", span
        )
    lo, hi = (
        _bound(lower, "the loop's lower bound", span),
        _bound(upper, "the loop's upper bound", span),
    )
    older = any(isinstance(b, Scalar) and b.older for b in (lower, upper))
    var = _register(ctx, "int32", span, kind="loopvar", name="loop_i")
    ctx.builder.begin_loop(Loop("for", 0, 0, span, var=var, lower=lo, upper=hi, step=step))
    return Scalar(var, older=older, frozen=True)


def open_while(ctx: Context, span: SourceSpan, init: Scalar) -> Scalar:
    """Open a device while-loop starting from register `init`; its variable."""
    first = _bound(init, "while_loop init", span)
    assert isinstance(first, View)
    var = _register(ctx, "int32", span, kind="loopvar", name="loop_r")
    ctx.builder.begin_loop(Loop("while", 0, 0, span, var=var, lower=first))
    return Scalar(var, older=init.older, frozen=True)


def close(ctx: Context, cond: View | None = None) -> None:
    ctx.builder.end_loop(cond)


def abandon(ctx: Context) -> None:
    ctx.builder.abandon_loop()


def _traced(ctx: Context, fn: Any, args: list[Any], span: SourceSpan) -> Any:
    try:
        return ctx.call(fn, args, {}, span)
    except BaseException:
        abandon(ctx)
        raise


def fori_loop(
    ctx: Context,
    span: SourceSpan,
    lower: Any,
    upper: Any,
    body_fun: Any,
    step: Any = 1,
    unroll: Any = False,
) -> None:
    if unroll:
        if not (_is_int(lower) and _is_int(upper) and _is_int(step) and step > 0):
            raise KernelTypeError(
                "fori_loop(unroll=True) needs int bounds and a positive int step (known when "
                "compiling)",
                span,
            )
        for i in ctx.meter.counted(range(lower, upper, step), span):
            if ctx.call(body_fun, [i], {}, span) is not None:
                raise KernelTypeError("the body of a fori_loop cannot return a value", span)
        return None
    var = open_for(ctx, span, lower, upper, step)
    if _traced(ctx, body_fun, [var], span) is not None:
        abandon(ctx)
        raise KernelTypeError(
            "the body of a fori_loop cannot return a value (carry state in SBUF/HBM)", span
        )
    close(ctx)
    return None


def while_loop(ctx: Context, span: SourceSpan, init: Any, body_fun: Any) -> None:
    if _is_int(init):
        if init == 0:
            return None  # the condition is checked first: the body never runs
        init = Scalar(_immediate(ctx, init, "int32", span))
    if not isinstance(init, Scalar):
        raise KernelTypeError(f"while_loop init must be a register, got {shown(init)}", span)
    var = open_while(ctx, span, init)
    nxt = _traced(ctx, body_fun, [var], span)
    if not isinstance(nxt, Scalar) or nxt.dtype.name != "int32":
        abandon(ctx)
        raise KernelTypeError(
            "the body of a while_loop must return the next condition (an int32 register), "
            f"got {shown(nxt)}",
            span,
        )
    close(ctx, nxt.view)
    return None


def if_else(ctx: Context, span: SourceSpan, cond: Any, then_fn: Any, else_fn: Any = None) -> None:
    if isinstance(cond, (bool, int)):  # known when tracing: only that branch is traced
        fn = then_fn if cond else else_fn
        if fn is not None:
            ctx.call(fn, [], {}, span)
        return None
    _bound(cond, "if_else cond", span)
    # The condition is read once, before either branch (a branch may change its register).
    view = _register(ctx, "int32", span, name="if_cond")
    _emit(ctx, "register_move", {"src": cond.view, "dst": view}, {}, span)
    for kind, fn in (("if", then_fn), ("else", else_fn)):
        if fn is not None:
            ctx.builder.begin_loop(Loop(kind, 0, 0, span, cond=view))
            _traced(ctx, fn, [], span)
            close(ctx)
    return None


# Between the cores of a logical NeuronCore ------------------------------------------------


def core_barrier(
    ctx: Context, span: SourceSpan, data: Any, cores: Any = (0, 1), engine: Any = None, name=None
) -> None:
    view = as_view(data) if is_tensor_like(data) else None
    if view is None or view.buffer != Buffer.HBM:
        raise KernelTypeError(
            f"core_barrier(data) is the shared HBM tensor the cores synchronize on, got "
            f"{shown(data)}",
            span,
        )
    if not isinstance(cores, (tuple, list)) or tuple(cores) != (0, 1):
        raise KernelTypeError(
            f"core_barrier: only cores=(0, 1) is supported, got {shown(cores)}", span
        )
    if ctx.arch.nc_version < 3:
        raise KernelTypeError(
            "core_barrier is available on NeuronCore-v3 or newer (trn2, trn3)", span
        )
    chosen = Engine.GPSIMD if engine is None else engine_of(SPECS["core_barrier"], engine, span)
    ctx.builder.core_barrier(view, chosen, span)


def sendrecv(
    ctx: Context,
    span: SourceSpan,
    src: Any,
    dst: Any,
    send_to_rank: Any,
    recv_from_rank: Any,
    pipe_id: Any = 0,
    dma_engine: Any = None,
    name=None,
    priority: Any = None,
) -> None:
    views = []
    for what, value in (("src", src), ("dst", dst)):
        view = as_view(value) if is_tensor_like(value) else None
        if view is None or view.buffer != Buffer.SBUF:
            raise KernelTypeError(
                f"sendrecv({what}) must be an SBUF tile, got {shown(value)}", span
            )
        views.append(view)
    for what, rank in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if rank not in (0, 1) or isinstance(rank, bool):
            raise KernelTypeError(f"sendrecv: {what} must be 0 or 1, got {shown(rank)}", span)
    if views[0].shape != views[1].shape or views[0].dtype.name != views[1].dtype.name:
        raise KernelTypeError(
            f"sendrecv: src {shown(views[0])} and dst {shown(views[1])} must have the same shape "
            "and dtype",
            span,
        )
    attrs = {"send_to_rank": send_to_rank, "recv_from_rank": recv_from_rank}
    attrs["pipe_id"] = pipe_id if _is_int(pipe_id) else 0
    ctx.builder.sendrecv(views[0], views[1], attrs, span)


def lnc_members() -> dict[str, Any]:
    """`nki.lnc`: the same calls under their current names (nki.isa's are deprecated)."""
    return {"core_barrier": core_barrier, "sendrecv": sendrecv}


def isa_members() -> dict[str, Any]:
    return {
        "scalar_load": scalar_load,
        "scalar_store": scalar_store,
        "scalar_alu": scalar_alu,
        "register_alloc": register_alloc,
        "register_move": register_move,
        "register_load": register_load,
        "register_store": register_store,
        "core_barrier": core_barrier,
        "sendrecv": sendrecv,
    }


def language_members() -> dict[str, Any]:
    return {"fori_loop": fori_loop, "while_loop": while_loop, "if_else": if_else}
