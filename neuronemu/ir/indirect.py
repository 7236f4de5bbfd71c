"""Views addressed at run time (indirect DMA: gathers, scatters, dynamic starts), and the
narrowing of views to a mask's ranges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan, shown
from neuronemu.ir.tensor import PatternView, Tensor, View, _count, pattern_pairs, raw_pattern
from neuronemu_isa import Buffer

__all__ = ["IndirectView", "restrict"]


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
    def offsets(self) -> View:
        """The view of the index tile its offsets are read from (`make` gives every one)."""
        assert self.index is not None, "an IndirectView is made with its index"
        return self.index

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
            rows = idx[: self.pattern[0][1]]
            addr = rows.reshape((-1,) + (1,) * len(levels)) * self.unit + static[None]
            inside = ((addr >= 0) & (addr < size)).reshape(len(rows), -1).all(axis=1)
            bad_rows = (rows < 0) | (rows >= limit) | ~inside
            ok = np.broadcast_to(~bad_rows.reshape((-1,) + (1,) * len(levels)), addr.shape)
        else:  # one offset moves the whole transfer: in bounds or not at all
            addr = idx[0] * self.unit + static
            bad_rows = np.array(
                [idx[0] < 0 or idx[0] >= limit or addr.min() < 0 or addr.max() >= size]
            )
            ok = np.full(addr.shape, not bad_rows[0])
        bad = sorted({int(v) for v, b in zip(idx[: len(bad_rows)], bad_rows) if b})
        return addr.reshape(self.shape), ok.reshape(self.shape), bad

    def np_view(self, array: np.ndarray) -> np.ndarray:
        raise TypeError("an indirect view is resolved when it runs (IndirectView.addresses)")

    def subscript(self, index: Any, span: SourceSpan) -> View:
        raise KernelTypeError("an indirect view cannot be sliced further", span)

    def as_root(self) -> View:
        return self

    @staticmethod
    def make(
        tensor: Tensor,
        offset: int,
        pattern: Any,
        index: Any,
        mode: str,
        indirect_dim: Any,
        span: SourceSpan,
        step: tuple[int, int] | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> IndirectView:
        """`step`: (elements per index step, index values in bounds), when not those of
        dim `indirect_dim` of `shape`: the shape the kernel indexes (a reshape's), by
        default the tensor's."""
        pairs = pattern_pairs(pattern or [[1, 1]], span)
        dims = tensor.shape if shape is None else shape
        what = tensor.name if shape is None else "the view"
        if tensor.on_chip or tensor.base is not None:
            raise KernelTypeError(
                f"indirect access to {tensor.name} ({tensor.buffer.value.upper()}) is not "
                "supported by neuronemu yet: the tensor indexed at run time must be in HBM "
                "(and not a reinterpreting view)",
                span,
            )
        if (
            not isinstance(index, View)
            or isinstance(index, IndirectView)
            or index.buffer not in (Buffer.SBUF, Buffer.REG)
        ):
            raise KernelTypeError(
                f"the {mode} offset of an indirect view must be an SBUF "
                f"tile of integers or an NkiScalar, got {shown(index)}",
                span,
            )
        if not index.dtype.name.startswith(("int", "uint")):
            raise KernelTypeError(
                f"the {mode} offset must hold integers, not {index.dtype.name}", span
            )
        if (
            isinstance(indirect_dim, bool)
            or not isinstance(indirect_dim, int)
            or not 0 <= indirect_dim < len(dims)
        ):
            raise KernelTypeError(
                f"indirect_dim must be a dim of {what} (0..{len(dims) - 1}), "
                f"got {shown(indirect_dim)}",
                span,
            )
        if mode == "vector" and indirect_dim != 0:
            raise KernelTypeError(
                f"vector_offset supports only indirect_dim=0 (nki: NkiTensor.ap), got "
                f"{indirect_dim}",
                span,
            )
        if mode == "vector" and index.size != pairs[0][1]:
            raise ConstraintError(
                f"the vector offset {shown(index)} holds {index.size} indices but the pattern's "
                f"first level takes {pairs[0][1]}; they must be equal",
                span,
            )
        if mode == "scalar" and index.size != 1:
            raise ConstraintError(
                f"a scalar offset is one value; {shown(index)} has {index.size}", span
            )
        unit, limit = step or (math.prod(dims[indirect_dim + 1 :]), dims[indirect_dim])
        full = tuple((0, n, 1) for n in tensor.shape)
        return IndirectView(
            tensor, full, tuple(range(len(tensor.shape))), offset, pairs, index, mode, unit, limit
        )

    def __repr__(self) -> str:
        return (
            f"iap({self.tensor.name}, {[list(p) for p in self.pattern]}, {self.offset}, "
            f"{self.mode}, {shown(self.index)}, {self.unit}, {self.limit})"
        )


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
        return raw_pattern(view.tensor, offset, pairs)
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
