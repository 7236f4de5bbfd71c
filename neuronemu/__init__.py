"""neuronemu: an instruction-level, cycle-approximate emulator of the AWS NeuronCore."""

from neuronemu.api import DEFAULT_TARGET, compile_kernel, run, simulate
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
from neuronemu.program import Program
from neuronemu.report import Result

__version__ = "0.1.0"

__all__ = [
    "compile_kernel",
    "run",
    "simulate",
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
