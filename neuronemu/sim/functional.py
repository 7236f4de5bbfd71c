"""Reference executor: run the instructions' semantics in program order (no cycles).

Program order respects every semaphore (dependencies only point backwards), so it is one
valid interleaving of the engine streams.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from isa import InstrSpec
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
        wants = _shape_params(spec)
        for op in spec.operands:
            v = ins.operands.get(op.name)
            if v is None:
                continue
            reads = op.role == "in" or (op.reads_if is not None and bool(ins.attrs[op.reads_if]))
            if reads:
                args[op.name] = mem.read(v) if isinstance(v, View) else v
            if op.role == "out" and op.name in wants:
                args[f"{op.name}_shape"] = v.shape
        result = spec.semantics(**args, **ins.attrs)
        outs = spec.outputs
        if not isinstance(result, dict):
            result = {outs[0].name: result}
        for op in outs:
            view = ins.operands.get(op.name)
            if view is not None:
                mem.write(view, result[op.name])
    return {t.name: mem.array(t).copy() for t in program.outputs}


_SHAPE_PARAMS: dict[str, frozenset[str]] = {}


def _shape_params(spec: InstrSpec) -> frozenset[str]:
    """The outputs whose shape the semantics asks for (a `<name>_shape` parameter)."""
    found = _SHAPE_PARAMS.get(spec.name)
    if found is None:
        params = inspect.signature(spec.semantics).parameters
        found = frozenset(o.name for o in spec.outputs if f"{o.name}_shape" in params)
        _SHAPE_PARAMS[spec.name] = found
    return found
