"""Kernel inputs: from the command line (`dtype[d0,d1]` seeded random, `@file.npy`, literals)
and, checked, from the Python API."""

from __future__ import annotations

import ast
import math
import re
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from neuronemu.errors import InternalError, UsageError, shown
from neuronemu.host.files import open_user_file
from neuronemu.ir import ALL_DTYPES, DType
from neuronemu.limits import Limits
from neuronemu_isa.numerics import dtype_name, dtype_of, is_float, itemsize

__all__ = [
    "parse_spec",
    "parse_assignment",
    "random_array",
    "load_npz",
    "write_npz",
    "Unmade",
    "made",
    "checked_inputs",
    "array_inputs",
]

_ARRAY_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[\s*([0-9,\s]*)\]\s*$")
# A dtype as a kernel parameter (`-i kernel_dtype=nl.bfloat16`): what the kernel would get
# from the name in its own code.
_DTYPE_SPEC = re.compile(r"^\s*(?:nl|nki\.language|np|numpy)\.([A-Za-z0-9_]+)\s*$")


# `dtype[shape]~name(args)`: the distribution of an input's data (default: normal(0, 1) for
# floats, integers in [-64, 64] clipped to the dtype).
_DISTRIBUTION = re.compile(r"^\s*([a-z]+)\s*(?:\(([^()]*)\))?\s*$")
_DISTRIBUTIONS = {  # name: (number of arguments, what they are)
    "uniform": (2, "low, high"),
    "normal": (2, "mean, std"),
    "randint": (2, "low, high (high excluded)"),
    "zeros": (0, ""),
    "ones": (0, ""),
    "arange": (0, ""),
}


def _distribution(name: str, text: str) -> tuple[str, tuple[float, ...]]:
    m = _DISTRIBUTION.match(text)
    known = ", ".join(f"{k}({v[1]})" if v[0] else k for k, v in _DISTRIBUTIONS.items())
    if m is None or m.group(1) not in _DISTRIBUTIONS:
        raise UsageError(
            f"input {name!r}: unknown distribution {shown(text)}", hint=f"one of: {known}"
        )
    kind, args_text = m.group(1), m.group(2) or ""
    try:
        args = tuple(float(a) for a in args_text.split(",") if a.strip())
    except ValueError:
        raise UsageError(f"input {name!r}: {shown(text)} takes numbers", hint=f"one of: {known}")
    if len(args) != _DISTRIBUTIONS[kind][0] or not all(math.isfinite(a) for a in args):
        raise UsageError(
            f"input {name!r}: {kind} takes {_DISTRIBUTIONS[kind][0]} finite numbers "
            f"({_DISTRIBUTIONS[kind][1] or 'none'}), got {shown(text)}"
        )
    if kind in ("uniform", "randint") and not args[0] < args[1]:
        raise UsageError(f"input {name!r}: {kind} needs low < high, got {shown(text)}")
    if kind == "uniform" and not math.isfinite(args[1] - args[0]):
        # (NumPy draws low + (high - low) * u: the width must be a float too)
        raise UsageError(
            f"input {name!r}: uniform's high - low must be a finite float, got {shown(text)}",
            hint="e.g. ~uniform(-1e300,1e300)",
        )
    if kind == "randint":
        low, high = math.ceil(args[0]), math.ceil(args[1])
        if not low < high:
            raise UsageError(f"input {name!r}: {shown(text)} holds no integer")
        if low < -(2**63) or high > 2**63:  # (NumPy draws them as int64)
            raise UsageError(
                f"input {name!r}: randint's bounds must lie within int64 "
                f"[-2**63, 2**63], got {shown(text)}"
            )
    if kind == "normal" and args[1] < 0:
        raise UsageError(f"input {name!r}: normal needs std >= 0, got {shown(text)}")
    return kind, args


