"""Dtypes and rounding: names to NumPy/ml_dtypes types, and casts that round like the hardware."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["DTYPES", "dtype_of", "dtype_name", "cast_to", "is_float", "itemsize", "FLOAT_DTYPES"]

# Names follow nki.language (nl.bfloat16, nl.float8_e4m3, ...). Ref: nki.language data types.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
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
_ALIASES = {"bool": "bool_", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16",
            "float": "float32", "half": "float16"}
FLOAT_DTYPES = frozenset(n for n, d in DTYPES.items() if n.startswith(("float", "bfloat")))


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
    """Cast as an engine writes its output: round to nearest even; integers saturate.

    Float targets: ml_dtypes/NumPy casts round to nearest even already. Integer targets: the
    engines round (not truncate) and saturate to the type's range (Ref: nki.isa data types,
    "fp32 to int conversions"); NaN becomes 0 (inferred).
    """
    dtype = np.dtype(dtype)
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu":
        v = np.asarray(values, dtype=np.float64)
        info = np.iinfo(dtype)
        v = np.nan_to_num(np.rint(v), nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(v, info.min, info.max).astype(dtype)
    if dtype.kind == "b":
        return np.asarray(values) != 0
    src = np.asarray(values)
    if src.dtype.kind == "f" and src.dtype.itemsize > 4 and dtype.itemsize < 4:
        # Engines compute in fp32 and round once on write; going via fp32 here mimics that.
        src = src.astype(np.float32)
    return src.astype(dtype)
