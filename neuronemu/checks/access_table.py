"""A program's memory accesses as one table of flat arrays, for the checks that compare
them (neuronemu.checks.hazards): races, uninitialized reads, unwritten outputs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from neuronemu.ir import Tensor, View
from neuronemu.program import Instr, Program, Repeated

__all__ = ["Accesses"]


class Accesses:
    """Every access of a program as flat arrays, in program order (each instruction's reads,
    then its writes): instruction, its place among the instruction's accesses, root tensor
    (numbered from 0), writes?, the box [lo, hi) it touches per dim of the root (padded with
    [0, 1)), whether that box is the access exactly (a plain box of the root itself, of
    every element in its bounds: not through an alias, whose root box holds what it touches,
    nor a stepped box, a pattern or run-time offsets), and for a read, whether it is of an
    output the instruction merges into (`Operand.merge`). Made once per run for the race
    check and the read and output checks (`run_program`); a replayed loop's repeated
    iterations (`Program.repeats`) from their base's accesses, moved on with NumPy."""

    def __init__(self, program: Program):
        self._merges: dict[str, set[str]] = {}  # instruction kind -> its merge outputs
        parts: list[tuple[np.ndarray, ...]] = []
        at = 0
        for rep in program.repeats:
            parts.append(self._listed(program.raw_instrs[at : rep.start]))
            parts.append(self._repeated(program, rep, _rows_from(parts, rep.base)))
            at = rep.start + rep.count * rep.period
        parts.append(self._listed(program.raw_instrs[at:]))
        instr, slot, tensor, write, plain, lo, hi, merged = _joined(parts)
        # The root tensors accessed, numbered in order of id (ids are small integers: by a
        # table over them, not by sorting the accesses).
        present = np.zeros(int(tensor.max()) + 1 if len(tensor) else 0, dtype=np.bool_)
        present[tensor] = True
        self.ids = np.flatnonzero(present)  # number -> root tensor id
        self._present = present  # (by root tensor id: is it accessed, and its number)
        self._number = np.cumsum(present, dtype=np.int64) - 1
        self.instr = instr
        self.slot = slot
        self.tensor = self._number[tensor]
        self.write = write
        self.plain = plain
        self.merged = merged
        self.lo = np.ascontiguousarray(lo)
        self.hi = np.ascontiguousarray(hi)

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

    def _listed(self, instrs: list[Instr]) -> tuple[np.ndarray, ...]:
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
        return (
            np.array(instr, dtype=np.int64),
            np.array(slot, dtype=np.int64),
            np.array(tensor, dtype=np.int64),
            np.array(write, dtype=np.bool_),
            np.array(plain, dtype=np.bool_),
            lo,
            hi,
            np.array(merged, dtype=np.bool_),
        )

    def _repeated(
        self, program: Program, rep: Repeated, base: tuple[np.ndarray, ...]
    ) -> tuple[np.ndarray, ...]:
        """The columns of a repeated block: the base's accesses (`base`, its columns), per
        repeat r in its instructions, on the tiles it took, their boxes moved on by r + 1
        steps."""
        position: list[int] = []
        moves: list[tuple[int, ...]] = []
        for ins in program.raw_instrs[rep.base : rep.base + rep.period]:
            sources = rep.sources[ins.index - rep.base]
            for role in ("in", "out"):
                for name in ins.view_names(role):
                    p, moved = sources[name]
                    position.append(p)
                    moves.append(moved)
        dims = base[5].shape[1]
        move = np.zeros((len(moves), dims), dtype=np.int64)
        for a, m in enumerate(moves):
            move[a, : len(m)] = m
        pos = np.array(position, dtype=np.int64)
        steps = np.arange(1, rep.count + 1, dtype=np.int64)  # from the base
        instr = base[0][None, :] + (steps * rep.period)[:, None]
        if rep.ids.shape[1]:
            tensor = np.where(pos >= 0, rep.ids[:, np.maximum(pos, 0)], base[2][None, :])
        else:  # (the iterations take no tiles)
            tensor = np.broadcast_to(base[2], (rep.count, len(pos)))
        shift = steps[:, None, None] * move[None, :, :]
        n = rep.count * len(pos)
        return (
            instr.reshape(n),
            np.tile(base[1], rep.count),
            tensor.reshape(n),
            np.tile(base[3], rep.count),
            np.tile(base[4], rep.count),
            (base[5][None] + shift).reshape(n, dims),
            (base[6][None] + shift).reshape(n, dims),
            np.tile(base[7], rep.count),
        )

    def view(self, program: Program, a: int) -> View:
        """The view of access `a`, as its instruction names it."""
        ins = program.raw_instrs[int(self.instr[a])]
        return (ins.views("in") + ins.views("out"))[int(self.slot[a])][1]

    def whole_writes(self, tensors: list[Tensor]) -> np.ndarray:
        """Per access: a write of every element of its root tensor (a plain box over all of
        it; `tensors`: the program's)."""
        by_id = {t.id: t.shape for t in tensors}
        width = self.lo.shape[1]  # (dims past a tensor's own: of size 1)
        dims = (by_id[tid] for tid in self.ids.tolist())
        shape = np.fromiter(
            itertools.chain.from_iterable(d + (1,) * (width - len(d)) for d in dims),
            dtype=np.int64,
            count=len(self.ids) * width,
        ).reshape(len(self.ids), width)
        return (
            self.write
            & self.plain
            & (self.lo == 0).all(axis=1)
            & (self.hi == shape[self.tensor]).all(axis=1)
        )


def _rows_from(parts: list[tuple[np.ndarray, ...]], first: int) -> tuple[np.ndarray, ...]:
    """The columns of the accesses of instructions `first` on, from `parts` (in program
    order, the last ones reaching the latest instruction): a repeated block's base, listed
    already (or made from an inner block's base), is not listed again."""
    taken: list[tuple[np.ndarray, ...]] = []
    for p in reversed(parts):
        if not len(p[0]):
            continue
        if p[0][0] >= first:
            taken.append(p)
            continue
        cut = int(np.searchsorted(p[0], first))
        taken.append(tuple(c[cut:] for c in p))
        break
    taken.reverse()
    if not taken:
        return parts[-1]  # (an empty part: the base has no accesses)
    return _joined(taken)


def _joined(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """The columns of `parts`, one after another (each part's boxes padded to the most
    dims: dims past a root's own are the one index [0, 1))."""
    dims = max(p[5].shape[1] for p in parts)
    for k, p in enumerate(parts):
        if p[5].shape[1] < dims:
            pad = ((0, 0), (0, dims - p[5].shape[1]))
            parts[k] = (*p[:5], np.pad(p[5], pad), np.pad(p[6], pad, constant_values=1), p[7])
    return tuple(np.concatenate([p[c] for p in parts]) for c in range(8))


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
