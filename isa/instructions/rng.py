"""rng: 32 random bits per element of dst, truncated to dst's integer type (low bits).

Ref: nki.isa.rng (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.rng.html). Vector engine (NC-v2), Vector or GpSimd (NC-v3+); dst in SBUF or PSUM
(SBUF only from GpSimd), int8/16/32 or uint8/16/32. The bits come from the engine's PRNG
state (see `_random`), seeded by set_rng_seed or rand_set_state.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import no_gpsimd_psum, streaming_cycles
from neuronemu_isa.instructions._random import RNG_STATE, draw
from neuronemu_isa.numerics import raw_bits
from neuronemu_isa.spec import ON_CHIP, REG, Check, Engine, InstrSpec, Out

INTEGERS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def semantics(rng_state, *, dst_shape):
    count = int(np.prod(dst_shape[1:])) if len(dst_shape) > 1 else 1
    bits, state = draw(rng_state, count, lanes=dst_shape[0])
    # nki.isa.rng: each value is truncated to dst's type, its least significant bits kept;
    # raw bits skip the fp32 trip (which would saturate) on the write.
    return {"dst": raw_bits(bits), "rng_state": state}


def cost(c: Check) -> int:
    # ISA-old gives no cost: one element per lane per cycle, inferred like other streams.
    dst = c.tile("dst")
    return streaming_cycles(c, dst.free_size, dst)


def _gpsimd_needs_v3(c: Check) -> str | None:
    if c.engine == Engine.GPSIMD and c.arch.nc_version < 3:
        return f"rng runs on GpSimd from NC-v3; target {c.arch.name} is NC-v{c.arch.nc_version}"
    return None


SPEC = InstrSpec(
    name="rng",
    engines=(Engine.VECTOR, Engine.GPSIMD),
    operands=(
        Out("dst", *ON_CHIP, dtypes=INTEGERS),
        Out("rng_state", REG, dtypes=("uint32",), register=RNG_STATE, reads_if=lambda attrs: True),
    ),
    constraints=(no_gpsimd_psum("dst"), _gpsimd_needs_v3),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "engine", "rng_state"),
)
