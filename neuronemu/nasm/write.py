"""Print a program in its text form: directives, tensors, then each engine's stream.

Programs and instructions are taken as they come (`neuronemu.program` uses this module, so
this one does not import it back).

`neuronemu asm` prints this; `neuronemu.nasm.read` parses it back, so an edited program can
be run. Views are written in the notation messages use for them (`t[0:64, :]`, `ap(...)`).
Each tensor is written under a name of its own: a tile a loop makes anew under one name in
every iteration (a block tensor's blocks, an explicit `name=`) is written `name.1`, `name.2`,
... in program order, as the tracer numbers a variable's tiles. Each on-chip tile is written
at the place the allocator gave it (`at(partition, offset)`: after spills, the planner's places
are not found again), and each instruction's dependencies that reading would not find again
as `after(@i, ...)`: a text program runs back with the same values and the same cycles.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import numpy as np

from neuronemu.checks.accesses import conflicts, record
from neuronemu.ir import IndirectView, PatternView, View

__all__ = ["dumps", "instruction", "text_names"]

_HEADER = (
    "; neuronemu program; run it (edited or not) with `neuronemu run FILE.nasm -i NAME=SPEC ...`"
)
# A name the text form reads back (nasm.lark's NAME), and the words it reads as values.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_RESERVED = {"True", "False", "None", "ap", "iap", "as", "at", "wait", "carry", "after"}


def text_names(tensors: list[Any]) -> dict[int, str]:
    """Tensor id -> the name the text form gives it: its own where that is free and
    readable, else the name with `.N` appended, the first N no tensor has (deterministic: in
    the order of `tensors`)."""
    taken = {t.name for t in tensors}
    out: dict[int, str] = {}
    used: set[str] = set()
    numbered: dict[str, int] = {}
    for t in tensors:
        name = t.name
        if not _NAME.match(name) or name in _RESERVED:
            name = re.sub(r"\W", "_", t.label, flags=re.ASCII) or "tmp"
            name = name if name[0].isalpha() or name[0] == "_" else "_" + name
            name = name + "_" if name in _RESERVED else name
        if name in used or (name != t.name and name in taken):
            n = numbered.get(name, 0)
            while True:
                n += 1
                if f"{name}.{n}" not in taken and f"{name}.{n}" not in used:
                    break
            numbered[name] = n
            name = f"{name}.{n}"
        used.add(name)
        out[t.id] = name
    return out


def dumps(program: Any) -> str:
    """The whole program: tensors, then each stream (instruction index, operands, semaphore
    waits, the other instructions it follows, kernel source line)."""
    lines = [
        _HEADER,
        f".kernel {program.kernel}",
        f".source {_quote(program.file)}",
        f".target {program.arch.name}",
        ".grid " + " ".join(map(str, program.grid)),
    ]
    declared = {t.id for t in program.tensors}
    # An input the kernel never reads is still one: `run` binds it by name.
    unused = [t for t in program.inputs.values() if t.id not in declared]
    tensors = unused + list(program.tensors)
    names = text_names(tensors)
    outputs = {t.id for t in program.outputs}
    placements = program.placements
    for t in tensors:
        if t.base is not None:
            lines.append(f".alias {names[t.id]} {names[t.base.id]} {t.dtype.name}")
            continue
        kind = t.kind if t.kind in ("input", "constant") else "tile"
        if t.id in outputs:  # (an older kernel's output argument: an input it writes)
            kind = "inout" if t.kind == "input" else "output"
        dims = ",".join(map(str, t.shape))
        data = (
            ""
            if t.data is None
            else ' "' + base64.b64encode(np.ascontiguousarray(t.data).tobytes()).decode() + '"'
        )
        at = "" if t.address is None else f" at({t.partition_offset or 0}, {t.address})"
        placed = placements.get(t.id)
        if placed is not None:  # where the allocator put it, spills and all
            at = f" at({placed.partition}, {placed.offset})"
        shown = "" if t.out_shape is None else " as[" + ",".join(map(str, t.out_shape)) + "]"
        lines.append(
            f".tensor {names[t.id]} {kind} {t.kind_of_buffer.name} "
            f"{t.dtype.name}[{dims}]{data}{at}{shown}"
        )
    for k, loop in enumerate(getattr(program, "loops", ())):
        args = {"var": loop.var, "lower": loop.lower, "upper": loop.upper, "step": loop.step}
        if loop.kind != "for":
            args = {"var": loop.var, "lower": loop.lower} if loop.kind == "while" else {}
        if loop.cond is not None:
            args["cond"] = loop.cond
        shown_args = "".join(f" {k}={_value(v, names)}" for k, v in args.items() if v is not None)
        lines.append(
            f".loop {k} {loop.kind} @{loop.begin} @{loop.end - 1}{shown_args}  ; {loop.span}"
        )
    instrs = program.instrs
    after = _after(instrs)
    for stream, own in program.streams().items():
        plural = "" if len(own) == 1 else "s"
        lines.append(f"\n{stream}:  ; {len(own)} instruction{plural}")
        for ins in own:
            waits = ""
            if ins.waits:
                waits = " wait(" + ", ".join(f"{instrs[w].stream}@{w}" for w in ins.waits) + ")"
            follows = ""
            if after[ins.index]:
                follows = " after(" + ", ".join(f"@{d}" for d in after[ins.index]) + ")"
            carry = ""
            if ins.carried:
                carry = " carry(" + ", ".join(f"@{c}" for c in ins.carried) + ")"
            text = instruction(ins, names)
            lines.append(f"  @{ins.index:<5} {text}{waits}{follows}{carry}  ; {ins.span}")
    return "\n".join(lines) + "\n"


def _after(instrs: list[Any]) -> list[tuple[int, ...]]:
    """Per instruction, the dependencies the text must state besides its waits: those that
    reading it back would not find again. Reading derives only the data dependencies within
    a stream (as the builder does: `neuronemu.checks.accesses`); the others (an earlier instruction
    of a stream it waits on later in, reuse of a dead tile's bytes on its own stream, SPMD
    instances in turn, explicit ones) are the program's too, and the schedule follows them."""
    history: dict[int, Any] = {}
    out: list[tuple[int, ...]] = []
    for ins in instrs:
        reads = [v.as_root() for _, v in ins.views("in")]
        writes = [v.as_root() for _, v in ins.views("out")]
        found = conflicts(history, reads, writes)
        record(history, reads, writes, ins.index)
        own = ins.stream
        derived = {d for d in found if instrs[d].stream == own}
        waits = set(ins.waits)
        out.append(tuple(d for d in ins.deps if d not in waits and d not in derived))
    return out


