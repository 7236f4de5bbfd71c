"""A replayed iteration's tiles, made when first read: an iteration that makes only tiles
(and names them) and instructions a Repeat makes (neuronemu.replay.templates, the quick
path) takes their ids and names at once, and leaves the tiles themselves to be made when
something reads them: an instruction made, a binding after the loop, an error. The
allocator and the checks take the rest as columns (neuronemu.program.lazy.tensor_groups):
on the 1M-instruction matmul that is 527,000 tiles never made.

Each tile is made as `Builder.again` makes it, with the id and name it would have had: the
iteration's ids are taken in order (`reserve_ids`), and each name base's counts for the
iteration (as `_unique_name` gives them, in event order) are taken at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from neuronemu.ir import Tensor
from neuronemu.ir.tensor import reserve_ids
from neuronemu.program.lazy import Later, Slots, Tiles
from neuronemu_isa import Buffer

__all__ = ["ENABLED", "TileTemplate", "numbered", "unnamed"]

# Leave a quick iteration's tiles to be made when read (False: made at once, as
# `Builder.again` makes them; the tests compare the two).
ENABLED = True


def numbered(base: str, n: int) -> str:
    """The name of the `n`th tile given name `base` (counting from 0)."""
    return base if n == 0 else f"{base}.{n}"


class TileTemplate:
    """The tiles each quick iteration of one replayed loop makes, from its recorded events
    (`alloc` and `name` of a tile, in order): per position, the tile as allocated but for
    its id (`kinds`, for `tensor_groups`) and the last name it is given."""

    def __init__(self, events: list[tuple], core: int):
        self.kinds: list[Tensor] = []
        self._fields: list[dict[str, Any]] = []
        for ev in events:
            if ev[0] != "alloc":
                continue
            _, attrs, (name, _, _, _, span, kind), tile = ev
            t = Tensor(name, tile.shape, tile.dtype, tile.kind_of_buffer, span, kind, id=-1)
            t.core = core
            t.buffer = tile.buffer  # (cached, as `again` sets them)
            t.on_chip = True
            for attr, v in attrs.items():
                setattr(t, attr, v)
            self.kinds.append(t)
            self._fields.append(dict(t.__dict__))
        # per position: (name base, its count within the iteration), the last given; per
        # base, how many names an iteration gives
        self.names: list[tuple[str, int] | None] = [None] * len(self.kinds)
        self.counts: dict[str, int] = {}
        for ev in events:
            if ev[0] == "name":
                base = ev[2]
                n = self.counts.get(base, 0)
                self.names[ev[1][1]] = (base, n)
                self.counts[base] = n + 1
        # the positions of tiles no name is given (named after the trace, as any)
        self.unnamed = [
            j for j, t in enumerate(self.kinds) if self.names[j] is None and t.name[:1] == "%"
        ]
        self.psum = [(j, t.shape) for j, t in enumerate(self.kinds) if t.buffer == Buffer.PSUM]

    def iteration(self, builder: Any, counts: dict[str, int], tensors: Slots) -> None:
        """One iteration's tiles, left to be made when read: their slots added to the
        builder's tensors and to `tensors` (the iteration's), their ids and names taken
        (`counts`: the names given so far, by base)."""
        k = len(self.kinds)
        if not k:  # (no tiles: nothing to take)
            return
        first = reserve_ids(k)
        names = {}
        for base, n in self.counts.items():
            c = names[base] = counts.get(base, 0)
            counts[base] = c + n
        if not isinstance(builder.tensors, Tiles):
            builder.tensors = Tiles(builder.tensors)
        made = _IterationTiles(self, first, builder.tensors, names)
        builder.tensors.add_later(made, k)
        tensors.add_later(_Own(made), k)
        written = builder._written  # (a PSUM tile's flags: none written, as `again` sets)
        for j, shape in self.psum:
            written[first + j] = np.zeros(shape, dtype=np.bool_)


def unnamed(tensors: list[Tensor]) -> Iterator[Tensor]:
    """The tensors of `tensors` whose names start with "%" (tiles never bound to a variable,
    which the trace names when it ends), in order; of the tiles not made yet, only those
    (made: they are renamed)."""
    if not (isinstance(tensors, Tiles) and tensors.later):
        yield from [t for t in tensors if t.name[:1] == "%"]
        return
    slot = 0
    for first, n, maker in list(tensors.runs):
        yield from [t for t in list.__getitem__(tensors, slice(slot, first)) if t.name[:1] == "%"]
        assert isinstance(maker, _IterationTiles)
        unnamed = maker.template.unnamed
        slots = list.__getitem__(tensors, slice(first, first + n))
        # (a tile without a name from the loop may have been made and named since: bound
        # to a variable after the loop, through the iteration's own list)
        if slots.count(maker) == n:  # (no slot made since)
            yield from [t for j in unnamed if (t := tensors[maker.at + j]).name[:1] == "%"]
        else:
            for k, x in enumerate(slots):
                if x is maker and first + k - maker.at in unnamed:
                    x = tensors[first + k]
                if x is not maker and x.name[:1] == "%":
                    yield x
        slot = first + n
    yield from [t for t in list.__getitem__(tensors, slice(slot, None)) if t.name[:1] == "%"]


class _IterationTiles(Later):
    """One iteration's tiles (slots `at`... of the builder's tensors `tiles`), each made
    once (`taken`: their positions, in order made)."""

    __slots__ = ("template", "first", "tiles", "at", "names", "made", "taken")

    def __init__(self, template: TileTemplate, first: int, tiles: Tiles, names: dict[str, int]):
        self.template, self.first, self.tiles, self.names = template, first, tiles, names
        self.at = len(tiles)
        self.made: list[Tensor | None] | None = None
        self.taken: list[int] = []

    def tile(self, j: int) -> Tensor:
        """The iteration's tile at position `j`."""
        made = self.made
        if made is None:
            made = self.made = [None] * len(self.template.kinds)
        t = made[j]
        if t is None:
            template = self.template
            fields = template._fields[j].copy()
            fields["id"] = self.first + j
            named = template.names[j]
            if named is not None:
                fields["name"] = numbered(named[0], self.names[named[0]] + named[1])
            t = made[j] = object.__new__(Tensor)
            t.__dict__.update(fields)
            self.taken.append(j)
        return t

    def make(self, index: int) -> Tensor:
        return self.tile(index - self.at)

    def made_at(self, index: int, n: int) -> list[int]:
        at = self.at
        return sorted(at + j for j in self.taken if index <= at + j < index + n)

    def tiles_block(self, index: int, n: int) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
        j = index - self.at
        pos = np.arange(j, j + n, dtype=np.int64)
        return pos + self.first, pos, self.template.kinds


class _Own(Later):
    """The same tiles as the iteration's own list of tensors has them (slots from 0); one
    made here is put in the builder's slot too (its tensors then say it is made)."""

    __slots__ = ("of",)

    def __init__(self, of: _IterationTiles):
        self.of = of

    def make(self, index: int) -> Tensor:
        of = self.of
        t = of.tile(index)
        tiles, slot = of.tiles, of.at + index
        if slot < len(tiles) and list.__getitem__(tiles, slot) is of:
            list.__setitem__(tiles, slot, t)
            tiles.later -= 1
        return t

    def ids(self) -> range:
        first = self.of.first
        return range(first, first + len(self.of.template.kinds))
