"""Program-level memory hazards, found without running: races between instructions that no
semaphore orders, and reads of memory no earlier instruction wrote.

Happens-before is tracked with vector clocks over the streams (engines and DMA queues): an
instruction follows everything earlier on its own stream and everything its waits follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuronemu.errors import MemoryAccessError, RaceError
from neuronemu.program import Instr, Program
from neuronemu.trace.values import View

__all__ = ["check_races", "uninitialized_reads", "UninitializedRead", "check_initialized"]

Box = tuple[tuple[int, int], ...]


def _overlap(a: Box, b: Box) -> bool:
    return all(alo < bhi and blo < ahi for (alo, ahi), (blo, bhi) in zip(a, b))


def _covers(outer: Box, inner: Box) -> bool:
    return all(olo <= ilo and ihi <= ohi for (olo, ohi), (ilo, ihi) in zip(outer, inner))


def _clocks(program: Program) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Per instruction: its stream number, its position on the stream, and its vector clock
    (for each stream, how many of that stream's instructions it follows)."""
    streams: dict[str, int] = {}
    for ins in program.instrs:
        streams.setdefault(ins.stream, len(streams))
    n, k = len(program.instrs), len(streams)
    clock = np.zeros((n, k), dtype=np.int64)
    stream_of = np.zeros(n, dtype=np.int64)
    position = np.zeros(n, dtype=np.int64)
    last = [-1] * k
    for ins in program.instrs:
        s = streams[ins.stream]
        i = ins.index
        row = clock[last[s]].copy() if last[s] >= 0 else np.zeros(k, dtype=np.int64)
        for d in ins.deps:
            np.maximum(row, clock[d], out=row)
        position[i] = row[s] + 1
        row[s] = position[i]
        clock[i] = row
        stream_of[i] = s
        last[s] = i
    return stream_of, position, clock


def check_races(program: Program) -> None:
    """Raise a RaceError for two unordered instructions touching the same bytes, one writing."""
    stream_of, position, clock = _clocks(program)

    def ordered(a: int, b: int) -> bool:  # a happens before b
        return clock[b, stream_of[a]] >= position[a]

    history: dict[int, list[tuple[Box, int, bool]]] = {}
    for ins in program.instrs:
        accesses = [(v, False) for _, v in ins.views("in")] + \
                   [(v, True) for _, v in ins.views("out")]
        for view, writes in accesses:
            box = view.bounds()
            entries = history.setdefault(view.tensor.id, [])
            for other_box, j, other_writes in entries:
                if (writes or other_writes) and j != ins.index and _overlap(box, other_box) \
                        and not ordered(j, ins.index):
                    _race(program.instrs[j], other_writes, ins, writes, view)
            if writes:
                entries[:] = [e for e in entries
                              if not (_covers(box, e[0]) and ordered(e[1], ins.index))]
            entries.append((box, ins.index, writes))


def _race(first: Instr, first_writes: bool, second: Instr, second_writes: bool,
          view: View) -> None:
    verb = {True: "writes", False: "reads"}
    raise RaceError(
        f"race on {view.tensor.name}: #{second.index} {second.spec.name} {verb[second_writes]} "
        f"{view!r} while #{first.index} {first.spec.name} ({first.span}) "
        f"{verb[first_writes]} it, and no semaphore orders the two", second.span,
        hint=f"make #{second.index} wait for #{first.index} (wait({first.stream}@"
             f"{first.index})), or use separate tiles")


@dataclass
class UninitializedRead:
    instr: Instr
    view: View
    first_index: tuple[int, ...]  # the first element read that nothing wrote

    def message(self) -> str:
        return (f"{self.instr.spec.name} reads {self.view!r}, but nothing wrote "
                f"{self.view.tensor.name}{list(self.first_index)} before it")


def uninitialized_reads(program: Program, limit: int = 1) -> list[UninitializedRead]:
    """Reads of SBUF/PSUM or output HBM memory that no earlier instruction wrote (in program
    order, which respects every wait)."""
    written: dict[int, np.ndarray] = {}
    found: list[UninitializedRead] = []
    for t in program.tensors:
        if t.kind != "input":
            written[t.id] = np.zeros(t.shape, dtype=np.bool_)
    for ins in program.instrs:
        for _, view in ins.views("in"):
            mask = written.get(view.tensor.id)
            if mask is None:
                continue
            region = mask[(*view.np_index(), Ellipsis)]
            if not region.all():
                local = np.unravel_index(int(np.argmin(region)), region.shape) if region.ndim \
                    else ()
                found.append(UninitializedRead(ins, view, _absolute(view, local)))
                if len(found) >= limit:
                    return found
        for _, view in ins.views("out"):
            mask = written.get(view.tensor.id)
            if mask is not None:
                mask[(*view.np_index(), Ellipsis)] = True
    return found


def _absolute(view: View, local: tuple) -> tuple[int, ...]:
    """An index into a view as an index into its tensor."""
    out = []
    it = iter(local)
    for d, (start, _, step) in enumerate(view.box):
        out.append(start + next(it) * step if d in view.kept else start)
    return tuple(int(i) for i in out)


def check_initialized(program: Program) -> None:
    for read in uninitialized_reads(program):
        raise MemoryAccessError(
            f"uninitialized read: {read.message()}", read.instr.span,
            hint="write it first (nl.zeros, nisa.memset, a DMA...), or run with --allow-uninit "
                 "to read NaN as AWS's simulator does")
