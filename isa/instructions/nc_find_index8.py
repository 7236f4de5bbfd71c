"""nc_find_index8: dst[p, j] = the index of the first element of data[p] equal to vals[p, j].

Ref: nki.isa.nc_find_index8 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.nc_find_index8.html). data has 8..16,384 elements per partition (free axes
flattened), vals exactly 8; dst is [P, 8] uint16/uint32. A value missing from data gives the
all-ones sentinel (0xFFFF or 0xFFFFFFFF). Equal vals take successive matching positions in
ascending order (the nc_match_replace8 doc's account of this instruction's tie-break).
Values are compared as fp32 (inferred, as max8 documents).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    claim_matches,
    f32,
    fixed_width_result,
    rows,
    streaming_cycles,
    top8_checks,
)
from neuronemu_isa.spec import ON_CHIP, Check, Engine, In, InstrSpec, Out, same_partition_size

INDEX_DTYPES = ("uint16", "uint32")
NOT_FOUND = 0xFFFFFFFF  # the write saturates it to 0xFFFF for a uint16 dst


def semantics(data, vals):
    found = claim_matches(rows(f32(data)), rows(f32(vals)), range(8))
    return np.where(found < 0, NOT_FOUND, found)


def cost(c: Check) -> int:
    # ISA-old: N engine cycles, N = elements per partition of data.
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data)


SPEC = InstrSpec(
    name="nc_find_index8",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP, dtypes=INDEX_DTYPES),
        In("data", *ON_CHIP),
        In("vals", *ON_CHIP),
    ),
    constraints=(
        same_partition_size("dst", "data", "vals"),
        top8_checks("data", "dst", min_free=True, vals="vals"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "vals"),
    result=fixed_width_result(8, "uint32"),
)
