"""Tensors and their views: strided boxes, access patterns and run-time (indirect) patterns.

Geometry only: where a tensor lives, which elements a view walks, in which order, and its
NumPy view of a backing array. The NKI tensor API that builds views from kernel code
(reshape, permute, select, ...) is in `neuronemu.trace.tensor_api`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuronemu.errors import ConstraintError, InternalError, KernelTypeError, SourceSpan, shown
from neuronemu.ir.buffers import BufferKind
from neuronemu.ir.dtypes import DType
from neuronemu_isa import Buffer

__all__ = [
    "Tensor",
    "reserve_ids",
    "View",
    "PatternView",
    "strided",
    "regroup",
    "raw_pattern",
    "pattern_pairs",
    "alias_shape",
]

_ids = itertools.count()


def reserve_ids(n: int) -> int:
    """Take the next `n` (at least 1) tensor ids (for tensors made later with them, in
    order): the first of them."""
    if n < 1:
        raise ValueError(f"reserve_ids({n}): at least one id")
    first = next(_ids)
    if n > 1:
        next(itertools.islice(_ids, n - 2, None))  # (the other n - 1, consumed in C)
    return first


class _cached:
    """A cached property without functools.cached_property's lock (slow before Python
    3.12): computed on first access, then read from the instance's dict."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.name = fn, fn.__name__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(eq=False)
