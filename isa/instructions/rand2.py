"""rand2: uniform pseudo-random values in [min, max] from the Vector engine's XORWOW PRNG.

Ref: nki.isa.rand2 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.rand2.html): NC-v4+, Vector engine; fp32 values (any float or integer dst, cast on
write); min and max are fp32 scalars or [P, 1] vectors, min < max. The fp32 conversion of the
random bits is not documented (inferred in `_random.uniform`).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import needs_nc_version, scalar_or_column
from neuronemu_isa.instructions._random import RNG_STATE, draw, uniform
from neuronemu_isa.spec import (
    ON_CHIP,
    REG,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    per_partition_or_scalar,
)


def semantics(rng_state, min=0.0, max=1.0, *, dst_shape):  # noqa: A002 - nki.isa's names
    count = int(np.prod(dst_shape[1:])) if len(dst_shape) > 1 else 1
    bits, state = draw(rng_state, count, lanes=dst_shape[0])
    return {"dst": uniform(bits, scalar_or_column(min), scalar_or_column(max)), "rng_state": state}


def cost(c: Check) -> int:
    # nki.isa.rand2 (v4): 4 x 32-bit values per lane per cycle.
    dst = c.tile("dst")
    return int(max(c.arch.cost_min_ii_cycles, -(-dst.free_size // 4)))


def _ordered(c: Check) -> str | None:
    lo, hi = c.operands.get("min"), c.operands.get("max")
    if isinstance(lo, float) and isinstance(hi, float) and not lo < hi:
        return f"min {lo} must be below max {hi}"
    return None


SPEC = InstrSpec(
    name="rand2",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("min", *ON_CHIP, scalar=True),
        In("max", *ON_CHIP, scalar=True),
        Out("rng_state", REG, dtypes=("uint32",), register=RNG_STATE, reads_if=lambda attrs: True),
    ),
    constraints=(
        needs_nc_version(4, "rand2"),
        per_partition_or_scalar("min", "dst"),
        per_partition_or_scalar("max", "dst"),
        _ordered,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "min", "max", "rng_state"),
)
