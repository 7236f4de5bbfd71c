"""Lists whose items are made when first read: a program's instruction list, in which a
replayed loop's instructions are made when first read (neuronemu.replay.repeats), and its
tensor list, in which a replayed iteration's tiles are (neuronemu.replay.lazy_tiles). Most of
a long program's instructions are repeats that no pass after the build reads one by one (the
program table takes them as blocks), and most of its tiles are their tiles, which the
allocator and the checks take as columns (`tensor_groups`); making each as an object was
most of a replay's time and memory.

A slot not made yet holds a `Later`, shared by the slots of one replayed iteration, which
makes the item of a slot when asked (an instruction's also says its dependencies without
making it). Reading a slot (by index, slice or iteration) makes it and keeps it in its
place, so each item is made once and is then the same object on every read; anything that
moves slots around (insert, delete, sort...) makes them all first. What reads a list's
slots in C without its methods sees the markers: `plain + instrs` and `list.copy(instrs)`
(use `list(instrs)`, `instrs + plain` or `instrs.copy()`, which make them). A slot made
late takes its base instruction's queue, costs and attributes as they are then: nothing
changes those of an instruction a replay repeats while slots are left (what moves or
renumbers instructions makes every slot first).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

if TYPE_CHECKING:
    from neuronemu.ir import Tensor
    from neuronemu.program import Instr

__all__ = ["Instrs", "Later", "Slots", "Tiles", "deps_csr", "tensor_groups"]


class Later:
    """The items of some slots of a `Slots`, made when read: `make(index)` is the item of
    slot `index`. In an `Instrs`, an instruction (its `index` that), and `deps_at(index)` its
    `deps`; in a `Tiles`, a tile, and `tiles_block` says the slots' ids and kinds."""

    __slots__ = ()

    def make(self, index: int) -> Any:
        raise NotImplementedError

    def deps_at(self, index: int) -> tuple[int, ...]:
        raise NotImplementedError

    def deps_block(self, index: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The `deps` of slots [index, index + n): per slot their count, and all of them in
        order."""
        deps = [self.deps_at(i) for i in range(index, index + n)]
        return _flat(deps)

    def made_at(self, index: int, n: int) -> list[int] | None:
        """The slots of [index, index + n) whose items are made, in order (None: not known
        here; the slots say)."""
        return None

    def tiles_block(self, index: int, n: int) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
        """The tiles of slots [index, index + n): their ids, and per slot the position in
        the returned list (the same list for every run of one loop's iterations) of a
        tensor that is the slot's tile in everything but its id and name."""
        raise NotImplementedError


def _comparing(name: str) -> Any:
    """List comparison `name`, made of a Slots' items (and the other's, if one)."""
    compare = getattr(list, name)

    def method(self: Slots, other: Any) -> Any:
        self._compared(other)
        return compare(self, other)

    method.__name__ = name
    return method


class Slots(list):  # type: ignore[type-arg]
    """A list some of whose slots are made when first read (`later`: how many are not made
    yet). Reads as a list of its items in every way."""

    __slots__ = ("later", "runs")

    def __init__(self, items: Iterable[Any] = ()):
        super().__init__(items)
        self.later = 0
        self.runs: list[tuple[int, int, Later]] = []  # (first slot, slots, maker), in order

    def add_later(self, maker: Later, n: int) -> None:
        """Append `n` slots made by `maker` when read."""
        self.runs.append((len(self), n, maker))
        self.extend(repeat(maker, n))
        self.later += n

    def make_all(self) -> None:
        """Make every slot not made yet (in order)."""
        if not self.later:
            return
        put = super().__setitem__
        for i, x in enumerate(super().__iter__()):
            if isinstance(x, Later):
                put(i, x.make(i))
        self.later = 0
        self.runs = []

    def _made(self, i: int, x: Later) -> Any:
        item = x.make(i)
        super().__setitem__(i, item)
        self.later -= 1
        return item

    def __getitem__(self, i: Any) -> Any:
        got = super().__getitem__(i)
        if not self.later:
            return got
        if isinstance(i, slice):
            if any(isinstance(x, Later) for x in got):
                for k in range(*i.indices(len(self))):
                    self[k]  # noqa: B018  (makes it in place)
                got = super().__getitem__(i)
            return got
        if isinstance(got, Later):
            k = i.__index__()
            return self._made(k + len(self) if k < 0 else k, got)
        return got

    def __iter__(self) -> Iterator[Any]:
        self.make_all()
        return super().__iter__()

    def __reversed__(self) -> Iterator[Any]:
        self.make_all()
        return super().__reversed__()

    def __contains__(self, x: object) -> bool:
        self.make_all()
        return super().__contains__(x)

    def _compared(self, other: object) -> None:
        self.make_all()
        if isinstance(other, Slots):
            other.make_all()

    # (compared as lists, every slot of both made first)
    __eq__ = _comparing("__eq__")
    __ne__ = _comparing("__ne__")
    __lt__ = _comparing("__lt__")
    __le__ = _comparing("__le__")
    __gt__ = _comparing("__gt__")
    __ge__ = _comparing("__ge__")

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> list[Any]:  # type: ignore[override]
        self.make_all()
        return list(super().__iter__()) + list(other)

    def __mul__(self, n: SupportsIndex) -> list[Any]:
        self.make_all()
        return list(super().__iter__()) * n

    __rmul__ = __mul__

    def __repr__(self) -> str:
        self.make_all()
        return super().__repr__()

    def __reduce__(self) -> tuple[Any, ...]:
        # (pickled as the plain list of its items, every one made)
        return (list, (list(self),))

    def copy(self) -> list[Any]:
        return list(self)

    def index(self, *args: Any) -> int:
        self.make_all()
        return super().index(*args)

    def count(self, x: Any) -> int:
        self.make_all()
        return super().count(x)

    # (what moves slots, or replaces one: every slot made first, so no slot's maker is asked
    # for another slot's instruction)

    def __setitem__(self, i: Any, value: Any) -> None:
        self.make_all()
        super().__setitem__(i, value)

    def __delitem__(self, i: Any) -> None:
        self.make_all()
        super().__delitem__(i)

    def __iadd__(self, other: Iterable[Any]) -> Slots:  # type: ignore[override,misc]
        self.extend(other)
        return self

    def __imul__(self, n: SupportsIndex) -> Slots:  # type: ignore[override,misc]
        self.make_all()
        return super().__imul__(n)  # type: ignore[return-value]

    def insert(self, i: SupportsIndex, x: Any) -> None:
        self.make_all()
        super().insert(i, x)

    def pop(self, i: SupportsIndex = -1) -> Any:
        self.make_all()
        return super().pop(i)

    def remove(self, x: Any) -> None:
        self.make_all()
        super().remove(x)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self.make_all()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self.make_all()
        super().reverse()

    def clear(self) -> None:
        super().clear()
        self.later = 0
        self.runs = []


class Instrs(Slots):
    """A program's instructions, some made when first read (neuronemu.replay.repeats)."""

    __slots__ = ()


class Tiles(Slots):
    """A program's tensors, some made when first read (neuronemu.replay.lazy_tiles); their
    groups (`tensor_groups`) worked out once while the list is not changed."""

    __slots__ = ("groups",)

    def __init__(self, items: Iterable[Any] = ()):
        super().__init__(items)
        # (the list's length when they were worked out, and them: appending is seen by the
        # length; whatever else changes the list forgets them, `_forgetting`)
        self.groups: tuple[int, tuple[np.ndarray, np.ndarray, list[Tensor]]] | None = None


def _forgetting(name: str) -> Any:
    """Slots' method `name`, forgetting a Tiles' groups first."""
    change = getattr(Slots, name)

    def method(self: Tiles, *args: Any, **kwargs: Any) -> Any:
        self.groups = None
        return change(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__setitem__",
    "__delitem__",
    "__imul__",
    "insert",
    "pop",
    "remove",
    "sort",
    "reverse",
    "clear",
):
    setattr(Tiles, _name, _forgetting(_name))


def deps_csr(instrs: list[Instr]) -> tuple[np.ndarray, np.ndarray]:
    """Every instruction's `deps` as CSR (row pointers, then the dependencies in order),
    without making those not made yet: a run of slots one `Later` makes gives them at once."""
    if isinstance(instrs, Instrs) and instrs.later:
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        at = 0
        for first, n, maker in instrs.runs:
            parts.append(_flat([ins.deps for ins in list.__getitem__(instrs, slice(at, first))]))
            slots = list.__getitem__(instrs, slice(first, first + n))
            if slots.count(maker) == n:  # (none made since: by identity, the makers alone)
                parts.append(maker.deps_block(first, n))
            else:
                parts.append(
                    _flat(
                        [
                            maker.deps_at(first + k) if x is maker else x.deps
                            for k, x in enumerate(slots)
                        ]
                    )
                )
            at = first + n
        parts.append(_flat([ins.deps for ins in list.__getitem__(instrs, slice(at, None))]))
        counts = np.concatenate([c for c, _ in parts])
        indices = np.concatenate([d for _, d in parts])
    else:
        counts, indices = _flat([ins.deps for ins in instrs])
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, indices


def _flat(deps: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter(map(len, deps), np.int64, len(deps))
    return counts, np.fromiter(chain.from_iterable(deps), np.int64, int(counts.sum()))


def tensor_groups(tensors: list[Tensor]) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
    """Every tensor's id, and its group: its position in the returned list of tensors, each
    of which is its group's tensors in everything but id and name (shape, dtype, buffer,
    kind, core, placement asked for, alias...). The tiles a `Tiles` has not made yet are
    taken by run, without being made: one group per tile of a replayed loop's iteration."""
    if not (isinstance(tensors, Tiles) and tensors.later):
        n = len(tensors)
        return (
            np.fromiter((t.id for t in tensors), np.int64, n),
            np.arange(n, dtype=np.int64),
            list(tensors),
        )
    if tensors.groups is not None and tensors.groups[0] == len(tensors):
        return tensors.groups[1]  # (made since or not, each tile's group is the same)
    reps: list[Tensor] = []
    at: dict[int, int] = {}  # id() of a run's list of tensors -> where it starts in reps
    ids: list[np.ndarray] = []
    groups: list[np.ndarray] = []

    def made(items: list[Tensor]) -> None:
        ids.append(np.fromiter((t.id for t in items), np.int64, len(items)))
        groups.append(np.arange(len(reps), len(reps) + len(items), dtype=np.int64))
        reps.extend(items)

    def later(maker: Later, index: int, n: int) -> None:
        tid, pos, kinds = maker.tiles_block(index, n)
        where = at.get(id(kinds))
        if where is None:
            where = at[id(kinds)] = len(reps)
            reps.extend(kinds)
        ids.append(tid)
        groups.append(pos + where)

    slot = 0
    for first, n, maker in tensors.runs:
        made(list.__getitem__(tensors, slice(slot, first)))
        taken = maker.made_at(first, n)
        if taken is None:
            slots = list.__getitem__(tensors, slice(first, first + n))
            taken = [first + k for k, x in enumerate(slots) if x is not maker]
        # (the made ones on their own, the runs of slots between them at once)
        j = first
        for k in taken:
            if k > j:
                later(maker, j, k - j)
            made([tensors[k]])
            j = k + 1
        if first + n > j:
            later(maker, j, first + n - j)
        slot = first + n
    made(list.__getitem__(tensors, slice(slot, None)))
    found = np.concatenate(ids), np.concatenate(groups), reps
    tensors.groups = (len(tensors), found)
    return found
