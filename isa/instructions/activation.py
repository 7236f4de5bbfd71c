"""activation: dst = op(data * scale + bias) on the Scalar engine, in fp32, with an optional
per-lane sum of the result into the engine's reduce registers.

Ref: nki.isa.activation. `scale` is an fp32 immediate or a [P, 1] tile; `bias` a [P, 1] tile
(an immediate too on NC-v3+). The 128 fp32 `reduce_regs` (one per lane) persist between
instructions: `reduce_cmd` reset zeroes them, reduce adds the row sums of the result,
reset_reduce stores them, idle leaves them; `reduce_res` reads them out afterwards (one more
instruction, ~64 cycles). `reduce_op` must be add.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    REDUCE_REGS,
    f32,
    rows,
    scalar_or_column,
    streaming_cycles,
)
from neuronemu_isa.ops import ACTIVATION_RANGES, ACTIVATIONS
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


def semantics(
    data, bias=None, scale=1.0, reduce_regs=None, *, op, reduce_op=None, reduce_cmd="idle"
):
    x = rows(f32(data)) * scalar_or_column(scale)
    if bias is not None:
        x = x + scalar_or_column(bias)
    with np.errstate(all="ignore"):
        out = ACTIVATIONS[op](x.astype(np.float32))
        if reduce_regs is None and reduce_cmd == "idle":
            return out  # the plain form: no registers involved
        row_sums = out.sum(axis=1, dtype=np.float32, keepdims=True)
    regs = np.zeros((out.shape[0], 1), np.float32) if reduce_regs is None else f32(reduce_regs)
    if reduce_cmd in ("reset", "reset_reduce"):
        regs = np.zeros_like(regs)
    if reduce_cmd in ("reduce", "reset_reduce"):
        regs = regs + row_sums
    return {"dst": out, "reduce_regs": regs, "reduce_res": regs}


def diagnose(data, bias=None, scale=1.0, *, op, **_):
    """Inputs outside the documented valid range of `op` (nki.api.shared.rst, activation
    functions): the hardware's polynomial approximations are invalid there."""
    if op not in ACTIVATION_RANGES:
        return []
    lo, hi = ACTIVATION_RANGES[op]
    x = rows(f32(data)) * scalar_or_column(scale)
    if bias is not None:
        x = x + scalar_or_column(bias)
    outside = int(np.count_nonzero(~((x >= lo) & (x <= hi))))
    if not outside:
        return []
    return [
        f"activation {op}: {outside} of {x.size} inputs are outside its documented range "
        f"[{lo:.6g}, {hi:.6g}]; the hardware's results there are invalid"
    ]


def _reads_registers(attrs) -> bool:
    """The registers are read unless this instruction resets them first."""
    return attrs.get("reduce_cmd", "idle") not in ("reset", "reset_reduce")


def cost(c: Check) -> int:
    # ISA-old: max(64, N); scale, bias and the reduction are free (nki_perf_guide.rst); reading
    # the registers out to reduce_res is one more instruction (ActReadAccumulator ~64 cycles).
    data = c.tile("data")
    cycles = streaming_cycles(c, data.free_size, data, c.tile("dst"))
    if c.tile_or_none("reduce_res") is not None:
        cycles += c.arch.cost_act_reduce_readout_cycles
    return cycles


def _bias_immediate_needs_v3(c: Check) -> str | None:
    bias = c.operands.get("bias")
    if bias is not None and c.tile_or_none("bias") is None and c.arch.nc_version < 3:
        return "bias must be a [P, 1] tile on NC-v2 (an immediate bias needs NC-v3+)"
    return None


def _reduce_form(c: Check) -> str | None:
    if c.attrs.get("reduce_op") not in (None, "add"):
        return f"reduce_op {c.attrs['reduce_op']!r} is not supported; it must be nl.add"
    cmd = c.attrs.get("reduce_cmd", "idle")
    if cmd not in REDUCE_CMDS:
        return f"reduce_cmd {cmd!r} must be one of {', '.join(REDUCE_CMDS)}"
    res, data = c.tile_or_none("reduce_res"), c.tile("data")
    if res is not None and (res.partition_size != data.partition_size or res.free_size != 1):
        return (
            f"reduce_res has shape {list(res.shape)}; it must be "
            f"[{data.partition_size}, 1] (one value per partition of data)"
        )
    return None


REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce")


SPEC = InstrSpec(
    name="activation",
    engines=(Engine.SCALAR,),
    operands=(
        Out("dst", *ON_CHIP),
        In("data", *ON_CHIP),
        In("bias", *ON_CHIP, optional=True, scalar=True),
        In("scale", *ON_CHIP, optional=True, scalar=True),
        Out("reduce_res", *ON_CHIP, optional=True),
        Out(
            "reduce_regs",
            REG,
            dtypes=("float32",),
            optional=True,
            register=REDUCE_REGS,
            reads_if=_reads_registers,
        ),
    ),
    attrs=(
        Attr("op", choices=tuple(ACTIVATIONS)),
        Attr("reduce_op", None),
        Attr("reduce_cmd", "idle"),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        per_partition_or_scalar("bias", "data"),
        per_partition_or_scalar("scale", "data"),
        _bias_immediate_needs_v3,
        _reduce_form,
    ),
    semantics=semantics,
    cost=cost,
    diagnose=diagnose,
    doc=__doc__,
    # reduce_regs last: kernels never pass it, the tracer binds the engine's registers.
    positional=(
        "dst",
        "op",
        "data",
        "bias",
        "scale",
        "reduce_op",
        "reduce_res",
        "reduce_cmd",
        "reduce_regs",
    ),
)
