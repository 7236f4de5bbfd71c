"""range_select: keep on_true_tile where its free index + range_start lies within two bounds,
else FP32_MIN; reduce_res = the per-partition maximum. Vector engine, NC-v3+.

Ref: nki.isa.range_select (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.range_select.html). index = range_start + position in the flattened free axes,
compared in fp32 as comp_op0(index, bound0) and comp_op1(index, bound1); bound0/bound1 are fp32
[P, 1] tiles; on_false_value must be FP32_MIN; reduce_op only maximum. The reduction of
`reset_reduce` starts from -inf; continuing one (`reduce`, `load_reduce`) is not supported.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    F32,
    FLOAT_DTYPES,
    column_of,
    f32,
    fold_free,
    needs_nc_version,
    rows,
    stateless_reduce_cmd,
    streaming_cycles,
)
from neuronemu_isa.ops import ALU_BINARY
from neuronemu_isa.spec import (
    ON_CHIP,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    same_free_size,
    same_partition_size,
)

RANGE_OPS = ("equal", "less", "less_equal", "greater", "greater_equal")
FP32_MIN = float(np.finfo(np.float32).min)


def semantics(
    on_true_tile,
    bound0,
    bound1,
    *,
    comp_op0,
    comp_op1,
    reduce_cmd="reset_reduce",
    reduce_op="maximum",
    range_start=0,
    on_false_value=FP32_MIN,
):
    x = rows(f32(on_true_tile))
    index = (np.float32(range_start) + np.arange(x.shape[1], dtype=np.float32))[None, :]
    keep = (ALU_BINARY[comp_op0](index, rows(f32(bound0))) != 0) & (
        ALU_BINARY[comp_op1](index, rows(f32(bound1))) != 0
    )
    out = np.where(keep, x, np.float32(on_false_value))
    return {"dst": out, "reduce_res": fold_free(np.maximum, out, np.float32(-np.inf))}


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N).
    t = c.tile("on_true_tile")
    return streaming_cycles(c, t.free_size, t, c.tile("dst"))


def _immediates(c: Check) -> str | None:
    if c.attrs.get("on_false_value") != FP32_MIN:
        return (
            f"on_false_value {c.attrs.get('on_false_value')!r} must be FP32_MIN "
            f"({FP32_MIN!r}), a hardware constraint"
        )
    start = c.attrs.get("range_start")
    if isinstance(start, bool) or not isinstance(start, int):
        return f"range_start {start!r} must be a compile-time integer"
    t, limit = c.tile("on_true_tile"), c.arch.tile_fp32_exact_int_max
    if abs(start) + t.free_size > limit:
        return (
            f"range_start {start} + {t.free_size} free indices leave the exact fp32 integer "
            f"range {limit} (tile_fp32_exact_int_max)"
        )
    return None


SPEC = InstrSpec(
    name="range_select",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        Out("reduce_res", *ON_CHIP, optional=True),
        In("on_true_tile", *ON_CHIP, dtypes=FLOAT_DTYPES),
        In("bound0", *ON_CHIP, dtypes=F32),
        In("bound1", *ON_CHIP, dtypes=F32),
    ),
    attrs=(
        Attr("comp_op0", choices=RANGE_OPS),
        Attr("comp_op1", choices=RANGE_OPS),
        Attr("reduce_cmd", "reset_reduce"),
        Attr("reduce_op", "maximum", ("maximum",)),
        Attr("range_start", 0),
        Attr("on_false_value", FP32_MIN),
    ),
    constraints=(
        needs_nc_version(3, "range_select"),
        same_partition_size("dst", "on_true_tile"),
        same_free_size("dst", "on_true_tile"),
        column_of("bound0", "on_true_tile"),
        column_of("bound1", "on_true_tile"),
        column_of("reduce_res", "on_true_tile"),
        stateless_reduce_cmd(("reset_reduce", "idle")),
        _immediates,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "on_true_tile",
        "comp_op0",
        "comp_op1",
        "bound0",
        "bound1",
        "reduce_cmd",
        "reduce_res",
        "reduce_op",
        "range_start",
        "on_false_value",
    ),
)