def instruction(ins: Any, names: dict[int, str] | None = None) -> str:
    """One instruction: its name, operands, and the attributes that differ from defaults
    (tensors under `names`, tensor id -> name, where given)."""
    parts = [ins.spec.name]
    for op in ins.spec.operands:
        v = ins.operands.get(op.name)
        if v is not None:
            parts.append(f"{op.name}={_value(v, names)}")
    for a in ins.spec.attrs:
        v = ins.attrs.get(a.name, a.default)
        if a.required or v != a.default:
            parts.append(f"{a.name}={_value(v, names)}")
    return " ".join(parts)


def _view(v: View, names: dict[int, str] | None) -> str:
    """A view as its repr writes it, its tensor under its text name."""
    t = v.tensor
    name = t.name if names is None else names.get(t.id, t.name)
    if isinstance(v, IndirectView):
        pattern = [list(p) for p in v.pattern]
        index = "None" if v.index is None else _view(v.index, names)
        return f"iap({name}, {pattern}, {v.offset}, {v.mode}, {index}, {v.unit}, {v.limit})"
    text = repr(v)
    if isinstance(v, PatternView):
        return f"ap({name}, " + text[len(f"ap({t.name}, ") :]
    return name + text[len(t.name) :]


def _value(v: Any, names: dict[int, str] | None = None) -> str:
    if isinstance(v, View):
        return _view(v, names)
    if isinstance(v, str):  # a bare word reads back as a name (op=add), quoted as a string
        return v if _NAME.match(v) and v not in _RESERVED else _quote(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_value(x, names) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x, names) for x in v) + "]"
    return repr(v) if isinstance(v, float) else str(v)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
