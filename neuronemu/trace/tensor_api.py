"""The NKI tensor API: views a kernel builds from a tensor (`t[...]`, `.reshape`, `.ap`,
`.view`, `.permute`, `.select`, ...), with a located error for each misuse.

Each rewrites the (stride, count) pairs of a view (`neuronemu.ir.tensor`); on chip, the
partition dim stays dim 0 (nki.language.NkiTensor).
"""

from __future__ import annotations

import math
from typing import Any

from neuronemu.build.builder import Builder
from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import ALL_DTYPES, DType, IndirectView, PatternView, Tensor, View, restrict
from neuronemu.ir.tensor import regroup
from neuronemu.trace.gather_index import GatherView
from neuronemu.trace.legacy_index import AffineIndex, AffineView
from neuronemu.trace.values import Scalar

__all__ = [
    "reinterpret",
    "reshape",
    "reshape_call",
    "broadcast",
    "permute",
    "expand_dim",
    "squeeze_dim",
    "reshape_dim",
    "select",
    "vector_select",
    "flatten_dims",
    "VIEW_METHODS",
    "as_dtype",
    "access_pattern",
    "view_as",
    "subscript",
    "as_view",
]

# The NkiTensor view methods a kernel calls as `t.name(...)`.
VIEW_METHODS = frozenset(
    {
        "broadcast",
        "permute",
        "expand_dim",
        "squeeze_dim",
        "reshape_dim",
        "flatten_dims",
        "select",
        "vector_select",
    }
)


def reinterpret(view: View, alias: Tensor, span: SourceSpan) -> View:
    """This view's bytes read as `alias`'s dtype (`alias` views this view's root, or is
    the root): the last dim must be contiguous; its count scales by the ratio of the
    item sizes (nki: NkiTensor.view)."""
    if isinstance(view, IndirectView):
        raise KernelTypeError(
            "an indirect view cannot be reinterpreted (nki: not supported "
            "after a dynamic or vector select)",
            span,
        )
    old, new = view.dtype.itemsize, alias.dtype.itemsize
    if alias.id == view.tensor.id:
        return view
    offset, pattern = view.as_pattern()
    pairs = list(pattern)
    if not pairs or (len(pairs) == 1 and view.tensor.on_chip):
        pairs.append((1, 1))  # a dropped last dim: one element
    stride, count = pairs[-1]
    if count > 1 and stride != 1:
        raise KernelTypeError(
            f"cannot view {shown(view)} as {alias.dtype.name}: its last dim steps by {stride} "
            "elements; a reinterpreting view needs a contiguous last dim",
            span,
        )
    pairs[-1] = (1, count)
    regrouped = regroup(offset, pairs, old, new)
    if regrouped is None:
        raise KernelTypeError(
            f"cannot view {shown(view)} as {alias.dtype.name}: its elements do not group "
            f"into whole {new}-byte items (the last dim's start and size must be "
            f"multiples of {new // old})",
            span,
        )
    offset, grouped = regrouped
    return PatternView.build(alias, offset, [list(p) for p in grouped], span)


def reshape(view: View, shape: Any, span: SourceSpan) -> PatternView:
    """A contiguous view in a new shape (on chip, the partition dim stays)."""
    shape = (
        tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
    )
    if not shape or not all(
        isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
    ):
        raise KernelTypeError(f"reshape takes positive int dims, got {shown(shape)}", span)
    if math.prod(shape) != view.size:
        raise KernelTypeError(
            f"cannot reshape {list(view.shape)} ({view.size} elements) "
            f"to {list(shape)} ({math.prod(shape)})",
            span,
        )
    offset, pairs = view.as_pattern()
    on_chip = view.tensor.on_chip
    free = pairs[1:] if on_chip else pairs
    expected, stride = [], 1
    for _, count in reversed(free):
        expected.append(stride)
        stride *= count
    if [s for s, c in free if c > 1] != [e for e, (_, c) in zip(reversed(expected), free) if c > 1]:
        raise KernelTypeError("reshape needs a contiguous view (slice after reshaping)", span)
    if on_chip and shape[0] != view.shape[0]:
        raise KernelTypeError(
            f"reshape keeps the partition dim of an on-chip tensor "
            f"({view.shape[0]}); got {list(shape)}",
            span,
        )
    dims = shape[1:] if on_chip else shape
    new, stride = [], 1
    for d in reversed(dims):
        new.append([stride, d])
        stride *= d
    new.reverse()
    if on_chip:
        new.insert(0, [pairs[0][0], shape[0]])
    return PatternView.build(view.tensor, offset, new, span)


