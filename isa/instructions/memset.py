"""memset: fill dst with a compile-time constant. Ref: nki.isa.memset (Vector or GpSimd).

The older neuronxcc.nki form returns a new SBUF tile: `t = nisa.memset(shape, value, dtype)`
(nki.isa.memset at Neuron 2.26: "memset ignores nl.par_dim() and always treats the first
dimension as the partition dimension").
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import no_gpsimd_psum, streaming_cycles
from neuronemu_isa.spec import ON_CHIP, Attr, Check, Engine, InstrSpec, Out


def semantics(*, value):
    # One value; the write broadcasts it over dst and casts it to dst's dtype.
    return np.asarray(value)


def cost(c: Check) -> int:
    # ISA-old: max(64, N/2) when zeroing a 16-bit tile, else max(64, N).
    dst = c.tile("dst")
    n = dst.free_size
    if c.attrs["value"] == 0 and dst.itemsize == 2 and c.engine == Engine.VECTOR:
        n = (n + 1) // 2
    return streaming_cycles(c, n, dst)


def _value_is_number(c: Check) -> str | None:
    v = c.attrs["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"value must be a compile-time int or float, got {type(v).__name__}"
    return None


SPEC = InstrSpec(
    name="memset",
    engines=(Engine.VECTOR, Engine.GPSIMD),
    operands=(Out("dst", *ON_CHIP),),
    attrs=(Attr("value"),),
    constraints=(_value_is_number, no_gpsimd_psum("dst")),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    packed="zero",
    positional=("dst", "value", "engine"),
    older_params=(("shape", "shape"), ("value", "value"), ("dtype", "dtype")),
)
