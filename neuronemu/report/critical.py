"""The critical path of a timed run: the chain of instructions and waits that sets its total
time, each stretch named by its cause and the kernel line it belongs to.

The walk starts at the instruction whose result is visible last and goes backwards: an
instruction's own time splits into what it did (compute on its engine; for a DMA, the fixed
trigger latency, waiting for busy DMA engines, the transfer itself); what it waited for
before it started is whichever of its stream's previous instruction and its dependencies
released it last (the scheduler's own rule, `sim/_jit.py`: an engine is free when its
instruction ends; a DMA queue the issue interval after it took its previous transfer, or when
the transfer whose slot it takes is done: "dma queueing"), and the walk continues there. A
dependency on another stream costs its producer's pipeline latency plus a semaphore; on the
same stream, the chain latency. Time no predecessor explains (a shared port, the start of the
run) is "other".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from neuronemu.jit import compiled as _jit
from neuronemu.jit import worker as jit_worker
from neuronemu.sim.timing import ENGINE_KEYS, JIT_ABOVE, Timeline, schedule_arrays

__all__ = ["CAUSES", "CriticalPath", "Stretch", "before_on_stream", "critical_path"]

# Every cause a stretch can have, in the order reports list them.
CAUSES = (
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "sync",
    "dma transfer",
    "dma fixed latency",
    "dma queueing",
    "semaphore",
    "engine latency",
    "other",
)
# Rounding slack when matching a start time to what released it (ns).
_EPS = 1e-6


@dataclass(slots=True)
class Stretch:
    """One piece of the critical path: `ns` of `cause`, owed to instruction `index`. (Slots:
    a long path makes tens of thousands.)"""

    cause: str
    ns: float
    index: int
    edge_from: int | None = None  # a wait: the instruction waited for


class CriticalPath:
    """The path: `ns` long, its stretches (latest first) as the walk found them, as arrays
    (a long path has tens of thousands), and per stretch its kernel source line (a number
    into `names`)."""

    def __init__(
        self,
        ns: float,
        found: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        line: np.ndarray,
        names: list[str],
    ):
        self.ns = ns
        self.cause, self.ns_of, self.index, self.edge = found  # (edge: -1 for none)
        self.line, self.names = line, names
        self._stretches: list[Stretch] | None = None

    @property
    def stretches(self) -> list[Stretch]:
        """The stretches, latest first."""
        if self._stretches is None:
            self._stretches = [
                Stretch(CAUSES[c], ns, k, None if e < 0 else e)
                for c, ns, k, e in zip(
                    *(x.tolist() for x in (self.cause, self.ns_of, self.index, self.edge))
                )
            ]
        return self._stretches

    @property
    def lines(self) -> dict[int, str]:
        """Instruction index -> its kernel source line, for the instructions on the path."""
        names = self.names
        return {k: names[n] for k, n in zip(self.index.tolist(), self.line.tolist())}

    def by_cause(self) -> list[tuple[str, float, list[tuple[str, float]]]]:
        """(cause, ns, [(line, ns) most first]) for every cause on the path, most first."""
        shown = self.ns_of > 0
        cause, ns, line = self.cause[shown], self.ns_of[shown], self.line[shown]
        # (bincount adds in order: the sums a loop over the stretches makes)
        totals = np.bincount(cause, weights=ns, minlength=len(CAUSES))
        width = max(len(self.names), 1)
        per_line = np.bincount(cause * width + line, weights=ns, minlength=len(CAUSES) * width)
        seen = np.zeros(len(CAUSES) * width, dtype=np.bool_)
        seen[cause * width + line] = True
        present = sorted(set(cause.tolist()), key=lambda c: (-totals[c], c))
        out = []
        for c in present:
            at = np.flatnonzero(seen[c * width : (c + 1) * width])
            lines = [(self.names[k], float(per_line[c * width + k])) for k in at.tolist()]
            lines.sort(key=lambda kv: (-kv[1], kv[0]))
            out.append((CAUSES[c], float(totals[c]), lines))
        return out

    def edges(self) -> list[tuple[int, int]]:
        """(from, to) instruction pairs the path waits along, earliest first."""
        return [(s.edge_from, s.index) for s in reversed(self.stretches) if s.edge_from is not None]

    def to_json(self, top_lines: int = 5) -> dict:
        return {
            "ns": round(self.ns, 3),
            "causes": [
                {
                    "cause": cause,
                    "ns": round(ns, 3),
                    "share": round(ns / self.ns, 6) if self.ns else 0.0,
                    "lines": [{"line": ln, "ns": round(v, 3)} for ln, v in lines[:top_lines]],
                }
                for cause, ns, lines in self.by_cause()
            ],
        }

    def summary(self) -> str:
        """One sentence: what the critical path is made of."""
        parts = self.by_cause()
        if not parts or self.ns <= 0:
            return "critical path: empty"
        shown: list[str] = []
        for cause, ns, lines in parts[:3]:
            share = f"{100 * ns / self.ns:.0f}"
            if share == "0" and shown:  # (a cause too small to show a share of: left out)
                break
            where = f" at {lines[0][0]}" if lines else ""
            shown.append(f"{share}% {cause}{where}")
        return f"critical path {self.ns / 1000:.3f} us: " + ", ".join(shown)


def critical_path(timeline: Timeline) -> CriticalPath:
    program = timeline.program
    instrs = program.table().instrs
    n = len(instrs)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return CriticalPath(0.0, (empty, np.zeros(0), empty, empty), empty, [])
    a = timeline.arrays if timeline.arrays is not None else schedule_arrays(program)
    stream, chain, latency = a["stream"], a["chain_ns"], a["latency_ns"]
    indptr, indices = a["dep_indptr"], a["dep_indices"]
    start, xfer, end, ready = (
        timeline.start_ns,
        timeline.xfer_ns,
        timeline.end_ns,
        timeline.ready_ns,
    )
    # Each instruction's predecessor on its own stream (program order), and for a DMA
    # transfer its `depth`-th predecessor on its queue: the one whose slot it takes.
    depth = max(int(program.arch.dma_queue_depth), 1)
    previous = before_on_stream(stream, 1)
    slot_of = before_on_stream(stream, depth)
    slot_of[a["kind"] != _jit.KIND_DMA] = -1
    i = int(np.argmax(ready))
    total = float(ready[i])
    tail = float(ready[i] - end[i])
    args = (
        timeline.engine_index,
        stream,
        chain,
        latency,
        indptr,
        indices,
        previous,
        slot_of,
        start,
        xfer,
        end,
    )
    walk: Callable[..., Any]
    if n > jit_worker.jit_above(JIT_ABOVE, "critical_walk"):
        walk = _jit.critical_walk
    else:  # (the twin reads single elements: of lists, which cost less to index than arrays)
        walk = _jit._critical_walk_py
        args = tuple(x.tolist() for x in args)
    found = walk(
        i,
        tail,
        *args,
        ENGINE_KEYS.index("dma"),
        float(program.arch.cost_semaphore_ns),
        float(program.arch.dma_fixed_ns),
        float(program.arch.dma_issue_ns),
        _EPS,
    )
    cause, ns, index, edge = found
    # Each stretch's kernel line: its instruction's, which a loop's repeats share with the
    # one they repeat (`Table.base`); a span's text made once, and numbered by the text
    # (spans that read the same, as a text program's each of its own, are one line).
    own, line = np.unique(program.table().base[index], return_inverse=True)
    text: dict[int, str] = {}  # id(span) -> its text
    numbers: dict[str, int] = {}  # text -> its number among the names
    codes = np.empty(len(own), dtype=np.int64)
    for j, k in enumerate(own.tolist()):
        span = instrs[k].span
        shown = text.get(id(span))
        if shown is None:
            shown = text[id(span)] = str(span)
        codes[j] = numbers.setdefault(shown, len(numbers))
    names = list(numbers)
    return CriticalPath(total, (cause, ns, index, edge), codes[line.reshape(-1)], names)


def before_on_stream(stream: np.ndarray, k: int) -> np.ndarray:
    """Per instruction, the instruction `k` places before it on its own stream (program
    order), or -1."""
    order = np.argsort(stream, kind="stable")  # by stream, each in program order
    out = np.full(stream.size, -1, dtype=np.int64)
    if stream.size > k:
        same = stream[order[k:]] == stream[order[:-k]]
        out[order[k:][same]] = order[:-k][same]
    return out
