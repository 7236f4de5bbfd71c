"""The values a kernel manipulates at trace time: tensors, views, dtypes, namespaces."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from neuronemu_isa import Buffer
from neuronemu_isa._numerics import DTYPES, dtype_of, itemsize
from neuronemu.errors import ConstraintError, InternalError, KernelTypeError, SourceSpan

_ids = itertools.count()


@dataclass(frozen=True)
class DType:
    """An NKI dtype as a trace-time value (`nl.bfloat16`, `a.dtype`, `np.float32`)."""

    name: str

    @functools.cached_property
    def np(self) -> np.dtype:
        return dtype_of(self.name)

    @functools.cached_property
    def itemsize(self) -> int:
        # NC-v4 MX types pack four values per element (nki.language: float8 x4, float4 x4).
        packed = {"float8_e4m3fn_x4": 4, "float8_e5m2_x4": 4, "float4_e2m1fn_x4": 2}
        return packed[self.name] if self.name in packed else itemsize(self.name)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


ALL_DTYPES = {name: DType(name) for name in DTYPES}


@dataclass(frozen=True)
class BufferKind:
    """`nl.sbuf`, `nl.psum`, `nl.hbm`, `nl.shared_hbm`, `nl.private_hbm`."""

    name: str

    @functools.cached_property
    def buffer(self) -> Buffer:
        return {"sbuf": Buffer.SBUF, "psum": Buffer.PSUM, "reg": Buffer.REG}.get(
            self.name, Buffer.HBM)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


@dataclass(frozen=True, eq=False)
class DirectAlloc(BufferKind):
    """`nki.compiler.sbuf.alloc(func)` / `.mod_alloc(...)` (and the PSUM ones): the kernel
    places each tile itself. `func(block_index, partitions, bytes_per_partition)` gives
    (partition, byte offset) in SBUF, (bank, partition, byte offset) in PSUM."""

    func: Any = None

    def __repr__(self) -> str:
        return f"nki.compiler.{self.name}.alloc({self.func!r})"


BUFFERS = {n: BufferKind(n) for n in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")}
# Engine registers are tensors too, so that their ordering, races and text form come free;
# kernels never name this buffer.
REGISTERS = BufferKind("reg")


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

    @property
    def root(self) -> Tensor:
        """The tensor that owns the bytes (itself unless it is an alias)."""
        return self if self.base is None else self.base
    data: np.ndarray | None = None  # the contents of a constant (kind "constant")

    @functools.cached_property
    def buffer(self) -> Buffer:
        return self.kind_of_buffer.buffer

    @property
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

    @functools.cached_property
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

    @property
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
        strides = [1] * len(self.tensor.shape)
        for d in range(len(strides) - 2, -1, -1):
            strides[d] = strides[d + 1] * self.tensor.shape[d + 1]
        offset = sum(start * strides[d] for d, (start, _, _) in enumerate(self.box))
        pairs = tuple((strides[d] * self.box[d][2], _count(*self.box[d])) for d in self.kept)
        return offset, pairs

    def reinterpret(self, alias: Tensor, span: SourceSpan) -> View:
        """This view's bytes read as `alias`'s dtype (`alias` views this view's root, or is
        the root): the last dim must be contiguous; its count scales by the ratio of the
        item sizes (nki: NkiTensor.view)."""
        old, new = self.dtype.itemsize, alias.dtype.itemsize
        if alias.id == self.tensor.id:
            return self
        offset, pairs = self.as_pattern()
        pairs = list(pairs)
        if not pairs or (len(pairs) == 1 and self.tensor.on_chip):
            pairs.append((1, 1))  # a dropped last dim: one element
        stride, count = pairs[-1]
        if count > 1 and stride != 1:
            raise KernelTypeError(
                f"cannot view {self!r} as {alias.dtype.name}: its last dim steps by {stride} "
                "elements; a reinterpreting view needs a contiguous last dim", span)
        pairs[-1] = (1, count)
        regrouped = _regroup(offset, pairs, old, new)
        if regrouped is None:
            raise KernelTypeError(
                f"cannot view {self!r} as {alias.dtype.name}: its elements do not group "
                f"into whole {new}-byte items (the last dim's start and size must be "
                f"multiples of {new // old})", span)
        offset, pairs = regrouped
        return PatternView.build(alias, offset, [list(p) for p in pairs], span)

    def as_root(self) -> View:
        """The same bytes as a view of the root tensor (itself if not an alias). Exact when
        the bytes are whole root elements; else the root elements that contain them."""
        t = self.tensor
        if t.base is None:
            return self
        root = t.base
        a, b = t.dtype.itemsize, root.dtype.itemsize
        offset, pairs = self.as_pattern()
        pairs = list(pairs)
        if root.on_chip and len(pairs) == 1:  # only the partition level: one element each
            pairs.append((1, 1))
        regrouped = _regroup(offset, pairs, a, b)
        if regrouped is not None:
            return _raw_pattern(root, *regrouped)
        r = b // a
        box = tuple((lo, hi, 1) for lo, hi in self.bounds()[:-1]) + (
            (self.bounds()[-1][0] // r, -(-self.bounds()[-1][1] // r), 1),)
        return View(root, box, tuple(range(len(root.shape))))

    def reshape(self, shape: Any, span: SourceSpan) -> PatternView:
        """A contiguous view in a new shape (on chip, the partition dim stays)."""
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else tuple(shape)
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                for d in shape):
            raise KernelTypeError(f"reshape takes positive int dims, got {shape!r}", span)
        if math.prod(shape) != self.size:
            raise KernelTypeError(f"cannot reshape {list(self.shape)} ({self.size} elements) "
                                  f"to {list(shape)} ({math.prod(shape)})", span)
        offset, pairs = self.as_pattern()
        on_chip = self.tensor.on_chip
        free = pairs[1:] if on_chip else pairs
        expected, stride = [], 1
        for _, count in reversed(free):
            expected.append(stride)
            stride *= count
        if [s for s, c in free if c > 1] != [e for e, (_, c) in zip(reversed(expected), free)
                                             if c > 1]:
            raise KernelTypeError("reshape needs a contiguous view (slice after reshaping)",
                                  span)
        if on_chip and shape[0] != self.shape[0]:
            raise KernelTypeError(f"reshape keeps the partition dim of an on-chip tensor "
                                  f"({self.shape[0]}); got {list(shape)}", span)
        dims = shape[1:] if on_chip else shape
        new, stride = [], 1
        for d in reversed(dims):
            new.append([stride, d])
            stride *= d
        new.reverse()
        if on_chip:
            new.insert(0, [pairs[0][0], shape[0]])
        return PatternView.build(self.tensor, offset, new, span)

    def broadcast(self, dim: Any, size: Any, span: SourceSpan) -> PatternView:
        """Repeat a size-1 free dim `size` times at no cost (stride 0)."""
        if not isinstance(dim, int) or not 0 < dim < len(self.shape):
            raise KernelTypeError(f"broadcast dim must be a free dim 1..{len(self.shape) - 1} "
                                  f"(the partition dim cannot be broadcast), got {dim!r}", span)
        if self.shape[dim] != 1 or not isinstance(size, int) or size <= 0:
            raise KernelTypeError(f"broadcast repeats a dim of size 1 a positive number of "
                                  f"times; dim {dim} has size {self.shape[dim]}, size={size!r}",
                                  span)
        offset, pairs = self.as_pattern()
        new = [list(p) for p in pairs]
        new[dim] = [0, size]
        return PatternView.build(self.tensor, offset, new, span)

    # NkiTensor view methods (nki.language.NkiTensor): each rewrites the (stride, count)
    # pairs; the partition dim of an on-chip tensor stays dim 0.

    def _dim(self, dim: Any, what: str, span: SourceSpan, extra: int = 0) -> int:
        ndim = len(self.shape) + extra
        if isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < ndim:
            raise KernelTypeError(f"{what}: dim must be an int in [{-ndim}, {ndim}), "
                                  f"got {dim!r}", span)
        dim = dim + ndim if dim < 0 else dim
        if dim == 0 and self.tensor.on_chip:
            raise KernelTypeError(f"{what}: dim 0 is the partition dim of an on-chip tensor, "
                                  "which stays where it is", span)
        return dim

    def permute(self, dims: Any, span: SourceSpan) -> PatternView:
        offset, pairs = self.as_pattern()
        dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
        if sorted(dims) != list(range(len(pairs))):
            raise KernelTypeError(f"permute: {list(dims)} is not a permutation of the "
                                  f"{len(pairs)} dims", span)
        if self.tensor.on_chip and dims[0] != 0:
            raise KernelTypeError(f"permute: the partition dim of an on-chip tensor stays "
                                  f"first; got {list(dims)}", span)
        return PatternView.build(self.tensor, offset, [pairs[d] for d in dims], span)

    def expand_dim(self, dim: Any, span: SourceSpan) -> PatternView:
        dim = self._dim(dim, "expand_dim", span, extra=1)
        offset, pairs = self.as_pattern()
        return PatternView.build(self.tensor, offset,
                                 [*pairs[:dim], (0, 1), *pairs[dim:]], span)

    def squeeze_dim(self, dim: Any, span: SourceSpan) -> PatternView:
        dim = self._dim(dim, "squeeze_dim", span)
        offset, pairs = self.as_pattern()
        if pairs[dim][1] != 1:
            raise KernelTypeError(f"squeeze_dim: dim {dim} has size {pairs[dim][1]}, not 1",
                                  span)
        return PatternView.build(self.tensor, offset, [*pairs[:dim], *pairs[dim + 1:]], span)

    def reshape_dim(self, dim: Any, shape: Any, span: SourceSpan) -> PatternView:
        offset, pairs = self.as_pattern()
        ok = isinstance(shape, (tuple, list)) and shape and all(
            isinstance(n, int) and not isinstance(n, bool) and (n > 0 or n == -1)
            for n in shape) and list(shape).count(-1) <= 1
        if not ok:
            raise KernelTypeError(f"reshape_dim: shape must be a tuple of positive ints (one "
                                  f"may be -1), got {shape!r}", span)
        if isinstance(dim, int) and dim in (0, -len(pairs)) and len(shape) == 1 \
                and shape[0] in (-1, pairs[0][1]):
            return PatternView.build(self.tensor, offset, pairs, span)  # trivial: (128,)
        dim = self._dim(dim, "reshape_dim", span)
        stride, count = pairs[dim]
        known = math.prod(n for n in shape if n != -1)
        sizes = [count // known if n == -1 else n for n in shape]
        if math.prod(sizes) != count:
            raise KernelTypeError(f"reshape_dim: {list(shape)} does not split dim {dim} of "
                                  f"size {count}", span)
        split, inner = [], stride
        for n in reversed(sizes):
            split.append((inner, n))
            inner *= n
        return PatternView.build(self.tensor, offset,
                                 [*pairs[:dim], *reversed(split), *pairs[dim + 1:]], span)

    def select(self, dim: Any, index: Any, span: SourceSpan) -> PatternView:
        """Static selection: `index` along `dim`, which disappears (t.select(1, 3) is
        t[:, 3, :] without the size-1 dim)."""
        dim = self._dim(dim, "select", span)
        offset, pairs = self.as_pattern()
        if isinstance(index, (View, Tensor)):  # dynamic: a scalar offset along `dim`
            rest = [*pairs[:dim], *pairs[dim + 1:]]
            return IndirectView.make(self.tensor, offset, [list(p) for p in rest], index,
                                     "scalar", 0, span, step=pairs[dim])
        stride, count = pairs[dim]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise KernelTypeError(f"select: index must be an int in [0, {count}) for dim "
                                  f"{dim}, got {index!r}", span)
        return PatternView.build(self.tensor, offset + index * stride,
                                 [*pairs[:dim], *pairs[dim + 1:]], span)

    def vector_select(self, dim: Any, vector_offset: Any, span: SourceSpan) -> IndirectView:
        """Per-partition rows: entry i of `vector_offset` picks the index along `dim` (0)
        for row i of the result, whose dim 0 has one row per entry."""
        dim = self._dim(dim, "vector_select", span)
        if dim != 0:
            raise KernelTypeError(f"vector_select: dim must be 0, got {dim}", span)
        offset, pairs = self.as_pattern()
        rows = vector_offset.size if isinstance(vector_offset, (View, Tensor)) else 0
        return IndirectView.make(self.tensor, offset, [[pairs[0][0], max(rows, 1)],
                                                       *[list(p) for p in pairs[1:]]],
                                 vector_offset, "vector", 0, span, step=pairs[0])

    def flatten_dims(self, start_dim: Any, end_dim: Any, span: SourceSpan) -> PatternView:
        start = self._dim(start_dim, "flatten_dims", span)
        end = self._dim(end_dim, "flatten_dims", span)
        offset, pairs = self.as_pattern()
        if end < start:
            raise KernelTypeError(f"flatten_dims: end_dim {end} is before start_dim {start}",
                                  span)
        merged = pairs[start:end + 1]
        for (outer, _), (inner, count) in zip(merged, merged[1:]):
            if outer != inner * count:
                raise KernelTypeError(f"flatten_dims: dims {start}..{end} are not contiguous "
                                      "in memory (permuted or sliced with a step)", span)
        flat = (merged[-1][0], math.prod(c for _, c in merged))
        return PatternView.build(self.tensor, offset, [*pairs[:start], flat, *pairs[end + 1:]],
                                 span)

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

    @functools.cached_property
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
            b == (0, n, 1) for b, n in zip(self.box, self.tensor.shape))

    def subscript(self, index: Any, span: SourceSpan) -> View | AffineView:
        if not isinstance(index, tuple):
            index = (index,)
        from neuronemu.trace.index import AffineIndex

        if any(isinstance(i, AffineIndex) for i in index):
            return AffineView.build(self, index, span)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = len(self.kept) - (len(index) - 1)
            index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1:]
        if len(index) > len(self.kept):
            raise KernelTypeError(
                f"too many indices for {self.tensor.name}: {len(index)} for a "
                f"{len(self.kept)}-d view of shape {list(self.shape)}", span)
        box = list(self.box)
        kept = list(self.kept)
        drop: list[int] = []
        for pos, (dim, idx) in enumerate(zip(self.kept, index)):
            start, stop, step = box[dim]
            n = _count(start, stop, step)
            if isinstance(idx, bool) or not isinstance(idx, (int, slice)):
                raise KernelTypeError(
                    f"index {idx!r} of {self.tensor.name} must be an int or a slice of ints; "
                    f"got {type(idx).__name__}", span)
            if isinstance(idx, int):
                i = idx + n if idx < 0 else idx
                if not 0 <= i < n:
                    raise ConstraintError(
                        f"index {idx} is out of bounds for dim {pos} of {self.tensor.name} "
                        f"(size {n})", span)
                box[dim] = (start + i * step, start + (i + 1) * step, step)
                if not (self.tensor.on_chip and dim == 0):
                    drop.append(dim)
                continue
            for part in (idx.start, idx.stop, idx.step):
                if part is not None and (isinstance(part, bool) or not isinstance(part, int)):
                    raise KernelTypeError(
                        f"slice bounds of {self.tensor.name} must be ints, got {part!r}", span)
            lo, hi, st = idx.start, idx.stop, idx.step
            if (lo is not None and (lo > n or lo < -n)) or (hi is not None and hi > n):
                raise ConstraintError(
                    f"slice {_fmt_slice(idx)} is out of bounds for dim {pos} of "
                    f"{self.tensor.name} (size {n})", span,
                    hint="slices of NKI tensors must lie inside the tensor")
            if st is not None and st <= 0:
                raise KernelTypeError(f"slice step must be positive, got {st}", span)
            lo_i, hi_i, st_i = slice(lo, hi, st).indices(n)
            new_start = start + lo_i * step
            count = len(range(lo_i, hi_i, st_i))
            new_step = step * st_i
            box[dim] = (new_start, new_start + count * new_step, new_step)
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

    @property
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
            if (parts > 1 and step != free) or lo < 0 or hi >= free or \
                    p0 + parts > array.shape[0]:
                raise InternalError(f"{self!r} does not stay within the partitions of "
                                    f"{self.tensor.name}")
            row = array[p0].reshape(-1)
            strides = (array.strides[0], *(stride * item for stride, _ in self.pattern[1:]))
            return strided(row[r0:], self.shape, strides)
        flat = array.reshape(-1)
        return strided(flat[self.offset:], self.shape,
                       tuple(stride * item for stride, _ in self.pattern))

    @staticmethod
    def build(tensor: Tensor, offset: int, pattern: Any, span: SourceSpan,
              internal: bool = False) -> PatternView:
        """A checked pattern view. `internal`: made by neuronemu from index expressions, which
        may walk backwards (the ISA's strides are signed) and span more levels than one
        instruction encodes (the compiler splits those)."""
        pairs = _pattern_pairs(pattern, span, max_levels=None if internal else 5)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise KernelTypeError(f"access pattern offset must be an int >= 0, got {offset!r}",
                                  span)
        if not internal and any(stride < 0 for stride, _ in pairs):
            raise KernelTypeError("access pattern strides must be >= 0", span)
        lo, hi = _reach(offset, pairs)
        if lo < 0 or hi >= tensor.size:
            raise ConstraintError(
                f"access pattern {[list(p) for p in pairs]} at offset {offset} reaches element "
                f"{lo if lo < 0 else hi} of {tensor.name}, which has {tensor.size}", span)
        if tensor.on_chip:
            part_step, parts = pairs[0]
            free = tensor.size // tensor.shape[0]
            if parts > 1 and part_step != free:
                raise ConstraintError(
                    f"the partition step of an SBUF/PSUM access pattern must be the tensor's "
                    f"free size {free}, got {part_step}", span)
            lo, hi = _reach(offset % free, pairs[1:])
            if lo < 0 or hi >= free:
                raise ConstraintError(
                    f"access pattern {[list(p) for p in pairs]} at offset {offset} reaches "
                    f"free element {lo if lo < 0 else hi} of a partition of {tensor.name}, "
                    f"which has {free}; a pattern's free dims stay within each partition", span)
        box = _pattern_box(tensor, offset, pairs)
        return PatternView(tensor, box, tuple(range(len(tensor.shape))), offset, pairs)

    def subscript(self, index: Any, span: SourceSpan) -> View | AffineView:
        if not isinstance(index, tuple):
            index = (index,)
        from neuronemu.trace.index import AffineIndex

        if any(isinstance(i, AffineIndex) for i in index):
            return AffineView.build(self, index, span)
        if len(index) > len(self.pattern):
            raise KernelTypeError(f"too many indices for a {len(self.pattern)}-d access "
                                  "pattern", span)
        offset, pairs = self.offset, []
        for k, (stride, count) in enumerate(self.pattern):
            idx = index[k] if k < len(index) else slice(None)
            if isinstance(idx, int) and not isinstance(idx, bool):
                i = idx + count if idx < 0 else idx
                if not 0 <= i < count:
                    raise ConstraintError(f"index {idx} is out of bounds for dim {k} (size "
                                          f"{count}) of the access pattern", span)
                offset += i * stride
                if k == 0 and self.tensor.on_chip:
                    pairs.append((stride, 1))
                continue
            if not isinstance(idx, slice):
                raise KernelTypeError(f"index {idx!r} of an access pattern must be an int or "
                                      "a slice", span)
            lo, hi, st = idx.indices(count)
            offset += lo * stride
            pairs.append((stride * st, len(range(lo, hi, st))))
        return PatternView.build(self.tensor, offset, [list(p) for p in pairs], span)

    def __repr__(self) -> str:
        return f"ap({self.tensor.name}, {[list(p) for p in self.pattern]}, {self.offset})"


def mask_shape(root: Tensor, granule: int) -> tuple[int, ...]:
    """The shape of a per-byte-group flag array for `root`: one flag per `granule` bytes
    (the smallest item size any view of its bytes uses)."""
    return (*root.shape[:-1], root.shape[-1] * root.dtype.itemsize // granule)


def _flags(mask: np.ndarray, view: View) -> np.ndarray:
    """The flags of `mask` (shaped by mask_shape for the view's root) under the view's
    bytes: the view's shape plus a last axis of the flags in each element."""
    root = view.tensor.root
    granule = root.shape[-1] * root.dtype.itemsize // mask.shape[-1]
    k = view.dtype.itemsize // granule
    offset, pairs = view.as_pattern()
    levels = [(stride * k, count) for stride, count in pairs] + [(1, k)]
    offset *= k
    if root.on_chip:  # level 0 walks partitions: the rows of the mask
        free = mask.size // mask.shape[0]
        p0, r0 = divmod(offset, free)
        return strided(mask[p0].reshape(-1)[r0:], tuple(n for _, n in levels),
                       (mask.strides[0], *(s * mask.itemsize for s, _ in levels[1:])))
    flat = mask.reshape(-1)
    return strided(flat[offset:], tuple(n for _, n in levels),
                   tuple(s * mask.itemsize for s, _ in levels))


def read_mask(mask: np.ndarray, view: View) -> np.ndarray:
    """Per element of `view`, whether all of its bytes are flagged in `mask`."""
    if isinstance(view, IndirectView):  # which rows, only the run knows: optimistic
        return np.full(view.shape, bool(mask.any()))
    return _flags(mask, view).all(axis=-1).reshape(view.shape)


def write_mask(mask: np.ndarray, view: View, value: np.ndarray) -> None:
    """Flag (or unflag) the bytes of each element of `view` in `mask` by `value`."""
    if isinstance(view, IndirectView):  # unknown rows: written data counts everywhere
        if np.all(value):
            mask[...] = True
        return
    flags = _flags(mask, view)
    flags[...] = np.asarray(value, dtype=np.bool_).reshape(flags.shape[:-1])[..., None]


def _regroup(offset: int, pairs: Any, old: int, new: int
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
    if offset % r == 0 and pairs and pairs[-1][0] == 1 and pairs[-1][1] % r == 0 and \
            all(s % r == 0 for s, _ in pairs[:-1]):
        return offset // r, [(s // r, n) for s, n in pairs[:-1]] + [(1, pairs[-1][1] // r)]
    return None


def _raw_pattern(tensor: Tensor, offset: int, pairs: list[tuple[int, int]]) -> PatternView:
    """A pattern view made internally (no level limit; the caller keeps it in bounds)."""
    pattern = tuple(pairs)
    return PatternView(tensor, _pattern_box(tensor, offset, pattern),
                       tuple(range(len(tensor.shape))), offset, pattern)


def alias_shape(root: Tensor, dtype: DType, span: SourceSpan) -> tuple[int, ...]:
    """The shape of `root`'s bytes read as `dtype`: the last dim scaled."""
    nbytes = root.shape[-1] * root.dtype.itemsize
    if nbytes % dtype.itemsize:
        raise KernelTypeError(
            f"cannot view {root.name} as {dtype.name}: a row of its last dim holds {nbytes} "
            f"bytes, not a whole number of {dtype.itemsize}-byte items", span)
    return (*root.shape[:-1], nbytes // dtype.itemsize)


def strided(array: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A writable view of `array`'s memory with the given shape and byte strides.

    NumPy's as_strided rebuilds the dtype from its type string, which ml_dtypes' fp8 types
    do not survive; it goes through an unsigned integer of the same size instead.
    """
    raw = array.view(f"u{array.itemsize}")
    return np.lib.stride_tricks.as_strided(raw, shape=shape, strides=strides).view(array.dtype)


@dataclass(frozen=True, eq=False)
class IndirectView(PatternView):
    """An HBM access pattern addressed at run time from an SBUF index tile (nki: `.ap()` with
    `vector_offset` or `scalar_offset`, `vector_select`, `select` with a tensor index).

    "vector": entry i of `index` (flattened column-major) times `unit` (the stride of the
    indirect dim) replaces the first pattern level's i-th step: a gather or scatter of rows.
    "scalar": the one entry of `index` times `unit` is added to every address (a dynamic
    start). Which elements it touches is known only when it runs, so for dependencies and
    races it covers the whole tensor.
    """

    index: View | None = None
    mode: str = "vector"
    unit: int = 1  # elements per step of the index
    limit: int = 1  # index values in [0, limit) are in bounds

    @property
    def rows(self) -> int:
        """Dynamically addressed rows: one descriptor each."""
        return self.pattern[0][1] if self.mode == "vector" else 1

    def addresses(self, index_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Flat element addresses (the view's shape), which elements are in bounds, and the
        index values out of bounds: outside [0, limit), or addressing a row that does not
        lie wholly inside the tensor."""
        idx = np.asarray(index_values).astype(np.int64).T.reshape(-1)
        levels = self.pattern[1:] if self.mode == "vector" else self.pattern
        static = np.full((), self.offset, dtype=np.int64)
        for stride, count in levels:
            static = static[..., None] + np.arange(count, dtype=np.int64) * stride
        limit, size = self.limit, self.tensor.size
        if self.mode == "vector":
            rows = idx[:self.pattern[0][1]]
            addr = rows.reshape((-1,) + (1,) * len(levels)) * self.unit + static[None]
            inside = ((addr >= 0) & (addr < size)).reshape(len(rows), -1).all(axis=1)
            bad_rows = (rows < 0) | (rows >= limit) | ~inside
            ok = np.broadcast_to(~bad_rows.reshape((-1,) + (1,) * len(levels)), addr.shape)
        else:  # one offset moves the whole transfer: in bounds or not at all
            addr = idx[0] * self.unit + static
            bad_rows = np.array([idx[0] < 0 or idx[0] >= limit or addr.min() < 0 or
                                 addr.max() >= size])
            ok = np.full(addr.shape, not bad_rows[0])
        bad = sorted({int(v) for v, b in zip(idx[:len(bad_rows)], bad_rows) if b})
        return addr.reshape(self.shape), ok.reshape(self.shape), bad

    def np_view(self, array: np.ndarray) -> np.ndarray:
        raise TypeError("an indirect view is resolved when it runs (IndirectView.addresses)")

    def subscript(self, index: Any, span: SourceSpan) -> View | AffineView:
        raise KernelTypeError("an indirect view cannot be sliced further", span)

    def reinterpret(self, alias: Tensor, span: SourceSpan) -> View:
        raise KernelTypeError("an indirect view cannot be reinterpreted (nki: not supported "
                              "after a dynamic or vector select)", span)

    def as_root(self) -> View:
        return self

    @staticmethod
    def make(tensor: Tensor, offset: int, pattern: Any, index: Any, mode: str,
             indirect_dim: Any, span: SourceSpan, step: tuple[int, int] | None = None
             ) -> IndirectView:
        """`step`: (elements per index step, index values in bounds), when not those of
        the tensor's dim `indirect_dim`."""
        pairs = _pattern_pairs(pattern or [[1, 1]], span)
        if tensor.on_chip or tensor.base is not None:
            raise KernelTypeError(
                f"indirect access to {tensor.name} ({tensor.buffer.value.upper()}) is not "
                "supported by neuronemu yet: the tensor indexed at run time must be in HBM "
                "(and not a reinterpreting view)", span)
        if isinstance(index, Tensor):
            index = index.full()
        if not isinstance(index, View) or isinstance(index, IndirectView) or \
                index.buffer != Buffer.SBUF:
            raise KernelTypeError(f"the {mode} offset of an indirect view must be an SBUF "
                                  f"tile of integers, got {index!r}", span)
        if not index.dtype.name.startswith(("int", "uint")):
            raise KernelTypeError(f"the {mode} offset must hold integers, not "
                                  f"{index.dtype.name}", span)
        if isinstance(indirect_dim, bool) or not isinstance(indirect_dim, int) or \
                not 0 <= indirect_dim < len(tensor.shape):
            raise KernelTypeError(f"indirect_dim must be a dim of {tensor.name} (0.."
                                  f"{len(tensor.shape) - 1}), got {indirect_dim!r}", span)
        if mode == "vector" and index.size != pairs[0][1]:
            raise ConstraintError(
                f"the vector offset {index!r} holds {index.size} indices but the pattern's "
                f"first level takes {pairs[0][1]}; they must be equal", span)
        if mode == "scalar" and index.size != 1:
            raise ConstraintError(f"a scalar offset is one value; {index!r} has {index.size}",
                                  span)
        unit, limit = step or (math.prod(tensor.shape[indirect_dim + 1:]),
                               tensor.shape[indirect_dim])
        full = tuple((0, n, 1) for n in tensor.shape)
        return IndirectView(tensor, full, tuple(range(len(tensor.shape))), offset, pairs,
                            index, mode, unit, limit)

    def __repr__(self) -> str:
        return (f"iap({self.tensor.name}, {[list(p) for p in self.pattern]}, {self.offset}, "
                f"{self.mode}, {self.index!r}, {self.unit}, {self.limit})")


def _reach(offset: int, pairs: Any) -> tuple[int, int]:
    """The lowest and highest flat element a pattern touches."""
    lo = offset + sum(min(0, stride * (count - 1)) for stride, count in pairs)
    hi = offset + sum(max(0, stride * (count - 1)) for stride, count in pairs)
    return lo, hi


def _pattern_pairs(pattern: Any, span: SourceSpan, max_levels: int | None = 5
                   ) -> tuple[tuple[int, int], ...]:
    ok = isinstance(pattern, (list, tuple)) and pattern and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and
        all(isinstance(x, int) and not isinstance(x, bool) for x in p) for p in pattern)
    if not ok:
        raise KernelTypeError(f"an access pattern is a list of [step, count] pairs, got "
                              f"{pattern!r}", span)
    if max_levels is not None and len(pattern) > max_levels:
        raise ConstraintError(f"an access pattern has at most 5 [step, count] levels "
                              f"(partition + 4 free), got {len(pattern)}", span)
    if any(count <= 0 for _, count in pattern):
        raise KernelTypeError(f"access pattern counts must be > 0, got {pattern!r}", span)
    return tuple((int(step), int(count)) for step, count in pattern)


def _pattern_box(tensor: Tensor, offset: int, pairs: tuple[tuple[int, int], ...]
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


@dataclass(frozen=True, eq=False)
class AffineView:
    """`t[k * 128 + i_p, i_f]`: per iteration position, a tensor dim walked from `start` by
    `step` for `size` elements. It may reach past the tensor until a mask clips it, so it
    becomes a View (and is bounds-checked) only when an instruction uses it."""

    base: View
    dims: tuple[tuple[int, int, int, int], ...]  # per position: (tensor dim, start, step, size)
    fixed: tuple[tuple[int, int], ...]  # tensor dims indexed by a constant: (dim, index)
    span: SourceSpan

    @property
    def tensor(self) -> Tensor:
        return self.base.tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d[3] for d in self.dims)

    @property
    def dtype(self) -> DType:
        return self.base.dtype

    @property
    def buffer(self) -> Buffer:
        return self.base.buffer

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @staticmethod
    def build(base: View, index: tuple, span: SourceSpan) -> AffineView:
        from neuronemu.trace.index import AffineIndex

        if len(index) != len(base.shape):
            raise KernelTypeError(
                f"{base!r} has {len(base.shape)} dims; an nl.arange index must give "
                f"one index per dim, got {len(index)}", span)
        ndim = max(i.ndim for i in index if isinstance(i, AffineIndex))
        index = tuple(AffineIndex((), i, ndim) if isinstance(i, int) and
                      not isinstance(i, bool) else i for i in index)
        for idx in index:
            if not isinstance(idx, AffineIndex):
                raise KernelTypeError(
                    f"index {idx!r} of {base.tensor.name}: slices cannot be mixed with "
                    "nl.arange indices yet", span)
        if isinstance(base, PatternView):
            return AffinePattern.make(base, index, ndim, span)
        dims: dict[int, tuple[int, int, int, int]] = {}
        fixed: list[tuple[int, int]] = []
        for dim, idx in zip(base.kept, index):
            start, _, step = base.box[dim]
            if not idx.terms:
                fixed.append((dim, start + idx.offset * step))
                continue
            _, size, from_right, coeff = idx.terms[0]
            pos = ndim - 1 - from_right
            if len(idx.terms) > 1 or coeff <= 0 or pos in dims:
                # Several indices in a dim (a sliding window), a decreasing or a diagonal
                # walk: a general access pattern.
                return AffinePattern.make(base, index, ndim, span)
            dims[pos] = (dim, start + idx.offset * step, coeff * step, size)
        if sorted(dims) != list(range(len(dims))) or [dims[p][0] for p in sorted(dims)] != \
                sorted(d[0] for d in dims.values()):
            return AffinePattern.make(base, index, ndim, span)  # transposing through indices
        return AffineView(base, tuple(dims[p] for p in sorted(dims)), tuple(fixed), span)

    def resolve(self, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
        """The View of the positions allowed by a mask's ranges; None when nothing is left."""
        t = self.tensor
        box = list(self.base.box)
        for dim, at in self.fixed:
            box[dim] = (at, at + 1, 1)
        for pos, (dim, start, step, size) in enumerate(self.dims):
            lo, hi = (ranges or {}).get(pos, (0, size))
            lo, hi = max(lo, 0), min(hi, size)
            if hi <= lo:
                return None
            first, last = start + lo * step, start + (hi - 1) * step
            if first < 0 or last >= t.shape[dim]:
                raise ConstraintError(
                    f"index of {t.name} reaches {last} in dim {dim} (size {t.shape[dim]})"
                    + ("" if ranges else "; use mask= to stay in bounds"), self.span)
            box[dim] = (first, last + 1, step)
        keep_fixed_partition = t.on_chip and any(d == 0 for d, _ in self.fixed)
        kept = tuple(sorted({d[0] for d in self.dims} | ({0} if keep_fixed_partition else set())))
        return View(t, tuple(box), kept)

    def __repr__(self) -> str:
        return f"{self.tensor.name}[affine {list(self.shape)}]"


@dataclass(frozen=True, eq=False)
class AffinePattern(AffineView):
    """An index expression no box describes (several nl.arange indices in one dim, a walk
    against the dim order, a view that is itself a pattern): one access-pattern level per
    iteration position, `offset + sum(stride * i)` over the view's flat elements."""

    offset: int = 0
    levels: tuple[tuple[int, int], ...] = ()  # per iteration position: (stride, size)
    # per view dim: (its size, constant part, ((position, coefficient), ...)) for bounds
    checks: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.levels)

    @staticmethod
    def make(base: View, index: tuple, ndim: int, span: SourceSpan) -> AffinePattern:
        offset, pairs = base.as_pattern()
        strides = [0] * ndim
        sizes = [1] * ndim
        checks = []
        for (stride, count), idx in zip(pairs, index):
            offset += stride * idx.offset
            terms = []
            for _, size, from_right, coeff in idx.terms:
                pos = ndim - 1 - from_right
                strides[pos] += stride * coeff
                sizes[pos] = size
                terms.append((pos, coeff))
            checks.append((count, idx.offset, tuple(terms)))
        return AffinePattern(base, (), (), span, offset, tuple(zip(strides, sizes)),
                             tuple(checks))

    def resolve(self, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
        bounds = []
        for pos, (_, size) in enumerate(self.levels):
            # A mask on a position this index does not walk (size 1) leaves it alone.
            lo, hi = (ranges or {}).get(pos, (0, size)) if size > 1 else (0, 1)
            lo, hi = max(lo, 0), min(hi, size)
            if hi <= lo:
                return None
            bounds.append((lo, hi))
        for dim, (count, const, terms) in enumerate(self.checks):
            lo = const + sum(c * (bounds[p][0] if c > 0 else bounds[p][1] - 1) for p, c in terms)
            hi = const + sum(c * (bounds[p][1] - 1 if c > 0 else bounds[p][0]) for p, c in terms)
            if lo < 0 or hi >= count:
                raise ConstraintError(
                    f"index of {self.tensor.name} reaches {lo if lo < 0 else hi} in dim {dim} "
                    f"(size {count})" + ("" if ranges else "; use mask= to stay in bounds"),
                    self.span)
        offset = self.offset + sum(stride * lo for (stride, _), (lo, _) in
                                   zip(self.levels, bounds))
        pattern = [[stride, hi - lo] for (stride, _), (lo, hi) in zip(self.levels, bounds)]
        return PatternView.build(self.tensor, offset, pattern, self.span, internal=True)


def _count(start: int, stop: int, step: int) -> int:
    return max(0, (stop - start + step - 1) // step)


def _fmt_slice(s: slice) -> str:
    a = "" if s.start is None else str(s.start)
    b = "" if s.stop is None else str(s.stop)
    return f"{a}:{b}" + ("" if s.step is None else f":{s.step}")


def as_view(value: Any, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
    """A tensor, view or index-expression view as a View (restricted by mask ranges)."""
    if isinstance(value, AffineView):
        return value.resolve(ranges)
    if isinstance(value, Tensor):
        value = value.full()
    if isinstance(value, View):
        return restrict(value, ranges) if ranges else value
    return None


def restrict(view: View, ranges: dict[int, tuple[int, int]]) -> View | None:
    """Narrow a view's dims by iteration position to a mask's [lo, hi) ranges."""
    if isinstance(view, PatternView):  # narrow the pattern's levels, not its bounding box
        if isinstance(view, IndirectView):
            return view
        offset, pairs = view.offset, list(view.pattern)
        for pos, (lo, hi) in ranges.items():
            if pos >= len(pairs) or pairs[pos][1] == 1:
                continue
            stride, count = pairs[pos]
            lo, hi = max(lo, 0), min(hi, count)
            if hi <= lo:
                return None
            offset += lo * stride
            pairs[pos] = (stride, hi - lo)
        return _raw_pattern(view.tensor, offset, pairs)
    box = list(view.box)
    for pos, (lo, hi) in ranges.items():
        if pos >= len(view.kept):
            continue
        dim = view.kept[pos]
        start, stop, step = box[dim]
        n = _count(start, stop, step)
        if n == 1:  # a [P, 1] column or scalar broadcast along this position
            continue
        lo, hi = max(lo, 0), min(hi, n)
        if hi <= lo:
            return None
        box[dim] = (start + lo * step, start + hi * step, step)
    return View(view.tensor, tuple(box), view.kept)


def is_tensor_like(value: Any) -> bool:
    return isinstance(value, (Tensor, View, AffineView))


class ParDim(int):
    """`nl.par_dim(n)`: marks the partition dim of an on-chip shape; the dims before it are
    block dims (older NKI)."""


@dataclass(eq=False)
class BlockTensor:
    """An on-chip tensor with block dims before its partition dim (older NKI: `nl.ndarray((B,
    nl.par_dim(P), F), buffer=nl.sbuf)`). Each block is a tile of its own, allocated when first
    indexed, so that each has its own live range (nki block dimension migration guide)."""

    name: str
    blocks: tuple[int, ...]
    tile_shape: tuple[int, ...]
    dtype: DType
    kind_of_buffer: BufferKind
    span: SourceSpan
    make: Callable[[str, tuple[int, ...]], Tensor]  # allocates one block's tile
    tiles: dict[tuple[int, ...], Tensor] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.blocks, *self.tile_shape)

    @property
    def label(self) -> str:
        return self.name.lstrip("%") or "tmp"

    def block(self, index: tuple[int, ...]) -> Tensor:
        t = self.tiles.get(index)
        if t is None:
            t = self.make(f"{self.label}_b{'_'.join(map(str, index))}", index)
            self.tiles[index] = t
        return t

    def split(self, index: Any, span: SourceSpan) -> tuple[Tensor, tuple]:
        """The block an index names (its leading block indices) and the rest of the index."""
        if not isinstance(index, tuple):
            index = (index,)
        k = len(self.blocks)
        picked = []
        for pos, (i, n) in enumerate(zip(index[:k], self.blocks)):
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise KernelTypeError(
                    f"{self.label} has block dims {list(self.blocks)} before its partition dim; "
                    f"index each with an int (dim {pos} got "
                    f"{_fmt_slice(i) if isinstance(i, slice) else repr(i)})", span)
            j = int(i) + n if i < 0 else int(i)
            if not 0 <= j < n:
                raise ConstraintError(f"block index {i} is out of bounds for dim {pos} of "
                                      f"{self.label} (size {n})", span)
            picked.append(j)
        if len(picked) < k:
            raise KernelTypeError(f"{self.label} has {k} block dims; index all of them to "
                                  "get a tile", span)
        return self.block(tuple(picked)), index[k:]

    def __repr__(self) -> str:
        tile = f"{self.dtype.name}{list(self.tile_shape)}"
        return f"{self.label}: blocks {list(self.blocks)} of {tile}"


@dataclass
class Namespace:
    """A module-like object: `nl`, `nisa`, `nki`, `np`, `math`, enum groups, `nl.tile_size`."""

    name: str
    members: dict[str, Any]
    kind: str = "attribute"  # what a member is called in "has no ..." errors

    def get(self, attr: str, span: SourceSpan) -> Any:
        try:
            return self.members[attr]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(attr, list(self.members), n=1)
            raise KernelTypeError(
                f"{self.name} has no {self.kind} {attr!r}", span,
                hint=f"did you mean {self.name}.{close[0]}?" if close else None) from None

    def __repr__(self) -> str:
        return f"<module {self.name}>"


@dataclass(frozen=True)
class EnumValue:
    """A member of an nki enum (`nisa.engine.vector`, `nisa.reduce_cmd.idle`)."""

    group: str
    name: str

    def __repr__(self) -> str:
        return f"{self.group}.{self.name}"


@dataclass(frozen=True)
class OpRef:
    """An `nl.*` function usable both as an operator argument (`op=nl.add`) and as a call."""

    name: str
    call: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        return f"nl.{self.name}"


@dataclass
class Poison:
    """A module-level name whose definition failed; using it raises the deferred error."""

    error: Exception