class Tensor:
    """A tensor in HBM, SBUF or PSUM. `kind`: "input", "output" (shared_hbm) or "tile"."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    kind_of_buffer: BufferKind
    span: SourceSpan
    kind: str = "tile"
    id: int = field(default_factory=lambda: next(_ids))
    address: int | None = None  # a placement the kernel asked for (bytes per partition)
    partition_offset: int | None = None  # ... and its first partition
    # A reinterpretation (`t.view(dtype)`): the same bytes as `base` (never itself an alias)
    # in another dtype, the last dim scaled by the ratio of the item sizes.
    base: Tensor | None = None
    aliased: bool = False  # some alias views this tensor's bytes
    out_shape: tuple[int, ...] | None = None  # the shape a kernel returned it as (a reshape)
    core: int = 0  # the physical NeuronCore whose SBUF/PSUM/registers hold it (LNC2)

    @property
    def root(self) -> Tensor:
        """The tensor that owns the bytes (itself unless it is an alias)."""
        return self if self.base is None else self.base

    data: np.ndarray | None = None  # the contents of a constant (kind "constant")

    @_cached
    def buffer(self) -> Buffer:
        return self.kind_of_buffer.buffer

    @_cached
    def on_chip(self) -> bool:
        return self.buffer != Buffer.HBM

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes_per_partition(self) -> int:
        return math.prod(self.shape[1:]) * self.dtype.itemsize

    def full(self) -> View:
        return self._full

    @_cached
    def _full(self) -> View:
        return View(self, tuple((0, n, 1) for n in self.shape), tuple(range(len(self.shape))))

    @property
    def label(self) -> str:
        """The name for messages: unnamed tiles are named by the variable they are bound to."""
        return self.name.lstrip("%") or "tmp"

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"{self.name}: {self.kind_of_buffer.name} {self.dtype.name}[{dims}]"


@dataclass(frozen=True, eq=False)
class View:
    """A strided box of a tensor: per-dim (start, stop, step), and which dims are kept.

    Integer indexing drops a dim of an HBM tensor, but keeps the partition dim of an on-chip
    tile as size 1 (nki: "integer-indexing dim 0 keeps a size-1 dim").
    """

    tensor: Tensor
    box: tuple[tuple[int, int, int], ...]
    kept: tuple[int, ...]  # the tensor dims that remain dims of the view

    @_cached  # (a view is immutable: shape, pattern, root computed once)
    def shape(self) -> tuple[int, ...]:
        return tuple(_count(*self.box[d]) for d in self.kept)

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    @property
    def buffer(self) -> Buffer:
        return self.tensor.buffer

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def np_view(self, array: np.ndarray) -> np.ndarray:
        """This view of `array` (the tensor's backing array): a NumPy view, writable, no copy."""
        return array[(*self.np_index(), Ellipsis)]

    def as_pattern(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        """This view as (offset, [(stride, count), ...]) over the tensor's flat elements."""
        return self._pattern

    @_cached
    def _pattern(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        strides = [1] * len(self.tensor.shape)
        for d in range(len(strides) - 2, -1, -1):
            strides[d] = strides[d + 1] * self.tensor.shape[d + 1]
        offset = sum(start * strides[d] for d, (start, _, _) in enumerate(self.box))
        pairs = tuple((strides[d] * self.box[d][2], _count(*self.box[d])) for d in self.kept)
        return offset, pairs

    def as_root(self) -> View:
        """The same bytes as a view of the root tensor (itself if not an alias). Exact when
        the bytes are whole root elements; else the root elements that contain them."""
        return self if self.tensor.base is None else self._root

    @_cached
    def _root(self) -> View:
        t = self.tensor
        root = t.base
        assert root is not None
        a, b = t.dtype.itemsize, root.dtype.itemsize
        offset, levels = self.as_pattern()
        pairs = list(levels)
        if root.on_chip and len(pairs) == 1:  # only the partition level: one element each
            pairs.append((1, 1))
        regrouped = regroup(offset, pairs, a, b)
        if regrouped is not None:
            return raw_pattern(root, *regrouped)
        r = b // a
        box = tuple((lo, hi, 1) for lo, hi in self.bounds()[:-1]) + (
            (self.bounds()[-1][0] // r, -(-self.bounds()[-1][1] // r), 1),
        )
        return View(root, box, tuple(range(len(root.shape))))

    def tensor_index(self, local: tuple) -> tuple[int, ...]:
        """An index into this view as an index into its tensor."""
        out = []
        it = iter(local)
        for d, (start, _, step) in enumerate(self.box):
            out.append(start + next(it) * step if d in self.kept else start)
        return tuple(int(i) for i in out)

    def np_index(self) -> tuple:
        """Index into the tensor's backing array giving this view (a NumPy view, no copy)."""
        out: list[Any] = []
        for d, (start, stop, step) in enumerate(self.box):
            if d in self.kept:
                out.append(slice(start, stop if stop >= 0 else None, step))
            else:
                out.append(start)
        return tuple(out)

    @_cached
    def _bounds(self) -> tuple[tuple[int, int], ...]:
        return self._compute_bounds()

    def bounds(self) -> tuple[tuple[int, int], ...]:
        """The half-open [lo, hi) range touched in every tensor dim (conservative for steps)."""
        return self._bounds

    def _compute_bounds(self) -> tuple[tuple[int, int], ...]:
        out = []
        for start, stop, step in self.box:
            n = _count(start, stop, step)
            if n == 0:
                out.append((start, start))
            else:
                last = start + (n - 1) * step
                out.append((min(start, last), max(start, last) + 1))
        return tuple(out)

    def is_full(self) -> bool:
        return self.kept == tuple(range(len(self.tensor.shape))) and all(
            b == (0, n, 1) for b, n in zip(self.box, self.tensor.shape)
        )

    def subscript(self, index: Any, span: SourceSpan) -> View:
        """Basic indexing: ints and slices (and `...`)."""
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = len(self.kept) - (len(index) - 1)
            index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1 :]
        if len(index) > len(self.kept):
            raise KernelTypeError(
                f"too many indices for {self.tensor.name}: {len(index)} for a "
                f"{len(self.kept)}-d view of shape {list(self.shape)}",
                span,
            )
        box = list(self.box)
        kept = list(self.kept)
        drop: list[int] = []
        for pos, (dim, idx) in enumerate(zip(self.kept, index)):
            start, stop, step = box[dim]
            n = _count(start, stop, step)
            if isinstance(idx, bool) or not isinstance(idx, (int, slice)):
                raise KernelTypeError(
                    f"index {shown(idx)} of {self.tensor.name} must be an int or a slice of ints; "
                    f"got {type(idx).__name__}",
                    span,
                )
            if isinstance(idx, int):
                i = idx + n if idx < 0 else idx
                if not 0 <= i < n:
                    raise ConstraintError(
                        f"index {idx} is out of bounds for dim {pos} of {self.tensor.name} "
                        f"(size {n})",
                        span,
                    )
                box[dim] = (start + i * step, start + (i + 1) * step, step)
                if not (self.tensor.on_chip and dim == 0):
                    drop.append(dim)
                continue
            for part in (idx.start, idx.stop, idx.step):
                if part is not None and (isinstance(part, bool) or not isinstance(part, int)):
                    raise KernelTypeError(
                        f"slice bounds of {self.tensor.name} must be ints, got {shown(part)}", span
                    )
            lo, hi, st = idx.start, idx.stop, idx.step
            if (lo is not None and (lo > n or lo < -n)) or (hi is not None and hi > n):
                raise ConstraintError(
                    f"slice {fmt_slice(idx)} is out of bounds for dim {pos} of "
                    f"{self.tensor.name} (size {n})",
                    span,
                    hint="slices of NKI tensors must lie inside the tensor",
                )
            if st is not None and st <= 0:
                raise KernelTypeError(f"slice step must be positive, got {st}", span)
            lo_i, hi_i, st_i = slice(lo, hi, st).indices(n)
            new_start = start + lo_i * step
            count = len(range(lo_i, hi_i, st_i))
            new_step = step * st_i
            box[dim] = (new_start, new_start + count * new_step, new_step)
        if self.tensor.on_chip and drop and len(kept) - len(drop) == 1 and 0 in kept:
            drop.pop()  # a tile keeps a free dim: `t[:, 0]` is [P, 1], not [P] (inferred)
        kept = [d for d in kept if d not in drop]
        return View(self.tensor, tuple(box), tuple(kept))

    def __repr__(self) -> str:
        if self.is_full():
            return self.tensor.name
        parts = []
        for d, (start, stop, step) in enumerate(self.box):
            if d not in self.kept:
                parts.append(str(start))
            elif (start, stop, step) == (0, self.tensor.shape[d], 1):
                parts.append(":")
            elif step == 1:
                parts.append(f"{start}:{stop}")
            else:  # the stop just past the last element, so that it stays inside the tensor
                last = start + (_count(start, stop, step) - 1) * step
                parts.append(f"{start}:{last + 1}:{step}")
        return f"{self.tensor.name}[{', '.join(parts)}]"


@dataclass(frozen=True, eq=False)
class PatternView(View):
    """An access pattern over a tensor's flat elements: offset + sum(i_k * stride_k) for the
    (stride, count) pairs of `pattern` (`t.ap(...)`, `t.reshape(...)`, `t.broadcast(...)`).

    Its `box` is the bounding box of the elements it touches (conservative for dependencies
    and races); `np_view` is exact.
    """

    offset: int = 0
    pattern: tuple[tuple[int, int], ...] = ()

    @_cached
    def shape(self) -> tuple[int, ...]:
        return tuple(count for _, count in self.pattern)

    def is_full(self) -> bool:
        return False

    def np_index(self) -> tuple:
        raise TypeError("a pattern view has no basic index; use np_view")

    def as_pattern(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        return self.offset, self.pattern

    def tensor_index(self, local: tuple) -> tuple[int, ...]:
        flat = self.offset + sum(int(i) * stride for i, (stride, _) in zip(local, self.pattern))
        return tuple(int(i) for i in np.unravel_index(flat, self.tensor.shape))

    def np_view(self, array: np.ndarray) -> np.ndarray:
        item = array.itemsize
        if self.tensor.on_chip:
            # The pattern walks one partition's free elements (contiguous) and steps across
            # partitions by the array's own partition stride (an SBUF row need not follow
            # the previous one in memory).
            free = self.tensor.size // self.tensor.shape[0]
            p0, r0 = divmod(self.offset, free)
            (step, parts), rest = self.pattern[0], self.pattern[1:]
            lo, hi = _reach(r0, rest)
            if (parts > 1 and step != free) or lo < 0 or hi >= free or p0 + parts > array.shape[0]:
                raise InternalError(
                    f"{shown(self)} does not stay within the partitions of {self.tensor.name}"
                )
            row = array[p0].reshape(-1)
            strides = (array.strides[0], *(stride * item for stride, _ in self.pattern[1:]))
            return strided(row[r0:], self.shape, strides)
        flat = array.reshape(-1)
        return strided(
            flat[self.offset :], self.shape, tuple(stride * item for stride, _ in self.pattern)
        )

    @staticmethod
    def build(
        tensor: Tensor, offset: int, pattern: Any, span: SourceSpan, internal: bool = False
    ) -> PatternView:
        """A checked pattern view. `internal`: made by neuronemu from index expressions, which
        may walk backwards (the ISA's strides are signed) and span more levels than one
        instruction encodes (the compiler splits those)."""
        pairs = pattern_pairs(pattern, span, max_levels=None if internal else 5)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise KernelTypeError(
                f"access pattern offset must be an int >= 0, got {shown(offset)}", span
            )
        if not internal and any(stride < 0 for stride, _ in pairs):
            raise KernelTypeError("access pattern strides must be >= 0", span)
        lo, hi = _reach(offset, pairs)
        if lo < 0 or hi >= tensor.size:
            raise ConstraintError(
                f"access pattern {[list(p) for p in pairs]} at offset {offset} reaches element "
                f"{lo if lo < 0 else hi} of {tensor.name}, which has {tensor.size}",
                span,
            )
        if tensor.on_chip:
            part_step, parts = pairs[0]
            free = tensor.size // tensor.shape[0]
            if parts > 1 and part_step != free:
                raise ConstraintError(
                    f"the partition step of an SBUF/PSUM access pattern must be the tensor's "
                    f"free size {free}, got {part_step}",
                    span,
                )
            lo, hi = _reach(offset % free, pairs[1:])
            if lo < 0 or hi >= free:
                raise ConstraintError(
                    f"access pattern {[list(p) for p in pairs]} at offset {offset} reaches "
                    f"free element {lo if lo < 0 else hi} of a partition of {tensor.name}, "
                    f"which has {free}; a pattern's free dims stay within each partition",
                    span,
                )
        box = _pattern_box(tensor, offset, pairs)
        return PatternView(tensor, box, tuple(range(len(tensor.shape))), offset, pairs)

    def subscript(self, index: Any, span: SourceSpan) -> View:
        """Basic indexing: ints and slices (and `...`)."""
        if not isinstance(index, tuple):
            index = (index,)
        if sum(i is Ellipsis for i in index) > 1:
            raise KernelTypeError("an access pattern takes at most one '...'", span)
        if Ellipsis in index:  # `...` stands for every dim the other indices leave out
            k = index.index(Ellipsis)
            rest = len(self.pattern) - (len(index) - 1)
            index = index[:k] + (slice(None),) * max(rest, 0) + index[k + 1 :]
        if len(index) > len(self.pattern):
            raise KernelTypeError(
                f"too many indices for a {len(self.pattern)}-d access pattern", span
            )
        offset, pairs = self.offset, []
        for k, (stride, count) in enumerate(self.pattern):
            idx = index[k] if k < len(index) else slice(None)
            if isinstance(idx, int) and not isinstance(idx, bool):
                i = idx + count if idx < 0 else idx
                if not 0 <= i < count:
                    raise ConstraintError(
                        f"index {idx} is out of bounds for dim {k} (size "
                        f"{count}) of the access pattern",
                        span,
                    )
                offset += i * stride
                if k == 0 and self.tensor.on_chip:
                    pairs.append((stride, 1))
                continue
            if not isinstance(idx, slice):
                raise KernelTypeError(
                    f"index {shown(idx)} of an access pattern must be an int or a slice", span
                )
            lo, hi, st = idx.indices(count)
            offset += lo * stride
            pairs.append((stride * st, len(range(lo, hi, st))))
        return PatternView.build(self.tensor, offset, [list(p) for p in pairs], span)

    def __repr__(self) -> str:
        return f"ap({self.tensor.name}, {[list(p) for p in self.pattern]}, {self.offset})"


def regroup(
    offset: int, pairs: Any, old: int, new: int
) -> tuple[int, list[tuple[int, int]]] | None:
    """A pattern over elements of `old` bytes as one over elements of `new` bytes of the same
    flat bytes. Splitting (new <= old) is always exact: each element becomes old/new
    consecutive ones. Merging needs whole groups (offset, strides and the contiguous last
    count divisible by new/old); None when they are not."""
    pairs = list(pairs)
    if new <= old:
        r = old // new
        if pairs and (pairs[-1][0] == 1 or pairs[-1][1] == 1):
            return offset * r, [(s * r, n) for s, n in pairs[:-1]] + [(1, pairs[-1][1] * r)]
        return offset * r, [(s * r, n) for s, n in pairs] + [(1, r)]
    r = new // old
    if (
        offset % r == 0
        and pairs
        and pairs[-1][0] == 1
        and pairs[-1][1] % r == 0
        and all(s % r == 0 for s, _ in pairs[:-1])
    ):
        return offset // r, [(s // r, n) for s, n in pairs[:-1]] + [(1, pairs[-1][1] // r)]
    return None


def raw_pattern(tensor: Tensor, offset: int, pairs: list[tuple[int, int]]) -> PatternView:
    """A pattern view made internally (no level limit; the caller keeps it in bounds)."""
    pattern = tuple(pairs)
    return PatternView(
        tensor,
        _pattern_box(tensor, offset, pattern),
        tuple(range(len(tensor.shape))),
        offset,
        pattern,
    )


def strided(array: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A writable view of `array`'s memory with the given shape and byte strides.

    NumPy's as_strided rebuilds the dtype from its type string, which ml_dtypes' fp8 types
    do not survive; it goes through an unsigned integer of the same size instead.
    """
    raw = array.view(f"u{array.itemsize}")
    return np.lib.stride_tricks.as_strided(raw, shape=shape, strides=strides).view(array.dtype)


def _reach(offset: int, pairs: Any) -> tuple[int, int]:
    """The lowest and highest flat element a pattern touches."""
    lo = offset + sum(min(0, stride * (count - 1)) for stride, count in pairs)
    hi = offset + sum(max(0, stride * (count - 1)) for stride, count in pairs)
    return lo, hi


def pattern_pairs(
    pattern: Any, span: SourceSpan, max_levels: int | None = 5
) -> tuple[tuple[int, int], ...]:
    ok = (
        isinstance(pattern, (list, tuple))
        and pattern
        and all(
            isinstance(p, (list, tuple))
            and len(p) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
            for p in pattern
        )
    )
    if not ok:
        raise KernelTypeError(
            f"an access pattern is a list of [step, count] pairs, got {shown(pattern)}", span
        )
    if max_levels is not None and len(pattern) > max_levels:
        raise ConstraintError(
            f"an access pattern has at most 5 [step, count] levels "
            f"(partition + 4 free), got {len(pattern)}",
            span,
        )
    if any(count <= 0 for _, count in pattern):
        raise KernelTypeError(f"access pattern counts must be > 0, got {shown(pattern)}", span)
    return tuple((int(step), int(count)) for step, count in pattern)


def _pattern_box(
    tensor: Tensor, offset: int, pairs: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int, int], ...]:
    """The per-dim bounding box of a pattern's elements (exact when it walks whole rows)."""
    lo, hi = _reach(offset, pairs)
    first = np.unravel_index(lo, tensor.shape)
    last = np.unravel_index(hi, tensor.shape)
    box = [(int(first[0]), int(last[0]) + 1, 1)]
    for d in range(1, len(tensor.shape)):
        if first[:d] == last[:d]:  # inside one row of the dims before: a tight range
            box.append((int(first[d]), int(last[d]) + 1, 1))
        else:
            box.append((0, tensor.shape[d], 1))
    return tuple(box)


def _count(start: int, stop: int, step: int) -> int:
    return max(0, (stop - start + step - 1) // step)


def fmt_slice(s: slice) -> str:
    a = "" if s.start is None else str(s.start)
    b = "" if s.stop is None else str(s.stop)
    return f"{a}:{b}" + ("" if s.step is None else f":{s.step}")


def alias_shape(root: Tensor, dtype: DType, span: SourceSpan) -> tuple[int, ...]:
    """The shape of `root`'s bytes read as `dtype`: the last dim scaled."""
    nbytes = root.shape[-1] * root.dtype.itemsize
    if nbytes % dtype.itemsize:
        raise KernelTypeError(
            f"cannot view {root.name} as {dtype.name}: a row of its last dim holds {nbytes} "
            f"bytes, not a whole number of {dtype.itemsize}-byte items",
            span,
        )
    return (*root.shape[:-1], nbytes // dtype.itemsize)
