"""Older-dialect indexing with an index tile: `data[idx_tile, i_f]` (or
`data[idx_tile[i_p, 0], i_f]`) reads or writes the HBM rows the tile names, by an indirect DMA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan, shown
from neuronemu.ir import IndirectView, Tensor, View, restrict
from neuronemu.trace.legacy_index import AffineIndex, AffineView
from neuronemu_isa import Buffer

__all__ = ["GatherView"]


@dataclass(frozen=True, eq=False)
class GatherView(AffineView):
    """`data[idx_tile, i_f]` or `data[idx_tile[i_p, 0], i_f]` (older NKI): row i of the
    result is row `idx_tile[i]` of an HBM tensor's dim, read or written by an indirect DMA
    (nki.language.load and .store, "Also supports indirect DMA access with dynamic index
    values": https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/
    nki.language.load.html). `base` is the tensor with every other index applied, the
    indexed dim first; it becomes an IndirectView when an instruction uses it, its rows (and
    the index tile's) narrowed by a mask's range of position 0."""

    index: Any = None  # the index tile: a View, or an AffineView of one (idx_tile[i_p, 0])

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.index.shape[0], *self.base.shape[1:])

    @staticmethod
    def build(view: View, items: tuple, span: SourceSpan) -> GatherView:
        """The view `view[items]` where one item is an index tile, ints come before it and
        ints, slices and nl.arange indices (one each, stepping forward) after it."""
        at = [k for k, item in enumerate(items) if isinstance(item, (Tensor, View, AffineView))]
        if len(at) != 1:
            raise KernelTypeError(
                f"{view.tensor.name} is indexed by {len(at)} tiles; one dim at most takes an "
                "index tile (the others ints, slices or nl.arange indices)",
                span,
            )
        k = at[0]
        if view.tensor.on_chip or view.tensor.base is not None:
            raise KernelTypeError(
                f"indexing {view.tensor.name} ({view.buffer.value.upper()}) with a tile is an "
                "indirect DMA, which reads or writes HBM: index an HBM tensor (nl.load, "
                "nl.store)",
                span,
            )
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in items[:k]):
            raise KernelTypeError(
                f"the indices of {view.tensor.name} before its index tile must be ints, got "
                f"{shown(items[:k])}",
                span,
            )
        index = items[k]
        index = index.full() if isinstance(index, Tensor) else index
        _check_index_tile(index, span)
        if len(items) > len(view.shape):
            raise KernelTypeError(
                f"too many indices for {view.tensor.name}: {len(items)} for a "
                f"{len(view.shape)}-d view of shape {list(view.shape)}",
                span,
            )
        after: list[int | slice] = []
        for dim, item in enumerate(items[k + 1 :], start=k + 1):
            position = 1 + sum(not isinstance(a, int) for a in after)
            after.append(_as_slice(item, position, view.shape[dim], view.tensor.name, span))
        base = view.subscript((*items[:k], slice(None), *after), span)
        return GatherView(base, (), (), span, index)

    def resolve(self, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
        rows, n = (ranges or {}).get(0, (0, self.index.shape[0])), self.index.shape[0]
        lo, hi = max(rows[0], 0), min(rows[1], n)
        if hi <= lo:
            return None
        index = self.index
        if isinstance(index, AffineView):
            index = index.resolve({0: (lo, hi)})
        elif (lo, hi) != (0, n):
            index = restrict(index, {0: (lo, hi)})
        rest = {p: r for p, r in (ranges or {}).items() if p != 0}
        base = restrict(self.base, rest) if rest else self.base
        if index is None or base is None:
            return None
        offset, pairs = base.as_pattern()
        stride, count = pairs[0]
        if stride == 0:
            raise KernelTypeError(
                f"{self.tensor.name}: the dim an index tile selects has stride 0 (a "
                "broadcast): every index names the same elements",
                self.span,
            )
        pattern = [[stride, hi - lo], *[list(p) for p in pairs[1:]]]
        return IndirectView.make(
            base.tensor, offset, pattern, index, "vector", 0, self.span, step=(stride, count)
        )

    def __repr__(self) -> str:
        return f"{self.tensor.name}[gather {list(self.shape)}]"


def _check_index_tile(index: Any, span: SourceSpan) -> None:
    """An index tile holds one integer per partition: [K, 1], in SBUF."""
    if index.buffer != Buffer.SBUF or not index.dtype.name.startswith(("int", "uint")):
        raise KernelTypeError(
            f"an index tile must be an SBUF tile of integers, got {shown(index)} "
            f"({index.dtype.name} in {index.buffer.value.upper()})",
            span,
            hint="load the indices first: idx = nl.load(indices)",
        )
    if len(index.shape) != 2 or index.shape[1] != 1:
        raise KernelTypeError(
            f"an index tile holds one row index per partition, [K, 1]; got {shown(index)} "
            f"of shape {list(index.shape)}",
            span,
        )


def _as_slice(item: Any, position: int, size: int, name: str, span: SourceSpan) -> int | slice:
    """An index after the index tile as a basic one: an nl.arange index walking iteration
    position `position` forward is the slice it walks (within the dim's `size`)."""
    if isinstance(item, AffineIndex) and len(item.terms) == 1:
        _, count, from_right, coeff = item.terms[0]
        if coeff <= 0 or item.position(from_right) != position:
            raise KernelTypeError(
                f"beside an index tile, an nl.arange index walks one dim forward on its own "
                f"axis ({position}); got {shown(item)}",
                span,
            )
        last = item.offset + coeff * (count - 1)
        if item.offset < 0 or last >= size:
            raise ConstraintError(
                f"index of {name} reaches {min(item.offset, last) if item.offset < 0 else last} "
                f"in a dim of size {size}",
                span,
            )
        return slice(item.offset, last + 1, coeff)
    if isinstance(item, AffineIndex) and not item.terms:
        item = item.offset
    if isinstance(item, slice) or (isinstance(item, int) and not isinstance(item, bool)):
        return item
    raise KernelTypeError(f"index {shown(item)} beside an index tile is not supported", span)
