"""Emitting instructions for a kernel: operands bound, masks applied, engine registers
and immediates resolved; the helpers every lowering shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import BUFFERS, DType, Tensor, View
from neuronemu.program import Instr
from neuronemu.program.verify import operand_info
from neuronemu.trace.legacy_index import Predicate
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import Builtin, EnumValue, OpRef, is_tensor_like
from neuronemu_isa import REGISTRY, Buffer, Engine, InstrSpec

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def attr_value(v: Any) -> Any:
    if isinstance(v, (OpRef, EnumValue)):
        return v.name
    if isinstance(v, DType):
        return v.name
    if isinstance(v, np.generic):
        return v.item()
    return v


def _engine_named(value: Any) -> bool:
    return not (value is None or (isinstance(value, EnumValue) and value.name == "unknown"))


def engine_of(spec: InstrSpec, value: Any, span: SourceSpan) -> Engine:
    if not _engine_named(value):
        return spec.engines[0]
    name = value.name if isinstance(value, EnumValue) else value
    try:
        return Engine(name)
    except ValueError:
        raise KernelTypeError(f"{spec.name}: unknown engine {shown(value)}", span) from None


def emit(
    ctx: Context,
    spec: InstrSpec,
    span: SourceSpan,
    bound: dict[str, Any],
    engine: Any = None,
    mask: Any = None,
) -> Instr | None:
    """Emit one instruction; `mask=` (older dialect) narrows every tile operand first, and
    a constant False mask (a trace-time condition) leaves nothing to do. A mask that keeps
    several rectangles (a condition over two indices) emits one instruction per rectangle;
    the last one is returned."""
    if masked_off(mask):
        return None
    pieces = _mask_pieces(mask, spec, bound, span)
    engine_value = engine_of(spec, engine, span)
    bound = _bind_registers(ctx, spec, engine_value, bound, span)
    last = None
    for ranges in pieces:
        last = _emit_piece(ctx, spec, span, bound, engine, engine_value, ranges) or last
    return last


def _emit_piece(
    ctx: Context,
    spec: InstrSpec,
    span: SourceSpan,
    bound: dict[str, Any],
    engine: Any,
    engine_value: Engine,
    ranges: dict[int, tuple[int, int]] | None,
) -> Instr | None:
    operand_specs = {o.name: o for o in spec.operands}
    operands: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for k, v in bound.items():
        if k in operand_specs:
            if is_tensor_like(v):
                view = as_view(v, ranges)
                if view is None:
                    return None  # the mask leaves nothing to do
                operands[k] = view
            elif not operand_specs[k].scalar:
                _refuse_plain_input(ctx, spec, k, v, span)
                operands[k] = v  # (the checks of program/verify.py say what it must be)
            elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
                operands[k] = _immediate(spec, k, v, span)
            else:
                operands[k] = v
        else:
            attrs[k] = attr_value(v)
    if spec.default_engine is not None and not _engine_named(engine):
        infos = {k: operand_info(k, v) if isinstance(v, View) else v for k, v in operands.items()}
        engine_value = spec.default_engine(infos, attrs)
    return ctx.builder.emit(spec, engine_value, operands, attrs, span)


def _refuse_plain_input(
    ctx: Context, spec: InstrSpec, name: str, value: Any, span: SourceSpan
) -> None:
    """A kernel input given as a plain value (`-i n_rows=384`) where an instruction takes a
    tensor: say which input, what it was, and how to give an array instead."""
    for param, given in ctx.kernel_values.items():
        if given is value and not isinstance(value, (type(None), bool)):
            kind = type(value).__name__
            article = "an" if kind[0] in "aeiou" else "a"
            raise KernelTypeError(
                f"kernel input {param!r} is {shown(value)} ({article} {kind}), but "
                f"{spec.name}'s {name} must be a tensor",
                span,
                hint=f"pass an array for it: -i {param}=float32[128,512] on the command "
                f"line, a NumPy array in inputs={{{param!r}: ...}}",
            )


def _immediate(spec: InstrSpec, name: str, value: Any, span: SourceSpan) -> float:
    """A number passed as an operand: an fp32 immediate; one no float can hold is an error."""
    try:
        return float(value)
    except OverflowError:
        digits = len(str(abs(int(value))))
        raise KernelTypeError(
            f"{spec.name}: {name} is a {digits}-digit integer, too large for a float immediate",
            span,
        ) from None


def _bind_registers(
    ctx: Context, spec: InstrSpec, engine: Engine, bound: dict[str, Any], span: SourceSpan
) -> dict[str, Any]:
    """Engine-register operands (activation's reduce registers, the PRNG state) are implicit
    in a kernel: bind each to its engine's register file (one tensor per engine and file)
    when the call uses it."""
    args = {k: attr_value(v) if not is_tensor_like(v) else v for k, v in bound.items()}
    out = dict(bound)
    for op in spec.operands:
        regs = op.register
        if regs is None or op.name in out or (op.optional and not regs.used(args)):
            continue
        pmax = ctx.arch.tile_pmax
        file = ctx.builder.registers(engine, op.name, (pmax, regs.words(engine)), regs.dtype, span)
        # Per-lane registers follow the tile's partitions; others are the whole file.
        lanes = next((v.shape[0] for v in bound.values() if is_tensor_like(v)), 1)
        out[op.name] = (
            file.full().subscript(slice(0, lanes), span) if regs.per_lane else file.full()
        )
    return out


class InstrHandle:
    """What a `nisa.*` call returns (nki.isa.NkiInstruction): `.depends_on(*producers)`."""

    def __init__(self, ctx: Context, instr: Instr):
        self._tr = ctx
        self.instr = instr

    def depends_on(self, span: SourceSpan, *producers: Any, kind: Any = None) -> InstrHandle:
        for p in producers:
            if not isinstance(p, InstrHandle):
                raise KernelTypeError(
                    f"depends_on() takes instructions returned by nisa calls, got {shown(p)}", span
                )
            self._tr.builder.add_dependency(self.instr, p.instr, span)
        return self

    def __repr__(self) -> str:
        return f"<instruction #{self.instr.index} {self.instr.spec.name}>"


NO_REORDER = EnumValue("nl", "no_reorder")


def masked_off(mask: Any) -> bool:
    """Is `mask=` a constant False (a trace-time condition that leaves nothing to do)?"""
    return isinstance(mask, (bool, np.bool_)) and not mask


def _mask_ranges(mask: Any, span: SourceSpan) -> dict[int, tuple[int, int]] | None:
    if mask is None:
        return None
    if isinstance(mask, Predicate):
        return mask.ranges(span)
    if isinstance(mask, (bool, np.bool_)) and mask:
        return None
    raise KernelTypeError(
        f"mask= must be a condition on nl.arange indices (e.g. i_p < n), got {shown(mask)}", span
    )


# Instructions a mask over two indices may split into one instruction per rectangle it
# keeps: each element they write comes from the elements of their inputs at the same
# iteration point (or reduced along trailing free axes), whatever the point's position, so
# the pieces write what one masked instruction would (inferred from each nki.isa page).
# Others (a matmul, a transpose, an iota whose values depend on the partition) are refused.
_SPLITTABLE = frozenset(
    {
        "dma_copy",
        "tensor_copy",
        "tensor_tensor",
        "tensor_scalar",
        "scalar_tensor_tensor",
        "activation",
        "activation_reduce",
        "tensor_reduce",
        "reciprocal",
        "memset",
    }
)


def _mask_pieces(
    mask: Any, spec: InstrSpec, bound: dict[str, Any], span: SourceSpan
) -> list[dict[int, tuple[int, int]] | None]:
    """The ranges of each instruction a `mask=` makes of the call: one, or one per rectangle
    of a mask over two indices, where the instruction can be split so (each rectangle's
    writes disjoint from the others')."""
    if not isinstance(mask, Predicate):
        return [_mask_ranges(mask, span)]
    pieces, split = mask.pieces(span)
    if len(pieces) == 1:
        return list(pieces)
    if spec.name not in _SPLITTABLE:
        raise KernelTypeError(
            f"mask= {shown(mask)} keeps {len(pieces)} rectangles, emitted as one instruction "
            f"each; {spec.name} cannot be split so (its results do not come from the same "
            "points of its inputs alone)",
            span,
            hint="give each condition one nl.arange index (i_p < n, i_f < m)",
        )
    for op in spec.outputs:
        v = bound.get(op.name)
        if op.register is not None or v is None or not is_tensor_like(v):
            continue
        shape = tuple(v.shape)
        flat = [pos for pos in split if pos >= len(shape) or shape[pos] == 1]
        if flat:
            raise KernelTypeError(
                f"mask= {shown(mask)} splits {spec.name} into {len(pieces)} instructions along "
                f"axis {flat[0]}, but its {op.name} {list(shape)} does not vary along that axis: "
                "the pieces would write the same elements",
                span,
                hint="give each condition one nl.arange index (i_p < n, i_f < m)",
            )
    return list(pieces)


def tile_name(ctx: Context, name: Any) -> str:
    """An explicit name=, else a placeholder renamed when the tile is bound to a variable."""
    return name if isinstance(name, str) and name else "%" + (ctx.pending_name or "")


def through_sbuf(ctx: Context, v: Any, span: SourceSpan, mask: Any = None) -> Any:
    """A PSUM tile where only SBUF will do (a DMA source, a Tensor-engine input): copied to
    a new SBUF tile first, as the compiler does; anything else as it is."""
    if v.buffer != Buffer.PSUM:
        return v
    tmp = ctx.builder.alloc(tile_name(ctx, None), tuple(v.shape), v.dtype, BUFFERS["sbuf"], span)
    emit(ctx, REGISTRY["tensor_copy"], span, {"dst": tmp, "src": v}, mask=mask)
    return tmp


def tensor_arg(x: Any, what: str, span: SourceSpan) -> Any:
    if not is_tensor_like(x):
        raise KernelTypeError(f"{what} must be a tensor, got {type(x).__name__} {shown(x)}", span)
    return x.full() if isinstance(x, Tensor) else x


def builtin(name: str, fn: Callable[..., Any]) -> Any:

    return Builtin(name, fn)


def not_yet(qualname: str) -> Any:
    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        raise KernelTypeError(f"{qualname} is not supported by neuronemu yet", span)

    return builtin(qualname, call)
