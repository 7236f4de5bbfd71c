"""nc_matmul: dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on the Tensor engine.

Ref: nki.isa.nc_matmul. K is the partition dim of both inputs (<= 128), M <= 128, N <= 512;
inputs in SBUF, dst in PSUM (fp32). Products and accumulation are fp32. `accumulate=None` is
resolved by the tracer: the first write to a PSUM location overwrites, later ones add.
`perf_mode="double_row"` (NC-v3+, fp8 inputs only) takes stationary [K', 2, M] and moving
[K', 2, N] and contracts over both rows, K = 2K' <= 256, at twice the rate.
`is_transpose=True` (NC-v3+) transposes stationary through an identity (or permutation) moving
tile bit-accurately, NaN and Inf included, into a dst of stationary's dtype; on NC-v2 it only
labels the instruction for the profiler (dst stays fp32; finite values transpose exactly either
way, and non-finite ones are also moved exactly here: a simplification).
`tile_position`/`tile_size` place the matmul in a row
and column tile of the 128x128 PE array (64 or, from NC-v3, 32 wide); the values are the same,
and tiles running side by side are not modelled yet (each matmul costs as if alone).
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import MATMUL_IN, f32, rows
from neuronemu_isa.spec import (
    PSUM,
    SBUF,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    Result,
    max_partition,
    same_partition_size,
)

# perf_mode names of the double-row mode: the current one, and the older NKI's
# "double_row_gen3" (nki-samples' legacy double_row_matmul; inferred to be the same mode).
DOUBLE_ROW = ("double_row", "double_row_gen3")


def _contraction_rows(x: np.ndarray, double_row: bool) -> np.ndarray:
    """[K, ...] as [K, F]; in double-row mode [K', 2, F] as [2K', F]."""
    if double_row:
        return f32(x).reshape(x.shape[0] * 2, -1)
    return rows(f32(x))


def _selecting(moving: np.ndarray) -> np.ndarray | None:
    """For a moving tile with exactly one 1 per column (an identity or permutation), the row
    each column selects; None otherwise."""
    m = rows(f32(moving))
    ones = m == 1
    if not (ones.sum(axis=0) == 1).all() or np.count_nonzero(m) != m.shape[1]:
        return None
    return np.argmax(ones, axis=0)


def semantics(
    stationary, moving, dst=None, *, accumulate, perf_mode=None, is_transpose=False, **_hints
):
    if is_transpose and not accumulate:
        pick = _selecting(moving)
        if pick is not None:  # the PE array moves the bits: no arithmetic, NaN/Inf intact
            return rows(stationary)[pick].T
    double = perf_mode in DOUBLE_ROW
    product = _contraction_rows(stationary, double).T @ _contraction_rows(moving, double)
    if accumulate:  # (into the product's own array: one [M, N] array fewer per call)
        return np.add(rows(f32(dst)), product, out=product)
    return product


def validity(stationary, moving, dst=None, *, accumulate=False, is_transpose=False, **_):
    """dst[m, n] is sound when every stationary[k, m] and moving[k, n] it sums is (the
    NaN of a never-written element reaches just those sums), and a transpose moves each
    element alone. Masks: True where written."""
    unsound = np.float32(np.nan)
    written_s, written_m = rows(stationary), rows(moving)
    s = np.where(written_s, np.float32(0), unsound)
    m = np.where(written_m, np.float32(0), unsound)
    if is_transpose and s.shape[0] == m.shape[0] == m.shape[1]:
        out = s.T + (np.float32(0) if written_m.all() else unsound)
    elif s.shape[0] != m.shape[0]:  # double-row operands: whole or nothing
        whole = written_s.all() and written_m.all()
        out = np.full((s.shape[1], m.shape[1]), np.float32(0) if whole else unsound)
    else:
        with np.errstate(invalid="ignore"):
            out = s.T @ m
    if accumulate and dst is not None:
        out = out + np.where(rows(dst), np.float32(0), unsound)
    return ~np.isnan(out)


def product_step(attrs) -> bool | None:
    """A plain fp32 `dst (+)= stationary.T @ moving`: whether it adds (None: a transpose or a
    mode that changes the values, or the flag not resolved yet)."""
    if (
        attrs.get("is_transpose")
        or attrs.get("perf_mode") is not None
        or attrs.get("tile_position")
        or attrs.get("tile_size")
        or attrs.get("accumulate") is None
    ):
        return None
    return bool(attrs["accumulate"])


def cost(c: Check) -> int:
    # nki_perf_guide.rst: MultiplyMoving issues every max(N_moving, MM_INIT_LATENCY) cycles,
    # 4x for fp32; ISA-old: max(min(64, N_stationary), N_moving).
    stat, mov = c.tile("stationary"), c.tile("moving")
    m, n = _free_sizes(c)
    cycles = max(min(c.arch.cost_min_ii_cycles, m), n)  # double row: K doubles, time does not
    if "float32" in (stat.dtype, mov.dtype):
        cycles *= c.arch.cost_matmul_fp32_factor
    return int(cycles)


def load_stationary_cost(c: Check) -> int:
    # nki_perf_guide.rst: the matmul lowers to LoadStationary + MultiplyMoving; LoadStationary
    # runs in the background and "fast LS" is ~4x faster than a MultiplyMoving of the same
    # free size (4x slower again for fp32, as the multiply is).
    m, _ = _free_sizes(c)
    cycles = max(min(c.arch.cost_min_ii_cycles, m), m)
    if "float32" in (c.tile("stationary").dtype, c.tile("moving").dtype):
        cycles *= c.arch.cost_matmul_fp32_factor
    return int(math.ceil(cycles / c.arch.cost_load_stationary_speedup))


def _fp32_pairs(c: Check) -> str | None:
    s, m = c.tile("stationary"), c.tile("moving")
    if (s.dtype == "float32") != (m.dtype == "float32"):
        return (
            f"stationary is {s.dtype} and moving is {m.dtype}; if either input is "
            "float32 both must be"
        )
    return None


def _double_row(c: Check) -> bool:
    return c.attrs.get("perf_mode") in DOUBLE_ROW


def _free_sizes(c: Check) -> tuple[int, int]:
    """M and N: the stationary and moving free sizes (per row in double-row mode)."""
    div = 2 if _double_row(c) else 1
    return c.tile("stationary").free_size // div, c.tile("moving").free_size // div


def _dst_shape(c: Check) -> str | None:
    s, d = c.tile("stationary"), c.tile("dst")
    m, n = _free_sizes(c)
    if d.partition_size != m or d.free_size != n:
        return (
            f"dst has shape {list(d.shape)}; stationary [K={s.partition_size}, M={m}] and "
            f"moving [K, N={n}] give [{m}, {n}]"
        )
    return None


def _free_limits(c: Check) -> str | None:
    m, n = _free_sizes(c)
    if m > c.arch.tile_gemm_stationary_fmax:
        return (
            f"stationary free size {m} exceeds {c.arch.tile_gemm_stationary_fmax} "
            "(tile_gemm_stationary_fmax)"
        )
    if n > c.arch.tile_gemm_moving_fmax:
        return (
            f"moving free size {n} exceeds {c.arch.tile_gemm_moving_fmax} (tile_gemm_moving_fmax)"
        )
    return None


_FP8 = {"float8_e4m3", "float8_e5m2", "float8_e4m3fn"}


def _double_row_rules(c: Check) -> str | None:
    """nki.isa.nc_matmul: double_row is FP8 only, NC-v3+, [K', 2, F] operands, no transpose or
    PE tiling."""
    if not _double_row(c):
        return None
    if c.arch.nc_version < 3:
        return (
            f"perf_mode double_row needs NC-v3+ (trn2/trn3); target {c.arch.name} is "
            f"NC-v{c.arch.nc_version}"
        )
    for name in ("stationary", "moving"):
        t = c.tile(name)
        if t.dtype not in _FP8:
            return f"perf_mode double_row takes fp8 inputs; {name} is {t.dtype}"
        if len(t.shape) != 3 or t.shape[1] != 2:
            return f"perf_mode double_row takes {name} as [K', 2, F]; it has shape {list(t.shape)}"
    if c.attrs.get("is_transpose"):
        return "perf_mode double_row cannot be combined with is_transpose"
    return None


def _dst_dtype(c: Check) -> str | None:
    """dst is fp32 (fp32 or bf16 on NC-v4); a bit-accurate transpose writes the input dtype."""
    dst, stat = c.tile("dst"), c.tile("stationary")
    if c.attrs.get("is_transpose") and c.arch.nc_version >= 3:
        if dst.dtype != stat.dtype:
            return (
                f"dst is {dst.dtype}; a transpose (is_transpose=True) writes stationary's "
                f"dtype {stat.dtype}"
            )
        return None
    allowed = ("float32", "bfloat16") if c.arch.nc_version >= 4 else ("float32",)
    if dst.dtype not in allowed:
        return f"dst has dtype {dst.dtype}; allowed on {c.arch.name}: {', '.join(allowed)}"
    return None


def _pe_tiling(c: Check) -> str | None:
    """nki.isa.nc_matmul tiling mode: both tuples or neither; sizes 128, 64 or (NC-v3+) 32;
    positions multiples of the size inside the array; stationary fits the tile."""
    position: tuple[int, ...] = tuple(c.attrs.get("tile_position") or ())
    size: tuple[int, ...] = tuple(c.attrs.get("tile_size") or ())
    if not position and not size:
        return None
    if not (len(position) == 2 and len(size) == 2):
        return (
            f"tile_position {tuple(position)} and tile_size {tuple(size)} must both be "
            "(row, column) pairs to enable PE tiling"
        )
    sizes = (32, 64, 128) if c.arch.nc_version >= 3 else (64, 128)
    for axis, (start, width) in zip(("row", "column"), zip(position, size)):
        if width not in sizes:
            return f"tile_size {axis} {width} must be one of {sizes} on {c.arch.name}"
        if start % width or not 0 <= start < 128:
            return (
                f"tile_position {axis} {start} must be a multiple of its tile size {width} "
                "inside the 128x128 PE array"
            )
    stat = c.tile("stationary")
    m, _ = _free_sizes(c)
    if stat.partition_size > size[0] or m > size[1]:
        return (
            f"stationary [K={stat.partition_size}, M={m}] does not fit the "
            f"{size[0]}x{size[1]} PE tile"
        )
    if _double_row(c) and size[1] != 128:
        return "perf_mode double_row cannot be combined with PE column tiling"
    return None


def _not_modelled(c: Check) -> str | None:
    if c.attrs.get("perf_mode") not in (None, "none", *DOUBLE_ROW):
        return f"perf_mode={c.attrs['perf_mode']!r} is not supported yet"
    return None


def result(c: Check) -> Result:
    """dst[M, N] in PSUM, fp32; a transpose through the PE array writes stationary's dtype
    (nki.isa.nc_matmul)."""
    stationary, moving = c.tile("stationary"), c.tile("moving")
    dtype = stationary.dtype if c.attrs.get("is_transpose") else "float32"
    return (stationary.free_size, moving.free_size), dtype, PSUM


def flops(c: Check) -> int:
    """2 * K * M * N: a multiply and an add per PE per moving column (in double-row mode K is
    both rows, 2K', and M and N are per row)."""
    m, n = _free_sizes(c)
    k = c.tile("stationary").partition_size * (2 if _double_row(c) else 1)
    return 2 * k * m * n


def peak_flops_per_ns(c: Check) -> float:
    """The mode's own peak (the arch guides' TFLOPS per core): FP8 double_row reads two K rows
    per PE per cycle, FP32 runs at a quarter of the BF16/FP16/TF32/FP8 rate."""
    if _double_row(c):
        return float(c.arch.peak_fp8_double_row_flops_per_ns)
    if "float32" in (c.tile("stationary").dtype, c.tile("moving").dtype):
        return float(c.arch.peak_fp32_flops_per_ns)
    return float(c.arch.peak_bf16_flops_per_ns)


SPEC = InstrSpec(
    name="nc_matmul",
    engines=(Engine.TENSOR,),
    operands=(
        Out("dst", PSUM, reads_if="accumulate"),
        # (a bit-accurate transpose moves stationary's own bits)
        In("stationary", SBUF, dtypes=MATMUL_IN, fp32=lambda attrs: not attrs.get("is_transpose")),
        In("moving", SBUF, dtypes=MATMUL_IN, fp32=True),
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
        _dst_dtype,
        _pe_tiling,
        _fp32_pairs,
        _dst_shape,
        _not_modelled,
    ),
    semantics=semantics,
    validity=validity,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "stationary",
        "moving",
        "is_stationary_onezero",
        "is_moving_onezero",
        "is_transpose",
        "accumulate",
        "tile_position",
        "tile_size",
        "perf_mode",
    ),
    result=result,
    flops=flops,
    peak_flops_per_ns=peak_flops_per_ns,
    preloaded="stationary",
    preload_cost=load_stationary_cost,
    one_psum_bank=("dst",),  # an accumulation group is one PSUM bank (nki.isa.nc_matmul)
    product_step=product_step,
)
