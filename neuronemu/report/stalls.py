"""Why each line waits: every instruction's time, on the critical path or off it, split by
cause, and summed per kernel source line (as a profiler gives stall reasons per line).

An instruction's span runs from the moment its stream could take it (its engine free after
the previous instruction on it; for a DMA queue, the moment it took the previous transfer; the
start of the run for a stream's first) to the moment its result is visible to other engines.
It splits, from the scheduler's own times (`sim/timing.py`, whose rules the critical path's
walk reads the same way, `critical.py`), into:

- before it starts, waiting on whatever released it last (the scheduler starts an
  instruction at the latest of these): its stream (for a DMA queue, the interval after it
  took the previous transfer: `dma queueing`); a queue full of transfers not yet done (`dma
  queueing`); a dependency, until its producer ends (`dependency`) and then the producer's
  pipeline latency and the semaphore (`semaphore`); what none of those explains (a shared
  port: `other`);
- its own time: its engine's work (`tensor`, `vector`, ...: for the Tensor engine its
  LoadStationary and the throttle included); for a transfer, the fixed trigger latency (`dma
  fixed latency`), waiting for its DMA engines to finish earlier transfers (`dma
  queueing`), moving its bytes (`dma transfer`);
- after it ends, until its result is committed: `engine latency`.

The causes of an instruction add up to its span.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuronemu.jit import compiled as _jit
from neuronemu.report.critical import before_on_stream
from neuronemu.sim.timing import ENGINE_KEYS, Timeline, schedule_arrays

__all__ = ["LINE_CAUSES", "Stalls", "stalls"]

LINE_CAUSES = (
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "sync",
    "dma transfer",
    "dma fixed latency",
    "dma queueing",
    "dependency",
    "semaphore",
    "engine latency",
    "other",
)
_C = {name: k for k, name in enumerate(LINE_CAUSES)}
# Rounding slack when matching a start time to what released it (ns), as the critical path's.
_EPS = 1e-6
# The most characters of a source line a report quotes.
SOURCE_CHARS = 160


class Stalls:
    """Per instruction: `span_from` (ns) and its time per cause (`ns[:, c]`, c indexing
    LINE_CAUSES); and per kernel source line (path, line number) the sums."""

    def __init__(self, timeline: Timeline, span_from: np.ndarray, ns: np.ndarray):
        self.timeline = timeline
        self.span_from = span_from
        self.ns = ns  # (n, len(LINE_CAUSES))
        self._lines: list[dict[str, Any]] | None = None

    def causes_of(self, i: int) -> dict[str, float]:
        """Instruction `i`'s time by cause (the causes it has)."""
        row = self.ns[i]
        return {LINE_CAUSES[c]: float(row[c]) for c in np.flatnonzero(row > 0).tolist()}

    def lines(self) -> list[dict[str, Any]]:
        """Every kernel source line with instructions: {file, line, source, instructions,
        total_ns, by_cause}, the most time first."""
        if self._lines is not None:
            return self._lines
        program = self.timeline.program
        instrs = program.table().instrs
        if not instrs:
            self._lines = []
            return self._lines
        source = program.table().base
        own, at = np.unique(source, return_inverse=True)
        keys: dict[tuple[str, int], int] = {}  # (path, line) -> its number
        spans: list[Any] = []
        code = np.empty(len(own), dtype=np.int64)
        for j, k in enumerate(own.tolist()):
            span = instrs[k].span
            where = (span.path, span.line)
            if where not in keys:
                keys[where] = len(keys)
                spans.append(span)
            code[j] = keys[where]
        line = code[at.reshape(-1)]
        count = np.bincount(line, minlength=len(keys))
        sums = np.stack(
            [
                np.bincount(line, weights=self.ns[:, c], minlength=len(keys))
                for c in range(len(LINE_CAUSES))
            ],
            axis=1,
        )
        totals = sums.sum(axis=1)
        out: list[dict[str, Any]] = []
        for (path, number), k in keys.items():
            text = spans[k].source_line()
            text = None if text is None else text.strip()[:SOURCE_CHARS]
            by_cause = {
                LINE_CAUSES[c]: round(float(sums[k, c]), 3) for c in np.flatnonzero(sums[k] > 0)
            }
            out.append(
                {
                    "file": path,
                    "line": number,
                    "source": text,
                    "instructions": int(count[k]),
                    "total_ns": round(float(totals[k]), 3),
                    "by_cause": dict(sorted(by_cause.items(), key=lambda kv: (-kv[1], kv[0]))),
                }
            )
        out.sort(key=lambda r: (-r["total_ns"], r["file"], r["line"]))
        self._lines = out
        return out

    def to_json(self, top: int = 10) -> list[dict[str, Any]]:
        return self.lines()[:top]


