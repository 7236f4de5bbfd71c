"""Dtypes and rounding: names to NumPy/ml_dtypes types, and casts that round like the hardware."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DTYPES",
    "dtype_of",
    "dtype_name",
    "cast_to",
    "is_float",
    "itemsize",
    "FLOAT_DTYPES",
    "LOW_PRECISION",
    "round_tf32",
    "ulp",
    "ulps_apart",
    "mantissa_bits",
]

# Names follow nki.language (nl.bfloat16, nl.float8_e4m3, ...). Ref: nki.api.shared, "Supported
# Data Types". float8_e4m3 is the IEEE-like format (inf, max 240); float8_e4m3fn the OCP one
# (no inf, NaN is S.1111.111; NeuronCore-v4). tfloat32 (1S,8E,10M) is stored as fp32: only the
# Tensor engine reads it at tf32 precision (`round_tf32`). bool_ is stored as uint8.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "tfloat32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "bool_": np.dtype(np.bool_),
}
_ALIASES = {
    "bool": "bool_",
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "float": "float32",
    "half": "float16",
    "tf32": "tfloat32",
}
FLOAT_DTYPES = frozenset(n for n in DTYPES if n.startswith(("float", "bfloat", "tfloat")))
# Float dtypes with fewer bits than fp32: `--no-precise` holds these in fp32.
LOW_PRECISION = frozenset(n for n in FLOAT_DTYPES if DTYPES[n].itemsize < 4) | {"tfloat32"}

_TF32_DROPPED_BITS = 23 - 10  # fp32 mantissa bits that tf32 does not keep


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype for an NKI dtype name; KeyError if unknown."""
    return DTYPES[_ALIASES.get(name, name)]


def dtype_name(dt: np.dtype | type) -> str:
    dt = np.dtype(dt)
    for name, d in DTYPES.items():
        if d == dt:
            return name
    raise KeyError(f"unsupported dtype {dt}")


def is_float(name: str) -> bool:
    return _ALIASES.get(name, name) in FLOAT_DTYPES


def itemsize(name: str) -> int:
    return dtype_of(name).itemsize


def cast_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert as the machine writes a value of another dtype: via fp32, round to nearest even.

    Ref: neuroncore.md B4: copies and DMA between different dtypes go src -> fp32 -> dst, and
    arithmetic is fp32 inside; rounding is RNE. Integer targets round half to even and saturate
    to the type's range (NKI release notes, nki.simulate fixes: "fp32-to-integer casts match
    hardware (round to nearest, ties to even; saturate to the destination range)"); NaN becomes
    0 (inferred). Float targets follow ml_dtypes: overflow gives inf (float8_e4m3fn, which has
    none, gives NaN); no NKI document says the engines saturate floats. bool_ is stored as
    uint8, so it converts as uint8 does. Exact integer results (int64 intermediates of integer
    math such as iota) convert to integer targets exactly, saturating, without the fp32 trip.
    Same dtype: returned unchanged (bit-exact).
    """
    dtype = np.dtype(dtype)
    src = np.asarray(values)
    if src.dtype == dtype:
        return src
    if dtype.kind in "iub" and src.dtype.kind in "iu" and src.dtype.name not in DTYPES:
        return _saturate_int(src, dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the behaviour
        fp32 = src.astype(np.float32)
        if dtype.kind in "iub":
            return _saturate_int(np.rint(fp32.astype(np.float64)), dtype)
        return fp32.astype(dtype)


def _saturate_int(whole: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Whole numbers (or int64) to an integer dtype, clamped to its range; bool_ via uint8."""
    target = np.dtype(np.uint8) if dtype.kind == "b" else dtype
    info = np.iinfo(target)
    if whole.dtype.kind == "f":
        whole = np.nan_to_num(whole, nan=0.0, posinf=float(info.max), neginf=float(info.min))
        out = np.clip(whole, float(info.min), float(info.max)).astype(target)
    else:
        out = np.clip(whole, int(info.min), int(info.max)).astype(target)
    return out != 0 if dtype.kind == "b" else out


def round_tf32(values: np.ndarray) -> np.ndarray:
    """fp32 values rounded (RNE) to tfloat32's 10 mantissa bits, still stored as fp32.

    Ref: nki.api.shared: tfloat32 is (1S,8E,10M). The low 13 bits are dropped with ties to
    even; a carry into the exponent is correct (up to inf at the top); NaN stays NaN.
    """
    x = np.ascontiguousarray(values, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    keep_lsb = (bits >> _TF32_DROPPED_BITS) & 1
    half = (1 << (_TF32_DROPPED_BITS - 1)) - 1
    rounded = (bits + half + keep_lsb) & ~np.uint64((1 << _TF32_DROPPED_BITS) - 1)
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def mantissa_bits(name: str) -> int:
    """Explicit mantissa bits of a float dtype (tfloat32: 10); 0 for integer dtypes."""
    name = _ALIASES.get(name, name)
    if name == "tfloat32":
        return 10
    dt = DTYPES[name]
    return int(ml_dtypes.finfo(dt).nmant) if name in FLOAT_DTYPES else 0


def ulp(values: np.ndarray, name: str) -> np.ndarray:
    """The spacing of `name`'s representable numbers at |values| (float64; 1 for integers).

    Subnormal and zero values get the subnormal spacing 2**(min_exp - mantissa_bits); inf and
    NaN give NaN.
    """
    v = np.abs(np.asarray(values, dtype=np.float64))
    name = _ALIASES.get(name, name)
    if name not in FLOAT_DTYPES:
        return np.where(np.isfinite(v), 1.0, np.nan)
    bits = mantissa_bits(name)
    min_exp = -126 if name == "tfloat32" else int(ml_dtypes.finfo(DTYPES[name]).minexp)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log2(np.where(v > 0, v, 1.0)))
    exp = np.maximum(np.where((v > 0) & np.isfinite(v), exp, min_exp), min_exp)
    return np.where(np.isfinite(v), np.ldexp(1.0, (exp - bits).astype(np.int64)), np.nan)


def ulps_apart(got: np.ndarray, want: np.ndarray, name: str) -> np.ndarray:
    """|got - want| in units in the last place of `name` at `want` (float64); 0 where they are
    equal or both NaN, inf where only one of them is NaN or inf."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        apart = np.abs(got - want) / ulp(want, name)
    return np.where(same, 0.0, np.where(np.isnan(apart), np.inf, apart))
