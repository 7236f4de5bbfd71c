"""activation_reduce: dst = op(data * scale + bias); reduce_res[P, 1] = the row sums of dst.

Ref: nki.isa.activation_reduce (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.activation_reduce.html). Scalar engine, fp32; op/data/bias/scale as for
nisa.activation. The doc calls it activation with reduce_cmd=reset_reduce: the registers are
zeroed, then the row sums of the fp32 results (taken in order, before dst's cast) are read out
into reduce_res. reduce_op must be add. The registers keep the sum: a later
activation(reduce_cmd=reduce) adds to it.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions import activation as _activation
from neuronemu_isa.instructions._common import (
    REDUCE_REGS,
    activate,
    column_of,
    fold_free,
    streaming_cycles,
)
from neuronemu_isa.ops import ACTIVATIONS
from neuronemu_isa.spec import (
    ON_CHIP,
    REG,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    per_partition_or_scalar,
    same_free_size,
    same_partition_size,
)


def semantics(data, bias=None, scale=1.0, *, op, reduce_op="add"):
    out = activate(op, data, bias, scale)
    with np.errstate(all="ignore"):
        total = fold_free(np.add, out, np.float32(0.0))
    return {"dst": out, "reduce_res": total, "reduce_regs": total}


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N) + MIN_II Scalar cycles; the read-out is ActReadAccumulator.
    data = c.tile("data")
    return (
        streaming_cycles(c, data.free_size, data, c.tile("dst"))
        + c.arch.cost_act_reduce_readout_cycles
    )


SPEC = InstrSpec(
    name="activation_reduce",
    engines=(Engine.SCALAR,),
    operands=(
        Out("dst", *ON_CHIP),
        Out("reduce_res", *ON_CHIP),
        Out("reduce_regs", REG, dtypes=("float32",), optional=True, register=REDUCE_REGS),
        In("data", *ON_CHIP),
        In("bias", *ON_CHIP, optional=True, scalar=True),
        In("scale", *ON_CHIP, optional=True, scalar=True),
    ),
    attrs=(Attr("op", choices=tuple(ACTIVATIONS)), Attr("reduce_op", choices=("add",))),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        per_partition_or_scalar("bias", "data"),
        per_partition_or_scalar("scale", "data"),
        _activation._bias_immediate_needs_v3,
        column_of("reduce_res", "data"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "op", "data", "reduce_op", "reduce_res", "bias", "scale", "reduce_regs"),
)