def broadcast(view: View, dim: Any, size: Any, span: SourceSpan) -> PatternView:
    """Repeat a size-1 dim `size` times at no cost (stride 0); on chip, a free dim only
    (nki.language.NkiTensor.broadcast: "On-chip tensors: dim must not be 0 (partition
    dim)"; an HBM tensor's dim 0 may be broadcast, https://awsdocs-neuron.readthedocs-hosted
    .com/en/latest/nki/api/generated/nki.language.NkiTensor.html)."""
    first = 1 if view.tensor.on_chip else 0
    if isinstance(dim, bool) or not isinstance(dim, int) or not first <= dim < len(view.shape):
        why = " (on chip, the partition dim cannot be broadcast)" if first else ""
        raise KernelTypeError(
            f"broadcast dim must be a dim {first}..{len(view.shape) - 1}{why}, got {shown(dim)}",
            span,
        )
    if view.shape[dim] != 1 or not isinstance(size, int) or size <= 0:
        raise KernelTypeError(
            f"broadcast repeats a dim of size 1 a positive number of "
            f"times; dim {dim} has size {view.shape[dim]}, size={shown(size)}",
            span,
        )
    offset, pairs = view.as_pattern()
    new = [list(p) for p in pairs]
    new[dim] = [0, size]
    return PatternView.build(view.tensor, offset, new, span)


def _dim(view: View, dim: Any, what: str, span: SourceSpan, extra: int = 0) -> int:
    ndim = len(view.shape) + extra
    if isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < ndim:
        raise KernelTypeError(
            f"{what}: dim must be an int in [{-ndim}, {ndim}), got {shown(dim)}", span
        )
    dim = dim + ndim if dim < 0 else dim
    if dim == 0 and view.tensor.on_chip:
        raise KernelTypeError(
            f"{what}: dim 0 is the partition dim of an on-chip tensor, which stays where it is",
            span,
        )
    return dim


def permute(view: View, dims: Any, span: SourceSpan) -> PatternView:
    offset, pairs = view.as_pattern()
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if sorted(dims) != list(range(len(pairs))):
        raise KernelTypeError(
            f"permute: {list(dims)} is not a permutation of the {len(pairs)} dims", span
        )
    if view.tensor.on_chip and dims[0] != 0:
        raise KernelTypeError(
            f"permute: the partition dim of an on-chip tensor stays first; got {list(dims)}", span
        )
    return PatternView.build(view.tensor, offset, [pairs[d] for d in dims], span)


def expand_dim(view: View, dim: Any, span: SourceSpan) -> PatternView:
    dim = _dim(view, dim, "expand_dim", span, extra=1)
    offset, pairs = view.as_pattern()
    return PatternView.build(view.tensor, offset, [*pairs[:dim], (0, 1), *pairs[dim:]], span)


def squeeze_dim(view: View, dim: Any, span: SourceSpan) -> PatternView:
    dim = _dim(view, dim, "squeeze_dim", span)
    offset, pairs = view.as_pattern()
    if pairs[dim][1] != 1:
        raise KernelTypeError(f"squeeze_dim: dim {dim} has size {pairs[dim][1]}, not 1", span)
    return PatternView.build(view.tensor, offset, [*pairs[:dim], *pairs[dim + 1 :]], span)


