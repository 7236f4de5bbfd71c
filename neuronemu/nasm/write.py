"""Print a program in its text form: directives, tensors, then each engine's stream.

Programs and instructions are taken as they come (`neuronemu.program` uses this module, so
this one does not import it back).

`neuronemu asm` prints this; `neuronemu.nasm.read` parses it back, so an edited program can
be run. Views are written in the notation messages use for them (`t[0:64, :]`, `ap(...)`).
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from neuronemu.ir import View

__all__ = ["dumps", "instruction"]

_HEADER = (
    "; neuronemu program; run it (edited or not) with `neuronemu run FILE.nasm -i NAME=SPEC ...`"
)


def dumps(program: Any) -> str:
    """The whole program: tensors, then each stream (instruction index, operands, semaphore
    waits, kernel source line)."""
    lines = [
        _HEADER,
        f".kernel {program.kernel}",
        f".source {_quote(program.file)}",
        f".target {program.arch.name}",
        ".grid " + " ".join(map(str, program.grid)),
    ]
    outputs = {t.id for t in program.outputs}
    for t in program.tensors:
        if t.base is not None:
            lines.append(f".alias {t.name} {t.base.name} {t.dtype.name}")
            continue
        kind = (
            "output" if t.id in outputs else (t.kind if t.kind in ("input", "constant") else "tile")
        )
        dims = ",".join(map(str, t.shape))
        data = (
            ""
            if t.data is None
            else ' "' + base64.b64encode(np.ascontiguousarray(t.data).tobytes()).decode() + '"'
        )
        at = "" if t.address is None else f" at({t.partition_offset or 0}, {t.address})"
        shown = "" if t.out_shape is None else " as[" + ",".join(map(str, t.out_shape)) + "]"
        lines.append(
            f".tensor {t.name} {kind} {t.kind_of_buffer.name} "
            f"{t.dtype.name}[{dims}]{data}{at}{shown}"
        )
    for k, loop in enumerate(getattr(program, "loops", ())):
        args = {"var": loop.var, "lower": loop.lower, "upper": loop.upper, "step": loop.step}
        if loop.kind != "for":
            args = {"var": loop.var, "lower": loop.lower} if loop.kind == "while" else {}
        if loop.cond is not None:
            args["cond"] = loop.cond
        shown_args = "".join(f" {k}={_value(v)}" for k, v in args.items() if v is not None)
        lines.append(
            f".loop {k} {loop.kind} @{loop.begin} @{loop.end - 1}{shown_args}  ; {loop.span}"
        )
    for stream, instrs in program.streams().items():
        plural = "" if len(instrs) == 1 else "s"
        lines.append(f"\n{stream}:  ; {len(instrs)} instruction{plural}")
        for ins in instrs:
            waits = ""
            if ins.waits:
                waits = (
                    " wait(" + ", ".join(f"{program.instrs[w].stream}@{w}" for w in ins.waits) + ")"
                )
            carry = ""
            if ins.carried:
                carry = " carry(" + ", ".join(f"@{c}" for c in ins.carried) + ")"
            lines.append(f"  @{ins.index:<5} {instruction(ins)}{waits}{carry}  ; {ins.span}")
    return "\n".join(lines) + "\n"


def instruction(ins: Any) -> str:
    """One instruction: its name, operands, and the attributes that differ from defaults."""
    parts = [ins.spec.name]
    for op in ins.spec.operands:
        v = ins.operands.get(op.name)
        if v is not None:
            parts.append(f"{op.name}={_value(v)}")
    for a in ins.spec.attrs:
        v = ins.attrs.get(a.name, a.default)
        if a.required or v != a.default:
            parts.append(f"{a.name}={_value(v)}")
    return " ".join(parts)


def _value(v: Any) -> str:
    if isinstance(v, View):
        return repr(v)
    if isinstance(v, str):
        return v if v.isidentifier() else _quote(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return repr(v) if isinstance(v, float) else str(v)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
