"""Instructions' dependency lists as flat arrays (CSR), and edges added to many instructions
at once: the reuse edges of a finished program (`Builder.finish`) touch nearly every
instruction of a large one, so they are merged with NumPy rather than one set at a time."""

from __future__ import annotations

from itertools import chain
from typing import Any, Sequence

import numpy as np

__all__ = ["add_edges", "csr"]


def csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """`lists` (one list of ints per row) as (indptr, indices)."""
    n = len(lists)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), np.int64, n), out=indptr[1:])
    indices = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(indptr[-1]))
    return indptr, indices


def add_edges(
    instrs: Sequence[Any], streams: np.ndarray, rows: np.ndarray, deps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Instruction `rows[k]` comes to depend on `deps[k]`, for every k (an edge to itself is
    dropped): each instruction that gains a dependency it did not have has its `deps` made
    anew, ascending, and its `waits` updated as `Builder._add_deps` updates them (a new
    dependency on another stream replaces that stream's wait when it is later; a stream's
    wait is the latest of its candidates). `streams`: each instruction's stream, as a number.
    Returns every instruction's dependencies afterwards as CSR (`csr`)."""
    n = len(instrs)
    indptr, indices = csr([ins.deps for ins in instrs])
    old = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices
    keep = rows != deps
    key = _unique(rows[keep] * n + deps[keep])
    old.sort()  # (it is unless some instruction's deps are out of order)
    at = np.minimum(np.searchsorted(old, key), max(old.size - 1, 0))
    new = key[old[at] != key] if old.size else key  # pairs not there before
    if not new.size:
        return indptr, indices
    merged = np.concatenate((old, new))
    merged.sort()
    row_of, dep_of = np.divmod(merged, n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=n), out=indptr[1:])
    # The waits of the rows that changed: their old waits and their new dependencies on
    # other streams; per (row, stream) the latest.
    new_row, new_dep = np.divmod(new, n)
    changed = _unique(new_row).tolist()
    old_waits = [instrs[r].waits for r in changed]
    wait_row = np.repeat(
        np.asarray(changed, dtype=np.int64),
        np.fromiter(map(len, old_waits), np.int64, len(changed)),
    )
    wait_dep = np.fromiter(chain.from_iterable(old_waits), np.int64, wait_row.size)
    other = streams[new_dep] != streams[new_row]
    cand_row = np.concatenate((wait_row, new_row[other]))
    cand_dep = np.concatenate((wait_dep, new_dep[other]))
    group = cand_row * (int(streams.max(initial=0)) + 1) + streams[cand_dep]
    order = np.lexsort((cand_dep, group))
    group = group[order]
    last = np.ones(group.size, dtype=np.bool_)
    last[:-1] = group[1:] != group[:-1]
    waits = np.sort(cand_row[order][last] * n + cand_dep[order][last])
    wait_row, wait_dep = np.divmod(waits, n)
    wait_ptr = np.searchsorted(wait_row, np.asarray(changed + [n], dtype=np.int64))
    flat, wflat = dep_of.tolist(), wait_dep.tolist()
    ptr, wptr = indptr.tolist(), wait_ptr.tolist()
    for k, r in enumerate(changed):
        ins = instrs[r]
        ins.deps = tuple(flat[ptr[r] : ptr[r + 1]])
        ins.waits = tuple(wflat[wptr[k] : wptr[k + 1]])
    return indptr, dep_of


def _unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of `a`, ascending (np.unique, by sorting: its hashing is slower
    on these)."""
    a = np.sort(a)
    keep = np.ones(a.size, dtype=np.bool_)
    keep[1:] = a[1:] != a[:-1]
    return a[keep]
