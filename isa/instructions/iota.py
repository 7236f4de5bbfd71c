"""iota: dst[p, i...] = offset + p * channel_multiplier + sum(i_k * step_k), on the GpSimd engine.

Ref: nki.isa.iota (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.iota.html). `pattern` is up to four [step, num] pairs, outermost first, whose nums
multiply to dst's elements per partition; values are computed in 32-bit integer arithmetic
and GpSimd casts them to dst's dtype: an integer dst gets the value itself (out of range:
EXACT_INT_OVERFLOW), not an fp32 rounding of it (inferred: the doc says only "can cast these
integer results to any valid NKI data type"); a float dst gets it via fp32, RNE.
The older neuronxcc.nki form returns a new SBUF tile of `dtype`: `t = nisa.iota(expr, dtype)`,
`expr` an affine expression of nl.arange indices (nki.isa.iota at Neuron 2.26).
"""

from __future__ import annotations

from neuronemu_isa.instructions._common import affine_pattern, pattern_checks, streaming_cycles
from neuronemu_isa.numerics import exact_ints
from neuronemu_isa.spec import SBUF, Attr, Check, Engine, InstrSpec, Out


def semantics(*, pattern, offset=0, channel_multiplier=0, dst_shape):
    return exact_ints(affine_pattern(pattern, offset, channel_multiplier, dst_shape[0]))


def cost(c: Check) -> int:
    # ISA-old: 150 + N GpSimd cycles (start-up plus one element per cycle).
    dst = c.tile("dst")
    return streaming_cycles(c, dst.free_size, dst)


SPEC = InstrSpec(
    name="iota",
    engines=(Engine.GPSIMD,),
    operands=(Out("dst", SBUF),),
    attrs=(Attr("pattern"), Attr("offset", 0), Attr("channel_multiplier", 0)),
    constraints=(pattern_checks("dst"),),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "pattern", "offset", "channel_multiplier"),
    older_params=(("expr", "pattern"), ("dtype", "dtype")),
)
