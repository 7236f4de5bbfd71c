"""Dtypes and rounding: names to NumPy/ml_dtypes types, and casts that round like the hardware."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DTYPES",
    "dtype_of",
    "dtype_name",
    "cast_to",
    "exact_ints",
    "raw_bits",
    "EXACT_INT",
    "RAW_BITS",
    "NAN_TO_INT",
    "EXACT_INT_OVERFLOW",
    "is_float",
    "itemsize",
    "FLOAT_DTYPES",
    "LOW_PRECISION",
    "FP32_EXACT",
    "round_tf32",
    "ulp",
    "ulps_apart",
    "mantissa_bits",
    "PACKED",
    "pack_x4",
    "unpack_x4",
    "e8m0_scale",
]

# Names follow nki.language (nl.bfloat16, nl.float8_e4m3, ...). Ref: nki.api.shared, "Supported
# Data Types". float8_e4m3 is the IEEE-like format (inf, max 240); float8_e4m3fn the OCP one
# (no inf, NaN is S.1111.111; NeuronCore-v4). float8_e8m0fnu (0S,8E,0M; NaN is 0xFF) is the
# power-of-two scale of the MX formats. tfloat32 (1S,8E,10M) is stored as fp32: only the
# Tensor engine reads it at tf32 precision (`round_tf32`). bool_ is stored as uint8.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "tfloat32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "bool_": np.dtype(np.bool_),
}
# The packed MX dtypes (nki.api.shared "Supported Data Types", Packed: "4x packed elements,
# custom data type for nki.isa.nc_matmul_mx and nki.isa.quantize_mx on NeuronCore-v4"): name ->
# (the word one element is stored in, the type of the 4 values it packs). float8 x4 is 32 bits,
# float4 x4 16 bits (nki/deep-dives/mxfp-matmul.rst). Value j of a word sits in its bits
# [j*w, (j+1)*w), w = 8 or 4, the lowest first (inferred: the layout the MXFP tutorial's
# mx_cpu_utils.py packs and unpacks host data in).
PACKED: dict[str, tuple[np.dtype, np.dtype]] = {
    "float8_e5m2_x4": (np.dtype(np.uint32), np.dtype(ml_dtypes.float8_e5m2)),
    "float8_e4m3fn_x4": (np.dtype(np.uint32), np.dtype(ml_dtypes.float8_e4m3fn)),
    "float4_e2m1fn_x4": (np.dtype(np.uint16), np.dtype(ml_dtypes.float4_e2m1fn)),
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
# Dtypes narrower than fp32 whose every value fp32 holds exactly (an engine that computes in
# fp32 reads them converted, no rounding). Not tfloat32: the Tensor engine rounds it.
FP32_EXACT = frozenset({"bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"})

_TF32_DROPPED_BITS = 23 - 10  # fp32 mantissa bits that tf32 does not keep


def dtype_of(name: str) -> np.dtype:
    """The NumPy dtype for an NKI dtype name (a packed one's storage word); KeyError if
    unknown."""
    if name in PACKED:
        return PACKED[name][0]
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


# Integer conversions: the choices no NKI document makes, each in one place (inferred).
# What a NaN becomes in an integer dtype (the docs, and nki.simulate's release note, say only
# "round to nearest, ties to even; saturate").
NAN_TO_INT = 0
# What an exact integer result (EXACT_INT) outside an integer destination's range becomes:
# "saturate" (clamp to the range) or "wrap" (keep the low bits, two's complement). The docs
# promise GpSimd's integer math exact for 32-bit values, not what an overflow writes.
EXACT_INT_OVERFLOW = "saturate"
# Semantics mark results that do not take the fp32 path by returning them in one of these
# dtypes, which no NKI tensor has: exact integers (integer math on GpSimd, iota, indices),
# and bit patterns (rng, bitvec ops), whose low bits are written. RAW_BITS is int64 in the
# other byte order: a dtype of its own whose values are still the integers, as a float64
# view of them (the unrounded shadow run's) must see.
EXACT_INT = np.dtype(np.int64)
RAW_BITS = np.dtype(np.int64).newbyteorder()


def exact_ints(values: np.ndarray) -> np.ndarray:
    """Integer values marked exact: written to an integer dtype without the fp32 trip."""
    return np.asarray(values).astype(EXACT_INT)


def raw_bits(values: np.ndarray) -> np.ndarray:
    """An integer array's bit patterns marked raw: the write keeps their low bits.

    The write is the value modulo 2**bits of the destination (two's complement): unchanged
    where it fits (inferred for bitvec results wider or narrower than dst, as C converts
    integers; the docs say only that the bits are not cast)."""
    return np.asarray(values).astype(RAW_BITS)


def cast_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert as the machine writes a value into a tile of another dtype.

    The rule, by what the value is:
    - same dtype as the destination: the bits, unchanged (a copy between equal dtypes is
      bit-exact: nki.isa.tensor_copy, nki.isa.dma_copy).
    - an NKI dtype or a float (an engine's fp32 result, a DMA's source, an immediate):
      to fp32 first, then to the destination. nki-dma-overview.rst and nki.isa.dma_copy: a
      DMA between different dtypes casts src -> fp32 -> dst, integers included (so uint32
      0xFFFFFFFF stored to int32 is 4294967296.0, saturated: 2147483647; `.view(nl.int32)`
      keeps the bits); nki.isa.tensor_copy: Vector/GpSimd (and Scalar) copies between
      different dtypes go through fp32; the engines compute in fp32 and cast the result
      (trainium_inferentia2_arch.rst, nki.api.shared "Supported Math Operators"). An integer
      over 2**24 rounds to nearest even in fp32. fp32 -> integer: round half to even and
      saturate to the destination's range, +-inf to its limits (NKI 0.6.0 release notes,
      nki.simulate fixes: "fp32-to-integer casts match hardware"); NaN -> NAN_TO_INT
      (inferred). fp32 -> float: round to nearest even (rounding-modes.rst); overflow gives
      inf, or NaN for float8_e4m3fn, which has none (ml_dtypes; the docs do not say).
    - EXACT_INT (int64, exact integer math) to an integer dtype: the value itself, out of
      range per EXACT_INT_OVERFLOW (inferred); to a float dtype: via fp32 as above.
    - RAW_BITS (bit patterns): the destination's low bits of the pattern (nki.isa.rng:
      "truncates each 32-bit random value ... taking the least significant bits").
    bool_ is stored as uint8 and converts as uint8 does.
    """
    dtype = np.dtype(dtype)
    src = np.asarray(values)
    if src.dtype == dtype:
        return src
    if src.dtype == RAW_BITS:
        return _low_bits(src, dtype)
    if src.dtype == EXACT_INT and dtype.kind in "iub":
        if EXACT_INT_OVERFLOW == "wrap":
            return _low_bits(src, dtype)
        return _saturate_int(src, dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the behaviour
        fp32 = src.astype(np.float32, copy=False)  # (read only below)
        if dtype.kind in "iub":
            return _saturate_int(np.rint(fp32.astype(np.float64)), dtype)
        return fp32.astype(dtype)


def _low_bits(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Integers to `dtype`: the low bits of their two's complement, reinterpreted (bool_ via
    uint8). int64 -> uint64 -> a narrower unsigned type each wrap modulo 2**bits."""
    target = np.dtype(np.uint8) if dtype.kind == "b" else dtype
    unsigned = np.dtype(f"u{target.itemsize}")
    out = values.astype(np.int64).astype(np.uint64).astype(unsigned).view(target)
    return out != 0 if dtype.kind == "b" else out


def _saturate_int(whole: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Whole numbers (or int64) to an integer dtype, clamped to its range; bool_ via uint8."""
    target = np.dtype(np.uint8) if dtype.kind == "b" else dtype
    info = np.iinfo(target)
    if whole.dtype.kind == "f":
        whole = np.nan_to_num(
            whole, nan=float(NAN_TO_INT), posinf=float(info.max), neginf=float(info.min)
        )
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


def _lanes(name: str) -> tuple[np.dtype, np.dtype, int]:
    word, element = PACKED[name]
    return word, element, 8 * word.itemsize // 4


def unpack_x4(words: np.ndarray, name: str) -> np.ndarray:
    """The values a packed MX tile holds, as fp32: [..., 4], value j of each word last."""
    word, element, width = _lanes(name)
    w = np.asarray(words).astype(word, copy=False).astype(np.uint32)
    shifts = np.arange(4, dtype=np.uint32) * width
    codes = ((w[..., None] >> shifts) & ((1 << width) - 1)).astype(np.uint8)
    return codes.view(element).astype(np.float32)


def pack_x4(values: np.ndarray, name: str) -> np.ndarray:
    """[..., 4] values rounded (RNE, as ml_dtypes casts; overflow to the type's max is the
    caller's business) to the packed type's element and packed into words, marked RAW_BITS so
    that the write stores the bits."""
    word, element, width = _lanes(name)
    codes = np.asarray(values, dtype=np.float32).astype(element).view(np.uint8)
    codes = (codes & ((1 << width) - 1)).astype(np.int64)
    shifts = np.arange(4, dtype=np.int64) * width
    return raw_bits((codes << shifts).sum(axis=-1))


def e8m0_scale(scale: np.ndarray) -> np.ndarray:
    """MX scales as the fp32 powers of two they stand for. A uint8 tile holds the E8M0 code
    itself (nki.isa.nc_matmul_mx: uint8 "accepted for backward compatibility"): 2**(code - 127),
    0xFF NaN; float8_e8m0fnu (or a float tile holding its values) converts as it is."""
    s = np.asarray(scale)
    if s.dtype.kind in "iu":
        code = s.astype(np.int32)
        with np.errstate(over="ignore"):
            out = np.ldexp(np.float32(1), code - 127).astype(np.float32)
        return np.where(code == 0xFF, np.float32(np.nan), out)
    return s.astype(np.float32)
