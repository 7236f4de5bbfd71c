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
    get = history.get
    for v in reads:
        h = get(v.tensor.id)
        if h is not None and h.writes:
            box = v.bounds()
            for b, i in h.writes:
                if overlap(b, box):
                    deps.add(i)
    for v in writes:
        h = get(v.tensor.id)
        if h is not None:
            box = v.bounds()
            for entries in (h.writes, h.reads):
                for b, i in entries:
                    if overlap(b, box):
                        deps.add(i)
    return deps


def copy_history(h: History) -> History:
    copy = History()
    copy.writes, copy.reads = list(h.writes), list(h.reads)
    return copy


def record(history: dict[int, History], reads: list[View], writes: list[View], index: int) -> None:
    """Record instruction `index`'s accesses; a write supersedes what it covers."""
    for v in reads:
        h = history.get(v.tensor.id)
        if h is None:
            h = history[v.tensor.id] = History()
        h.reads.append((v.bounds(), index))
    for v in writes:
        h = history.get(v.tensor.id)
        if h is None:
            h = history[v.tensor.id] = History()
        box = v.bounds()
        if h.writes:
            h.writes = [(b, i) for b, i in h.writes if not contains(box, b)]
        if h.reads:
            h.reads = [(b, i) for b, i in h.reads if i == index or not contains(box, b)]
        h.writes.append((box, index))
