"""nc_matmul: dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on the Tensor engine.

Ref: nki.isa.nc_matmul. K is the partition dim of both inputs (<= 128), M <= 128, N <= 512;
inputs in SBUF, dst in PSUM (fp32). Products and accumulation are fp32. `accumulate=None` is
resolved by the tracer: the first write to a PSUM location overwrites, later ones add.
`perf_mode="double_row"` (NC-v3+, fp8 inputs only) takes stationary [K', 2, M] and moving
[K', 2, N] and contracts over both rows, K = 2K' <= 256, at twice the rate.
"""

from __future__ import annotations

import numpy as np

from isa._spec import (PSUM, SBUF, Attr, Check, Engine, In, InstrSpec, Out, max_partition,
                       same_partition_size)
from isa.instructions._common import F32, MATMUL_IN, f32, rows


def _contraction_rows(x: np.ndarray, double_row: bool) -> np.ndarray:
    """[K, ...] as [K, F]; in double-row mode [K', 2, F] as [2K', F]."""
    if double_row:
        return f32(x).reshape(x.shape[0] * 2, -1)
    return rows(f32(x))


def semantics(stationary, moving, dst=None, *, accumulate, perf_mode=None, **_hints):
    double = perf_mode == "double_row"
    product = _contraction_rows(stationary, double).T @ _contraction_rows(moving, double)
    if accumulate:
        return rows(f32(dst)) + product
    return product


def cost(c: Check) -> int:
    # nki_perf_guide.rst: MultiplyMoving issues every max(N_moving, MM_INIT_LATENCY) cycles,
    # 4x for fp32; ISA-old: max(min(64, N_stationary), N_moving).
    stat, mov = c.tile("stationary"), c.tile("moving")
    m, n = _free_sizes(c)
    cycles = max(min(c.arch.cost_min_ii_cycles, m), n)  # double row: K doubles, time does not
    if "float32" in (stat.dtype, mov.dtype):
        cycles *= c.arch.cost_matmul_fp32_factor
    return int(cycles)


def _fp32_pairs(c: Check) -> str | None:
    s, m = c.tile("stationary"), c.tile("moving")
    if (s.dtype == "float32") != (m.dtype == "float32"):
        return (f"stationary is {s.dtype} and moving is {m.dtype}; if either input is "
                "float32 both must be")
    return None


def _double_row(c: Check) -> bool:
    return c.attrs.get("perf_mode") == "double_row"


def _free_sizes(c: Check) -> tuple[int, int]:
    """M and N: the stationary and moving free sizes (per row in double-row mode)."""
    div = 2 if _double_row(c) else 1
    return c.tile("stationary").free_size // div, c.tile("moving").free_size // div


def _dst_shape(c: Check) -> str | None:
    s, d = c.tile("stationary"), c.tile("dst")
    m, n = _free_sizes(c)
    if d.partition_size != m or d.free_size != n:
        return (f"dst has shape {list(d.shape)}; stationary [K={s.partition_size}, M={m}] and "
                f"moving [K, N={n}] give [{m}, {n}]")
    return None


def _free_limits(c: Check) -> str | None:
    m, n = _free_sizes(c)
    if m > c.arch.tile_gemm_stationary_fmax:
        return (f"stationary free size {m} exceeds {c.arch.tile_gemm_stationary_fmax} "
                "(tile_gemm_stationary_fmax)")
    if n > c.arch.tile_gemm_moving_fmax:
        return f"moving free size {n} exceeds {c.arch.tile_gemm_moving_fmax} (tile_gemm_moving_fmax)"
    return None


_FP8 = {"float8_e4m3", "float8_e5m2", "float8_e4m3fn"}


def _double_row_rules(c: Check) -> str | None:
    """nki.isa.nc_matmul: double_row is FP8 only, NC-v3+, [K', 2, F] operands, no transpose or
    PE tiling."""
    if not _double_row(c):
        return None
    if c.arch.nc_version < 3:
        return (f"perf_mode double_row needs NC-v3+ (trn2/trn3); target {c.arch.name} is "
                f"NC-v{c.arch.nc_version}")
    for name in ("stationary", "moving"):
        t = c.tile(name)
        if t.dtype not in _FP8:
            return f"perf_mode double_row takes fp8 inputs; {name} is {t.dtype}"
        if len(t.shape) != 3 or t.shape[1] != 2:
            return (f"perf_mode double_row takes {name} as [K', 2, F]; it has shape "
                    f"{list(t.shape)}")
    if c.attrs.get("is_transpose") or c.attrs.get("tile_position") or c.attrs.get("tile_size"):
        return "perf_mode double_row cannot be combined with is_transpose or PE tiling"
    return None


def _not_modelled(c: Check) -> str | None:
    if c.attrs.get("is_transpose"):
        return "is_transpose=True is not supported yet"
    if c.attrs.get("tile_position") or c.attrs.get("tile_size"):
        return "tile_position/tile_size (PE array tiling) is not supported yet"
    if c.attrs.get("perf_mode") not in (None, "none", "double_row"):
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
        _double_row_rules,
        _free_limits,
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
