"""Check one instruction's operands and attributes against its spec, before it may run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuronemu.errors import ConstraintError, SourceSpan, shown
from neuronemu.ir import IndirectView, View
from neuronemu_isa import Arch, Buffer, Engine, InstrSpec, OperandInfo
from neuronemu_isa.spec import Check, packed_misuse

__all__ = ["operand_info", "check_instr", "instr_check"]


def operand_info(name: str, view: View) -> OperandInfo:
    """What a spec's hooks see of an operand (kept on the view: the checks, the schedule and
    the report each ask for an instruction's operands)."""
    known = view.__dict__.get("_operand_info")
    if known is not None and known.name == name:
        return known
    info = view.__dict__["_operand_info"] = _operand_info(name, view)
    return info


def _operand_info(name: str, view: View) -> OperandInfo:
    shape = view.shape
    if view.buffer != Buffer.HBM and len(shape) == 1:
        shape = (shape[0], 1)
    rows = view.rows if isinstance(view, IndirectView) else 0
    return OperandInfo(
        name,
        shape,
        view.dtype.name,
        view.buffer,
        view.dtype.itemsize,
        _inner_stride_bytes(view),
        rows,
        _runs(view),
    )


def _runs(view: View) -> int:
    """How many maximal runs of contiguous elements `view` forms: in HBM over its flat
    memory, on chip within each partition (a partition's row is its own memory)."""
    _, pairs = view.as_pattern()
    if view.buffer != Buffer.HBM and pairs:
        partitions, pairs = pairs[0][1], pairs[1:]
    else:
        partitions = 1
    elements = run = 1
    contiguous = True
    for stride, count in reversed(pairs):
        elements *= count
        if count == 1:
            continue
        if contiguous and stride == run:
            run *= count
        else:
            contiguous = False
    if elements == 0:  # (an empty box: no run at all; its shape is refused where checked)
        return 0
    return partitions * max(1, elements // run)


def _inner_stride_bytes(view: View) -> int:
    """The byte step of an on-chip view's most-minor free dim that has more than one
    element; 0 when that step is one element (contiguous) or 0 (broadcast), or for HBM."""
    if view.buffer == Buffer.HBM:
        return 0
    _, pairs = view.as_pattern()
    free = [stride for stride, count in pairs[1:] if count > 1]
    if not free or abs(free[-1]) in (0, 1):
        return 0
    return abs(free[-1]) * view.dtype.itemsize


def instr_check(ins: Any, arch: Arch) -> Check:
    """What a spec's hooks see of an instruction already in a program: its operands' shapes,
    dtypes and buffers (immediates as they are) and its attributes."""
    infos = {k: operand_info(k, v) if isinstance(v, View) else v for k, v in ins.operands.items()}
    return Check(arch, ins.engine, infos, ins.attrs)


def check_instr(
    spec: InstrSpec,
    engine: Engine,
    operands: dict[str, Any],
    attrs: dict[str, Any],
    arch: Arch,
    span: SourceSpan,
) -> Check:
    """Raise a located ConstraintError for the first broken rule; return the cost context."""

    def fail(msg: str, hint: str | None = None) -> None:
        raise ConstraintError(f"{spec.name}: {msg}", span, hint)

    if engine not in spec.engines:
        allowed = ", ".join(e.value for e in spec.engines)
        fail(f"cannot run on the {engine.value} engine", f"{spec.name} runs on: {allowed}")
    infos: dict[str, OperandInfo | float | None] = {}
    for op in spec.operands:
        v = operands.get(op.name)
        if v is None:
            if not op.optional:
                fail(f"operand {op.name!r} is required")
            infos[op.name] = None
            continue
        if not isinstance(v, View):
            if op.scalar and isinstance(v, (int, float)) and not isinstance(v, bool):
                infos[op.name] = float(v)
                continue
            kind = "a tile or a number" if op.scalar else "a tensor"
            fail(f"{op.name} must be {kind}, got {type(v).__name__} {shown(v)}")
        if isinstance(v, IndirectView) and not spec.indirect:
            fail(
                f"{op.name} {shown(v)} is addressed at run time; neuronemu supports indirect "
                "views as dma_copy operands only (yet)"
            )
        if v.buffer not in op.buffers:
            where = " or ".join(b.value.upper() for b in op.buffers)
            fail(f"{op.name} is in {v.buffer.value.upper()} ({shown(v)}); it must be in {where}")
        if op.dtypes is not None and v.dtype.name not in op.dtypes:
            fail(f"{op.name} has dtype {v.dtype.name}; allowed: {', '.join(sorted(op.dtypes))}")
        if op.role == "out" and any(
            stride == 0 and count > 1 for stride, count in v.as_pattern()[1]
        ):
            fail(
                f"{op.name} {shown(v)} repeats elements (a stride-0 broadcast); an output must "
                "write each element once"
            )
        info = operand_info(op.name, v)
        if v.buffer != Buffer.HBM and info.partition_size > arch.tile_pmax:
            fail(
                f"{op.name} partition size {info.partition_size} exceeds "
                f"{arch.tile_pmax} (nl.tile_size.pmax)"
            )
        if info.nbytes == 0:
            fail(f"{op.name} is empty ({shown(v)} has shape {list(v.shape)})")
        infos[op.name] = info
    for a in spec.attrs:
        value = attrs.get(a.name, None if a.required else a.default)
        if a.required and a.name not in attrs:
            fail(f"attribute {a.name!r} is required")
        if a.choices is not None and value not in a.choices:
            choices = ", ".join(str(c) for c in a.choices[:12])
            fail(f"{a.name}={shown(value)} is not supported", f"choose one of: {choices}")
    _check_registers(spec, engine, infos, arch, fail)
    check = Check(arch, engine, infos, attrs)
    for constraint in (*spec.constraints, lambda c: packed_misuse(spec, c)):
        msg = constraint(check)
        if msg:
            fail(msg)
    return check


def _check_registers(
    spec: InstrSpec,
    engine: Engine,
    infos: dict[str, OperandInfo | float | None],
    arch: Arch,
    fail: Callable[..., None],
) -> None:
    """An engine-register operand (bound by the tracer; a .nasm file may name any tensor)
    is its file's shape: `words` per lane, over the instruction's partitions for a per-lane
    file (as the tracer binds it), over all `pmax` lanes otherwise."""
    tiles = [
        info
        for op in spec.operands
        if op.register is None and isinstance(info := infos.get(op.name), OperandInfo)
    ]
    for op in spec.operands:
        info, regs = infos.get(op.name), op.register
        if regs is None or not isinstance(info, OperandInfo):
            continue
        lanes = tiles[0].partition_size if regs.per_lane and tiles else arch.tile_pmax
        want = [lanes, regs.words(engine)]
        if [info.partition_size, info.free_size] != want:
            fail(
                f"{op.name} is the {engine.value} engine's registers, of shape {want} "
                f"here; it has shape {list(info.shape)}"
            )