def stalls(timeline: Timeline) -> Stalls:
    """Every instruction's span by cause (the module's docstring says how)."""
    program = timeline.program
    n = len(program.table().instrs)
    a = timeline.arrays if timeline.arrays is not None else schedule_arrays(program)
    arch = program.arch
    stream, kind = a["stream"], a["kind"]
    start, xfer, end, ready = (
        timeline.start_ns,
        timeline.xfer_ns,
        timeline.end_ns,
        timeline.ready_ns,
    )
    ns = np.zeros((n, len(LINE_CAUSES)), dtype=np.float64)
    if n == 0:
        return Stalls(timeline, np.zeros(0), ns)
    is_dma = kind == _jit.KIND_DMA
    prev = before_on_stream(stream, 1)
    slot = before_on_stream(stream, max(int(arch.dma_queue_depth), 1))
    slot[~is_dma] = -1
    has_prev = prev >= 0
    p = np.maximum(prev, 0)
    # When its stream could take it, and when its stream was free for it (a queue: the
    # interval after the previous transfer).
    span_from = np.where(has_prev, np.where(is_dma, start[p], end[p]), 0.0)
    free = np.where(has_prev & is_dma, span_from + float(arch.dma_issue_ns), span_from)
    span_from = np.minimum(span_from, start)
    # The dependency that released it last: its ready time and producer.
    indptr, indices = a["dep_indptr"], a["dep_indices"]
    rows = np.repeat(np.arange(n), np.diff(indptr))
    d = indices
    same = stream[d] == stream[rows]
    wait = np.where(same, a["chain_ns"][d], a["latency_ns"][d] + float(arch.cost_semaphore_ns))
    released = end[d] + wait
    dep_t = np.full(n, -np.inf)
    np.maximum.at(dep_t, rows, released)
    producer = np.full(n, -1, dtype=np.int64)
    if d.size:  # the first dependency in each row that reaches its row's latest
        first = (released >= dep_t[rows]) & (released > -np.inf)
        hit = np.flatnonzero(first)
        row_of = rows[hit]
        keep = np.ones(hit.size, dtype=np.bool_)
        keep[1:] = row_of[1:] != row_of[:-1]
        producer[row_of[keep]] = d[hit[keep]]
    slot_t = np.where(slot >= 0, end[np.maximum(slot, 0)], -np.inf)
    # What released it, as the walk of the critical path prefers: its stream, then a later
    # queue slot, then a later dependency.
    best = free.copy()
    by = np.zeros(n, dtype=np.int64)  # 0 stream, 1 slot, 2 dependency
    later = slot_t > best + _EPS
    best = np.where(later, slot_t, best)
    by[later] = 1
    later = dep_t > best + _EPS
    best = np.where(later, dep_t, best)
    by[later] = 2
    best = np.clip(best, span_from, start)
    ns[:, _C["other"]] = start - best  # (a shared port, or what else held it)
    held = best - span_from
    ns[:, _C["dma queueing"]] = np.where(by < 2, held, 0.0)
    dep = by == 2
    q = np.maximum(producer, 0)
    until_end = np.clip(end[q] - span_from, 0.0, held)
    ns[:, _C["dependency"]] = np.where(dep, until_end, 0.0)
    ns[:, _C["semaphore"]] = np.where(dep, held - until_end, 0.0)
    # Its own time.
    engine = timeline.engine_index
    own = end - start
    for e in range(len(ENGINE_KEYS) - 1):
        mine = engine == e
        ns[mine, e] = own[mine]
    moving = xfer - start
    fixed = np.minimum(float(arch.dma_fixed_ns), moving)
    ns[is_dma, _C["dma fixed latency"]] = fixed[is_dma]
    ns[is_dma, _C["dma queueing"]] += (moving - fixed)[is_dma]
    ns[is_dma, _C["dma transfer"]] = (end - xfer)[is_dma]
    ns[:, _C["engine latency"]] = ready - end
    return Stalls(timeline, span_from, ns)
