"""reciprocal: dst = 1 / data, elementwise in fp32, on the Vector engine.

Ref: nki.isa.reciprocal (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.reciprocal.html). data and dst in SBUF or PSUM, same partitions and elements
per partition. Modelled as an IEEE fp32 divide (the docs: "in float32 math"; more precise than
the Scalar engine's activation(reciprocal) approximation).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import f32, rows, streaming_cycles
from neuronemu_isa.spec import (
    ON_CHIP,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    same_free_size,
    same_partition_size,
)


def semantics(data):
    with np.errstate(divide="ignore"):
        return np.float32(1.0) / rows(f32(data))


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, 8N).
    data = c.tile("data")
    n = c.arch.cost_reciprocal_cycles_per_elem * data.free_size
    return streaming_cycles(c, n, data, c.tile("dst"))


SPEC = InstrSpec(
    name="reciprocal",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP), In("data", *ON_CHIP)),
    constraints=(same_partition_size("dst", "data"), same_free_size("dst", "data")),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data"),
)
