"""iota: dst[p, i...] = offset + p * channel_multiplier + sum(i_k * step_k), on the GpSimd engine.

Ref: nki.isa.iota (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.iota.html). `pattern` is up to four [step, num] pairs, outermost first, whose nums
multiply to dst's elements per partition; values are int32 and cast to dst's dtype on write.
"""

from __future__ import annotations

from neuronemu_isa._spec import SBUF, Attr, Check, Engine, InstrSpec, Out
from neuronemu_isa.instructions._common import affine_pattern, pattern_checks, streaming_cycles


def semantics(*, pattern, offset=0, channel_multiplier=0, dst_shape):
    return affine_pattern(pattern, offset, channel_multiplier, dst_shape[0])


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
)
