"""Reference executor: run the instructions' semantics in program order (no cycles).

Program order respects every semaphore (dependencies only point backwards), so it is one
valid interleaving of the engine streams.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuronemu.program import Program
from neuronemu.sim.state import Memory
from neuronemu.trace.values import View

__all__ = ["execute"]


def execute(program: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run `program` on `inputs` (by input tensor name); return its outputs by name."""
    mem = Memory(program.tensors, inputs)
    for ins in program.instrs:
        spec = ins.spec
        args: dict[str, Any] = {}
        for op in spec.operands:
            v = ins.operands.get(op.name)
            if v is None:
                continue
            reads = op.role == "in" or (op.reads_if is not None and bool(ins.attrs[op.reads_if]))
            if reads:
                args[op.name] = mem.read(v) if isinstance(v, View) else v
        result = spec.semantics(**args, **ins.attrs)
        outs = spec.outputs
        if len(outs) == 1:
            result = {outs[0].name: result}
        for op in outs:
            mem.write(ins.operands[op.name], result[op.name])
    return {t.name: mem.array(t).copy() for t in program.outputs}
