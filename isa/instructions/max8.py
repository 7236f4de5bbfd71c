"""max8: dst[p, :8] = the 8 largest values of partition p of src, in descending order.

Ref: nki.isa.max8 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.max8.html). Values are compared as fp32; src has 8..16,384 elements per partition;
dst is [P, 8]. The engine is not named by the docs; it is modelled on the Vector engine like its
siblings nc_find_index8 and nc_match_replace8 (inferred).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    f32,
    fixed_width_result,
    rows,
    streaming_cycles,
    top8_checks,
)
from neuronemu_isa.spec import ON_CHIP, Check, Engine, In, InstrSpec, Out, same_partition_size


def semantics(src):
    x = rows(f32(src))
    return -np.sort(-x, axis=1, kind="stable")[:, :8]


def cost(c: Check) -> int:
    # ISA-old: N engine cycles (MIN_II floor as for every Vector instruction).
    src = c.tile("src")
    return streaming_cycles(c, src.free_size, src)


SPEC = InstrSpec(
    name="max8",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP), In("src", *ON_CHIP)),
    constraints=(same_partition_size("dst", "src"), top8_checks("src", "dst", min_free=True)),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src"),
    result=fixed_width_result(8, "float32"),
)
