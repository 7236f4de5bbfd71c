"""scalar_tensor_tensor: dst = (data <op0> operand0) <op1> operand1, in fp32, on the Vector engine.

Ref: nki.isa.scalar_tensor_tensor (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/
api/generated/nki.isa.scalar_tensor_tensor.html). operand0 is an immediate or a [P, 1] tile;
operand1 a tile shaped like data; data and operand1 not both in PSUM; arithmetic ops only;
`reverse0`/`reverse1` make operand0/operand1 the left-hand side.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    binary_step,
    f32,
    rows,
    scalar_or_column,
    streaming_cycles,
    tile_pair_with_scalar,
    two_arith_ops_attrs,
)
from neuronemu_isa.spec import ON_CHIP, Check, Engine, In, InstrSpec, Out


def semantics(data, operand0, operand1, *, op0, op1, reverse0=False, reverse1=False):
    with np.errstate(all="ignore"):
        t = binary_step(op0, rows(f32(data)), scalar_or_column(operand0), reverse0)
        return binary_step(op1, t, rows(f32(operand1)), reverse1)


def cost(c: Check) -> int:
    # ISA-old: N when data and operand1 are bf16, op0 subtract, op1 multiply and N even;
    # otherwise 2N.
    data, operand1 = c.tile("data"), c.tile("operand1")
    n = data.free_size
    fast = (
        data.dtype == operand1.dtype == "bfloat16"
        and n % 2 == 0
        and (c.attrs["op0"], c.attrs["op1"]) == ("subtract", "multiply")
    )
    return streaming_cycles(c, n if fast else 2 * n, data, operand1, c.tile("dst"))


SPEC = InstrSpec(
    name="scalar_tensor_tensor",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("data", *ON_CHIP),
        In("operand0", *ON_CHIP, scalar=True),
        In("operand1", *ON_CHIP),
    ),
    attrs=two_arith_ops_attrs(),
    constraints=tile_pair_with_scalar("data", "operand1", "operand0"),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "op0", "operand0", "op1", "operand1", "reverse0", "reverse1"),
)
