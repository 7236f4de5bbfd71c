"""bn_stats: per partition, (count, mean, variance * count) of the even and of the odd elements.

Ref: nki.isa.bn_stats (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.bn_stats.html). Vector engine, fp32; data has at most 512 elements per
partition (nl.tile_size.bn_stats_fmax); dst holds 6 values per partition. "Even"/"odd" are the
positions in the flattened free axes. An empty odd half (one element) gives count 0, mean 0 and
0 (inferred: the docs do not say), which bn_aggr then weighs by its zero count.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import f32, fixed_width_result, rows, streaming_cycles
from neuronemu_isa.spec import (
    ON_CHIP,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    max_free,
    same_partition_size,
)


def _half(x: np.ndarray) -> list[np.ndarray]:
    count = np.float32(x.shape[1])
    if x.shape[1] == 0:
        zero = np.zeros(x.shape[0], dtype=np.float32)
        return [zero, zero, zero]
    mean = x.sum(axis=1, dtype=np.float32) / count
    m2 = np.square(x - mean[:, None]).sum(axis=1, dtype=np.float32)
    return [np.full(x.shape[0], count, dtype=np.float32), mean, m2]


def semantics(data):
    x = rows(f32(data))
    return np.stack(_half(x[:, 0::2]) + _half(x[:, 1::2]), axis=1)


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N).
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


def _six_outputs(c: Check) -> str | None:
    dst, want = c.tile("dst"), c.arch.tile_bn_stats_outputs
    if dst.free_size != want:
        return (
            f"dst has {dst.free_size} elements per partition; bn_stats writes "
            f"{want} (tile_bn_stats_outputs)"
        )
    return None


SPEC = InstrSpec(
    name="bn_stats",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP), In("data", *ON_CHIP)),
    constraints=(
        same_partition_size("dst", "data"),
        max_free("data", "tile_bn_stats_fmax"),
        _six_outputs,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data"),
    result=fixed_width_result(6, "float32"),
)
