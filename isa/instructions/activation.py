"""activation: dst = op(data * scale + bias) on the Scalar engine, in fp32.

Ref: nki.isa.activation. `scale` is an fp32 immediate or a [P, 1] tile; `bias` a [P, 1] tile
(an immediate too on NC-v3+). The reduce form (reduce_op/reduce_res/reduce_cmd) is not
modelled yet and is rejected rather than ignored.
"""

from __future__ import annotations

import numpy as np

from isa._ops import ACTIVATIONS
from isa._spec import (ON_CHIP, Attr, Check, Engine, In, InstrSpec, Out,
                       per_partition_or_scalar, same_free_size, same_partition_size)
from isa.instructions._common import f32, rows, scalar_or_column, streaming_cycles


def semantics(data, bias=None, scale=1.0, *, op, **_reduce):
    x = rows(f32(data)) * scalar_or_column(scale)
    if bias is not None:
        x = x + scalar_or_column(bias)
    with np.errstate(all="ignore"):
        return ACTIVATIONS[op](x.astype(np.float32))


def cost(c: Check) -> int:
    # ISA-old: max(64, N); scale and bias are free (nki_perf_guide.rst).
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


def _bias_immediate_needs_v3(c: Check) -> str | None:
    bias = c.operands.get("bias")
    if bias is not None and c.tile("bias") is None and c.arch.nc_version < 3:
        return "bias must be a [P, 1] tile on NC-v2 (an immediate bias needs NC-v3+)"
    return None


def _reduce_not_modelled(c: Check) -> str | None:
    for name in ("reduce_op", "reduce_res"):
        if c.attrs.get(name) is not None or c.operands.get(name) is not None:
            return f"{name} (the reduce form of activation) is not supported yet"
    if c.attrs.get("reduce_cmd") not in (None, "idle"):
        return "reduce_cmd (the reduce form of activation) is not supported yet"
    return None


SPEC = InstrSpec(
    name="activation",
    engines=(Engine.SCALAR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("data", *ON_CHIP),
        In("bias", *ON_CHIP, optional=True, scalar=True),
        In("scale", *ON_CHIP, optional=True, scalar=True),
        In("reduce_res", *ON_CHIP, optional=True),
    ),
    attrs=(
        Attr("op", choices=tuple(ACTIVATIONS)),
        Attr("reduce_op", None),
        Attr("reduce_cmd", None),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        per_partition_or_scalar("bias", "data"),
        per_partition_or_scalar("scale", "data"),
        _bias_immediate_needs_v3,
        _reduce_not_modelled,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "op", "data", "bias", "scale", "reduce_op", "reduce_res", "reduce_cmd"),
)
