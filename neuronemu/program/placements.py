"""What the allocator (neuronemu.build.allocator) returns: each on-chip tile's placement, the reuses
between tiles and the peak bytes in use. The placements the jitted path finds stay the
columns it returned until something asks for one (a timing-only run of a large program asks
for few: the checks and the scheduler take the reuses as tensor ids)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, overload

import numpy as np

from neuronemu.ir import Tensor
from neuronemu_isa import Buffer

__all__ = ["Allocation", "Pairs", "Placement", "Placements"]


@dataclass(eq=False, slots=True)
class Placement:
    tensor: Tensor
    offset: int  # bytes from the start of each partition
    size: int  # bytes per partition reserved
    first: int  # instruction indices of the live range
    last: int
    pinned: bool = False
    partition: int = 0  # the first partition

    @property
    def partitions(self) -> range:
        return range(self.partition, self.partition + self.tensor.shape[0])


class Placements(MutableMapping[int, Placement]):
    """Placements by tensor id, in the order added. Those added as columns (`add_columns`)
    are made into Placement objects when first asked for, one object per tile from then on."""

    def __init__(self) -> None:
        self._made: dict[int, Placement] = {}
        # the columns, as added: (first row, the rows' tensor ids sorted, the rows in that
        # order, per row: offset, size, first, last, pinned, partition; the rows' tiles, read
        # by row: a tile not made yet is made when its placement is) (arrays: as Python
        # ints and a dict by id they took 115 MB on the 1M-instruction matmul)
        self._columns: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, Sequence[Tensor]]] = []
        self._taken: set[int] = set()  # rows made into placements, or deleted
        self._rows = 0
        # tensor ids, in the order added: runs of them, the columns' as arrays
        self._order: list[list[int] | np.ndarray] = []

    def add_columns(
        self,
        tiles: Sequence[Tensor],
        offset: np.ndarray,
        size: np.ndarray,
        first: np.ndarray,
        last: np.ndarray,
        pinned: np.ndarray,
        ids: np.ndarray | None = None,
        partition: np.ndarray | None = None,
    ) -> None:
        """Placements for `tiles`, one per row of these columns (tiles not placed yet; with
        their `ids` and first partitions `partition`, where known, the tiles are read only
        when a placement is made)."""
        n = len(tiles)
        if ids is None:
            ids = np.fromiter((t.id for t in tiles), np.int64, n)
        if partition is None:
            partition = np.fromiter((t.partition_offset or 0 for t in tiles), np.int64, n)
        rows = np.stack([offset, size, first, last, pinned, partition], axis=1)
        rows = rows.astype(np.int64, copy=False)
        order = np.argsort(ids, kind="stable")
        self._columns.append((self._rows, ids[order], order, rows, tiles))
        self._rows += n
        self._order.append(ids)

    def _row(self, tid: object) -> tuple[int, np.ndarray] | None:
        """The row of tensor `tid` in the columns, not made or deleted yet, and its values."""
        if not isinstance(tid, (int, np.integer)):
            return None
        for start, ids, order, rows, _ in self._columns:
            k = int(np.searchsorted(ids, tid))
            if k < len(ids) and ids[k] == tid:
                row = start + int(order[k])
                return None if row in self._taken else (row, rows[row - start])
        return None

    def _tile(self, row: int) -> Tensor:
        for start, ids, _, _, tiles in self._columns:
            if row < start + len(ids):
                return tiles[row - start]
        raise IndexError(row)

    def offsets(self, ids: np.ndarray) -> np.ndarray:
        """The offset of each tensor of `ids` (-1: none placed), without making placements."""
        out = np.full(len(ids), -1, dtype=np.int64)
        taken = np.fromiter(self._taken, np.int64, len(self._taken))
        for start, sorted_ids, order, rows, _ in self._columns:
            if not len(sorted_ids):
                continue
            k = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
            hit = (sorted_ids[k] == ids) & ~np.isin(start + order[k], taken)
            out[hit] = rows[order[k[hit]], 0]
        made = self._made
        for i, tid in enumerate(ids.tolist()):  # (those made: as they are now)
            p = made.get(tid)
            if p is not None:
                out[i] = p.offset
        return out

    def __getitem__(self, tid: int) -> Placement:
        made = self._made.get(tid)
        if made is None:
            got = self._row(tid)
            if got is None:
                raise KeyError(tid)
            row, values = got
            self._taken.add(row)
            offset, size, first, last, pinned, partition = values.tolist()
            made = self._made[tid] = Placement(
                self._tile(row), offset, size, first, last, bool(pinned), partition
            )
        return made

    def __setitem__(self, tid: int, placement: Placement) -> None:
        if tid not in self:
            if not self._order or not isinstance(self._order[-1], list):
                self._order.append([])
            self._order[-1].append(tid)  # type: ignore[union-attr]
        got = self._row(tid)
        if got is not None:
            self._taken.add(got[0])
        self._made[tid] = placement

    def __delitem__(self, tid: int) -> None:
        if tid not in self:
            raise KeyError(tid)
        got = self._row(tid)
        if got is not None:
            self._taken.add(got[0])
        self._made.pop(tid, None)
        order = list(self)  # (rare: the spill path's)
        order.remove(tid)
        self._order = [order]

    def __contains__(self, tid: object) -> bool:
        return tid in self._made or self._row(tid) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(
            list(chain.from_iterable(r if isinstance(r, list) else r.tolist() for r in self._order))
        )

    def __len__(self) -> int:
        return len(self._made) + self._rows - len(self._taken)  # (rows: made, or deleted)


class Pairs(Sequence[tuple[int, int]]):
    """(old, new) tensor ids, kept as an (n, 2) int64 array (`array`) and read as a list of
    tuples: a large program's reuses as tuples of ints were 83 MB on the 1M-instruction
    matmul (tracemalloc). `np.asarray` of it is the array."""

    def __init__(self, array: np.ndarray):
        self.array = array.reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [(a, b) for a, b in self.array[i].tolist()]
        a, b = self.array[i].tolist()
        return a, b

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter([(a, b) for a, b in self.array.tolist()])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype)

    def __repr__(self) -> str:
        return repr(list(self))


class Allocation:
    """Where every on-chip tile lives, the reuses between them and the peak bytes in use."""

    def __init__(self, placements: MutableMapping[int, Placement]) -> None:
        self.placements = placements  # by tensor id
        # the most bytes live at once in any one partition (tiles in other partitions do
        # not add)
        self.peak: dict[Buffer, int] = {}
        self._reuses: list[tuple[Placement, Placement]] = []  # (old, new)
        self._ids = np.zeros((0, 2), dtype=np.int64)  # ... as tensor ids, where known first
        self._lazy = 0  # the last reuses known by ids alone (made when `reuses` is read)

    @property
    def reuses(self) -> list[tuple[Placement, Placement]]:
        """(old, new): `new` was placed over bytes `old`, dead by then, held."""
        if self._lazy:
            get = self.placements.__getitem__
            self._reuses.extend((get(o), get(n)) for o, n in self._ids[-self._lazy :].tolist())
            self._lazy = 0
        return self._reuses

    @reuses.setter
    def reuses(self, pairs: list[tuple[Placement, Placement]]) -> None:
        self._reuses, self._ids, self._lazy = pairs, np.zeros((0, 2), dtype=np.int64), 0

    def add_reuse_ids(self, pairs: np.ndarray | Sequence[tuple[int, int]]) -> None:
        """More reuses, as (old, new) tensor ids (an (n, 2) array or pairs), of placements
        made already."""
        self.reuse_ids()  # (the ids in step with the reuses so far)
        more = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        self._ids = np.concatenate((self._ids, more))
        self._lazy += len(more)

    def reuse_ids(self) -> Pairs:
        """`reuses` as (old, new) tensor ids."""
        if len(self._ids) != len(self._reuses) + self._lazy:  # (placements added since)
            ids = [(old.tensor.id, new.tensor.id) for old, new in self.reuses]
            self._ids = np.array(ids, dtype=np.int64).reshape(-1, 2)
        return Pairs(self._ids)
