"""Kernel inputs from the command line: `dtype[d0,d1]` (seeded random), `@file.npy`, literals."""

from __future__ import annotations

import ast
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from isa._numerics import dtype_of, is_float
from neuronemu.errors import UsageError

__all__ = ["parse_spec", "parse_assignment", "random_array", "load_npz"]

_ARRAY_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[\s*([0-9,\s]*)\]\s*$")


def random_array(dtype: str, shape: tuple[int, ...], seed: int, name: str) -> np.ndarray:
    """Seeded data for one input; each input's stream depends only on (seed, name)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    dt = dtype_of(dtype)
    if is_float(dtype):
        return rng.standard_normal(shape, dtype=np.float32).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -64), min(info.max, 64), shape, endpoint=True).astype(dt)


def parse_spec(name: str, spec: str, seed: int) -> Any:
    """One `-i NAME=SPEC` value: an array or a Python literal (a compile-time parameter)."""
    if spec.startswith("@"):
        return _load_npy(name, Path(spec[1:]))
    m = _ARRAY_SPEC.match(spec)
    if m and not _is_literal(spec):
        dtype, dims = m.group(1), m.group(2)
        try:
            dtype_of(dtype)
        except KeyError:
            raise UsageError(f"input {name!r}: unknown dtype {dtype!r} in {spec!r}",
                             hint="e.g. float32[128,512], bfloat16[256,1024], int32[128,1]") \
                from None
        parts = [p.strip() for p in dims.split(",") if p.strip()]
        if not parts:
            raise UsageError(f"input {name!r}: {spec!r} has no dimensions",
                             hint="e.g. float32[128,512]")
        shape = tuple(int(p) for p in parts)
        if any(d <= 0 for d in shape):
            raise UsageError(f"input {name!r}: every dimension of {spec!r} must be positive")
        return random_array(dtype, shape, seed, name)
    try:
        return ast.literal_eval(spec)
    except (ValueError, SyntaxError):
        raise UsageError(
            f"input {name!r}: cannot read {spec!r}",
            hint="SPEC is dtype[d0,d1,...] (random data), @file.npy, or a Python literal "
                 "such as 2, 0.5, (3, 4) or \"causal\"") from None


def _is_literal(spec: str) -> bool:
    try:
        ast.literal_eval(spec)
        return True
    except (ValueError, SyntaxError):
        return False


def parse_assignment(text: str, seed: int) -> tuple[str, Any]:
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"-i {text!r}: expected NAME=SPEC", hint="e.g. -i a=float32[128,512]")
    return name, parse_spec(name, spec.strip(), seed)


def _load_npy(name: str, path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"input {name!r}: no such file {str(path)!r}") from None
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"input {name!r}: {str(path)!r} is not a valid .npy file ({exc})") \
            from None
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"input {name!r}: {str(path)!r} holds several arrays; use --inputs")
    return arr


def load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise UsageError(f"--inputs {path!r} is a .npy file, not a .npz archive")
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise UsageError(f"--inputs: no such file {path!r}") from None
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"--inputs {path!r} is not a valid .npz archive ({exc})") from None
