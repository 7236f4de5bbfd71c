"""exponential: dst = exp(src - max_value), optionally reduce_res = init + sum of dst, NC-v4+.

Ref: nki.isa.exponential (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.exponential.html). Vector engine, fp32 inside; max_value an fp32 immediate or
a [P, 1] tile. The sum runs over each partition's fp32 results in order (the doc's
`accumulator += dst[i]`, taken before dst's cast), from 0 (reset_reduce) or `reduce_init`
(load_reduce). `reduce_cmd=reduce` continues an accumulation kept from an earlier instruction
and is not supported; idle leaves no result to read out.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    ANY_DTYPE,
    column_of,
    cycles_at_rate,
    f32,
    fold_free,
    max_free_dims,
    needs_nc_version,
    rows,
    scalar_or_column,
    stateless_reduce_cmd,
)
from neuronemu_isa.numerics import FLOAT_DTYPES
from neuronemu_isa.spec import (
    ON_CHIP,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    OperandInfo,
    Out,
    per_partition_or_scalar,
    same_free_size,
    same_partition_size,
)

DST_DTYPES = ANY_DTYPE - {"uint32", "bool_", "float8_e4m3fn"}
SRC_DTYPES = ANY_DTYPE - {"tfloat32", "bool_", "float8_e4m3fn"}
REDUCE_RES_DTYPES = FLOAT_DTYPES - {"float8_e4m3fn"}


def semantics(src, max_value=0.0, reduce_init=0.0, *, reduce_cmd="idle"):
    with np.errstate(all="ignore"):
        out = np.exp(rows(f32(src)) - scalar_or_column(max_value))
        start = scalar_or_column(reduce_init if reduce_cmd == "load_reduce" else 0.0)
        total = fold_free(np.add, out, np.broadcast_to(start.reshape(-1), (out.shape[0],)))
    return {"dst": out, "reduce_res": total}


def cost(c: Check) -> int:
    # trainium3_arch.rst: exponential runs at `cost_exp_vector_speedup` times the throughput of
    # the Scalar engine's activation(exp); reading the sum out costs MIN_II more (inferred, as
    # for tensor_scalar_reduce).
    src = c.tile("src")
    rate = c.arch.cost_scalar_elems_per_cycle * c.arch.cost_exp_vector_speedup
    cycles = cycles_at_rate(c, src.free_size, rate)
    if c.tile_or_none("reduce_res") is not None:
        cycles += c.arch.cost_min_ii_cycles
    return cycles


def _reduce_init_only_with_load(c: Check) -> str | None:
    init = c.operands.get("reduce_init")
    if c.attrs.get("reduce_cmd") != "load_reduce" and init not in (None, 0.0):
        shown = f"a {list(init.shape)} tile" if isinstance(init, OperandInfo) else init
        return (
            f"reduce_init is {shown} but reduce_cmd is {c.attrs.get('reduce_cmd')}; it must "
            "be unset or 0.0 unless reduce_cmd is load_reduce"
        )
    return None


SPEC = InstrSpec(
    name="exponential",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP, dtypes=DST_DTYPES),
        Out("reduce_res", *ON_CHIP, dtypes=REDUCE_RES_DTYPES, optional=True),
        In("src", *ON_CHIP, dtypes=SRC_DTYPES),
        In("max_value", *ON_CHIP, dtypes=("float32",), optional=True, scalar=True),
        In("reduce_init", *ON_CHIP, dtypes=("float32",), optional=True, scalar=True),
    ),
    attrs=(Attr("reduce_cmd", "idle"),),
    constraints=(
        needs_nc_version(4, "exponential"),
        same_partition_size("dst", "src"),
        same_free_size("dst", "src"),
        max_free_dims("tile_exponential_free_dims_max", "dst", "src"),
        per_partition_or_scalar("max_value", "src"),
        per_partition_or_scalar("reduce_init", "src"),
        column_of("reduce_res", "src"),
        stateless_reduce_cmd(("idle", "reset_reduce", "load_reduce")),
        _reduce_init_only_with_load,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "max_value", "reduce_res", "reduce_cmd", "reduce_init"),
)
