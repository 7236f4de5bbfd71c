"""quantize_mx: bf16/fp16 src to MXFP8 data (x4 packed) and one E8M0 scale per 32 values.

Ref: nki.isa.quantize_mx (docs 2.32; nki/deep-dives/mxfp-matmul.rst; trainium3_arch.rst "MX
data-type Quantization"). Vector engine, NC-v4; all tiles in SBUF. src [P, F] float16/bfloat16,
P a multiple of 32 (<= 128), F a multiple of 4; dst [P, F/4] float8_e5m2_x4 or
float8_e4m3fn_x4, element f of partition p packing src[p, 4f..4f+3] (the layout is kept);
dst_scale float8_e8m0fnu or uint8 (the E8M0 code). A scaling group is partitions 8i..8i+7 x the
4 values of one x4 column; its scale goes to dst_scale's row mx_scale_rows(8i) (the first 4
rows of the group's quadrant), the same column; the other rows of dst_scale keep their
contents (so that several quantize_mx calls can pack their scales into one tile).

The scale of a group V is X = 2**(floor(log2(max|V|)) - (E_max - 1)), E_max the element type's
largest unbiased exponent (8 for float8_e4m3fn, 15 for float8_e5m2): twice the OCP sample
algorithm's, so that no value saturates; an all-zero group gets 2**-127. Each value is V / X
rounded to nearest even. Inferred where the docs are silent: a scale below 2**-127 (a group of
tiny values) is clamped to 2**-127, and a group holding NaN or an infinity gets the NaN scale
(E8M0 0xFF) and NaN values, as an E8M0 scale cannot stand for it.
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import (
    MX_GROUP_ROWS,
    cycles_at_rate,
    f32,
    mx_scale_checks,
    mx_scale_rows,
    needs_nc_version,
    rows,
)
from neuronemu_isa.numerics import pack_x4
from neuronemu_isa.spec import SBUF, Check, Engine, In, InstrSpec, Out, same_partition_size

# nki.isa.quantize_mx: the largest unbiased exponent of each destination element type.
E_MAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
E8M0_MIN_EXP, E8M0_NAN = -127, 0xFF  # float8_e8m0fnu: 2**-127 .. 2**127; 0xFF is NaN
E8M0_BIAS = 127
PACK = 4  # values per x4 element (the constraints read tile_mx_pack)


def semantics(src, dst_scale, *, dst_dtype_name):
    x = rows(f32(src))
    p, f = x.shape
    groups = x.reshape(p // MX_GROUP_ROWS, MX_GROUP_ROWS, f // PACK, PACK)
    with np.errstate(invalid="ignore"):
        amax = np.abs(groups).max(axis=(1, 3)).astype(np.float64)  # [P/8, F/4]
    finite = np.isfinite(amax)
    _, exp = np.frexp(np.where(finite & (amax > 0), amax, 1.0))  # amax = m * 2**exp, m in [.5, 1)
    shared = np.where(amax > 0, exp - 1 - (E_MAX[dst_dtype_name] - 1), E8M0_MIN_EXP)
    shared = np.maximum(shared, E8M0_MIN_EXP)
    scale = np.where(finite, np.ldexp(1.0, shared), np.nan)
    per_value = np.repeat(np.repeat(scale, MX_GROUP_ROWS, axis=0), PACK, axis=1)
    with np.errstate(invalid="ignore"):
        quantized = (x.astype(np.float64) / per_value).astype(np.float32)
    words = pack_x4(quantized.reshape(p, f // PACK, PACK), dst_dtype_name)
    out_scale = np.array(rows(dst_scale), copy=True)  # (its own dtype: other rows keep bits)
    where = mx_scale_rows(p)[::MX_GROUP_ROWS]
    if out_scale.dtype.kind in "iu":  # uint8 holds the E8M0 code
        out_scale[where] = np.where(finite, shared + E8M0_BIAS, E8M0_NAN)
    else:
        out_scale[where] = scale.astype(out_scale.dtype)
    return {"dst": words, "dst_scale": out_scale}


def validity(src, dst=None, dst_scale=None, **_):
    """dst[p, f] is sound when its whole scaling group of src is (its scale is the group's).
    Masks: True where written."""
    written = rows(src)
    p, f = written.shape
    groups = written.reshape(p // MX_GROUP_ROWS, MX_GROUP_ROWS, f // PACK, PACK).all(axis=(1, 3))
    return np.repeat(groups, MX_GROUP_ROWS, axis=0)


def cost(c: Check) -> int:
    # trainium3_arch.rst: "quantize four input elements per partition, per cycle" (MIN_II
    # floor as for every Vector instruction).
    src = c.tile("src")
    per_cycle = c.arch.cost_quantize_mx_elems_per_cycle * c.arch.sbuf_partitions
    return cycles_at_rate(c, src.free_size, per_cycle)


def _layout(c: Check) -> str | None:
    src, dst = c.tile("src"), c.tile("dst")
    quadrant, pack = c.arch.tile_quadrant_partitions, c.arch.tile_mx_pack
    if src.partition_size % quadrant:
        return f"src has {src.partition_size} partitions; it must be a multiple of {quadrant}"
    if src.free_size % pack:
        return f"src has {src.free_size} elements per partition; it must be a multiple of {pack}"
    if dst.free_size * pack != src.free_size:
        return (
            f"dst has {dst.free_size} elements per partition; src's {src.free_size} values "
            f"pack into {math.ceil(src.free_size / pack)} (tile_mx_pack = {pack})"
        )
    return None


SPEC = InstrSpec(
    name="quantize_mx",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", SBUF, dtypes=tuple(E_MAX)),
        In("src", SBUF, dtypes=("bfloat16", "float16")),
        Out(
            "dst_scale",
            SBUF,
            dtypes=("float8_e8m0fnu", "uint8"),
            reads_if=lambda attrs: True,
            merge=True,
        ),
    ),
    constraints=(
        needs_nc_version(4, "quantize_mx"),
        same_partition_size("dst", "src"),
        _layout,
        mx_scale_checks("src", "dst_scale", x4=False),
    ),
    semantics=semantics,
    validity=validity,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "dst_scale"),
)
