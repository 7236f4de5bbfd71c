"""A program's memory accesses as one table of flat arrays, for the checks that compare
them (neuronemu.checks.hazards): races, uninitialized reads, unwritten outputs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuronemu.ir import Tensor, View
from neuronemu.program import Instr, Program
from neuronemu.program.lazy import tensor_groups
from neuronemu.program.table import Rows

__all__ = ["Accesses"]


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
