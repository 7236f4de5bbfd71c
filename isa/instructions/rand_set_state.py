"""rand_set_state: load each lane's XORWOW state from a uint32 tile (one row per lane).

Ref: nki.isa.rand_set_state (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.rand_set_state.html): NC-v3+; GpSimd (NC-v3), GpSimd or Vector (NC-v4+);
src_seeds uint32 with 6 elements per partition for GpSimd, 24 for Vector; SBUF only from
GpSimd. The state persists in the engine for later rand2/rng/dropout.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import needs_nc_version, no_gpsimd_psum
from neuronemu_isa.instructions._random import RNG_STATE, STATE_WORDS
from neuronemu_isa.spec import ON_CHIP, REG, Check, Engine, In, InstrSpec, Out


def semantics(src_seeds, *, rng_state_shape):
    seeds = np.asarray(src_seeds, dtype=np.uint32).reshape(src_seeds.shape[0], -1)
    state = np.ones(rng_state_shape, np.uint32)  # lanes not seeded keep a valid state
    state[: seeds.shape[0]] = seeds
    return state


def cost(c: Check) -> int:
    return int(c.arch.cost_min_ii_cycles)  # inferred: one short instruction


def _state_size(c: Check) -> str | None:
    src = c.tile("src_seeds")
    words = STATE_WORDS[c.engine.value]
    if src.dtype != "uint32" or src.free_size != words:
        return (
            f"src_seeds is {src.dtype}{list(src.shape)}; XORWOW on {c.engine.value} "
            f"takes uint32 with {words} elements per partition"
        )
    return None


def _vector_needs_v4(c: Check) -> str | None:
    if c.engine == Engine.VECTOR and c.arch.nc_version < 4:
        return (
            f"rand_set_state runs on the Vector engine from NC-v4; target {c.arch.name} "
            f"is NC-v{c.arch.nc_version} (use engine=gpsimd)"
        )
    return None


SPEC = InstrSpec(
    name="rand_set_state",
    engines=(Engine.GPSIMD, Engine.VECTOR),
    operands=(
        In("src_seeds", *ON_CHIP),
        Out("rng_state", REG, dtypes=("uint32",), register=RNG_STATE),
    ),
    constraints=(
        needs_nc_version(3, "rand_set_state"),
        _vector_needs_v4,
        _state_size,
        no_gpsimd_psum("src_seeds"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("src_seeds", "engine", "rng_state"),
)