def random_array(
    dtype: str,
    shape: tuple[int, ...],
    seed: int,
    name: str,
    distribution: tuple[str, tuple[float, ...]] | None = None,
) -> np.ndarray:
    """Seeded data for one input; each input's stream depends only on (seed, name)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    dt = dtype_of(dtype)
    if distribution is not None:
        kind, args = distribution
        if kind == "zeros":
            return np.zeros(shape, dt)
        if kind == "ones":
            return np.ones(shape, dt)
        if kind == "arange":
            return np.arange(math.prod(shape), dtype=np.float64).reshape(shape).astype(dt)
        if kind == "uniform":
            data = rng.uniform(args[0], args[1], shape)
        elif kind == "normal":
            data = rng.normal(args[0], args[1], shape)
        else:
            data = rng.integers(math.ceil(args[0]), math.ceil(args[1]), shape).astype(np.float64)
        if dt.kind in "iub":
            info = np.iinfo(dt) if dt.kind != "b" else None
            if info is not None:
                data = np.clip(np.rint(data), info.min, info.max)
        with np.errstate(over="ignore", invalid="ignore"):  # (float16 of 1e300: inf, quietly)
            return data.astype(dt)
    if is_float(dtype):
        return rng.standard_normal(shape, dtype=np.float32).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -64), min(info.max, 64), shape, endpoint=True).astype(dt)


class Unmade(np.ndarray):
    """A seeded input whose values are not made yet: an array of its shape and dtype whose
    elements are one read-only zero (no memory), and how to make them (`make`). What reads
    only shapes and dtypes (tracing, the checks, the timing) takes it as it is; what reads
    values takes `made(...)` of it. `neuronemu run --timing-only` passes these: at
    [8192, 8192] the values took a second and 400 MB to make, for a run that may never read
    them (it does with device loops, or writes of two cores to settle)."""

    make: Any = None

    @classmethod
    def of(cls, dtype: str, shape: tuple[int, ...], make: Any) -> Unmade:
        standin = np.broadcast_to(np.zeros((), dtype_of(dtype)), shape).view(cls)
        standin.make = make
        return standin

    def __array_finalize__(self, obj: Any) -> None:
        self.make = None  # (a view of one is not the input: `made` refuses it)


def made(value: Any) -> Any:
    """An input's values: those of an `Unmade` made now, anything else as it is."""
    if not isinstance(value, Unmade):
        return value
    if value.make is None:
        raise InternalError("the values of a view of an unmade input were asked for")
    return value.make()


def _check_size(name: str, shape: tuple[int, ...], nbytes_per_item: int, limits: Limits) -> None:
    nbytes = math.prod(shape) * nbytes_per_item
    if nbytes > limits.memory_bytes:
        raise UsageError(
            f"input {name!r} of shape {list(shape)} needs {nbytes:,} bytes, over "
            f"the memory_bytes budget of {limits.memory_bytes:,}",
            hint="raise it with --limit memory_bytes=N (e.g. 16G) if the machine has the memory",
        )


# Dimensions of an array SPEC: NumPy 1's limit (NumPy 2's is 64); no NKI tensor comes close.
MAX_DIMS = 32


