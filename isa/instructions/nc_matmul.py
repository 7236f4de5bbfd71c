"""nc_matmul: dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on the Tensor engine.

Ref: nki.isa.nc_matmul. K is the partition dim of both inputs (<= 128), M <= 128, N <= 512;
inputs in SBUF, dst in PSUM (fp32). Products and accumulation are fp32. `accumulate=None` is
resolved by the tracer: the first write to a PSUM location overwrites, later ones add.
"""

from __future__ import annotations

import numpy as np

from isa._spec import (PSUM, SBUF, Attr, Check, In, InstrSpec, Out, Engine,
                       max_free, max_partition, same_partition_size)
from isa.instructions._common import F32, MATMUL_IN, f32, rows


def semantics(stationary, moving, dst=None, *, accumulate, **_hints):
    product = rows(f32(stationary)).T @ rows(f32(moving))
    if accumulate:
        return rows(f32(dst)) + product
    return product


def cost(c: Check) -> int:
    # nki_perf_guide.rst: MultiplyMoving issues every max(N_moving, MM_INIT_LATENCY) cycles,
    # 4x for fp32; ISA-old: max(min(64, N_stationary), N_moving).
    stat, mov = c.tile("stationary"), c.tile("moving")
    cycles = max(min(c.arch.cost_min_ii_cycles, stat.free_size), mov.free_size)
    if "float32" in (stat.dtype, mov.dtype):
        cycles *= c.arch.cost_matmul_fp32_factor
    return int(cycles)


def _fp32_pairs(c: Check) -> str | None:
    s, m = c.tile("stationary"), c.tile("moving")
    if (s.dtype == "float32") != (m.dtype == "float32"):
        return (f"stationary is {s.dtype} and moving is {m.dtype}; if either input is "
                "float32 both must be")
    return None


def _dst_shape(c: Check) -> str | None:
    s, m, d = c.tile("stationary"), c.tile("moving"), c.tile("dst")
    if d.partition_size != s.free_size or d.free_size != m.free_size:
        return (f"dst has shape {list(d.shape)}; stationary [K={s.partition_size}, "
                f"M={s.free_size}] and moving [K, N={m.free_size}] give [{s.free_size}, "
                f"{m.free_size}]")
    return None


def _not_modelled(c: Check) -> str | None:
    if c.attrs.get("is_transpose"):
        return "is_transpose=True is not supported yet"
    if c.attrs.get("tile_position") or c.attrs.get("tile_size"):
        return "tile_position/tile_size (PE array tiling) is not supported yet"
    if c.attrs.get("perf_mode") not in (None, "none"):
        return f"perf_mode={c.attrs['perf_mode']!r} is not supported yet"
    return None


SPEC = InstrSpec(
    name="nc_matmul",
    engines=(Engine.TENSOR,),
    operands=(
        Out("dst", PSUM, dtypes=F32, reads_if="accumulate"),
        In("stationary", SBUF, dtypes=MATMUL_IN),
        In("moving", SBUF, dtypes=MATMUL_IN),
    ),
    attrs=(
        Attr("is_stationary_onezero", False, (False, True)),
        Attr("is_moving_onezero", False, (False, True)),
        Attr("is_transpose", False, (False, True)),
        Attr("accumulate", None, (None, False, True)),
        Attr("tile_position", ()),
        Attr("tile_size", ()),
        Attr("perf_mode", None),
    ),
    constraints=(
        same_partition_size("stationary", "moving"),
        max_partition("stationary", "tile_pmax"),
        max_free("stationary", "tile_gemm_stationary_fmax"),
        max_free("moving", "tile_gemm_moving_fmax"),
        _fp32_pairs,
        _dst_shape,
        _not_modelled,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "stationary", "moving", "is_stationary_onezero", "is_moving_onezero",
                "is_transpose", "accumulate", "tile_position", "tile_size", "perf_mode"),
)
