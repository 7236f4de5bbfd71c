"""tensor_tensor_scan: r[i] = (data0[i] <op0> r[i-1]) <op1> data1[i], r[-1] = initial, in fp32.

Ref: nki.isa.tensor_tensor_scan (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/
api/generated/nki.isa.tensor_tensor_scan.html). Vector engine, per partition over the flattened
free axes; `initial` an fp32 immediate or a [P, 1] tile; data0 and data1 not both in PSUM;
`reverse0` makes data0 the right-hand side of op0, `reverse1` makes data1 the left of op1.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    binary_step,
    f32,
    rows,
    streaming_cycles,
    tile_pair_with_scalar,
    two_arith_ops_attrs,
)
from neuronemu_isa.spec import ON_CHIP, Check, Engine, In, InstrSpec, Out


def semantics(data0, data1, initial, *, op0, op1, reverse0=False, reverse1=False):
    d0, d1 = rows(f32(data0)), rows(f32(data1))
    out = np.empty_like(d0)
    prev = np.broadcast_to(f32(initial).reshape(-1), (d0.shape[0],))
    with np.errstate(all="ignore"):
        for i in range(d0.shape[1]):
            # data0 is op0's lhs unless reversed: binary_step puts its operand on the right.
            t = binary_step(op0, d0[:, i], prev, reverse0)
            prev = out[:, i] = binary_step(op1, t, d1[:, i], reverse1)
    return out


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, 2N).
    d0, d1 = c.tile("data0"), c.tile("data1")
    return streaming_cycles(c, 2 * d0.free_size, d0, d1, c.tile("dst"))


SPEC = InstrSpec(
    name="tensor_tensor_scan",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("data0", *ON_CHIP),
        In("data1", *ON_CHIP),
        In("initial", *ON_CHIP, scalar=True),
    ),
    attrs=two_arith_ops_attrs(),
    constraints=tile_pair_with_scalar("data0", "data1", "initial"),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data0", "data1", "initial", "op0", "op1", "reverse0", "reverse1"),
)