def parse_spec(
    name: str, spec: str, seed: int, limits: Limits | None = None, unmade: bool = False
) -> Any:
    """One `-i NAME=SPEC` value: an array or a Python literal (a compile-time parameter).
    `unmade`: seeded data as an `Unmade`, made only if the run reads it."""
    limits = limits or Limits()
    if len(spec) > limits.literal_bytes:
        raise UsageError(
            f"input {name!r}: a SPEC of {len(spec):,} characters is over the "
            f"literal_bytes budget of {limits.literal_bytes:,}",
            hint="raise it with --limit literal_bytes=N",
        )
    if spec.startswith("@"):
        # `@x.npy:bfloat16`: the dtype of an array NumPy saved without knowing it (bfloat16
        # and fp8 from ml_dtypes load back as raw |V2 / |V1 bytes).
        file, colon, dtype = spec[1:].rpartition(":")
        if colon and dtype and not Path(spec[1:]).is_file():
            return _as_dtype(name, _load_npy(name, Path(file), limits), dtype)
        return _load_npy(name, Path(spec[1:]), limits)
    distribution = None
    if "~" in spec and not _is_literal(spec):  # float32[128,512]~uniform(-30,30)
        spec, dist_text = spec.split("~", 1)
        distribution = _distribution(name, dist_text)
    m = _ARRAY_SPEC.match(spec)
    if m and not _is_literal(spec):
        dtype, dims = m.group(1), m.group(2)
        try:
            dtype_of(dtype)
        except KeyError:
            raise UsageError(
                f"input {name!r}: unknown dtype {dtype!r} in {spec!r}",
                hint="e.g. float32[128,512], bfloat16[256,1024], int32[128,1]",
            ) from None
        parts = [p.strip() for p in dims.split(",") if p.strip()]
        if not parts:
            raise UsageError(
                f"input {name!r}: {shown(spec)} has no dimensions", hint="e.g. float32[128,512]"
            )
        if len(parts) > MAX_DIMS:
            raise UsageError(
                f"input {name!r}: {len(parts)} dimensions, over the {MAX_DIMS} an array can have"
            )
        if any(len(p) > 18 for p in parts):  # (over 10**18 elements: over any memory budget)
            raise UsageError(f"input {name!r}: a dimension of {shown(spec)} is too large")
        shape = tuple(int(p) for p in parts)
        if any(d <= 0 for d in shape):
            raise UsageError(f"input {name!r}: every dimension of {shown(spec)} must be positive")
        _check_size(name, shape, itemsize(dtype), limits)
        if unmade:
            return Unmade.of(
                dtype, shape, lambda: random_array(dtype, shape, seed, name, distribution)
            )
        return random_array(dtype, shape, seed, name, distribution)
    if distribution is not None:
        raise UsageError(
            f"input {name!r}: a distribution goes with an array SPEC, e.g. "
            "float32[128,512]~uniform(-1,1)"
        )
    d = _DTYPE_SPEC.match(spec)
    if d:
        found = ALL_DTYPES.get({"bool": "bool_"}.get(d.group(1), d.group(1)))
        if found is None:
            raise UsageError(
                f"input {name!r}: unknown dtype {shown(spec)}",
                hint="e.g. nl.bfloat16, nl.float32, nl.int32",
            )
        return found
    try:
        value = ast.literal_eval(spec)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise UsageError(
            f"input {name!r}: cannot read {shown(spec)}",
            hint="SPEC is dtype[d0,d1,...] (random data), @file.npy, a dtype such as "
            'nl.bfloat16, or a Python literal such as 2, 0.5, (3, 4) or "causal"',
        ) from None
    if isinstance(value, int) and value.bit_length() > limits.int_bits:
        raise UsageError(
            f"input {name!r}: an integer of {value.bit_length():,} bits is over "
            f"the int_bits budget of {limits.int_bits:,}"
        )
    return value


def _is_literal(spec: str) -> bool:
    try:
        ast.literal_eval(spec)
        return True
    except (ValueError, SyntaxError, MemoryError, RecursionError):  # (deep: the parser's stack)
        return False


def parse_assignment(
    text: str, seed: int, limits: Limits | None = None, unmade: bool = False
) -> tuple[str, Any]:
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"-i {text!r}: expected NAME=SPEC", hint="e.g. -i a=float32[128,512]")
    return name, parse_spec(name, spec.strip(), seed, limits, unmade)


class _BadFile(ValueError):
    """What is wrong with an input file, in words that quote none of its bytes (NumPy's own
    messages quote the magic string, the header's text and keys; zipfile's, member names)."""


