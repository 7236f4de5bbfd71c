"""Cycle-approximate timing: schedule a program's streams and summarize engine activity.

Reads only shapes and costs, never values, so results cannot depend on timing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import Engine
from neuronemu.program import Program
from neuronemu.sim import _jit

__all__ = ["Timeline", "schedule", "ENGINE_KEYS", "LATENCY_BOUND_BELOW"]

ENGINE_KEYS = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")
# Inferred: when even the busiest engine is busy less than this fraction of the run, the
# kernel is bound by dependency latency (semaphores, DMA fixed cost), not by an engine.
LATENCY_BOUND_BELOW = 0.5


@dataclass
class Timeline:
    """Per-instruction start/end (ns) and the per-engine summary derived from them."""

    program: Program
    start_ns: np.ndarray
    end_ns: np.ndarray

    @property
    def total_ns(self) -> float:
        return float(self.end_ns.max()) if self.end_ns.size else 0.0

    def busy_ns(self) -> dict[str, float]:
        busy = {k: 0.0 for k in ENGINE_KEYS}
        dma: list[tuple[float, float]] = []
        for ins, s, e in zip(self.program.instrs, self.start_ns, self.end_ns):
            if ins.engine == Engine.DMA:
                dma.append((float(s), float(e)))
            else:
                busy[ins.engine.value] += float(e - s)
        busy["dma"] = _union_length(dma)
        return busy

    def bound_by(self) -> str:
        total = self.total_ns
        if total <= 0:
            return "latency"
        busy = self.busy_ns()
        candidates = {k: v for k, v in busy.items() if k != "sync"}
        top = max(candidates, key=lambda k: candidates[k])
        return top if candidates[top] / total >= LATENCY_BOUND_BELOW else "latency"


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def schedule(program: Program, use_jit: bool = True) -> Timeline:
    a = program.as_arrays()
    fn = _jit.schedule if use_jit else _jit._schedule_py
    start, end = fn(a["stream"], a["cost_ns"], a["is_dma"], a["dep_indptr"], a["dep_indices"],
                    int(a["n_streams"]), float(program.arch.dma_fixed_ns),
                    float(program.arch.cost_semaphore_ns))
    return Timeline(program, start, end)
