"""What a trace-time result made in C will hold, known before it is made, and what making it
costs: strings joined, encoded or re-cased, arrays converted, copied or indexed, slices.

Two rules bound many results together as well as each one: a trace-time NumPy array counts
its bytes against `memory_bytes` (as the run's other data does), and every string or
container that C code copies or makes costs one step of `loop_iterations` per
`COPY_BYTES_PER_STEP` bytes of it, so that all the copies one run may make hold at most
`loop_iterations * COPY_BYTES_PER_STEP` bytes (512 MB at the default budgets).
"""

from __future__ import annotations

import codecs
import collections
import math
import re
import sys
from typing import Any, Iterable

import numpy as np

from neuronemu.errors import SourceSpan
from neuronemu.limits import Meter

__all__ = [
    "COPY_BYTES_PER_STEP",
    "array_bytes",
    "array_method",
    "charge_array",
    "copy_work",
    "fits",
    "itemsize",
    "join_parts",
    "made",
    "subscript",
    "text_method",
]

# A copy of 64 list items or 512 ASCII characters is one step: 1,000 steps copy a 64,000-item
# list (ordinary kernels copy far less), and the default 1,000,000 steps copy 512 MB in all.
COPY_BYTES_PER_STEP = 512
# An element of an object array: its pointer and the Python object NumPy boxes for it.
_OBJECT_BYTES = 64
# `astype("U")` (no width) of numbers: NumPy picks the width (32 characters for a float64).
_FLEXIBLE_CHARS = 64
# Strings measured a piece at a time, so that measuring holds no more than this at once.
_CHUNK_CHARS = 1 << 16
_MADE = (str, bytes, list, tuple, dict, set, frozenset, collections.deque)
# str methods whose result may be longer than the string (`"ß".upper()` is "SS", "ﬃ" is
# three letters) or another size altogether (`encode`), with their worst growth per character.
_TEXT_GROWTH = {"upper": 3, "lower": 3, "casefold": 3, "swapcase": 3, "title": 3, "capitalize": 3}
_ENCODE_GROWTH = {"strict": 4, "ignore": 4, "replace": 4, "surrogateescape": 4}
_ENCODE_GROWTH_OTHER = 100  # "namereplace": `\N{...}` with a Unicode name of up to ~90 letters


def copy_work(meter: Meter, nbytes: int, span: SourceSpan | None) -> None:
    """`nbytes` copied or made by C code: one step per `COPY_BYTES_PER_STEP`."""
    if nbytes >= COPY_BYTES_PER_STEP:
        meter.step(span, nbytes // COPY_BYTES_PER_STEP)


def made(meter: Meter, value: Any, span: SourceSpan | None) -> None:
    """A string or container C code has just made: its own bytes (not the items it shares
    with others) are work. A sequence of NumPy scalars (`list(array)`) holds new objects
    too: each is made, not shared, and counts."""
    if isinstance(value, _MADE):
        nbytes = sys.getsizeof(value)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.generic):
            nbytes += len(value) * sys.getsizeof(value[0])
        copy_work(meter, nbytes, span)


# Arrays ---------------------------------------------------------------------------------