def _array_header(f: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a .npy header, without reading the data. The header is a Python
    literal NumPy parses (tokenize, literal_eval): whatever a malformed one makes that parser
    raise (an unclosed bracket's TokenError, a deep nesting's RecursionError...) is a
    `_BadFile`, the file's fault."""
    try:
        version = np.lib.format.read_magic(f)
    except ValueError:
        raise _BadFile("bad magic") from None
    try:
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    except (EOFError, OSError):
        raise
    except Exception:  # (the parser of an untrusted header: any failure is bad input)
        raise _BadFile("its header does not parse") from None
    return shape, dtype


def _load_npy(name: str, path: Path, limits: Limits) -> np.ndarray:
    option = f"input {name!r}"
    with open_user_file(path, "file", option, limits.memory_bytes + HEADER_BYTES) as (f, _):
        try:
            shape, dtype = _array_header(f)
            _check_size(name, shape, dtype.itemsize, limits)
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise UsageError(
                f"{option}: {str(path)!r} is not a valid .npy file ({_fault(exc)})"
            ) from None


# What a .npy or .npz file may hold beyond its arrays' bytes: the .npy header (its length is
# 2 bytes in format 1.0, and NumPy refuses longer ones in 2.0 unless told otherwise) and the
# zip archive's entries. Inferred, not a documented figure.
HEADER_BYTES = 1 << 20


def _fault(exc: BaseException) -> str:
    """`exc`, raised reading an input file, in words that quote none of the file's bytes."""
    if isinstance(exc, _BadFile):
        return str(exc)
    if isinstance(exc, zipfile.BadZipFile):
        return "a damaged zip archive"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, EOFError):
        return "it ends early"
    if isinstance(exc, NotImplementedError):  # (zipfile's: a compression it lacks)
        return "a zip member compressed in a way that cannot be read"
    return "its data does not match its header"  # (its header has parsed)


def _as_dtype(name: str, arr: np.ndarray, dtype: str) -> np.ndarray:
    """`arr` as `dtype`: raw bytes of that size are reinterpreted, numbers converted."""
    try:
        dt = dtype_of(dtype)
    except KeyError:
        raise UsageError(
            f"input {name!r}: unknown dtype {dtype!r}", hint="e.g. @x.npy:bfloat16"
        ) from None
    if arr.dtype.kind == "V":
        if arr.dtype.itemsize != dt.itemsize:
            raise UsageError(
                f"input {name!r}: the file holds {arr.dtype.itemsize}-byte raw items; "
                f"{dtype} items are {dt.itemsize} bytes"
            )
        return arr.view(dt)
    if arr.dtype.kind not in "biuf":  # (strings, dates, complex numbers: not numbers of dt)
        raise UsageError(
            f"input {name!r}: the file holds {arr.dtype} items, which are not numbers "
            f"to convert to {dtype}"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # (float16 of 1e300: inf, quietly)
        return arr.astype(dt)


def checked_inputs(inputs: Any) -> dict[str, Any]:
    """The inputs of `run` and `compile_kernel`, checked: a dict of parameter names to
    arrays of a dtype neuronemu models, or compile-time values (numbers, strings, None,
    and tuples, lists, dicts and sets of them). A wrong one is a UsageError naming it."""
    if not isinstance(inputs, Mapping):
        raise UsageError(
            f"inputs must be a dict of input name to array or value, got {type(inputs).__name__}",
            hint="e.g. inputs={'a': numpy.ones((128, 512), numpy.float32)}",
        )
    for name, value in inputs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"inputs: {shown(name)} is not a parameter name (a str)")
        if isinstance(value, np.ndarray):
            if not _modelled(value.dtype):
                raise UsageError(
                    f"input {name!r}: arrays of dtype {value.dtype} are not modelled",
                    hint="e.g. float32, bfloat16 (ml_dtypes), float8_e4m3, int32, uint8, bool",
                )
        elif not _plain_value(value, 32):
            raise UsageError(
                f"input {name!r}: a value of type {type(value).__name__} is neither an array "
                "nor a compile-time value (a number, string, None, or a tuple, list, dict or set "
                "of them)"
            )
    return dict(inputs)


def _modelled(dtype: np.dtype) -> bool:
    try:
        return dtype_name(dtype) in ALL_DTYPES
    except (KeyError, TypeError, ValueError):
        return False


def array_inputs(inputs: dict[str, Any]) -> None:
    """A text program's inputs are its tensors: each must make an array of a modelled dtype."""
    for name, value in inputs.items():
        try:
            dtype = np.asarray(value).dtype
        except (ValueError, TypeError):
            dtype = np.dtype(object)
        if not _modelled(dtype):
            raise UsageError(
                f"input {name!r}: a {type(value).__name__} of dtype {dtype} is not an array "
                "neuronemu models (a text program's inputs are its tensors)"
            )


