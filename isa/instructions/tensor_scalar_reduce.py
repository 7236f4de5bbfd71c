"""tensor_scalar_reduce: dst = data <op0> operand0, reduce_res = reduce_op over its free axes.

Ref: nki.isa.tensor_scalar_reduce (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/
api/generated/nki.isa.tensor_scalar_reduce.html). Vector engine, fp32. One arithmetic op0
(a unary op ignores operand0); reduce_op add/multiply/maximum/minimum over the fp32 results,
starting from the op's identity (reset_reduce) or `reduce_init` (load_reduce); the result may be
negated on its way to reduce_res. `reduce_cmd=reduce` continues an accumulation kept from an
earlier instruction and is not supported; `reverse0` is documented as "not supported yet".
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    ARITH_BINARY,
    binary_step,
    column_of,
    f32,
    fold_free,
    rows,
    scalar_or_column,
    stateless_reduce_cmd,
    streaming_cycles,
)
from neuronemu_isa.ops import ALU_BINARY, ALU_UNARY
from neuronemu_isa.spec import (
    ON_CHIP,
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

ARITH_UNARY = ("abs", "square", "relu", "rsqrt", "reciprocal")
REDUCE_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def semantics(
    data,
    operand0=None,
    reduce_init=None,
    *,
    op0,
    reduce_op,
    reverse0=False,
    reduce_cmd="reset_reduce",
    reduce_res_negate=False,
):
    x = rows(f32(data))
    with np.errstate(all="ignore"):
        if op0 in ALU_UNARY:
            out = ALU_UNARY[op0](x)
        else:
            out = binary_step(op0, x, scalar_or_column(operand0), reverse0)
        init: np.ndarray | np.floating
        if reduce_cmd == "load_reduce":
            init = scalar_or_column(reduce_init).reshape(-1)
        else:
            init = np.float32(REDUCE_IDENTITY[reduce_op])
        total = fold_free(ALU_BINARY[reduce_op], out, init)
    return {"dst": out, "reduce_res": -total if reduce_res_negate else total}


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N) + MIN_II (the reduction read-out).
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst")) + c.arch.cost_min_ii_cycles


def _operands_fit_op0(c: Check) -> str | None:
    op0 = c.attrs["op0"]
    operand0 = c.operands.get("operand0")
    if op0 in ARITH_BINARY and operand0 is None:
        return f"op0 {op0!r} is binary; operand0 is required"
    if op0 in ARITH_UNARY and operand0 not in (None, 0.0):
        return f"op0 {op0!r} is unary; operand0 must be None or 0"
    if c.attrs.get("reverse0"):
        return "reverse0=True is documented as not supported yet"
    return None


def _reduce_init_with_load(c: Check) -> str | None:
    given = c.operands.get("reduce_init") is not None
    load = c.attrs.get("reduce_cmd") == "load_reduce"
    if given != load:
        return "reduce_init must be given exactly when reduce_cmd is load_reduce"
    return None


SPEC = InstrSpec(
    name="tensor_scalar_reduce",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        Out("reduce_res", *ON_CHIP, optional=True),
        In("data", *ON_CHIP),
        In("operand0", *ON_CHIP, optional=True, scalar=True),
        In("reduce_init", *ON_CHIP, optional=True, scalar=True),
    ),
    attrs=(
        Attr("op0", choices=ARITH_BINARY + ARITH_UNARY),
        Attr("reduce_op", choices=tuple(REDUCE_IDENTITY)),
        Attr("reverse0", False, (False, True)),
        Attr("reduce_cmd", "reset_reduce"),
        Attr("reduce_res_negate", False, (False, True)),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        per_partition_or_scalar("operand0", "data"),
        column_of("reduce_res", "data"),
        per_partition_or_scalar("reduce_init", "data"),
        _operands_fit_op0,
        stateless_reduce_cmd(("reset_reduce", "load_reduce")),
        _reduce_init_with_load,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "data",
        "op0",
        "operand0",
        "reduce_op",
        "reduce_res",
        "reverse0",
        "reduce_cmd",
        "reduce_init",
        "reduce_res_negate",
    ),
)
