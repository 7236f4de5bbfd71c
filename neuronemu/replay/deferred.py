"""The state of a replayed loop's tiles left to be made when asked for (neuronemu.replay.repeats):
an iteration made at once (`Repeat.emit_iteration`) touches only its own tiles, whose
histories and live ranges are then their base tiles' moved on by the iteration's step. Most are
never touched again: their state is kept as runs of tile ids (`Deferred`), made for one tile
when an instruction touches it again (`DeferredTiles.settle_tensor`), and, as arrays, for
the passes that take every tile's (the allocator, `TileUses`; the reuse dependencies,
`DeferredTiles.stream_rows`). On the 1M-instruction matmul that state was 386 MB of small
lists, dicts and tuples (tracemalloc)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any

import numpy as np

from neuronemu.build.state import BuilderState
from neuronemu.checks.accesses import shifted_history

__all__ = ["Deferred", "DeferredTiles", "TileUses"]


class DeferredTiles(BuilderState):
    """Mixed into Builder (through neuronemu.replay.repeats.Repeats): the runs of tiles whose
    state is deferred (`_deferred`, by first id, ascending and disjoint)."""

    _deferred: list[Deferred]
    _deferred_los: list[int]

    def _start_deferred(self) -> None:
        self._deferred, self._deferred_los = [], []

    def settle_tensor(self, tid: int) -> None:
        """Make what replays left unmade of tensor `tid`'s state (here: a deferred tile's)."""
        deferred = self._deferred
        if deferred and deferred[0].lo <= tid < deferred[-1].hi:
            self._settle_deferred(tid)

    def _settle_deferred(self, tid: int) -> None:
        """Make the state a replay left deferred of tile `tid`: its history, live range and
        live range per stream, its base tile's moved on, and whether something wrote it (as
        `Repeat.end_iteration`)."""
        found = _find(self._deferred, self._deferred_los, tid)
        if found is None:
            return
        run, r, position = found
        run.made.add(tid)
        moved = run.moved(r, position)
        if moved is None:
            return
        (_, h, use, streams, wrote, *_), by = moved
        if wrote:
            self.written.add(tid)
        if h is not None:
            self._history[tid] = shifted_history(h, by)
        if use is not None:
            self._uses[tid] = [use[0] + by, use[1] + by]
        if streams is not None:
            self._stream_uses[tid] = {k: [first + by, last + by] for k, (first, last) in streams}

    def settle_all(self) -> None:
        """Make every tile's deferred state (before what reads the live ranges by tile)."""
        for run in self._deferred:
            for tid in range(run.lo, run.hi):
                if tid not in run.made:
                    self._settle_deferred(tid)
        self._deferred, self._deferred_los = [], []

    def tile_uses(self) -> TileUses:
        """Every tile's [first, last] use, those deferred included (a mapping by id)."""
        return TileUses(self._uses, self._deferred)

    def stream_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every on-chip tile's live range per stream, those deferred included, as rows:
        the tile ids, per tile its count of streams, and each stream's first and last use
        (tile by tile, in the order of the ids)."""
        spans = self._stream_uses.values()
        ids = [np.fromiter(self._stream_uses.keys(), np.int64, len(spans))]
        counts = [np.fromiter(map(len, spans), np.int64, len(spans))]
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(s.values() for s in spans)), np.int64
        )
        firsts, lasts = [flat[0::2]], [flat[1::2]]
        for run in self._deferred:
            got = run.stream_rows()
            if got is not None:
                for out, part in zip((ids, counts, firsts, lasts), got):
                    out.append(part)
        return tuple(np.concatenate(c) for c in (ids, counts, firsts, lasts))  # type: ignore[return-value]


class Deferred:
    """Tiles of consecutive iterations of one replay whose ids run on without a gap: the
    `count` iterations from `s0` made ids [lo, lo + count * width), `width` each, in the
    order of the iteration's tensors. Their histories and live ranges are their base tiles'
    moved on by the iteration's step (`Repeat.end_iteration`), made when a tile is touched
    again (`made`: those made) or, as arrays, for the passes that take every tile's."""

    __slots__ = ("repeat", "s0", "lo", "width", "count", "made")

    def __init__(self, repeat: Any, s0: int, lo: int, width: int):
        # (`repeat`: the neuronemu.replay.repeats.Repeat that made them, whose `shapes`,
        # `tiles` and `at_position` say the base's; not imported: it imports this module)
        self.repeat, self.s0, self.lo, self.width, self.count = repeat, s0, lo, width, 1
        self.made: set[int] = set()

    @property
    def hi(self) -> int:
        return self.lo + self.count * self.width

    def moved(self, r: int, position: int) -> tuple[tuple, int] | None:
        """The base tile's state at `position` (its entry of `Repeat.tiles`) and the step of
        the run's iteration `r`, in instructions (None: no base tile there)."""
        tile = self.repeat.at_position.get(position)
        return None if tile is None else (tile, (self.s0 + r) * len(self.repeat.shapes))

    def _grid(self, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Per iteration and each of `positions`: the tile's id and its iteration's step in
        instructions; both (count, len(positions)), the tiles made already included."""
        r = np.arange(self.count, dtype=np.int64)[:, None]
        ids = self.lo + r * self.width + np.array(positions, dtype=np.int64)[None, :]
        by = np.broadcast_to((self.s0 + r) * len(self.repeat.shapes), ids.shape)
        return ids, by

    def uses(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The ids of the tiles not made yet that have a live range, and its first and last
        instruction."""
        tiles = [t for t in self.repeat.tiles if t[2] is not None]
        if not tiles:
            return None
        ids, by = self._grid([t[0] for t in tiles])
        base = np.array([t[2] for t in tiles], dtype=np.int64)  # (positions, 2)
        keep = self._kept(ids)
        return ids[keep], (base[None, :, 0] + by)[keep], (base[None, :, 1] + by)[keep]

    def stream_rows(self) -> tuple[np.ndarray, ...] | None:
        """`Repeats.stream_rows` of the tiles not made yet."""
        tiles = [t for t in self.repeat.tiles if t[3]]
        if not tiles:
            return None
        ids, by = self._grid([t[0] for t in tiles])
        keep = self._kept(ids)
        ids, by = ids[keep], by[keep]  # (tile by tile, iteration-major)
        per = np.array([len(t[3]) for t in tiles], dtype=np.int64)
        spans = np.array([span for t in tiles for _, span in t[3]], dtype=np.int64)
        counts = np.broadcast_to(per[None, :], keep.shape)[keep]
        # each kept tile's streams, in order: its position's spans, moved by its step
        rows = np.repeat(np.flatnonzero(keep.reshape(-1)) % len(tiles), counts)
        start = np.concatenate(([0], np.cumsum(per)[:-1]))
        local = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        span = spans[start[rows] + local]
        step = np.repeat(by, counts)
        return ids, counts, span[:, 0] + step, span[:, 1] + step

    def _kept(self, ids: np.ndarray) -> np.ndarray:
        if not self.made:
            return np.ones(ids.shape, dtype=np.bool_)
        return ~np.isin(ids, np.fromiter(self.made, np.int64, len(self.made)))


class TileUses(Mapping[int, list[int]]):
    """Every tile's [first, last] use: the builder's (`uses`) and those replays left
    deferred (`runs`, none of them in `uses`), looked up by id or, for a list of tiles, as
    arrays (`spans`)."""

    def __init__(self, uses: dict[int, list[int]], runs: list[Deferred]):
        self.uses, self.runs = uses, runs
        self._los = [run.lo for run in runs]

    def _deferred(self, tid: int) -> list[int] | None:
        found = _find(self.runs, self._los, tid)
        if found is None:
            return None
        run, r, position = found
        moved = run.moved(r, position)
        if moved is None or moved[0][2] is None:
            return None
        (first, last), by = moved[0][2], moved[1]
        return [first + by, last + by]

    def __getitem__(self, tid: int) -> list[int]:
        got = self.uses.get(tid)
        if got is None:
            got = self._deferred(int(tid))
            if got is None:
                raise KeyError(tid)
        return got

    def __contains__(self, tid: object) -> bool:
        return tid in self.uses or (
            isinstance(tid, (int, np.integer)) and self._deferred(int(tid)) is not None
        )

    def __iter__(self) -> Iterator[int]:
        yield from self.uses
        for run in self.runs:
            got = run.uses()
            if got is not None:
                yield from got[0].tolist()

    def __len__(self) -> int:
        return len(self.uses) + sum(
            0 if (got := run.uses()) is None else len(got[0]) for run in self.runs
        )

    def spans(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For tiles `ids`: whether each has a use, and its first and last (0 if none)."""
        has = np.zeros(len(ids), dtype=np.bool_)
        first, last = np.zeros(len(ids), np.int64), np.zeros(len(ids), np.int64)
        parts = [got for run in self.runs if (got := run.uses()) is not None and len(got[0])]
        if parts:  # (the runs' ids ascend, each run's too: one sorted column)
            known_ids, firsts, lasts = (np.concatenate(c) for c in zip(*parts))
            where = np.minimum(np.searchsorted(known_ids, ids), len(known_ids) - 1)
            hit = known_ids[where] == ids
            has |= hit
            first[hit], last[hit] = firsts[where[hit]], lasts[where[hit]]
        known = self.uses  # (the others: looked up one by one)
        rest = np.flatnonzero(~has)
        for k, tid in zip(rest.tolist(), ids[rest].tolist()):
            use = known.get(tid)
            if use is not None:
                has[k], first[k], last[k] = True, use[0], use[1]
        return has, first, last


def _find(runs: list[Deferred], los: list[int], tid: int) -> tuple[Deferred, int, int] | None:
    """The run of `runs` (their first ids `los`) tile `tid` is of, its iteration there and
    its position among the iteration's tensors (None: in none, or made already)."""
    k = bisect.bisect_right(los, tid) - 1
    if k < 0:
        return None
    run = runs[k]
    if tid >= run.hi or tid in run.made:
        return None
    r, position = divmod(tid - run.lo, run.width)
    return run, r, position