_PLAIN = (int, float, complex, str, bytes, type(None), np.generic, np.dtype, DType)


def _plain_value(value: Any, depth: int) -> bool:
    """A compile-time value as a kernel may take one (a NumPy scalar, dtype or array among
    them), no deeper than `depth`."""
    if isinstance(value, _PLAIN) or (isinstance(value, type) and issubclass(value, np.generic)):
        return True
    if depth <= 0:
        return False
    if isinstance(value, np.ndarray):
        return _modelled(value.dtype)
    if isinstance(value, dict):
        return all(_plain_value(v, depth - 1) for kv in value.items() for v in kv)
    if isinstance(value, (tuple, list, set, frozenset)):
        return all(_plain_value(v, depth - 1) for v in value)
    return False


_DTYPES_KEY = "__neuronemu_dtypes__"  # name=dtype of each array stored widened to float32


def save_npz(path: str | IO[bytes], inputs: dict[str, Any]) -> None:
    """The array inputs of a run, exactly: bfloat16/fp8 arrays are stored as float32 (exact)
    with their dtype recorded, so that `--inputs` gives back the same arrays."""
    arrays: dict[str, np.ndarray] = {}
    widened = []
    for name, value in inputs.items():
        if not isinstance(value, np.ndarray):
            continue  # compile-time values go on the command line (-i NAME=VALUE)
        if value.dtype.kind == "V" or type(value.dtype).__module__.startswith("ml_dtypes"):
            widened.append(f"{name}={value.dtype.name}")
            value = value.astype(np.float32)
        arrays[name] = value
    if widened:
        arrays[_DTYPES_KEY] = np.array(widened)
    write_npz(path, arrays)


def write_npz(path: str | IO[bytes], arrays: Mapping[str, np.ndarray]) -> None:
    """`np.savez(path, **arrays)` for arrays of any name: savez takes one named
    `allow_pickle` for its flag, and leaves it out of the file."""
    if isinstance(path, str) and not path.endswith(".npz"):
        path += ".npz"  # (as savez names the file)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)


_ENCRYPTED = 0x1  # a zip entry's general purpose flag bit 0 (APPNOTE.TXT 4.4.4)


def load_npz(path: str, limits: Limits | None = None) -> dict[str, np.ndarray]:
    """The arrays of a .npz archive, each member's size checked from its header before it is
    read (a compressed archive may expand far beyond its own size)."""
    limits = limits or Limits()
    arrays: dict[str, np.ndarray] = {}
    total = 0
    with open_user_file(path, "file", "--inputs", limits.memory_bytes + HEADER_BYTES) as (f, _):
        try:
            if not zipfile.is_zipfile(f):
                raise UsageError(
                    f"--inputs {path!r} is not a valid .npz archive (not a zip file)",
                    hint="a single array is passed as -i NAME=@file.npy",
                )
            with zipfile.ZipFile(f) as archive:
                for member in archive.namelist():
                    key = member[:-4] if member.endswith(".npy") else member
                    if archive.getinfo(member).flag_bits & _ENCRYPTED:
                        raise _BadFile("an encrypted zip member")
                    with archive.open(member) as m:
                        shape, dtype = _array_header(m)
                        total += math.prod(shape) * dtype.itemsize
                        _check_size(
                            key,
                            shape,
                            dtype.itemsize,
                            limits.replace(
                                memory_bytes=limits.memory_bytes
                                - total
                                + math.prod(shape) * dtype.itemsize
                            ),
                        )
                    with archive.open(member) as m:
                        arrays[key] = np.lib.format.read_array(m, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
            raise UsageError(
                f"--inputs {path!r} is not a valid .npz archive ({_fault(exc)})"
            ) from None
    for entry in arrays.pop(_DTYPES_KEY, np.array([], dtype=str)).tolist():
        name, _, dtype_name = str(entry).partition("=")
        if name in arrays:
            arrays[name] = _as_dtype(name, arrays[name], dtype_name)
    return arrays
