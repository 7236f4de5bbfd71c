"""set_rng_seed: seed the Vector engine's PRNG from one 32-bit value.

Ref: nki.isa.set_rng_seed (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.set_rng_seed.html): src_seeds is a [1, 1] 32-bit tensor in SBUF or PSUM; the
same seed gives the same sequence from nisa.rng. How the seed fills each lane's state is not
documented (inferred expansion in `_random.seeded_state`).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._random import RNG_STATE, seeded_state
from neuronemu_isa.spec import ON_CHIP, REG, Check, Engine, In, InstrSpec, Out


def semantics(src_seeds, *, rng_state_shape):
    seed = int(np.asarray(src_seeds).reshape(-1)[0].astype(np.int64)) & 0xFFFFFFFF
    return seeded_state(seed, rng_state_shape[0], rng_state_shape[1])


def cost(c: Check) -> int:
    return int(c.arch.cost_min_ii_cycles)  # inferred: one short instruction


def _one_value(c: Check) -> str | None:
    src = c.tile("src_seeds")
    if src.shape != (1, 1):
        return f"src_seeds has shape {list(src.shape)}; it must be [1, 1] (one 32-bit seed)"
    if src.itemsize != 4:
        return f"src_seeds is {src.dtype}; the seed must be a 32-bit value"
    return None


SPEC = InstrSpec(
    name="set_rng_seed",
    engines=(Engine.VECTOR,),
    operands=(
        In("src_seeds", *ON_CHIP),
        Out("rng_state", REG, dtypes=("uint32",), register=RNG_STATE),
    ),
    constraints=(_one_value,),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("src_seeds", "rng_state"),
)
