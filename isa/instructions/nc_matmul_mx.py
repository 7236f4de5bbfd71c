"""nc_matmul_mx: dst[M, N] (+)= the MX-dequantized stationary[K', M] x4 .T @ moving[K', N] x4.

Ref: nki.isa.nc_matmul_mx (docs 2.32); trainium3_arch.rst "Quad-MXFP8/MXFP4 Matmul
Performance"; nki/deep-dives/mxfp-matmul.rst. Tensor engine, NC-v4. stationary and moving are
float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4 (fp8 and fp4 may be mixed) in SBUF; each
x4 element packs 4 values of the contraction, which runs over the K' partitions and those 4
values (K = 4K' <= 512). Each value is multiplied by its scaling group's scale (8 partitions x
one x4 element: stationary_scale / moving_scale, float8_e8m0fnu or the E8M0 code in uint8, laid
out as quantize_mx writes them: `mx_scale_rows`), the products summed in fp32 (as nc_matmul's)
into dst in PSUM, float32 or bfloat16. `accumulate` as nc_matmul's (None: the first write to a
PSUM location overwrites, later ones add). K' a multiple of 32, M even and <= 128, N up to the
whole PSUM (2 KiB x 8 banks: 4096 fp32 or 8192 bf16). PE tiling: rows only (tile_size
(32|64|128, 128), tile_position (row, 0)); the values are the same.

Inferred: a value is dequantized in fp32 (value x 2**(scale - 127)), so a scale beyond fp32's
range gives inf or 0 there; a NaN scale (E8M0 0xFF) makes its group's values NaN.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    f32,
    mx_scale_checks,
    mx_scale_rows,
    needs_nc_version,
    rows,
)
from neuronemu_isa.instructions.nc_matmul import cost as matmul_cost
from neuronemu_isa.instructions.nc_matmul import load_stationary_cost
from neuronemu_isa.numerics import PACKED, e8m0_scale, unpack_x4
from neuronemu_isa.spec import PSUM, SBUF, Attr, Check, Engine, In, InstrSpec, Out

MX_DATA = tuple(PACKED)
SCALES = ("float8_e8m0fnu", "uint8")


def _dequantized(data: np.ndarray, scale: np.ndarray, name: str) -> np.ndarray:
    """[K', F] x4 words and their scale view as the [4K', F] fp32 values they stand for."""
    values = unpack_x4(rows(data), name)  # [K', F, 4]
    scales = e8m0_scale(rows(scale))[mx_scale_rows(values.shape[0])]  # [K', F]
    with np.errstate(over="ignore", invalid="ignore"):
        values = values * scales[:, :, None]
    return values.transpose(0, 2, 1).reshape(-1, values.shape[1])


def semantics(
    stationary,
    moving,
    stationary_scale,
    moving_scale,
    dst=None,
    *,
    accumulate,
    stationary_dtype_name,
    moving_dtype_name,
    **_tiling,
):
    s = _dequantized(stationary, stationary_scale, stationary_dtype_name)
    m = _dequantized(moving, moving_scale, moving_dtype_name)
    with np.errstate(over="ignore", invalid="ignore"):
        product = s.T @ m
        if accumulate:
            product += rows(f32(dst))
    return product


def validity(
    stationary, moving, stationary_scale, moving_scale, dst=None, *, accumulate=False, **_
):
    """dst[m, n] is sound when stationary's column m, moving's column n and the scales they
    use are (the NaN of a never-written element reaches just those sums). Masks: True where
    written."""
    s_ok = rows(stationary).all(axis=0) & rows(stationary_scale)[
        np.unique(mx_scale_rows(rows(stationary).shape[0]))
    ].all(axis=0)
    m_ok = rows(moving).all(axis=0) & rows(moving_scale)[
        np.unique(mx_scale_rows(rows(moving).shape[0]))
    ].all(axis=0)
    out = s_ok[:, None] & m_ok[None, :]
    if accumulate and dst is not None:
        out = out & rows(dst)
    return out


def flops(c: Check) -> int:
    """2 * K * M * N with K = 4K': each PE multiplies and adds four value pairs per moving
    column (trainium3_arch.rst)."""
    stat, mov = c.tile("stationary"), c.tile("moving")
    return 2 * c.arch.tile_mx_pack * stat.partition_size * stat.free_size * mov.free_size


def peak_flops_per_ns(c: Check) -> float:
    return float(c.arch.peak_mx_flops_per_ns)


def cost(c: Check) -> int:
    # trainium3_arch.rst: an MX matmul contracts 4x the values of a BF16 one in the same
    # time (each PE does four multiplies per cycle), so it streams like an nc_matmul of the
    # x4 shapes: max(min(MIN_II, M), N) cycles.
    return matmul_cost(c)


def _data(c: Check) -> str | None:
    stat, mov = c.tile("stationary"), c.tile("moving")
    quadrant = c.arch.tile_quadrant_partitions
    if stat.partition_size != mov.partition_size:
        return (
            f"stationary has {stat.partition_size} partitions and moving {mov.partition_size}; "
            "they must be equal (the contraction)"
        )
    if stat.partition_size % quadrant:
        return (
            f"stationary has {stat.partition_size} partitions; it must be a multiple of {quadrant}"
        )
    m, limit = stat.free_size, c.arch.tile_gemm_stationary_fmax
    if m % 2 or m > limit:
        return (
            f"stationary free size {m} must be even and at most {limit} (tile_gemm_stationary_fmax)"
        )
    return None


def _dst(c: Check) -> str | None:
    stat, mov, dst = c.tile("stationary"), c.tile("moving"), c.tile("dst")
    most = c.arch.psum_bytes_per_partition // dst.itemsize
    if mov.free_size > most:
        return (
            f"moving free size {mov.free_size} exceeds {most}: a {dst.dtype} dst fills the "
            f"whole PSUM ({c.arch.psum_bytes_per_partition} bytes per partition) at {most}"
        )
    if dst.partition_size != stat.free_size or dst.free_size != mov.free_size:
        return (
            f"dst has shape {list(dst.shape)}; stationary [K'={stat.partition_size}, "
            f"M={stat.free_size}] and moving [K', N={mov.free_size}] give "
            f"[{stat.free_size}, {mov.free_size}]"
        )
    return None


def _tiling(c: Check) -> str | None:
    """nki.isa.nc_matmul_mx: row tiling only: tile_size (rows, 128) with rows 32, 64 or 128,
    tile_position (row, 0) with row a multiple of rows; both set or neither."""
    position = tuple(c.attrs.get("tile_position") or ())
    size = tuple(c.attrs.get("tile_size") or ())
    if not position and not size:
        return None
    pe = c.arch.tile_pmax
    if len(position) != 2 or len(size) != 2:
        return (
            f"tile_position {position} and tile_size {size} must both be (row, column) pairs "
            "to enable PE tiling"
        )
    rows_, cols = size
    if cols != pe or position[1] != 0:
        return (
            f"tile_size {size} and tile_position {position}: nc_matmul_mx tiles rows only "
            f"(column size {pe}, start column 0)"
        )
    if rows_ not in (pe // 4, pe // 2, pe) or position[0] % rows_ or not 0 <= position[0] < pe:
        return (
            f"tile_size rows {rows_} must be {pe // 4}, {pe // 2} or {pe}, and tile_position "
            f"row {position[0]} a multiple of it inside the {pe}-row PE array"
        )
    if c.tile("stationary").partition_size > rows_:
        return (
            f"stationary's {c.tile('stationary').partition_size} partitions do not fit the "
            f"{rows_}-row PE tile"
        )
    return None


SPEC = InstrSpec(
    name="nc_matmul_mx",
    engines=(Engine.TENSOR,),
    operands=(
        Out("dst", PSUM, dtypes=("float32", "bfloat16"), reads_if="accumulate"),
        In("stationary", SBUF, dtypes=MX_DATA),
        In("moving", SBUF, dtypes=MX_DATA),
        In("stationary_scale", SBUF, dtypes=SCALES),
        In("moving_scale", SBUF, dtypes=SCALES),
    ),
    attrs=(
        Attr("tile_position", None),
        Attr("tile_size", None),
        Attr("accumulate", None, (None, False, True)),
    ),
    constraints=(
        needs_nc_version(4, "nc_matmul_mx"),
        _data,
        _dst,
        mx_scale_checks("stationary", "stationary_scale", x4=True),
        mx_scale_checks("moving", "moving_scale", x4=True),
        _tiling,
    ),
    semantics=semantics,
    validity=validity,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "stationary",
        "moving",
        "stationary_scale",
        "moving_scale",
        "tile_position",
        "tile_size",
        "accumulate",
    ),
    flops=flops,
    peak_flops_per_ns=peak_flops_per_ns,
    preloaded="stationary",
    preload_cost=load_stationary_cost,
)
