"""A program's memory accesses as one table of flat arrays, for the checks that compare
them (neuronemu.checks.hazards): races, uninitialized reads, unwritten outputs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from neuronemu.ir import Tensor, View
from neuronemu.program import Instr, Program
from neuronemu.program.lazy import tensor_groups
from neuronemu.program.table import Rows

__all__ = ["Accesses", "Grid"]


class Grid(NamedTuple):
    """Where the jitted race check files each access (`Accesses.grid`): per tensor, gridded?;
    per access, its cells (CSR: `ptr` into `cell`; none for a wide access of a gridded
    tensor, compared with all); per filing, its access (`owner`); how many cells in all
    (each tensor's its own)."""

    gridded: np.ndarray
    ptr: np.ndarray
    cell: np.ndarray
    owner: np.ndarray
    n_cells: int


class Accesses:
    """Every access of a program as flat arrays, in program order (each instruction's reads,
    then its writes): instruction, its place among the instruction's accesses, root tensor
    (numbered from 0), writes?, the box [lo, hi) it touches per dim of the root (padded with
    [0, 1)), whether that box is the access exactly (a plain box of the root itself, of
    every element in its bounds: not through an alias, whose root box holds what it touches,
    nor a stepped box, a pattern or run-time offsets), and for a read, whether it is of an
    output the instruction merges into (`Operand.merge`). Made once per run for the race
    check and the read and output checks (`run_program`), from the program table's rows."""

    def __init__(self, program: Program):
        self._merges: dict[str, set[str]] = {}  # instruction kind -> its merge outputs
        rows = program.table().rows(self._listed, _accessed)
        tensor, (slot, write, plain, merged) = rows.tensor, rows.extra
        # The root tensors accessed, numbered in order of id (ids are small integers: by a
        # table over them, not by sorting the accesses).
        present = np.zeros(int(tensor.max()) + 1 if len(tensor) else 0, dtype=np.bool_)
        present[tensor] = True
        self.ids = np.flatnonzero(present)  # number -> root tensor id
        self._present = present  # (by root tensor id: is it accessed, and its number)
        self._number = np.cumsum(present, dtype=np.int64) - 1
        self.instr = rows.instr
        self.slot = slot
        self.tensor = self._number[tensor]
        self.write = write
        self.plain = plain
        self.merged = merged
        self.lo = np.ascontiguousarray(rows.lo)
        self.hi = np.ascontiguousarray(rows.hi)

    def numbers(self, ids: Any, absent: int) -> np.ndarray:
        """The numbers of root tensors `ids` (a sequence of ids), `absent` for those nothing
        accesses."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        got = np.full(len(ids), absent, dtype=np.int64)
        known = (ids >= 0) & (ids < len(self._present))
        known[known] = self._present[ids[known]]
        got[known] = self._number[ids[known]]
        return got

    def _merging(self, ins: Instr) -> set[str]:
        kind = ins.spec.name
        merging = self._merges.get(kind)
        if merging is None:
            merging = self._merges[kind] = {op.name for op in ins.spec.outputs if op.merge}
        return merging

    def _listed(self, instrs: Sequence[Instr]) -> Rows:
        """The columns of `instrs`' accesses, instruction by instruction."""
        instr: list[int] = []
        slot: list[int] = []
        tensor: list[int] = []
        write: list[bool] = []
        boxes: list[tuple] = []
        plain: list[bool] = []
        merged: list[bool] = []
        for ins in instrs:
            i = ins.index
            merging = self._merging(ins)
            k = 0
            for writes, role in ((False, "in"), (True, "out")):
                for name, view in ins.views(role):
                    root = view.as_root()
                    instr.append(i)
                    slot.append(k)
                    k += 1
                    tensor.append(root.tensor.id)
                    boxes.append(root.bounds())
                    plain.append(type(root) is View and root is view and _exact(root))
                    merged.append(not writes and name in merging)
                    write.append(writes)
        lo, hi = _box_arrays(boxes)
        extra = (
            np.array(slot, dtype=np.int64),
            np.array(write, dtype=np.bool_),
            np.array(plain, dtype=np.bool_),
            np.array(merged, dtype=np.bool_),
        )
        return Rows(
            np.array(instr, dtype=np.int64), np.array(tensor, dtype=np.int64), lo, hi, extra
        )

    def view(self, program: Program, a: int) -> View:
        """The view of access `a`, as its instruction names it."""
        ins = program.table().instrs[int(self.instr[a])]
        return (ins.views("in") + ins.views("out"))[int(self.slot[a])][1]

    def grid(self, above: int, most: int) -> Grid:
        """The cells of a grid per tensor each access is filed under, for the jitted race
        check (as `neuronemu.checks.accesses.Boxes` files them for the plain one). A tensor
        gets a grid if it is written somewhere, accessed more than `above` times, and not
        always at one box (a PSUM accumulator's writes supersede each other: its list stays
        short); its cell is, per dim, the median extent of its boxes. A box over at most
        `most` cells is filed under them, others (and empty boxes) are wide. Two non-empty
        boxes that overlap share a cell. (A tensor nothing writes is never compared with:
        its reads are looked up only by a write.)"""
        n_t, dims = len(self.ids), self.lo.shape[1]
        tensor = self.tensor
        gridded = np.bincount(tensor, minlength=n_t) > above
        gridded &= np.bincount(tensor[self.write], minlength=n_t) > 0
        # Per tensor that may be gridded (a group), its accesses together, in arrival order.
        grouped = np.flatnonzero(gridded[tensor])
        grouped = grouped[np.argsort(tensor[grouped], kind="stable")]
        ts = tensor[grouped]
        starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]]) if len(ts) else ts
        lo, hi = self.lo[grouped], self.hi[grouped]
        if len(ts):
            one_box = (np.minimum.reduceat(lo, starts) == np.maximum.reduceat(lo, starts)).all(1)
            one_box &= (np.minimum.reduceat(hi, starts) == np.maximum.reduceat(hi, starts)).all(1)
            gridded[ts[starts[one_box]]] = False
            kept = ~np.repeat(one_box, np.diff(np.r_[starts, len(ts)]))
            ts, lo, hi = ts[kept], lo[kept], hi[kept]
            starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]]) if len(ts) else ts
        n_g = len(starts)
        sizes = np.diff(np.r_[starts, len(ts)])
        group = np.repeat(np.arange(n_g), sizes)
        cell = np.ones((n_g, dims), dtype=np.int64)
        extent = np.maximum(hi - lo, 1)
        for d in range(dims):  # (the median: sorted by group, then extent)
            order = np.lexsort((extent[:, d], group))
            cell[:, d] = extent[order[starts + sizes // 2], d]
        top = np.maximum.reduceat(hi, starts) if n_g else cell  # (past every index touched)
        size = (np.maximum(top, 1) - 1) // cell + 1
        # Cells numbered per tensor row-major, tensors one after another: where that would
        # pass int64, the tensor is not gridded (its group keeps no cells).
        fits = np.prod(size.astype(np.float64), axis=1) <= 2.0**62 / max(n_g, 1)
        gridded[ts[starts[~fits]]] = False
        stride = np.ones((n_g, dims), dtype=np.int64)
        for d in range(dims - 2, -1, -1):
            stride[:, d] = stride[:, d + 1] * size[:, d + 1]
        base = np.r_[0, np.cumsum(np.where(fits, stride[:, 0] * size[:, 0], 0))]
        # Each access of a gridded tensor, in arrival order, filed under its cells.
        number = np.full(n_t, -1, dtype=np.int64)
        number[ts[starts]] = np.arange(n_g)
        sel = np.flatnonzero(gridded[tensor])
        g = number[tensor[sel]]
        c = cell[g]
        first = self.lo[sel] // c
        count = np.maximum((self.hi[sel] - 1) // c - first + 1, 0)
        filed = (self.hi[sel] > self.lo[sel]).all(axis=1)
        filed &= np.prod(count.astype(np.float64), axis=1) <= most
        owner, g = sel[filed], g[filed]
        keys = base[g]
        first, count, step = first[filed], count[filed], stride[g]
        at = np.arange(len(owner))  # (each filing's row among the filed accesses)
        for d in range(dims):  # (each filing into one per cell of this dim)
            n = count[at, d]
            rows = np.repeat(np.arange(len(at)), n)
            nth = np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
            at = at[rows]
            keys = keys[rows] + (first[at, d] + nth) * step[at, d]
        owner = owner[at]
        unique, cell_of = np.unique(keys, return_inverse=True)
        ptr = np.zeros(len(self.instr) + 1, dtype=np.int32)  # (int32: see hazards)
        np.add.at(ptr, owner + 1, 1)
        np.cumsum(ptr, out=ptr)
        cell_of, owner = cell_of.astype(np.int32), owner.astype(np.int32)
        return Grid(gridded, ptr, cell_of, owner, len(unique))

    def whole_writes(self, tensors: list[Tensor]) -> np.ndarray:
        """Per access: a write of every element of its root tensor (a plain box over all of
        it; `tensors`: the program's)."""
        ids, groups, reps = tensor_groups(tensors)  # (a replay's tiles, unmade)
        width = self.lo.shape[1]  # (dims past a tensor's own: of size 1)
        by_group = np.fromiter(
            itertools.chain.from_iterable(t.shape + (1,) * (width - len(t.shape)) for t in reps),
            dtype=np.int64,
            count=len(reps) * width,
        ).reshape(len(reps), width)
        order = np.argsort(ids, kind="stable")
        at = order[np.minimum(np.searchsorted(ids, self.ids, sorter=order), len(ids) - 1)]
        if len(self.ids) and not (ids[at] == self.ids).all():
            raise KeyError("an access to a tensor not in the program")
        shape = by_group[groups[at]]
        return (
            self.write
            & self.plain
            & (self.lo == 0).all(axis=1)
            & (self.hi == shape[self.tensor]).all(axis=1)
        )


def _accessed(ins: Instr) -> list[str]:
    """The operands `Accesses._listed` gives a row each, in its order."""
    return [*ins.view_names("in"), *ins.view_names("out")]


def _exact(view: View) -> bool:
    """Does the view touch every element of its bounds (no dim stepped past one element)?"""
    return all(
        abs(step) == 1 or hi - lo <= 1 for (_, _, step), (lo, hi) in zip(view.box, view.bounds())
    )


def _box_arrays(boxes: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ((lo, hi) per dim) as lo and hi arrays, padded to the most dims with [0, 1)."""
    lengths = set(map(len, boxes))
    dims = max(lengths, default=1)
    if lengths == {dims}:
        flat = itertools.chain.from_iterable(itertools.chain.from_iterable(boxes))
        box = np.fromiter(flat, dtype=np.int64, count=len(boxes) * dims * 2)
        box = box.reshape(len(boxes), dims, 2)
    else:
        box = np.zeros((len(boxes), dims, 2), dtype=np.int64)
        box[:, :, 1] = 1
        for a, b in enumerate(boxes):
            if b:
                box[a, : len(b)] = b
    return np.ascontiguousarray(box[:, :, 0]), np.ascontiguousarray(box[:, :, 1])
