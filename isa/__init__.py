"""The NeuronCore ISA as data: instruction specs, targets, dtypes. Needs only NumPy."""

from __future__ import annotations

import importlib
import pkgutil

from neuronemu_isa import instructions as _instructions
from neuronemu_isa._arch import TARGETS, Arch, load_arch
from neuronemu_isa.spec import Buffer, Engine, InstrSpec, OperandInfo

__all__ = [
    "REGISTRY",
    "InstrSpec",
    "Engine",
    "Buffer",
    "OperandInfo",
    "Arch",
    "load_arch",
    "TARGETS",
]


def _discover() -> dict[str, InstrSpec]:
    found: dict[str, InstrSpec] = {}
    for info in pkgutil.iter_modules(_instructions.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_instructions.__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, InstrSpec):
            raise ImportError(f"isa/instructions/{info.name}.py defines no InstrSpec SPEC")
        if spec.name != info.name:
            raise ImportError(f"isa/instructions/{info.name}.py declares {spec.name!r}")
        found[spec.name] = spec
    return found


REGISTRY: dict[str, InstrSpec] = _discover()
