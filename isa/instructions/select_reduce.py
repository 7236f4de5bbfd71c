"""select_reduce: dst = on_true where predicate (nonzero) else on_false; reduce_res = row maximum.

Ref: nki.isa.select_reduce (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.select_reduce.html). Vector engine, fp32. on_false is an fp32 immediate or a
[P, 1] tile; `reverse_pred` selects on_true where the predicate is zero; on_true and predicate
not both in PSUM. reduce_res (a float [P, 1] tile) needs reduce_cmd=reset_reduce (the maximum
starts from -inf); `reduce` continues an accumulation from an earlier instruction and is not
supported.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    ANY_DTYPE,
    FLOAT_DTYPES,
    column_of,
    f32,
    fold_free,
    rows,
    scalar_or_column,
    stateless_reduce_cmd,
    streaming_cycles,
)
from neuronemu_isa.spec import (
    ON_CHIP,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    not_both_psum,
    per_partition_or_scalar,
    same_free_size,
    same_partition_size,
)

PREDICATE_DTYPES = ("int8", "uint8", "int16", "uint16")
ON_TRUE_DTYPES = ANY_DTYPE - {"int32", "uint32"}


def semantics(
    predicate, on_true, on_false, *, reduce_cmd="idle", reduce_op="maximum", reverse_pred=False
):
    take = (rows(predicate) != 0) != bool(reverse_pred)
    out = np.where(take, rows(f32(on_true)), scalar_or_column(on_false))
    return {"dst": out, "reduce_res": fold_free(np.maximum, out, np.float32(-np.inf))}


def cost(c: Check) -> int:
    # Undocumented; inferred like range_select: one pass, max(MIN_II, N).
    t = c.tile("on_true")
    return streaming_cycles(c, t.free_size, t, c.tile("predicate"), c.tile("dst"))


def _reduce_res_is_float(c: Check) -> str | None:
    t = c.tile_or_none("reduce_res")
    if t is not None and t.dtype not in FLOAT_DTYPES:
        return f"reduce_res is {t.dtype}; it must have a float dtype"
    return None


SPEC = InstrSpec(
    name="select_reduce",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP),
        Out("reduce_res", *ON_CHIP, optional=True),
        In("predicate", *ON_CHIP, dtypes=PREDICATE_DTYPES),
        In("on_true", *ON_CHIP, dtypes=ON_TRUE_DTYPES),
        In("on_false", *ON_CHIP, scalar=True),
    ),
    attrs=(
        Attr("reduce_cmd", "idle"),
        Attr("reduce_op", "maximum", ("maximum",)),
        Attr("reverse_pred", False, (False, True)),
    ),
    constraints=(
        same_partition_size("dst", "on_true", "predicate"),
        same_free_size("dst", "on_true", "predicate"),
        per_partition_or_scalar("on_false", "on_true"),
        column_of("reduce_res", "on_true"),
        _reduce_res_is_float,
        not_both_psum("on_true", "predicate"),
        stateless_reduce_cmd(("idle", "reset_reduce")),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "predicate",
        "on_true",
        "on_false",
        "reduce_res",
        "reduce_cmd",
        "reduce_op",
        "reverse_pred",
    ),
)
