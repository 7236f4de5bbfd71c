"""Which earlier instructions an access conflicts with: per tensor, the accesses not yet
superseded by a covering write (the Builder derives dependencies from them)."""

from __future__ import annotations

from neuronemu.ir import View
from neuronemu.ir.footprint import Box, contains, overlap

__all__ = ["History", "conflicts", "record", "copy_history"]


class History:
    """Accesses to one tensor not yet superseded by a covering write."""

    __slots__ = ("writes", "reads")

    def __init__(self) -> None:
        self.writes: list[tuple[Box, int]] = []
        self.reads: list[tuple[Box, int]] = []


def conflicts(history: dict[int, History], reads: list[View], writes: list[View]) -> set[int]:
    """The recorded accesses that reads after (RAW) or writes after (WAR, WAW) conflict with."""
    deps: set[int] = set()
    for v in reads:
        h = history.get(v.tensor.id)
        if h is not None:
            box = v.bounds()
            deps.update(i for b, i in h.writes if overlap(b, box))
    for v in writes:
        h = history.get(v.tensor.id)
        if h is not None:
            box = v.bounds()
            deps.update(i for b, i in h.writes if overlap(b, box))
            deps.update(i for b, i in h.reads if overlap(b, box))
    return deps


def copy_history(h: History) -> History:
    copy = History()
    copy.writes, copy.reads = list(h.writes), list(h.reads)
    return copy


def record(history: dict[int, History], reads: list[View], writes: list[View], index: int) -> None:
    """Record instruction `index`'s accesses; a write supersedes what it covers."""
    for v in reads:
        history.setdefault(v.tensor.id, History()).reads.append((v.bounds(), index))
    for v in writes:
        h = history.setdefault(v.tensor.id, History())
        box = v.bounds()
        h.writes = [(b, i) for b, i in h.writes if not contains(box, b)]
        h.reads = [(b, i) for b, i in h.reads if i == index or not contains(box, b)]
        h.writes.append((box, index))
