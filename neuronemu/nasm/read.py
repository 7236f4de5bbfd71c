"""Parse the text form of a program (`neuronemu asm` output, possibly edited) back to a Program.

The semaphore waits (and `after()` orderings) are taken as written, not re-derived: deleting
one is how a race is provoked on purpose. Each instruction keeps its kernel source line for reports.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import math
from pathlib import Path
from typing import Any

import numpy as np

from neuronemu.build.allocator import partition_offset
from neuronemu.build.builder import Builder
from neuronemu.errors import (
    KernelSyntaxError,
    KernelTypeError,
    SourceSpan,
    UsageError,
    register_source,
)
from neuronemu.frontend.parser import read_source
from neuronemu.ir import (
    ALL_DTYPES,
    BUFFERS,
    REGISTERS,
    DType,
    IndirectView,
    PatternView,
    Tensor,
    View,
)
from neuronemu.limits import Meter
from neuronemu.nasm.lines import attr_value, read_records
from neuronemu.program import Loop, Program, split_stream
from neuronemu.program.control import LOOP_KINDS
from neuronemu.program.pseudo import SPECS
from neuronemu_isa import TARGETS, Buffer, Engine, load_arch
from neuronemu_isa.numerics import dtype_name

__all__ = ["load_program"]

_BUFFERS = BUFFERS | {"reg": REGISTERS}  # engine registers appear in programs, not kernels
# Dimensions of a tensor: as of an input SPEC (neuronemu.inputs.MAX_DIMS, NumPy 1's limit;
# NumPy 2's is 64), which no NKI tensor comes close to.
_MAX_DIMS = 32


def load_program(
    path: str | Path, inputs: dict[str, Any], target: str | None = None, meter: Meter | None = None
) -> Program:
    """Build a Program from its text form, binding input tensors to `inputs` by name."""
    meter = meter or Meter()
    p = Path(path)
    # (the file_bytes budget of a kernel file: `asm` says when a program it prints is larger)
    text = read_source(p, "program file", meter.limits)
    file = str(path)
    register_source(file, text)
    records = read_records(text, file, meter)
    info: dict[str, Any] = {"kernel": p.stem, "source": file, "grid": (1,)}
    for rec in records:
        if rec[0] == "grid":
            grid = rec[1]
            if not grid or any(g <= 0 for g in grid):
                raise KernelTypeError(
                    f".grid {' '.join(map(str, grid))}: every size must be a positive integer",
                    rec[2],
                )
            if math.prod(grid) > meter.limits.grid_instances:
                raise meter.over(
                    "grid_instances",
                    f".grid {' '.join(map(str, grid))} has {math.prod(grid):,} program instances",
                    rec[2],
                )
        if rec[0] in ("kernel", "source", "grid"):
            info[rec[0]] = rec[1]
        elif rec[0] == "target" and target is None:
            if rec[1] not in TARGETS:
                raise KernelTypeError(
                    f"unknown target {rec[1]!r}",
                    rec[2],
                    hint=f"choose one of: {', '.join(TARGETS)}",
                )
            target = rec[1]
    arch = load_arch(target or "trn2")
    builder = Builder(arch, meter)
    tensors: dict[str, Tensor] = {}
    bound: dict[str, Tensor] = {}
    outputs: list[Tensor] = []
    for rec in records:
        if rec[0] == "tensor":
            _declare(rec, builder, inputs, tensors, bound, outputs)
        elif rec[0] == "alias":
            _, name, root, dtype, span = rec
            if name in tensors:
                raise KernelTypeError(f"tensor {name!r} is declared twice", span)
            if root not in tensors or tensors[root].base is not None:
                raise KernelTypeError(
                    f"alias {name!r} views {root!r}, which is not a tensor declared above", span
                )
            tensors[name] = builder.alias(tensors[root], _dtype_named(dtype, span), span)
    unknown = sorted(set(inputs) - set(bound))
    if unknown:
        raise UsageError(
            f"{file} has no input tensor {unknown[0]!r} (inputs: {', '.join(bound) or 'none'})"
        )
    stream = None
    instrs = sorted((r for r in records if r[0] == "instr"), key=lambda r: r[1])
    streams = {}
    for rec in records:
        if rec[0] == "stream":
            stream = rec[1]
        elif rec[0] == "instr":
            if stream is None:
                raise KernelSyntaxError(
                    "instruction before any stream header (e.g. vector:)", rec[6]
                )
            if rec[1] in streams:
                raise KernelSyntaxError(f"instruction @{rec[1]} appears twice", rec[6])
            streams[rec[1]] = (stream, rec)
    index_of = {rec[1]: n for n, rec in enumerate(instrs)}
    stream_of = {index: stream for index, (stream, _) in streams.items()}
    for n, rec in enumerate(instrs):
        stream, _ = streams[rec[1]]
        _emit(builder, rec, stream, tensors, index_of, stream_of, n)
    for ins in builder.instrs:  # a tile lives in the SBUF/PSUM of the core that uses it
        for name, view in ins.views("in") + ins.views("out"):
            if name != ins.spec.peer:  # the other core's tile
                view.tensor.root.core = ins.core
    for rec in records:
        if rec[0] == "loop":
            builder.adopt_loop(_loop(rec, tensors, index_of))
    _check_pairs(builder, index_of)
    for n, rec in enumerate(instrs):
        for c in rec[7]:
            if c not in index_of or index_of[c] < n:
                raise KernelTypeError(
                    f"carry(@{c}): a loop-carried dependency names a later instruction of the "
                    "same loop's body (or itself)",
                    rec[6],
                )
        builder.instrs[n].carried = tuple(sorted(index_of[c] for c in rec[7]))
    return builder.finish(info["kernel"], file, bound, outputs, {}, info["grid"], reuse_waits=False)


def _check_pairs(builder: Builder, index_of: dict[int, int]) -> None:
    """A sendrecv's `pair=` names the other core's sendrecv, whose pair names it back."""
    by_text = index_of
    for ins in builder.instrs:
        if ins.spec.peer is None:
            continue
        n = by_text.get(int(ins.attrs.get("pair", -1)))
        other = builder.instrs[n] if n is not None else None
        if (
            other is None
            or other.spec is not ins.spec
            or other.core == ins.core
            or by_text.get(int(other.attrs.get("pair", -1))) != ins.index
        ):
            raise KernelTypeError(
                f"{ins.spec.name}: pair= must name the other core's {ins.spec.name}, whose pair= "
                "names this one",
                ins.span,
            )
    for ins in builder.instrs:
        if ins.spec.peer is not None:
            ins.attrs["pair"] = by_text[int(ins.attrs["pair"])]


def _loop(rec: tuple, tensors: dict[str, Tensor], index_of: dict[int, int]) -> Loop:
    _, number, kind, first, last, args, location, span = rec
    if kind not in LOOP_KINDS:
        raise KernelTypeError(
            f".loop {number}: unknown kind {kind!r} ({', '.join(LOOP_KINDS)})", span
        )
    for i in (first, last):
        if i not in index_of:
            raise KernelTypeError(
                f".loop {number}: @{i} is not an instruction of the program", span
            )
    loop = Loop(kind, index_of[first], index_of[last] + 1, location or span)
    if loop.end <= loop.begin:
        raise KernelTypeError(f".loop {number}: its last instruction comes before its first", span)
    allowed = {"for": ("var", "lower", "upper", "step"), "while": ("var", "lower", "cond")}
    for key, value in args:
        if key not in allowed.get(kind, ("cond",)):
            raise KernelTypeError(f".loop {number}: a {kind} loop has no {key}=", span)
        if isinstance(value, tuple) and value and value[0] == "view" and key != "step":
            value = _operand_view(".loop", value, tensors, span)
            if value.buffer != Buffer.REG or value.size != 1 or value.dtype.name != "int32":
                raise KernelTypeError(
                    f".loop {number}: {key}= must be a 1x1 int32 register, not {value!r}", span
                )
        elif key == "step" and (not isinstance(value, int) or value <= 0):
            raise KernelTypeError(f".loop {number}: step= must be a positive int", span)
        elif not isinstance(value, int):
            raise KernelTypeError(f".loop {number}: {key}= must be a register or an int", span)
        setattr(loop, key, value)
    needed = {"for": ("var",), "while": ("var", "lower", "cond")}.get(kind, ("cond",))
    for key in needed:
        if not isinstance(getattr(loop, key), View):
            raise KernelTypeError(f".loop {number}: a {kind} loop needs {key}= (a register)", span)
    if loop.var is not None:
        loop.var.tensor.kind = "loopvar"
    return loop


def _declare(
    rec: tuple,
    builder: Builder,
    inputs: dict[str, Any],
    tensors: dict[str, Tensor],
    bound: dict[str, Tensor],
    outputs: list[Tensor],
) -> None:
    _, name, kind, buffer, dtype, shape, span, data, placed, returned = rec
    builder.meter.tick(span)
    if name in tensors:
        raise KernelTypeError(f"tensor {name!r} is declared twice", span)
    for what, dims in (("shape", shape), ("returned shape", returned or ())):
        if len(dims) > _MAX_DIMS:
            raise KernelTypeError(
                f"tensor {name!r}: a {what} of {len(dims):,} dimensions, over the "
                f"{_MAX_DIMS} a tensor may have",
                span,
            )
    _dtype_named(dtype, span)
    if buffer not in _BUFFERS:
        raise KernelTypeError(
            f"unknown buffer {buffer!r}", span, hint=f"choose one of: {', '.join(_BUFFERS)}"
        )
    if kind in ("input", "inout"):
        if name not in inputs:
            raise UsageError(
                f"program needs input {name!r}: -i {name}=SPEC on the command line, "
                f"inputs={{{name!r}: ...}} in the Python API",
                span,
            )
        array = np.asarray(inputs[name])
        # (a 0-d array is a tensor of one element, as a kernel's input)
        if (tuple(array.shape) or (1,)) != shape or dtype_name(array.dtype) != dtype:
            raise UsageError(
                f"input {name!r} is {dtype_name(array.dtype)}{list(array.shape)}; "
                f"the program declares {dtype}{list(shape)}",
                span,
            )
        t = Tensor(name, shape, ALL_DTYPES[dtype], _BUFFERS[buffer], span, kind="input")
        builder.tensors.append(t)
        bound[name] = t
        if kind == "inout":
            outputs.append(t)
    elif kind in ("output", "tile"):
        t = builder.alloc(name, shape, ALL_DTYPES[dtype], _BUFFERS[buffer], span)
        if kind == "output":
            outputs.append(t)
    elif kind == "constant":
        t = builder.alloc(name, shape, ALL_DTYPES[dtype], _BUFFERS[buffer], span, kind="constant")
        try:
            raw = base64.b64decode(data or "", validate=True)
            t.data = np.frombuffer(raw, dtype=ALL_DTYPES[dtype].np).reshape(shape)
        except (ValueError, binascii.Error):
            raise KernelTypeError(
                f"constant {name!r} needs its {dtype}{list(shape)} contents as a base64 string",
                span,
            ) from None
    else:
        raise KernelTypeError(
            f"tensor kind must be input, output, inout, tile or constant, got {kind!r}", span
        )
    if returned is not None:
        if kind != "output" or len(returned) < 1 or math.prod(returned) != math.prod(shape):
            raise KernelTypeError(
                f"as{list(returned)}: an output's returned shape must hold "
                f"its {math.prod(shape)} elements",
                span,
            )
        t.out_shape = returned
    if placed is not None:
        if not t.on_chip:
            raise KernelTypeError("at(partition, offset) places SBUF or PSUM tensors only", span)
        t.partition_offset = partition_offset(placed[0], t, builder.arch, span)
        t.address = placed[1]
    tensors[name] = t


def _operand_view(instr: str, rec: tuple, tensors: dict[str, Tensor], span: SourceSpan) -> View:
    """The view a parsed operand record names: t[...], ap(...) or iap(...)."""
    t = tensors.get(rec[1])
    if t is None:
        close = difflib.get_close_matches(rec[1], list(tensors), n=1)
        raise KernelTypeError(
            f"{instr}: unknown tensor {rec[1]!r}",
            span,
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    if rec[0] == "view":
        return t.full() if rec[2] is None else t.full().subscript(rec[2], span)
    if rec[0] == "pattern":
        return PatternView.build(t, rec[3], rec[2], span, internal=True)  # signed strides
    _, _, pattern, offset, mode, index, unit, limit = rec
    if mode not in ("vector", "scalar"):
        raise KernelTypeError(
            f"{instr}: indirect mode must be vector or scalar, got {mode!r}", span
        )
    return IndirectView.make(
        t,
        offset,
        pattern,
        _operand_view(instr, index, tensors, span),
        mode,
        0,
        span,
        step=(unit, limit),
    )


def _dtype_named(name: str, span: SourceSpan) -> DType:
    if name not in ALL_DTYPES:
        close = difflib.get_close_matches(name, list(ALL_DTYPES), n=1)
        raise KernelTypeError(
            f"unknown dtype {name!r}", span, hint=f"did you mean {close[0]!r}?" if close else None
        )
    return ALL_DTYPES[name]


def _emit(
    builder: Builder,
    rec: tuple,
    stream: str,
    tensors: dict[str, Tensor],
    index_of: dict[int, int],
    stream_of: dict[int, str],
    n: int,
) -> None:
    _, index, name, args, waits, location, span, _, after = rec
    spec = SPECS.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, list(SPECS), n=1)
        raise KernelTypeError(
            f"unknown instruction {name!r}",
            span,
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    core, own = split_stream(stream)
    if core >= builder.arch.lnc_physical_cores:
        raise KernelTypeError(
            f"stream {stream!r}: {builder.arch.name} has {builder.arch.lnc_physical_cores} "
            "physical NeuronCore(s) per logical core",
            span,
        )
    if own.startswith("dma.q") and own[5:].isdigit():
        engine, queue = Engine.DMA, int(own[5:])
    else:
        try:
            engine, queue = Engine(own), -1
        except ValueError:
            raise KernelTypeError(f"unknown stream {stream!r}", span) from None
    builder.on_core(core)
    operand_names = {o.name for o in spec.operands}
    known = operand_names | {a.name for a in spec.attrs}
    operands: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, value in args:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise KernelTypeError(
                f"{name} has no argument {key!r} (arguments: {', '.join(sorted(known))})",
                span,
                hint=f"did you mean {close[0]!r}?" if close else None,
            )
        if key in attrs or key in operands:
            raise KernelTypeError(f"{name}: argument {key!r} given twice", span)
        if key in operand_names:
            if isinstance(value, tuple) and value and value[0] in ("view", "pattern", "indirect"):
                operands[key] = _operand_view(name, value, tensors, span)
            elif isinstance(value, (int, float)):
                operands[key] = float(value)
            else:
                raise KernelTypeError(f"{name}: operand {key}= must be a tensor or a number", span)
        else:
            try:
                attrs[key] = attr_value(value)
            except ValueError as exc:
                raise KernelTypeError(f"{name}: {key}: {exc}", span) from None
    ins = builder.emit(spec, engine, operands, attrs, span)
    if engine == Engine.DMA:
        ins.queue = queue
    waited = set()
    for wstream, windex, wspan in waits:
        if windex not in index_of or index_of[windex] >= n:
            raise KernelTypeError(f"wait on @{windex}, which is not an earlier instruction", wspan)
        if stream_of[windex] != wstream:
            raise KernelTypeError(
                f"wait({wstream}@{windex}): instruction @{windex} is on "
                f"stream {stream_of[windex]}, not {wstream}",
                wspan,
                hint=f"write wait({stream_of[windex]}@{windex})",
            )
        waited.add(index_of[windex])
    follows = set()
    for a in after:
        if a not in index_of or index_of[a] >= n:
            raise KernelTypeError(f"after(@{a}): @{a} is not an earlier instruction", span)
        follows.add(index_of[a])
    # Across streams only the written waits (and after()) order instructions; within a stream
    # the data dependencies stay (they are facts of the program, not synchronization).
    same_stream = {d for d in ins.deps if builder.instrs[d].stream == ins.stream}
    ins.deps = tuple(sorted(same_stream | waited | follows))
    ins.waits = tuple(sorted(waited))
    if location is not None:
        ins.span = location
