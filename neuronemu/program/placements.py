"""What the allocator (neuronemu.build.allocator) returns: each on-chip tile's placement, the reuses
between tiles and the peak bytes in use. The placements the jitted path finds stay the
columns it returned until something asks for one (a timing-only run of a large program asks
for few: the checks and the scheduler take the reuses as tensor ids)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass

import numpy as np

from neuronemu.ir import Tensor
from neuronemu_isa import Buffer

__all__ = ["Allocation", "Placement", "Placements"]


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
        self._rows: dict[int, int] = {}  # tensor id -> its row in the columns, not made yet
        self._tiles: list[Tensor] = []
        # the columns, as added: (first row, per row: offset, size, first, last, pinned,
        # partition), in order (arrays: Python ints took 10 MB per 66k tiles)
        self._columns: list[tuple[int, np.ndarray]] = []
        self._order: list[int] = []  # tensor ids, in the order added

    def add_columns(
        self,
        tiles: list[Tensor],
        offset: np.ndarray,
        size: np.ndarray,
        first: np.ndarray,
        last: np.ndarray,
        pinned: np.ndarray,
    ) -> None:
        """Placements for `tiles`, one per row of these columns (tiles not placed yet)."""
        start = len(self._tiles)
        ids = [t.id for t in tiles]
        self._tiles.extend(tiles)
        partition = np.fromiter((t.partition_offset or 0 for t in tiles), np.int64, len(tiles))
        rows = np.stack([offset, size, first, last, pinned, partition], axis=1).astype(np.int64)
        self._columns.append((start, rows))
        self._rows.update(zip(ids, range(start, start + len(tiles))))
        self._order.extend(ids)

    def __getitem__(self, tid: int) -> Placement:
        made = self._made.get(tid)
        if made is None:
            row = self._rows.pop(tid)  # (KeyError: no such placement)
            start, rows = next((c for c in reversed(self._columns) if c[0] <= row))
            offset, size, first, last, pinned, partition = rows[row - start].tolist()
            made = self._made[tid] = Placement(
                self._tiles[row], offset, size, first, last, bool(pinned), partition
            )
        return made

    def __setitem__(self, tid: int, placement: Placement) -> None:
        if tid not in self:
            self._order.append(tid)
        self._rows.pop(tid, None)
        self._made[tid] = placement

    def __delitem__(self, tid: int) -> None:
        if tid not in self:
            raise KeyError(tid)
        self._rows.pop(tid, None)
        self._made.pop(tid, None)
        self._order.remove(tid)

    def __contains__(self, tid: object) -> bool:
        return tid in self._made or tid in self._rows

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._made) + len(self._rows)


class Allocation:
    """Where every on-chip tile lives, the reuses between them and the peak bytes in use."""

    def __init__(self, placements: MutableMapping[int, Placement]) -> None:
        self.placements = placements  # by tensor id
        # the most bytes live at once in any one partition (tiles in other partitions do
        # not add)
        self.peak: dict[Buffer, int] = {}
        self._reuses: list[tuple[Placement, Placement]] = []  # (old, new)
        self._ids: list[tuple[int, int]] = []  # ... as tensor ids, where known first
        self._lazy = 0  # the last reuses known by ids alone (made when `reuses` is read)

    @property
    def reuses(self) -> list[tuple[Placement, Placement]]:
        """(old, new): `new` was placed over bytes `old`, dead by then, held."""
        if self._lazy:
            get = self.placements.__getitem__
            self._reuses.extend((get(o), get(n)) for o, n in self._ids[-self._lazy :])
            self._lazy = 0
        return self._reuses

    @reuses.setter
    def reuses(self, pairs: list[tuple[Placement, Placement]]) -> None:
        self._reuses, self._ids, self._lazy = pairs, [], 0

    def add_reuse_ids(self, pairs: list[tuple[int, int]]) -> None:
        """More reuses, as (old, new) tensor ids of placements made already."""
        self.reuse_ids()  # (the ids in step with the reuses so far)
        self._ids.extend(pairs)
        self._lazy += len(pairs)

    def reuse_ids(self) -> list[tuple[int, int]]:
        """`reuses` as (old, new) tensor ids."""
        if len(self._ids) != len(self._reuses) + self._lazy:  # (placements added since)
            self._ids = [(old.tensor.id, new.tensor.id) for old, new in self.reuses]
        return self._ids
