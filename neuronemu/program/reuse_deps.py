"""The reuse dependencies: a tile placed over a dead tile's bytes waits for the old tile's
accesses. Each stream's first access to the new tile follows each stream's last access to
the old one (later accesses follow in stream order).

They are worked out as arrays of (consumer, producer) instruction pairs when the program is
sealed (`pairs`). The jitted passes take them merged into the dependency arrays (`merged`);
the instructions' own `deps` and `waits` take them only when something reads those
(`settle`, through `Program.instrs`). On large programs that is the slow part, and a
timing-only run never needs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Pending", "merged", "pairs", "settle"]

# (consumers, producers): instruction indices, sorted by consumer then producer, no pair twice
Pending = tuple[np.ndarray, np.ndarray]
# Reuses worked out at a time (`pairs`): a bound on its temporary arrays, not on the result.
CHUNK = 1 << 16
# A pair's key: consumer << SHIFT | producer, which sorted orders the pairs by consumer, then
# producer (shifts, not a multiply and a division by the program's length: instruction
# indices stay below 2 ** 31, a program that long would take hundreds of GB to hold).
SHIFT = 32
LOW = (1 << SHIFT) - 1


def pairs(
    reuses: Sequence[tuple[int, int]],
    stream_uses: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    n: int,
) -> Pending:
    """The reuse dependencies of a program of `n` instructions: `reuses` are (old, new)
    tensor ids, `stream_uses` every tile's [first, last] access per stream as rows (tile
    ids, per tile its count of streams, each stream's first and last access, tile by tile:
    neuronemu.replay.repeats.Repeats.stream_rows)."""
    empty = np.zeros(0, dtype=np.int64)
    ids, per_tile, first_of, last_of = stream_uses
    if not reuses or not len(ids):
        return empty, empty
    # Tensor id t's rows are the `count[t]` from `start[t]`.
    pair = np.asarray(reuses, dtype=np.int64).reshape(-1, 2)
    size = int(max(ids.max(), pair.max())) + 1
    start, count = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    start[ids] = np.cumsum(per_tile) - per_tile
    count[ids] = per_tile
    old_start, old_count = start[pair[:, 0]], count[pair[:, 0]]
    new_start, new_count = start[pair[:, 1]], count[pair[:, 1]]
    # Every (old row, new row) of each reuse: its new tile's first access (the consumer)
    # follows its old tile's last access (the producer). (Worked out CHUNK reuses at a
    # time, as keys: the whole at once held seven arrays of every pair, 210 MB on the
    # 1M-instruction matmul.)
    each = old_count * new_count
    keys = []
    for lo in range(0, len(pair), CHUNK):
        some = each[lo : lo + CHUNK]
        total = int(some.sum())
        if not total:
            continue
        reuse = np.repeat(np.arange(lo, lo + len(some)), some)
        local = np.arange(total) - np.repeat(np.cumsum(some) - some, some)
        width = new_count[reuse]
        consumer = first_of[new_start[reuse] + local % width]
        producer = last_of[old_start[reuse] + local // width]
        keep = consumer != producer
        keys.append(consumer[keep] << SHIFT | producer[keep])
    if not keys:
        return empty, empty
    return _unique(np.concatenate(keys))


def _unique(key: np.ndarray) -> Pending:
    """The pairs of keys `key` (consumer << SHIFT | producer) sorted by consumer then
    producer, each once. By NumPy's stable sort (a timsort for int64: it merges the runs
    the keys come in, ascending or descending): on the 1M-instruction matmul's 2.9M keys
    of `pairs`, 0.012 s against 0.16 s for the default sort, and 0.006 s against 0.07-0.15
    s for the two ascending runs `merged` gives it. (NumPy's unique hashes int64 keys,
    slower still.)"""
    key.sort(kind="stable")
    if len(key):
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    return key >> SHIFT, key & LOW


def merged(
    indptr: np.ndarray, indices: np.ndarray, pending: Pending, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """The dependency arrays (CSR by consumer, each row ascending) with `pending` added."""
    consumer, producer = pending
    if not len(consumer):
        return indptr, indices
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    # (both ascending: the rows' dependencies in CSR order, and `pending`)
    keys = np.concatenate((rows << SHIFT | indices, consumer << SHIFT | producer))
    rows, indices = _unique(keys)
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=out[1:])
    return out, indices


def settle(instrs: list[Any], pending: Pending) -> None:
    """Add `pending` to the `deps` of `instrs` (neuronemu.program.Instr); a new dependency
    replaces the wait on its stream when it is later."""
    consumer, producer = pending
    if not len(consumer):
        return
    bounds = np.flatnonzero(np.diff(consumer)) + 1
    starts = np.concatenate(([0], bounds)).tolist()
    ends = np.concatenate((bounds, [len(consumer)])).tolist()
    consumers = consumer[starts].tolist()
    producers = producer.tolist()
    streams = [ins.stream for ins in instrs]
    for index, lo, hi in zip(consumers, starts, ends):
        ins = instrs[index]
        had = ins.deps
        deps = set(producers[lo:hi])
        deps.difference_update(had)
        if not deps:
            continue
        own = streams[index]
        latest = {streams[w]: w for w in ins.waits}
        for d in deps:
            stream = streams[d]
            if stream != own and d > latest.get(stream, -1):
                latest[stream] = d
        deps.update(had)
        ins.deps = tuple(sorted(deps))
        ins.waits = tuple(sorted(latest.values()))
