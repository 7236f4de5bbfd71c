"""The only home of Numba-jitted code; each jitted function has a plain-Python twin."""

from __future__ import annotations

import numpy as np
from numba import njit as _numba_njit

__all__ = ["njit", "schedule", "_schedule_py"]


def njit(fn):
    """The project's jit: cached on disk, no fastmath (results must match the twin)."""
    return _numba_njit(cache=True, fastmath=False, nogil=True)(fn)


def _schedule_py(stream, cost_ns, is_dma, dep_indptr, dep_indices, n_streams, dma_fixed_ns,
                 semaphore_ns):
    """Start/end time (ns) of each instruction, visited in program order.

    Each stream (engine or DMA queue) issues in order, one instruction at a time; an
    instruction starts when its stream is free and every dependency has ended (plus the
    semaphore latency when the dependency ran on another stream). DMA transfers pay a fixed
    latency, then share one bandwidth resource in program order.
    """
    n = stream.shape[0]
    start = np.empty(n, dtype=np.float64)
    end = np.empty(n, dtype=np.float64)
    free = np.zeros(n_streams, dtype=np.float64)
    bandwidth_free = 0.0
    for i in range(n):
        s = stream[i]
        t = free[s]
        for k in range(dep_indptr[i], dep_indptr[i + 1]):
            d = dep_indices[k]
            ready = end[d]
            if stream[d] != s:
                ready += semaphore_ns
            if ready > t:
                t = ready
        start[i] = t
        if is_dma[i]:
            transfer = t + dma_fixed_ns
            if bandwidth_free > transfer:
                transfer = bandwidth_free
            e = transfer + cost_ns[i]
            bandwidth_free = e
        else:
            e = t + cost_ns[i]
        end[i] = e
        free[s] = e
    return start, end


schedule = njit(_schedule_py)
