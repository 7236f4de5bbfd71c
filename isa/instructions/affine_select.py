"""affine_select: dst = on_true_tile where cmp_op(affine value, 0), else on_false_value (GpSimd).

Ref: nki.isa.affine_select (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.affine_select.html). The affine value is iota's: offset + p *
channel_multiplier + sum(i_k * step_k) over `pattern`. dst and on_true_tile in SBUF, same shape;
on_false_value is an fp32 immediate; a selected element of another dtype than dst goes through
fp32, one of dst's own dtype is written as it is ("Data types": int32 values past 2**24 stay).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    affine_pattern,
    pattern_checks,
    rows,
    streaming_cycles,
)
from neuronemu_isa.numerics import cast_to
from neuronemu_isa.ops import ALU_BINARY
from neuronemu_isa.spec import (
    SBUF,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    same_free_size,
    same_partition_size,
)

COMPARE_OPS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")


def semantics(
    on_true_tile,
    *,
    pattern,
    channel_multiplier,
    on_false_value,
    cmp_op="equal",
    offset=0,
    dst_dtype=None,
):
    x = rows(on_true_tile)
    affine = affine_pattern(pattern, offset, channel_multiplier, x.shape[0])
    keep = ALU_BINARY[cmp_op](affine, np.int32(0)) != 0
    on_false = np.float32(on_false_value)
    if dst_dtype is not None and np.dtype(dst_dtype) == x.dtype:
        # dst's own dtype: the kept elements' bits as they are, the immediate cast as a write
        return np.where(keep, x, cast_to(np.asarray(on_false), x.dtype))
    # float64 holds every input dtype and the fp32 immediate exactly; the write rounds once.
    return np.where(keep, x.astype(np.float64), np.float64(on_false))


def cost(c: Check) -> int:
    # ISA-old: GPSIMD_START + N.
    t = c.tile("on_true_tile")
    return streaming_cycles(c, t.free_size, t, c.tile("dst"))


def _on_false_is_number(c: Check) -> str | None:
    v = c.attrs.get("on_false_value")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"on_false_value {v!r} must be an fp32 number"
    return None


SPEC = InstrSpec(
    name="affine_select",
    engines=(Engine.GPSIMD,),
    operands=(Out("dst", SBUF), In("on_true_tile", SBUF)),
    attrs=(
        Attr("pattern"),
        Attr("channel_multiplier"),
        Attr("on_false_value"),
        Attr("cmp_op", "equal", COMPARE_OPS),
        Attr("offset", 0),
    ),
    constraints=(
        same_partition_size("dst", "on_true_tile"),
        same_free_size("dst", "on_true_tile"),
        pattern_checks("dst"),
        _on_false_is_number,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "pattern",
        "channel_multiplier",
        "on_true_tile",
        "on_false_value",
        "cmp_op",
        "offset",
    ),
)
