"""neuronemu: an instruction-level, cycle-approximate emulator of the AWS NeuronCore.

The error classes and `Limits` load with the package; the rest (the tracer, the machine, the
reports) when first named, so that `import neuronemu` stays cheap for tools that only need
part of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from neuronemu.errors import (
    AllocationError,
    BudgetError,
    ConstraintError,
    InternalError,
    KernelSyntaxError,
    KernelTypeError,
    MemoryAccessError,
    MismatchError,
    NeuronEmuError,
    RaceError,
    SourceSpan,
    UsageError,
)
from neuronemu.limits import Limits

if TYPE_CHECKING:
    from neuronemu.api import DEFAULT_TARGET, compile_kernel, run, simulate
    from neuronemu.nasm.write import dumps
    from neuronemu.program import Program
    from neuronemu.report import Result
    from neuronemu.sweeps import sweep

__version__ = "0.1.0"

__all__ = [
    "compile_kernel",
    "run",
    "simulate",
    "sweep",
    "dumps",
    "DEFAULT_TARGET",
    "Limits",
    "Program",
    "Result",
    "SourceSpan",
    "NeuronEmuError",
    "KernelSyntaxError",
    "KernelTypeError",
    "ConstraintError",
    "AllocationError",
    "MemoryAccessError",
    "RaceError",
    "MismatchError",
    "UsageError",
    "BudgetError",
    "InternalError",
]

# The public names that live in modules loaded on first use.
_LAZY = {
    "compile_kernel": "neuronemu.api",
    "run": "neuronemu.api",
    "simulate": "neuronemu.api",
    "DEFAULT_TARGET": "neuronemu.api",
    "Program": "neuronemu.program",
    "Result": "neuronemu.report",
    "sweep": "neuronemu.sweeps",
    "dumps": "neuronemu.nasm.write",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronemu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
