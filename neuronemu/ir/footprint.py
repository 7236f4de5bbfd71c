"""What bytes an access touches: boxes of tensor dims, and per-byte flag masks under views.

One home for the footprint arithmetic the dependency builder, the race and uninitialized-read
checks and the executor share.
"""

from __future__ import annotations

import numpy as np

from neuronemu.ir.indirect import IndirectView
from neuronemu.ir.tensor import Tensor, View, strided

__all__ = ["Box", "overlap", "contains", "mask_shape", "read_mask", "write_mask", "set_mask"]

# A half-open [lo, hi) range per tensor dim.
Box = tuple[tuple[int, int], ...]


def overlap(a: Box, b: Box) -> bool:
    for (alo, ahi), (blo, bhi) in zip(a, b):  # (a loop: this runs per pair of accesses)
        if alo >= bhi or blo >= ahi:
            return False
    return True


def contains(outer: Box, inner: Box) -> bool:
    for (olo, ohi), (ilo, ihi) in zip(outer, inner):
        if ilo < olo or ihi > ohi:
            return False
    return True


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
        return strided(
            mask[p0].reshape(-1)[r0:],
            tuple(n for _, n in levels),
            (mask.strides[0], *(s * mask.itemsize for s, _ in levels[1:])),
        )
    flat = mask.reshape(-1)
    return strided(
        flat[offset:], tuple(n for _, n in levels), tuple(s * mask.itemsize for s, _ in levels)
    )


def read_mask(mask: np.ndarray, view: View) -> np.ndarray:
    """Per element of `view`, whether all of its bytes are flagged in `mask`."""
    if isinstance(view, IndirectView):  # which rows, only the run knows: optimistic
        return np.full(view.shape, bool(mask.any()))
    return _flags(mask, view).all(axis=-1).reshape(view.shape)


def write_mask(mask: np.ndarray, view: View, value: np.ndarray | bool | np.bool_) -> None:
    """Flag (or unflag) the bytes of each element of `view` in `mask` by `value` (per element,
    or one bool for all)."""
    set_mask(mask, view, value, count=False)


def set_mask(
    mask: np.ndarray, view: View, value: np.ndarray | bool | np.bool_, count: bool = True
) -> int | None:
    """write_mask, returning how many flags it set net (set minus cleared; None when that
    is not known cheaply: a run-time view, or one that reaches a flag twice)."""
    if isinstance(view, IndirectView):  # unknown rows: written data counts everywhere
        if np.all(value):
            mask[...] = True
        return None
    flags = _flags(mask, view)
    counted = count and _injective(flags)
    before = int(np.count_nonzero(flags)) if counted else 0
    value = np.asarray(value, dtype=np.bool_)
    flags[...] = value if value.ndim == 0 else value.reshape(flags.shape[:-1])[..., None]
    return int(np.count_nonzero(flags)) - before if counted else None


def _injective(a: np.ndarray) -> bool:
    """Does every index of the strided array `a` reach its own byte? (Its dims, smallest
    stride first, each step past all that the smaller ones reach.)"""
    reach = a.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n > 1):
        if stride < reach:
            return False
        reach += stride * (n - 1)
    return True
