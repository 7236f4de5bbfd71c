"""dropout: dst = data with each element replaced by zero with probability prob.

Ref: nki.isa.dropout (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.dropout.html): Vector engine; prob an fp32 scalar or a [P, 1] tile (one
probability per partition); prob 1.0 drops everything, 0.0 keeps everything; dst.dtype equals
data.dtype. Kept elements are not rescaled. The random draw uses the Vector engine's PRNG state
(inferred: one uniform value per element, dropped when below prob).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import rows, same_dtype, scalar_or_column, streaming_cycles
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
    same_free_size,
    same_partition_size,
)


def semantics(data, prob, rng_state):
    x = rows(data)
    bits, state = draw(rng_state, x.shape[1], lanes=x.shape[0])
    drop = uniform(bits, 0.0, 1.0) < scalar_or_column(prob)
    return {"dst": np.where(drop, np.zeros((), x.dtype), x), "rng_state": state}


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N).
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


SPEC = InstrSpec(
    name="dropout",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("data", *ON_CHIP),
        In("prob", *ON_CHIP, scalar=True),
        Out("rng_state", REG, dtypes=("uint32",), register=RNG_STATE, reads_if=lambda attrs: True),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        same_dtype("dst", "data"),
        per_partition_or_scalar("prob", "data"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "prob", "rng_state"),
)
