"""Which earlier instructions an access conflicts with: per tensor, the accesses not yet
superseded by a covering write (the Builder derives dependencies from them, the race check
looks for unordered pairs among them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from neuronemu.ir import Tensor, View
from neuronemu.ir.footprint import Box, contains, overlap

__all__ = [
    "Boxes",
    "History",
    "RootBox",
    "conflicts",
    "record",
    "copy_history",
    "shifted_history",
]

# Past this many accesses a tensor's are also filed by grid cell (an output written tile by
# tile would otherwise have every write compared with every earlier one). Inferred: a short
# list is compared faster than cells are worked out.
GRID_ABOVE = 16
# A box over more cells than this is kept with the wide ones, compared with every access
# (which bounds the grid's size: at most this many references per access).
MAX_CELLS = 16


class Boxes:
    """Accesses (box, instruction) to one tensor, in the order recorded, and how to find
    those a box may touch without comparing it with all of them.

    Once asked with more than GRID_ABOVE accesses, each is also filed under the cells of a
    grid that its box touches; the grid's cell is the extent, per dim, of the latest box
    then (a tile).
    Two non-empty boxes that overlap share a cell, so the candidates for a box are the
    accesses filed under its cells, with the wide ones (over more than MAX_CELLS cells, or
    empty: `overlap` does not say no to every empty box) and, for a box the grid cannot
    file, all of them. The candidates are a superset: callers still ask `overlap` or
    `contains`, so the answers are those of comparing with every access."""

    __slots__ = ("items", "next", "cell", "grid", "wide")

    def __init__(self) -> None:
        self.items: dict[int, tuple[Box, int]] = {}  # sequence number -> (box, instruction)
        self.next = 0
        self.cell: tuple[int, ...] | None = None  # the grid's cell extents, once there is one
        # (these two are set with the cell: most tensors never have a grid)
        self.grid: dict[tuple[int, ...], dict[int, None]]
        self.wide: dict[int, None]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def copy(self) -> Boxes:
        other = Boxes()
        other.items, other.next, other.cell = dict(self.items), self.next, self.cell
        if self.cell is not None:
            other.grid = {k: dict(v) for k, v in self.grid.items()}
            other.wide = dict(self.wide)
        return other

    def shifted(self, by: int) -> Boxes:
        """A copy whose every access is that of the instruction `by` later."""
        other = self.copy()
        other.items = {s: (b, i + by) for s, (b, i) in self.items.items()}
        return other

    def add(self, box: Box, instr: int) -> None:
        seq = self.next
        self.next += 1
        self.items[seq] = (box, instr)
        if self.cell is not None:
            self._file(seq, box)

    def candidates(self, box: Box) -> Iterable[tuple[int, tuple[Box, int]]]:
        """(sequence number, (box, instruction)) of every access that may overlap `box` or
        lie inside it, in the order recorded (a view of them all, or a list: take what is
        wanted before removing any)."""
        if self.cell is None:
            if len(self.items) <= GRID_ABOVE:
                return self.items.items()
            # (made when first asked: the reads of a tensor nothing writes never are)
            last, _ = self.items[next(reversed(self.items))]
            self.cell = tuple(max(hi - lo, 1) for lo, hi in last)
            self.grid, self.wide = {}, {}
            for s, (b, _) in self.items.items():
                self._file(s, b)
        cells = self._cells(box)
        if cells is None:
            return self.items.items()
        found = set(self.wide)
        grid = self.grid
        for key in cells:
            filed = grid.get(key)
            if filed:
                found.update(filed)
        items = self.items
        return [(s, items[s]) for s in sorted(found)]

    def remove(self, seqs: Iterable[int]) -> None:
        for s in seqs:
            box, _ = self.items.pop(s)
            if self.cell is None:
                continue
            if s in self.wide:
                del self.wide[s]
                continue
            for key in self._cells(box) or ():
                del self.grid[key][s]

    def _file(self, seq: int, box: Box) -> None:
        cells = self._cells(box)
        if cells is None:
            self.wide[seq] = None
            return
        grid = self.grid
        for key in cells:
            filed = grid.get(key)
            if filed is None:
                grid[key] = {seq: None}
            else:
                filed[seq] = None

    def _cells(self, box: Box) -> list[tuple[int, ...]] | None:
        """The grid cells a box touches (None: a box to compare with everything)."""
        cell = self.cell
        assert cell is not None
        if len(box) != len(cell):
            return None
        first, last = [], []
        for (lo, hi), c in zip(box, cell):
            if hi <= lo:
                return None
            first.append(lo // c)
            last.append((hi - 1) // c)
        if first == last:  # (most boxes: within one cell)
            return [tuple(first)]
        if math.prod(b - a + 1 for a, b in zip(first, last)) > MAX_CELLS:
            return None
        keys: list[tuple[int, ...]] = [()]
        for a, b in zip(first, last):
            keys = [(*k, x) for k in keys for x in range(a, b + 1)]
        return keys


class RootBox:
    """An access as `conflicts` and `record` take it, without its view: a root tensor and the
    box it touches there. (A replay's repeats pass these for the off-chip views they leave
    unmade: neuronemu.replay.repeats.)"""

    __slots__ = ("tensor", "box")

    def __init__(self, tensor: Tensor, box: Box):
        self.tensor = tensor
        self.box = box

    def bounds(self) -> Box:
        return self.box


class History:
    """Accesses to one tensor not yet superseded by a covering write."""

    __slots__ = ("writes", "reads")

    def __init__(self) -> None:
        self.writes = Boxes()
        self.reads = Boxes()


def conflicts(
    history: dict[int, History],
    reads: Sequence[View | RootBox],
    writes: Sequence[View | RootBox],
) -> set[int]:
    """The recorded accesses that reads after (RAW) or writes after (WAR, WAW) conflict with."""
    deps: set[int] = set()
    get = history.get
    for v in reads:
        h = get(v.tensor.id)
        if h is not None and h.writes.items:
            box = v.bounds()
            for _, (b, i) in h.writes.candidates(box):
                if overlap(b, box):
                    deps.add(i)
    for v in writes:
        h = get(v.tensor.id)
        if h is not None:
            box = v.bounds()
            for entries in (h.writes, h.reads):
                if entries.items:
                    for _, (b, i) in entries.candidates(box):
                        if overlap(b, box):
                            deps.add(i)
    return deps


def copy_history(h: History) -> History:
    copy = History()
    copy.writes, copy.reads = h.writes.copy(), h.reads.copy()
    return copy


def shifted_history(h: History, by: int) -> History:
    """`h` as the accesses of the instructions `by` later (the same accesses to a tile made
    `by` instructions on) would leave it."""
    other = History()
    other.writes, other.reads = h.writes.shifted(by), h.reads.shifted(by)
    return other


def record(
    history: dict[int, History],
    reads: Sequence[View | RootBox],
    writes: Sequence[View | RootBox],
    index: int,
) -> None:
    """Record instruction `index`'s accesses; a write supersedes what it covers."""
    for v in reads:
        h = history.get(v.tensor.id)
        if h is None:
            h = history[v.tensor.id] = History()
        h.reads.add(v.bounds(), index)
    for v in writes:
        h = history.get(v.tensor.id)
        if h is None:
            h = history[v.tensor.id] = History()
        box = v.bounds()
        if h.writes.items:
            h.writes.remove([s for s, (b, _) in h.writes.candidates(box) if contains(box, b)])
        if h.reads.items:
            h.reads.remove(
                [s for s, (b, i) in h.reads.candidates(box) if i != index and contains(box, b)]
            )
        h.writes.add(box, index)
