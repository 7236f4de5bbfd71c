"""The allocator's path over columns (neuronemu.build.allocator): every tile as a row of
arrays (live range, size, step, quadrants, pinned offset, id), placed by one call of a
jitted pass (neuronemu.jit.compiled.place or its twin). A replay's tiles not made yet are
taken by group (neuronemu.program.lazy.tensor_groups) and stay unmade: their placements
are made when asked for (`Placements`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from neuronemu.ir import Tensor
from neuronemu.program.lazy import tensor_groups
from neuronemu.program.placements import Allocation, Placements
from neuronemu_isa import Arch, Buffer

__all__ = ["allocate_columns"]


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _quadrants(t: Tensor, quadrant: int) -> list[int]:
    first = t.partition_offset or 0
    return list(range(first // quadrant, -(-(first + t.shape[0]) // quadrant)))


def allocate_columns(
    tensors: list[Tensor],
    uses: Mapping[int, list[int]],
    arch: Arch,
    rotate: bool,
    place: Callable,
) -> Allocation | None:
    """`allocate` without a planner, by `place` (neuronemu.jit.compiled.place or its twin) over
    flat arrays: the same placements, reuses and peaks; None when some tile does not fit or
    is placed wrongly (the plain path then spills or says why). (The placements stay its
    columns until asked for: `Placements`.)"""
    placements = Placements()
    out = Allocation(placements)
    quadrant = arch.tile_quadrant_partitions
    n_quadrants = -(-arch.sbuf_partitions // quadrant)
    # (by group: tiles alike but for id and name, a replay's not made yet among them)
    all_ids, all_groups, reps = tensor_groups(tensors)
    rep_buffer = [t.buffer for t in reps]
    for buffer in (Buffer.SBUF, Buffer.PSUM):
        if buffer == Buffer.SBUF:
            capacity, unit = arch.sbuf_usable_bytes_per_partition, arch.sbuf_min_align_bytes
        else:
            capacity, unit = arch.psum_bytes_per_partition, arch.psum_bank_bytes
        ours = np.fromiter((b == buffer for b in rep_buffer), np.bool_, len(reps))
        at = np.flatnonzero(ours[all_groups])  # (positions in `tensors`)
        has, first, last = _spans(all_ids[at], uses)
        at = at[has]
        n = len(at)
        # The tiles as the columns of a table, one row each: (first, last, size, step,
        # quadrant mask, pinned offset or -1, id). Size, step and mask by kind of tile.
        groups, of_group = np.unique(all_groups[at], return_inverse=True)
        group_reps = [reps[g] for g in groups.tolist()]
        kinds: dict[tuple, int] = {}
        kind = np.fromiter(
            # (by dtype name: DType's hash is worked out in Python, its name's is cached)
            (
                kinds.setdefault((t.shape, t.dtype.name, t.partition_offset), len(kinds))
                for t in group_reps
            ),
            np.int64,
            len(group_reps),
        )[of_group]
        sized = []  # per kind: size, step, quadrant mask
        firsts = np.unique(kind, return_index=True)[1].tolist()  # (a tile of each kind)
        for k in firsts:
            t = group_reps[of_group[k]]
            step = max(unit, t.dtype.itemsize) if buffer == Buffer.SBUF else unit
            qids = _quadrants(t, quadrant)
            if max(qids) >= n_quadrants:
                return None
            size = _align(max(t.bytes_per_partition, 1), step)
            sized.append((size, step, sum(1 << q for q in qids)))
        table = np.empty((n, 7), dtype=np.int64)
        table[:, 0], table[:, 1] = first[has], last[has]
        table[:, 2:5] = np.array(sized, dtype=np.int64).reshape(-1, 3)[kind]
        table[:, 5] = np.fromiter(
            (-1 if t.address is None else t.address for t in group_reps), np.int64, len(groups)
        )[of_group]
        table[:, 6] = all_ids[at]
        partition = np.fromiter(
            (t.partition_offset or 0 for t in group_reps), np.int64, len(groups)
        )[of_group]
        order = np.lexsort((table[:, 6], table[:, 0]))  # (the plain path's order)
        table, at, of_group, partition = table[order], at[order], of_group[order], partition[order]
        pinned = []  # the kernel's placements: bytes, quadrant mask, live range
        for k in np.flatnonzero(table[:, 5] >= 0).tolist():
            first_use, last_use, _, _, mask, address, _ = table[k].tolist()
            held = _align(max(group_reps[of_group[k]].bytes_per_partition, 1), unit)
            pinned.append((address, address + held, mask, first_use, last_use))
        res = np.array(pinned, dtype=np.int64).reshape(-1, 5)
        offset, old, new, peak, failed = place(
            *(np.ascontiguousarray(table[:, c]) for c in range(6)),
            n_quadrants,
            capacity,
            rotate,
            *(np.ascontiguousarray(res[:, c]) for c in range(5)),
        )
        if failed >= 0:
            return None
        ids = table[:, 6]
        placements.add_columns(
            _Taken(tensors, at),
            offset,
            table[:, 2],
            table[:, 0],
            table[:, 1],
            table[:, 5] >= 0,
            ids=ids,
            partition=partition,
        )
        out.add_reuse_ids(np.stack((ids[old], ids[new]), axis=1))
        out.peak[buffer] = int(peak)
    return out


class _Taken(Sequence[Tensor]):
    """The tensors of `tensors` at positions `at`, read one by one (a replay's tiles not
    made yet are made when read)."""

    def __init__(self, tensors: list[Tensor], at: np.ndarray):
        self.tensors, self.at = tensors, at

    def __len__(self) -> int:
        return len(self.at)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self.tensors[i] for i in self.at[k].tolist()]
        return self.tensors[int(self.at[k])]


def _spans(ids: np.ndarray, uses: Mapping[int, list[int]]) -> tuple[np.ndarray, ...]:
    """Which of the tensors of ids `ids` some instruction uses, and their first and last
    uses (0 where none): at once where `uses` can (`TileUses.spans`)."""
    spans = getattr(uses, "spans", None)
    if spans is not None:
        return spans(ids)  # type: ignore[no-any-return]
    n = len(ids)
    has = np.zeros(n, dtype=np.bool_)
    first = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    for k, tid in enumerate(ids.tolist()):
        got = uses.get(tid)
        if got is not None:
            has[k] = True
            first[k], last[k] = got
    return has, first, last