def reshape_dim(view: View, dim: Any, shape: Any, span: SourceSpan) -> PatternView:
    offset, pairs = view.as_pattern()
    ok = (
        isinstance(shape, (tuple, list))
        and shape
        and all(
            isinstance(n, int) and not isinstance(n, bool) and (n > 0 or n == -1) for n in shape
        )
        and list(shape).count(-1) <= 1
    )
    if not ok:
        raise KernelTypeError(
            "reshape_dim: shape must be a tuple of positive ints (one may be -1), got "
            f"{shown(shape)}",
            span,
        )
    if (
        isinstance(dim, int)
        and dim in (0, -len(pairs))
        and len(shape) == 1
        and shape[0] in (-1, pairs[0][1])
    ):
        return PatternView.build(view.tensor, offset, pairs, span)  # trivial: (128,)
    dim = _dim(view, dim, "reshape_dim", span)
    stride, count = pairs[dim]
    known = math.prod(n for n in shape if n != -1)
    sizes = [count // known if n == -1 else n for n in shape]
    if math.prod(sizes) != count:
        raise KernelTypeError(
            f"reshape_dim: {list(shape)} does not split dim {dim} of size {count}", span
        )
    split, inner = [], stride
    for n in reversed(sizes):
        split.append((inner, n))
        inner *= n
    return PatternView.build(
        view.tensor, offset, [*pairs[:dim], *reversed(split), *pairs[dim + 1 :]], span
    )


def select(view: View, dim: Any, index: Any, span: SourceSpan) -> PatternView:
    """Static selection: `index` along `dim`, which disappears (t.select(1, 3) is
    t[:, 3, :] without the size-1 dim)."""
    dim = _dim(view, dim, "select", span)
    offset, pairs = view.as_pattern()
    if isinstance(index, (View, Tensor, Scalar)):  # dynamic: a scalar offset along `dim`
        index = _run_time_index(index, "select", False, span)
        rest = [*pairs[:dim], *pairs[dim + 1 :]]
        return IndirectView.make(
            view.tensor,
            offset,
            [list(p) for p in rest],
            index,
            "scalar",
            0,
            span,
            step=_view_step(pairs[dim], dim, "select", span),
        )
    stride, count = pairs[dim]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise KernelTypeError(
            f"select: index must be an int in [0, {count}) for dim {dim}, got {shown(index)}", span
        )
    return PatternView.build(
        view.tensor, offset + index * stride, [*pairs[:dim], *pairs[dim + 1 :]], span
    )


def vector_select(view: View, dim: Any, vector_offset: Any, span: SourceSpan) -> IndirectView:
    """Per-partition rows: entry i of `vector_offset` picks the index along `dim` (0)
    for row i of the result, whose dim 0 has one row per entry."""
    dim = _dim(view, dim, "vector_select", span)
    if dim != 0:
        raise KernelTypeError(f"vector_select: dim must be 0, got {dim}", span)
    offset, pairs = view.as_pattern()
    vector_offset = _run_time_index(vector_offset, "vector_select", True, span)
    rows = vector_offset.size if isinstance(vector_offset, View) else 0
    return IndirectView.make(
        view.tensor,
        offset,
        [[pairs[0][0], max(rows, 1)], *[list(p) for p in pairs[1:]]],
        vector_offset,
        "vector",
        0,
        span,
        step=_view_step(pairs[0], 0, "vector_select", span),
    )


def flatten_dims(view: View, start_dim: Any, end_dim: Any, span: SourceSpan) -> PatternView:
    start = _dim(view, start_dim, "flatten_dims", span)
    end = _dim(view, end_dim, "flatten_dims", span)
    offset, pairs = view.as_pattern()
    if end < start:
        raise KernelTypeError(f"flatten_dims: end_dim {end} is before start_dim {start}", span)
    merged = pairs[start : end + 1]
    for (outer, _), (inner, count) in zip(merged, merged[1:]):
        if outer != inner * count:
            raise KernelTypeError(
                f"flatten_dims: dims {start}..{end} are not contiguous "
                "in memory (permuted or sliced with a step)",
                span,
            )
    flat = (merged[-1][0], math.prod(c for _, c in merged))
    return PatternView.build(view.tensor, offset, [*pairs[:start], flat, *pairs[end + 1 :]], span)


def _whole(x: Any) -> Any:
    return x.full() if isinstance(x, Tensor) else x


def _run_time_index(given: Any, what: str, vector: bool, span: SourceSpan) -> Any:
    """The view a run-time offset is read from: an SBUF tile, or an NkiScalar's register
    for one offset (a vector offset is one per partition, in SBUF: nki.isa.dma_copy)."""
    if not isinstance(given, Scalar):
        return _whole(given)
    if vector:
        raise KernelTypeError(
            f"{what} takes an SBUF tile of per-partition offsets, not an NkiScalar "
            f"({shown(given)})",
            span,
            hint="one run-time index is select(dim, index) or .ap(..., scalar_offset=index)",
        )
    return given.view


def _view_step(pair: tuple[int, int], dim: int, what: str, span: SourceSpan) -> tuple[int, int]:
    """(elements per index step, indices in bounds) of a view dim indexed at run time: its
    own stride and size, whatever view (reshape, permute, step, select) it came from."""
    stride, count = pair
    if stride == 0:
        raise KernelTypeError(
            f"{what}: dim {dim} has stride 0 (a broadcast): every index names the same "
            "elements; select a dim that steps through memory",
            span,
        )
    return stride, count


def _indexed_shape(view: View, mode: str, span: SourceSpan) -> tuple[int, ...]:
    """The shape whose dim `indirect_dim` a run-time offset of `view.ap(...)` steps along:
    the view's, when it is its tensor's whole storage in row-major order (the tensor, or a
    reshape or flatten of it; nki: offset * prod(shape[indirect_dim + 1:])). `.ap()`
    ignores a view's offset and strides (nki: "Composition and .ap on a view"), so on any
    other view that step has no documented meaning: an error, not a guess."""
    offset, pairs = view.as_pattern()
    row_major, size = offset == 0, 1
    for stride, count in reversed(pairs):
        row_major &= count == 1 or stride == size
        size *= count
    if row_major and size == view.tensor.size:
        return view.shape
    tensor = view.tensor
    raise KernelTypeError(
        f"ap(): a {mode} offset on {shown(view)} is ambiguous: the view starts at element "
        f"{offset} of {tensor.name} with strides {[s for s, _ in pairs]}, and .ap() ignores "
        "a view's offset and strides (nki: NkiTensor.ap), so whether indirect_dim counts "
        f"this view's dims or {tensor.name}'s is not defined",
        span,
        hint=f"take .ap() on {tensor.name} or a reshape of it (offset= for the start), or "
        "use .select(dim, index) or .vector_select(0, offsets), which step along the view",
    )


def as_dtype(value: Any, span: SourceSpan) -> DType:
    """A dtype a kernel names: `nl.float32`, `np.float32`, `a.dtype` or `"float32"`."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in ALL_DTYPES:
        return ALL_DTYPES[value]
    raise KernelTypeError(f"expected a dtype (e.g. nl.float32), got {shown(value)}", span)


def access_pattern(
    builder: Builder,
    view: View,
    span: SourceSpan,
    pattern: Any,
    offset: int | None = None,
    dtype: Any = None,
    scalar_offset: Any = None,
    vector_offset: Any = None,
    indirect_dim: int = 0,
    **_: Any,
) -> PatternView:
    """`v.ap(pattern=[[step, count], ...], offset=None, dtype=None)`: a pattern over the
    storage of `v`'s tensor, from `v`'s first element plus `offset` elements (nki:
    NkiTensor.ap), the storage read as `dtype` if given. A `scalar_offset` or
    `vector_offset` steps along dim `indirect_dim` of `v`'s shape (a reshape's)."""
    if offset is not None and (not isinstance(offset, int) or isinstance(offset, bool)):
        raise KernelTypeError(f"ap() offset must be an int, got {shown(offset)}", span)
    tensor = view.tensor
    base = view.as_pattern()[0]
    if scalar_offset is not None or vector_offset is not None:
        if scalar_offset is not None and vector_offset is not None:
            raise KernelTypeError(
                "ap(): scalar_offset and vector_offset are mutually exclusive", span
            )
        if dtype is not None:
            raise KernelTypeError(
                "ap(): an indirect view cannot also reinterpret the dtype (in neuronemu yet)", span
            )
        mode = "scalar" if scalar_offset is not None else "vector"
        given = scalar_offset if mode == "scalar" else vector_offset
        index = _run_time_index(given, f"ap(): {mode}_offset", mode == "vector", span)
        shape = None  # an on-chip or reinterpreted tensor: make() says it is not supported
        if not tensor.on_chip and tensor.base is None:
            shape = _indexed_shape(view, mode, span)
        return IndirectView.make(
            tensor, base + (offset or 0), pattern, index, mode, indirect_dim, span, shape=shape
        )
    if dtype is not None:
        target = builder.alias(tensor.root, as_dtype(dtype, span), span)
        nbytes = base * tensor.dtype.itemsize
        if nbytes % target.dtype.itemsize:
            raise KernelTypeError(
                f"{shown(view)} starts at byte {nbytes} of {tensor.root.name}, not at a whole "
                f"{target.dtype.name} element",
                span,
            )
        tensor, base = target, nbytes // target.dtype.itemsize
    return PatternView.build(tensor, base + (offset or 0), pattern, span)


def view_as(builder: Builder, view: View, span: SourceSpan, dtype: Any) -> View:
    """`v.view(dtype)`: `v`'s bytes read as `dtype`, the last dim scaled (nki:
    NkiTensor.view)."""
    target = builder.alias(view.tensor.root, as_dtype(dtype, span), span)
    return reinterpret(view, target, span)


def subscript(view: View, index: Any, span: SourceSpan) -> Any:
    """`t[...]`: ints and slices give a view; `nl.arange` index expressions (older NKI) give
    an index-expression view, resolved when an instruction uses it (with its mask), and an
    index tile in one dim a gather (or scatter) of the rows it names."""
    if isinstance(view, IndirectView):
        raise KernelTypeError("an indirect view cannot be sliced further", span)
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (Tensor, View, AffineView)) for i in items):
        return GatherView.build(view, items, span)
    if any(isinstance(i, AffineIndex) for i in items):
        return AffineView.build(view, items, span)
    return view.subscript(index, span)


def as_view(value: Any, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
    """A tensor, view or index-expression view as a View (restricted by mask ranges)."""
    if isinstance(value, AffineView):
        return value.resolve(ranges)
    if isinstance(value, Tensor):
        value = value.full()
    if isinstance(value, View):
        return restrict(value, ranges) if ranges else value
    return None


def reshape_call(view: View, span: SourceSpan, *shape: Any, **kwargs: Any) -> Any:
    """`t.reshape(d0, d1)`, `t.reshape((d0, d1))` or `t.reshape(shape=(d0, d1))`."""
    if "shape" in kwargs:
        if shape or set(kwargs) != {"shape"}:
            raise KernelTypeError("reshape takes the new shape once: reshape(shape=(...))", span)
        shape = (kwargs["shape"],)
    elif kwargs:
        raise KernelTypeError(
            f"reshape() got an unexpected keyword argument {next(iter(kwargs))!r}", span
        )
    return reshape(view, shape, span)
