"""bn_aggr: per partition, the mean and variance of the inputs of one or more bn_stats outputs.

Ref: nki.isa.bn_aggr (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.isa.bn_aggr.html). Vector engine, fp32. data is a run of (count, mean, variance * count)
triples per partition (a multiple of 3 elements); dst gets mean = sum(c * m) / n and the
population variance (sum(v * c) + sum(c * (m - mean)^2)) / n, with n = sum(c).
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import f32, fixed_width_result, rows, streaming_cycles
from neuronemu_isa.spec import ON_CHIP, Check, Engine, In, InstrSpec, Out, same_partition_size


def semantics(data):
    x = rows(f32(data))
    triples = x.reshape(x.shape[0], -1, 3)
    count, mean, m2 = triples[..., 0], triples[..., 1], triples[..., 2]
    with np.errstate(all="ignore"):
        n = count.sum(axis=1)
        total_mean = (count * mean).sum(axis=1) / n
        spread = (count * np.square(mean - total_mean[:, None])).sum(axis=1)
        var = (m2.sum(axis=1) + spread) / n
    return np.stack([total_mean, var], axis=1)


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, 13 * N / 3).
    data = c.tile("data")
    groups = -(-data.free_size // c.arch.tile_bn_aggr_group)
    return streaming_cycles(c, c.arch.cost_bn_aggr_cycles_per_group * groups, data, c.tile("dst"))


def _shapes(c: Check) -> str | None:
    data, dst = c.tile("data"), c.tile("dst")
    group, outputs = c.arch.tile_bn_aggr_group, c.arch.tile_bn_aggr_outputs
    if data.free_size % group:
        return (
            f"data has {data.free_size} elements per partition; it must be a multiple of "
            f"{group} (tile_bn_aggr_group: count, mean, variance*count)"
        )
    if dst.free_size != outputs:
        return (
            f"dst has {dst.free_size} elements per partition; bn_aggr writes {outputs} "
            "(tile_bn_aggr_outputs: mean, variance)"
        )
    return None


SPEC = InstrSpec(
    name="bn_aggr",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP), In("data", *ON_CHIP)),
    constraints=(same_partition_size("dst", "data"), _shapes),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data"),
    result=fixed_width_result(2, "float32"),
)