def itemsize(dtype: Any, source: np.dtype | None = None) -> int:
    """Bytes an element of `dtype` holds (an object element with its boxed value; a string
    dtype with no width, as wide as NumPy may make it from `source`)."""
    dt = np.dtype(dtype)
    if dt.hasobject:
        return _OBJECT_BYTES * max(1, dt.itemsize // 8)
    if dt.itemsize == 0 and dt.kind in "USV":
        chars = max(_FLEXIBLE_CHARS, source.itemsize if source is not None else 0)
        return chars * (4 if dt.kind == "U" else 1)
    return dt.itemsize


def array_bytes(a: np.ndarray | np.generic) -> int:
    return int(a.size) * itemsize(a.dtype)


def fits(meter: Meter, nbytes: int, what: str, span: SourceSpan | None) -> None:
    """An array of `nbytes` is about to be made: refused if the run could not then hold it
    (the bytes are counted once it is made, by `charge_array`)."""
    if meter.data_bytes + nbytes > meter.limits.memory_bytes:
        meter.allocate(nbytes, what, span)


def charge_array(
    meter: Meter, result: np.ndarray, inputs: Iterable[Any], what: str, span: SourceSpan | None
) -> None:
    """An array C code has made counts its bytes against `memory_bytes`, unless it is a view
    of one of the `inputs`."""
    for x in inputs:
        if isinstance(x, np.ndarray) and np.may_share_memory(result, x):
            return
    meter.allocate(array_bytes(result), what, span)


def array_method(
    meter: Meter, value: Any, attr: str, args: tuple, kwargs: dict, span: SourceSpan
) -> None:
    """The size of what an array method will make, checked before NumPy makes it."""
    what = f"ndarray.{attr}()"
    size = int(value.size)
    if attr == "astype":
        dtype = args[0] if args else kwargs.get("dtype")
        try:
            dt = np.dtype(getattr(dtype, "np", dtype))
            nbytes = size * itemsize(dt, value.dtype)
        except (TypeError, ValueError, OverflowError):
            return  # NumPy says what is wrong with it
        meter.items(size * math.prod(dt.shape), what, span)
        fits(meter, nbytes, what, span)
    elif attr == "tolist":
        meter.items(size, what, span)
        # a Python object per element, and a list per row
        copy_work(meter, array_bytes(value) + size * 40, span)
    elif attr in ("cumsum", "cumprod", "argsort"):
        fits(meter, size * max(8, value.dtype.itemsize), what, span)
    elif attr == "nonzero":
        fits(meter, size * 8 * max(1, value.ndim), what, span)
    elif attr in ("copy", "flatten", "ravel", "reshape", "clip", "round", "conj", "sort"):
        fits(meter, array_bytes(value), what, span)
    elif attr == "repeat":  # (each element `repeats` times, or as many as their sum)
        repeats = args[0] if args else kwargs.get("repeats", 1)
        try:
            reps = np.asarray(repeats)
            n = (
                size * max(int(reps), 0)
                if reps.ndim == 0
                else int(np.sum(reps)) * max(size // max(reps.size, 1), 1)
            )
        except (TypeError, ValueError, OverflowError):
            return  # NumPy says what is wrong with it
        meter.items(n, what, span)
        fits(meter, n * itemsize(value.dtype), what, span)


def subscript(meter: Meter, value: Any, index: Any, span: SourceSpan | None) -> None:
    """`value[index]`, before it is made: a slice of a sequence is a copy (work, as any copy);
    an array indexed by arrays is a new array, as large as the index's broadcast shape."""
    if isinstance(index, slice) and isinstance(value, (list, tuple, str, bytes)):
        try:
            n = len(range(*index.indices(len(value))))
        except (TypeError, ValueError, OverflowError):
            return  # Python says what is wrong with the slice
        copy_work(meter, n * sys.getsizeof(value) // max(len(value), 1), span)
    elif isinstance(value, np.ndarray):
        items = _advanced_items(value.shape, index)
        if items is not None:
            meter.items(items, "an array indexed by an array", span)
            meter.allocate(items * itemsize(value.dtype), "an array indexed by an array", span)


def _advanced_items(shape: tuple[int, ...], index: Any) -> int | None:
    """Elements of `a[index]` when `index` holds arrays or lists (NumPy's advanced indexing,
    which copies), or None (basic indexing: a view; or an index NumPy will refuse)."""
    idx = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(i, (np.ndarray, list)) for i in idx):
        return None
    try:
        parts = [np.asarray(i) if isinstance(i, list) else i for i in idx]
        fixed = sum(
            i.ndim if isinstance(i, np.ndarray) and i.dtype == bool else 1
            for i in parts
            if i is not None and i is not Ellipsis
        )
        shapes: list[tuple[int, ...]] = []
        rest, dim = 1, 0
        for i in parts:
            if i is None:
                continue
            if i is Ellipsis:
                skip = max(len(shape) - fixed, 0)
                rest *= math.prod(shape[dim : dim + skip])
                dim += skip
            elif isinstance(i, slice):
                rest *= len(range(*i.indices(shape[dim])))
                dim += 1
            elif isinstance(i, np.ndarray) and i.dtype == bool:
                shapes.append((int(np.count_nonzero(i)),))
                dim += i.ndim
            else:
                shapes.append(np.shape(i))
                dim += 1
        rest *= math.prod(shape[dim:])
        return math.prod(np.broadcast_shapes(*shapes)) * rest
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


# Strings --------------------------------------------------------------------------------


def join_parts(meter: Meter, sep: str | bytes, parts: Any, lazy: bool, span: SourceSpan) -> Any:
    """The parts `sep.join(parts)` will join, as a list if they come from an iterator (a step
    each, as it is consumed), with the joined length checked before anything is joined."""
    what = f"{type(sep).__name__}.join()"
    if not lazy:
        try:
            total = sum(map(len, parts)) + len(sep) * max(len(parts) - 1, 0)
        except TypeError:
            return parts  # (not strings: join says so)
        meter.items(total, what, span)
        return parts
    out, total = [], -len(sep)
    for part in meter.counted(parts, span):
        out.append(part)
        if isinstance(part, (str, bytes)):
            total += len(part) + len(sep)
            if total > meter.limits.sequence_items:
                meter.items(total, what, span)
    return out


_PUNYCODE_CHARS_PER_STEP = 4  # (inferred from timings: 1M steps ~ 2,000 characters ~ 1 s)
# The label separators of Python's idna codec (RFC 3490 3.1: full stop and its ideographic,
# fullwidth and halfwidth forms).
_IDNA_DOTS = re.compile("[.\u3002\uff0e\uff61]")


def _codec(args: tuple, kwargs: dict) -> str | None:
    """The normalized name of the codec an encode/decode call names (None: the default, or
    one Python does not know: the call itself says so)."""
    name = args[0] if args else kwargs.get("encoding")
    if not isinstance(name, str):
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _punycoded_squared(value: str | bytes, codec: str | None) -> int:
    """The sum of the squared lengths of the runs `codec` puts through punycode: the whole
    text for punycode; for idna, each label that is not plain ASCII (encoding) or that
    carries the ACE prefix `xn--` (decoding); 0 for any other codec."""
    if codec == "punycode":
        return len(value) ** 2
    if codec != "idna":
        return 0
    if isinstance(value, str):
        labels = _IDNA_DOTS.split(value)
        return sum(len(label) ** 2 for label in labels if not label.isascii())
    return sum(len(label) ** 2 for label in value.split(b".") if label[:4].lower() == b"xn--")


def text_method(
    meter: Meter, value: str | bytes, attr: str, args: tuple, kwargs: dict, span: SourceSpan
) -> None:
    """The length of what a str or bytes method that may grow its text will make."""
    what = f"{type(value).__name__}.{attr}()"
    if attr in ("encode", "decode"):
        # Python's punycode codec takes time quadratic in the text (2,000 CJK characters:
        # ~1 s; 20,000: ~94 s), and its idna codec runs it on each label that needs it (a
        # 4,000,000-emoji label: 25 s before it says the label is too long): charged so,
        # before it runs (a step per 4 squared characters).
        squared = _punycoded_squared(value, _codec(args, kwargs))
        if squared:
            meter.step(span, squared // _PUNYCODE_CHARS_PER_STEP)
    if attr == "hex":
        meter.items(len(value) * (3 if args or kwargs else 2), what, span)
        return
    if attr == "encode" and isinstance(value, str):
        errors = args[1] if len(args) > 1 else kwargs.get("errors", "strict")
        growth = _ENCODE_GROWTH.get(errors, _ENCODE_GROWTH_OTHER) if isinstance(errors, str) else 1
    elif attr in _TEXT_GROWTH and isinstance(value, str):
        growth = _TEXT_GROWTH[attr]
    else:
        return
    if len(value) * growth + 4 <= meter.limits.sequence_items:
        return  # small enough whatever it makes
    total = 0
    for start in range(0, len(value), _CHUNK_CHARS):
        try:  # the real method on each piece (what it refuses, it refuses whole, located)
            total += len(getattr(value[start : start + _CHUNK_CHARS], attr)(*args, **kwargs))
        except (LookupError, ValueError, TypeError):
            return
        meter.items(total, what, span)
