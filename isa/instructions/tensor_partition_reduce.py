"""tensor_partition_reduce: dst[1, F...] = op-reduction of data[P, F...] across its partitions.

Ref: nki.isa.tensor_partition_reduce (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
nki/api/generated/nki.isa.tensor_partition_reduce.html). GpSimd engine, SBUF only. The op names
changed between doc versions ("average" in 2.32, "mean" and bitwise_xor in 2.33); both spellings
are accepted and mean sum / P. Arithmetic runs in fp32 partition by partition from partition 0
(order inferred); bitvec ops combine the raw integer bits. dst has one partition (the doc's
example: (128, 32, 4) -> (1, 32, 4)) and data's elements per partition.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    bitvec_checks,
    f32,
    fold_free,
    max_free_dims,
    rows,
    streaming_cycles,
)
from neuronemu_isa.ops import ALU_BINARY, BITVEC_OPS
from neuronemu_isa.spec import (
    SBUF,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    Result,
    same_free_size,
)

PARTITION_REDUCE_OPS = (
    "add",
    "maximum",
    "average",
    "mean",
    "bitwise_or",
    "bitwise_and",
    "bitwise_xor",
)
_MEAN = ("average", "mean")


def semantics(data, *, op):
    x = rows(data).T  # [F, P]: fold_free walks the partitions of each element in order
    if op in BITVEC_OPS:
        return fold_free(ALU_BINARY[op], x).reshape(1, -1)
    with np.errstate(all="ignore"):
        total = fold_free(ALU_BINARY["add" if op in _MEAN else op], f32(x))
        if op in _MEAN:
            total = total / np.float32(x.shape[1])
    return total.reshape(1, -1)


def cost(c: Check) -> int:
    # Undocumented (ISA-old gives none). Inferred: each of `cost_partition_reduce_passes`
    # passes (within each GpSimd core's 16 partitions, then across cores) streams the
    # elements per partition once, after the GpSimd start-up.
    data = c.tile("data")
    passes = int(c.arch.cost_partition_reduce_passes)
    return streaming_cycles(c, passes * data.free_size, data, c.tile("dst"))


def _dst_is_one_partition(c: Check) -> str | None:
    dst = c.tile("dst")
    if dst.partition_size != 1:
        return f"dst has {dst.partition_size} partitions; the reduction across partitions leaves 1"
    return None


def result(c: Check) -> Result:
    """One partition: the reduction across partitions."""
    data = c.tile("data")
    return (1, *data.shape[1:]), data.dtype, SBUF


SPEC = InstrSpec(
    name="tensor_partition_reduce",
    engines=(Engine.GPSIMD,),
    operands=(Out("dst", SBUF), In("data", SBUF)),
    attrs=(Attr("op", choices=PARTITION_REDUCE_OPS),),
    constraints=(
        _dst_is_one_partition,
        same_free_size("dst", "data"),
        max_free_dims("tile_partition_reduce_free_dims_max", "dst", "data"),
        bitvec_checks(("op",), ("data", "dst"), vector_only=False),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "op", "data"),
    result=result,
)
