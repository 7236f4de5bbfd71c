"""Program instructions that are not nki.isa instructions: `nl.device_print`.

They are declared like ISA specs, so that verification, dependencies, timing and the text
form treat them alike; the executor gives them their effect.
"""

from __future__ import annotations

import math

from neuronemu.program.control import SPECS as CONTROL_SPECS
from neuronemu_isa import REGISTRY
from neuronemu_isa.spec import HBM, PSUM, SBUF, Attr, Check, Engine, In, InstrSpec

__all__ = ["DEVICE_PRINT", "SPECS"]


def _no_values(src, **_):
    return {}  # nothing is written: the executor prints `src`


def _print_cost(c: Check) -> int:
    # Inferred: the values travel to the host like a DMA from one queue.
    src = c.tile("src")
    return int(math.ceil(src.nbytes / c.arch.dma_bytes_per_ns_per_engine))


DEVICE_PRINT = InstrSpec(
    name="device_print",
    engines=(Engine.DMA,),
    operands=(In("src", SBUF, PSUM, HBM),),
    attrs=(Attr("prefix", ""),),
    semantics=_no_values,
    cost=_print_cost,
    doc="nl.device_print(prefix, x): print a tensor's values when the kernel runs.",
    positional=("prefix", "src"),
)

# Every instruction a program may contain, by name.
SPECS = {**REGISTRY, DEVICE_PRINT.name: DEVICE_PRINT, **CONTROL_SPECS}
