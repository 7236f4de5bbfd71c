"""The PSUM bank rule: a matmul writes one bank, so its result may not cross a bank boundary
(checked once the tiles are placed)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

from neuronemu.build.allocator import Placement
from neuronemu.errors import ConstraintError, shown
from neuronemu.ir import View
from neuronemu.program import Instr
from neuronemu.program.table import Table, distinct
from neuronemu_isa import Arch

__all__ = ["check_psum_banks"]


def check_psum_banks(table: Table, placements: Mapping[int, Placement], arch: Arch) -> None:
    """A matmul writes one PSUM bank: its dst may not cross a 2 KiB bank boundary (each
    spec's `one_psum_bank` operands). Each instruction that stands for others in the
    program table (`base_where`: the same box, of its own tile) is checked once, and the
    others by where their tiles are placed; the first that crosses, in program order, is
    the error."""
    bank = arch.psum_bank_bytes
    instrs = table.instrs
    rows = np.flatnonzero(table.per_instr(lambda ins: bool(ins.spec.one_psum_bank), np.bool_))
    if not len(rows):
        return
    same = table.base_where(lambda ins: ins.spec.one_psum_bank, whole=True)
    # Each that stands for itself is checked on its own; the others by their tiles' offsets
    # (each the same box of its own tile as the one it stands for), but those not of a box
    # of a tile itself; all in program order, to the first that crosses.
    alone = rows[same[rows] == rows].tolist()
    crossing = np.zeros(table.n, dtype=np.bool_)
    others = rows[same[rows] != rows]
    names = {n for r in distinct(same[others]).tolist() for n in instrs[r].spec.one_psum_bank}
    for name in sorted(names):

        def named(ins: Instr, name: str = name) -> str | None:
            return name if name in ins.spec.one_psum_bank else None

        tensors = table.operand_tensors(others, named)
        # (as arrays: per instruction it stands for, the box; per tile, where it is placed)
        stands, at = np.unique(same[others], return_inverse=True)
        lo, hi = np.zeros(len(stands), np.int64), np.zeros(len(stands), np.int64)
        boxed = np.zeros(len(stands), np.bool_)
        for k, r in enumerate(stands.tolist()):
            box = _root_box_bytes(instrs[r], name)
            if box is not None:
                lo[k], hi[k], boxed[k] = box[0], box[1], True
        alone.extend(others[~boxed[at]].tolist())
        tiles, of = np.unique(tensors[others], return_inverse=True)
        offsets = getattr(placements, "offsets", None)  # (Placements: without making any)
        offset = (
            offsets(tiles)
            if offsets is not None
            else np.array(
                [placements[t].offset if t in placements else -1 for t in tiles.tolist()],
                np.int64,
            )
        )[of]
        placed = boxed[at] & (offset >= 0)
        start, end = offset + lo[at], offset + hi[at] - 1
        crossing[others[placed & (start // bank != end // bank)]] = True
    for i in sorted(set(alone).union(np.flatnonzero(crossing).tolist())):
        ins = instrs[i]
        for name in ins.spec.one_psum_bank:
            span = _span(ins, name, placements)
            if span is not None and span[0] // bank != (span[1] - 1) // bank:
                raise _across(ins, name, span, bank)


def _root_box_bytes(ins: Instr, name: str) -> tuple[int, int] | None:
    """The bytes of a partition that operand `name` covers in its tensor, a tile itself
    (None: no view, or a view of another view)."""
    tensor = ins.tensor_of(name)
    if tensor is None or tensor.base is not None:
        return None
    return _bytes_of(tensor.shape, ins.bounds_of(name), tensor.dtype.itemsize)


def _span(ins: Instr, name: str, placements: Mapping[int, Placement]) -> tuple[int, int] | None:
    """The bytes [lo, hi) of a partition that operand `name` covers where it is placed
    (None: not a view of a placed tile)."""
    tensor = ins.tensor_of(name)
    if tensor is None or tensor.root.id not in placements:
        return None
    if tensor.base is None:  # (a view of the root itself: its bounds, without the view)
        lo, hi = _bytes_of(tensor.shape, ins.bounds_of(name), tensor.dtype.itemsize)
    else:
        lo, hi = _byte_range(ins.operand(name).as_root())
    base = placements[tensor.root.id].offset
    return base + lo, base + hi


def _across(ins: Instr, name: str, span: tuple[int, int], bank: int) -> ConstraintError:
    lo, hi = span
    dst = ins.operand(name).as_root()
    return ConstraintError(
        f"{ins.spec.name}: {name} {shown(dst)} covers bytes [{lo}, {hi}) of each "
        f"partition, across PSUM banks {lo // bank} and {(hi - 1) // bank}; a matmul result "
        f"must lie within one {bank}-byte bank",
        ins.span,
    )


def _byte_range(view: View) -> tuple[int, int]:
    """The [lo, hi) bytes of one partition that a view of an on-chip tensor touches."""
    return _bytes_of(view.tensor.shape, view.bounds(), view.dtype.itemsize)


@functools.lru_cache(maxsize=4096)  # (a loop's matmuls write the same boxes of their tiles)
def _bytes_of(
    shape: tuple[int, ...], bounds: tuple[tuple[int, int], ...], size: int
) -> tuple[int, int]:
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, 0, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    lo = sum(b[0] * strides[d] for d, b in enumerate(bounds) if d > 0)
    hi = sum((b[1] - 1) * strides[d] for d, b in enumerate(bounds) if d > 0) + 1
    return lo * size, hi * size
