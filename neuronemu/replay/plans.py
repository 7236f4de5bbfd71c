"""What two recorded iterations of a loop (neuronemu.replay.templates) have in common: a
`Plan` of the events every further iteration repeats, each argument as a spec of how it
moves from one iteration to the next (the same value, a tensor the iteration makes, an
integer or a view that moves by a constant step...), or NoMatch where they differ in a way
no step explains."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronemu.ir import Tensor, View
from neuronemu.ir.tensor import _count
from neuronemu.replay import journal
from neuronemu.replay.journal import Journal
from neuronemu.replay.moving import Made, value
from neuronemu.trace.legacy_index import AffineIndex, MGrid, Predicate
from neuronemu.trace.objects import UserObject
from neuronemu.trace.values import BlockTensor

__all__ = ["NoMatch", "Plan", "match"]


class NoMatch(Exception):
    pass


# Why two iterations differ when a condition on the loop variable came out otherwise in each
# (the rest of the loop may match: neuronemu.replay.templates tries again from there).
CHANGED = "a condition on the loop variable changed"


@dataclass
class Plan:
    """How to make iteration 2 + s of a loop from its third iteration (s >= 1)."""

    events: list[tuple]  # the third iteration's events, their values as specs
    bindings: dict[str, Any]  # variable -> spec of the value it is left bound to
    steps: int
    data_bytes: int
    instructions: int  # emitted per iteration
    views: list[tuple]  # the specs of the views that move
    picks: list[tuple] = dataclasses.field(default_factory=list)  # items taken by a moving index
    axes: int = 0  # iteration axes drawn per iteration (nl.arange, nl.mgrid)
    blocks: list[tuple] = dataclasses.field(default_factory=list)  # block tiles taken, in order
    # conditions on the loop variable: (left spec, right spec, op, outcome, ranged)
    guards: list[tuple] = dataclasses.field(default_factory=list)
    # items of lists from before the loop at a moving index: (container, index spec, item,
    # step of an int item)
    lookups: list[tuple] = dataclasses.field(default_factory=list)

    def guarded(self, n: int) -> int:
        """How many of the `n` iterations after the recorded one (from the first on) take the
        branches it took: every condition on the loop variable comes out as it did. (Each
        compares ints that move by a constant step: their difference does, so an order
        changes at most once, and an equality holds at one iteration or all.)"""
        held = n
        for left, right, op, outcome, ranged in self.guards:
            if held == 0:
                return 0
            d0 = _guard_side(left, 0) - _guard_side(right, 0)
            step = _guard_side(left, 1) - _guard_side(right, 1) - d0
            if op in ("==", "!="):
                if step == 0:
                    continue  # (as recorded, in every iteration)
                if ranged:  # (a loop's last iteration only: its others are not looked at)
                    return 0
                zero, off = divmod(-d0, step)  # (the iteration where they are equal, if any)
                if not off and 1 <= zero <= held:
                    held = zero - 1
                continue
            fails = [s for s in (1, held) if journal.TESTS[op](d0 + s * step, 0) != outcome]
            if not fails:
                continue
            if fails[0] == 1:
                return 0
            lo, hi = 1, held  # holds at lo, not at hi: the last that holds, by bisection
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if journal.TESTS[op](d0 + mid * step, 0) == outcome:
                    lo = mid
                else:
                    hi = mid
            held = lo
        return self._looked_up(held)

    def _looked_up(self, held: int) -> int:
        """How many of the `held` iterations after the recorded one take from each list the
        item it took (an int: moved by the step it moved by), the list looked at item by
        item (nothing else says what it holds)."""
        for container, index, item, step in self.lookups:
            for s in range(1, held + 1):
                k = _guard_side(index, s)
                want = item + s * step if step else item
                if not 0 <= k < len(container) or not _same(container[k], item, want):
                    held = s - 1
                    break
        return held

    def looked_up(self, n: int) -> list[tuple]:
        """The items the `n` iterations after the recorded one take from lists: (container,
        index, item), their indices marked as the recorded ones."""
        return [
            (container, k, container[k])
            for container, index, _, _ in self.lookups
            for k in (_guard_at(index, s) for s in range(1, n + 1))
        ]

    def guards_at(self, n: int) -> list[tuple]:
        """The conditions as the iteration `n` after the recorded one tests them: (op, left,
        right, outcome), their sides marked as the recorded ones."""
        return [
            (op, _guard_at(left, n), _guard_at(right, n), outcome)
            for left, right, op, outcome, _ in self.guards
        ]

    def inside(self, n: int) -> bool:
        """Do the moving views stay inside their tensors for n more iterations? (A view
        that leaves its tensor is an error where the loop unrolled makes it.)"""
        for _, view, _, box, offset, delta in self.views:
            shape = view.tensor.shape
            for d, (start, dstart, stop, _, step) in enumerate(box):
                count = _count(start, stop, step)
                if count <= 0:
                    continue
                first = start + n * dstart
                last = first + (count - 1) * step
                if min(first, last) < 0 or max(first, last) >= shape[d]:
                    return False
            if offset is not None:
                lo = hi = offset + n * delta
                for stride, count in view.pattern:
                    reach = (count - 1) * stride
                    lo, hi = lo + min(reach, 0), hi + max(reach, 0)
                if lo < 0 or hi >= view.tensor.size:
                    return False
        return True

    def picks_hold(self, n: int) -> bool:
        """Are the items the iterations take from lists there for n more iterations, each a
        tile like the recorded one (or a list)? (Else the loop is traced, to fail or differ
        where the loop unrolled does.)"""
        none = Made()
        for spec in self.picks:
            item = spec[3]
            for s in range(1, n + 1):
                container = value(spec[1], s, none)
                index = value(spec[2], s, none)
                if not (isinstance(container, (list, tuple)) and 0 <= index < len(container)):
                    return False
                got = container[index]
                if isinstance(item, Tensor):
                    if not isinstance(got, Tensor) or _tile_kind(got) != _tile_kind(item):
                        return False
                elif type(got) is not type(item):
                    return False
        return True

    def blocks_hold(self, n: int) -> bool:
        """Are the block tiles the iterations take at their moved block indices there (or
        not yet allocated) for n more iterations, as in the recorded one? (Else the loop is
        traced, to fail or differ where the loop unrolled does.)"""
        if not self.blocks:
            return True
        none = Made()
        have: dict[int, set[tuple[int, ...]]] = {}  # block keys allocated, as the replay goes
        for s in range(1, n + 1):
            fresh: dict[int, set[tuple[int, ...]]] = {}  # (those of this iteration's holders)
            for _, of, key, created, tile in self.blocks:
                holder = of[-1]  # ("same", holder) or ("holder", position, holder)
                k = tuple(int(value(x, s, none)) for x in key)
                if not all(0 <= i < d for i, d in zip(k, holder.blocks)):
                    return False
                if of[0] == "holder":  # (made in each iteration: none of its blocks before)
                    keys = fresh.setdefault(of[1], set())
                else:
                    keys = have.setdefault(id(holder), set(holder.tiles))
                if created == (k in keys):
                    return False
                old = holder.tiles.get(k) if of[0] == "same" else None
                if old is not None and _tile_kind(old) != _tile_kind(tile):
                    return False
                keys.add(k)
        return True


# Items a list of constants made in an iteration may hold, nested, for a replay to take it
# as it is (more: it refuses).
PLAIN_ITEMS = 64


def _plain(value: Any, budget: list[int]) -> bool:
    """Is `value` made of None, bools, floats, strings and ints the loop did not mark, in
    lists and tuples, within the budget of items?"""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(value, (list, tuple)):
        return all(_plain(v, budget) for v in value)
    if isinstance(value, journal.Marked):
        return False
    return value is None or isinstance(value, (bool, int, float, str))


def _same(got: Any, item: Any, want: Any) -> bool:
    """Is a lookup's item `got` of the recorded `item`'s type, and `want`?"""
    return type(got) is type(item) and got == want


def _bounds_differ(x: tuple, y: tuple) -> bool:
    """Do two iterations' conditions compare with different plain ints (the runs of a
    quotient, `t // n`, each iteration in its own)?"""
    return any(
        not isinstance(p, journal.Marked) and not isinstance(q, journal.Marked) and p != q
        for p, q in zip(x[1:3], y[1:3])
    )


def _guard_at(spec: tuple, s: int) -> int:
    """A side of a condition, `s` iterations after the recorded one, marked as it was."""
    if spec[0] != "int":
        return spec[1]  # type: ignore[no-any-return]
    return journal.at_level(journal.Affine(spec[1] + s * spec[2]), spec[1].level)


def _guard_side(spec: tuple, s: int) -> int:
    return int(_guard_at(spec, s))


def _first_positions(tiles: list[Tensor]) -> dict[int, int]:
    first: dict[int, int] = {}
    for i, t in enumerate(tiles):
        first.setdefault(id(t), i)
    return first


def _tile_kind(t: Tensor) -> tuple:
    """What a replay of a tile's uses depends on, besides the tile itself."""
    return (t.shape, t.dtype, t.kind_of_buffer, t.kind, t.core)


def match(a: Journal, b: Journal, bound_a: dict[str, Any], bound_b: dict[str, Any]) -> Plan:
    """A Plan when iteration b is iteration a moved by a constant step; else NoMatch."""
    if a.why or b.why:
        raise NoMatch(a.why or b.why)
    for x, y in zip(a.events, b.events):  # (the first that differs: a condition's outcome?)
        if x[0] != y[0] or x[0] == "guard" and (x[3:] != y[3:] or _bounds_differ(x, y)):
            if x[0] == y[0]:
                raise NoMatch(CHANGED)
            break
    if (a.reads.keys() | b.reads.keys()) & (a.changed.keys() | b.changed.keys()):
        raise NoMatch("a container read and changed in the loop")
    if (
        len(a.events) != len(b.events)
        or len(a.tensors) != len(b.tensors)
        or a.steps != b.steps
        or a.data_bytes != b.data_bytes
        or a.axes != b.axes
        or bound_a.keys() != bound_b.keys()
    ):
        raise NoMatch("iterations differ")
    if len(a.holders) != len(b.holders):
        raise NoMatch("iterations differ")
    m = _Matcher(a.tensors, b.tensors, a.created, b.created, (a.picked, b.picked), b.level)
    m.holders = (_first_positions(a.holders), _first_positions(b.holders))
    events = [m.event(x, y) for x, y in zip(a.events, b.events)]
    bindings = {name: m.spec(bound_a[name], bound_b[name]) for name in bound_b}
    if m.axis_steps - {0, b.axes}:  # (an axis drawn in the iteration: one iteration's draws on)
        raise NoMatch("indices differ")
    emits = sum(1 for e in events if e[0] == "emit")
    return Plan(
        events,
        bindings,
        b.steps,
        b.data_bytes,
        emits,
        m.views,
        m.picks,
        b.axes,
        m.blocks,
        m.guards,
        m.lookups,
    )


class Moves:
    """An attribute the library set on a recorded tile that moves with the loop: its spec
    (neuronemu.replay.moving.value makes it for each replayed iteration)."""

    __slots__ = ("spec",)

    def __init__(self, spec: tuple):
        self.spec = spec


class _Matcher:
    def __init__(
        self,
        first: list[Tensor],
        second: list[Tensor],
        made_first: dict[int, object],
        made_second: dict[int, object],
        picked: tuple[dict[int, tuple], dict[int, tuple]] = ({}, {}),
        level: int = 0,
    ):
        # (the journals' level: values marked below it are made of outer loops' variables,
        # the same in every iteration of this loop)
        self.level = level
        self.made = (made_first, made_second)  # containers each iteration made
        self.picked = picked  # items each took from a list by a moving index
        self.picks: list[tuple] = []  # the pick specs whose item can change with the step
        self._pick_specs: dict[tuple[int, int], tuple] = {}
        self.containers: dict[int, tuple] = {}  # the spec of each one of the second's
        self.views: list[tuple] = []
        self.axis_steps: set[int] = set()  # how far each index's axes moved
        self.blocks: list[tuple] = []
        self.guards: list[tuple] = []
        self.lookups: list[tuple] = []
        self.holders: tuple[dict[int, int], dict[int, int]] = ({}, {})  # block tensors made
        # Each tile by where the iteration first took it (a block tile taken again is there
        # twice; uses refer to the first, which a replay has made by then).
        self.index = _first_positions(second)
        self.pair = _first_positions(first)
        for t, u in zip(first, second):
            if _tile_kind(t) != _tile_kind(u):
                raise NoMatch("tensors differ")

    def event(self, x: tuple, y: tuple) -> tuple:
        kind = x[0]
        if kind != y[0]:
            raise NoMatch("events differ")
        if kind == "alloc":
            named = None  # (a name an f-string made of the loop variable: made again)
            if isinstance(x[2][0], journal.Text) or isinstance(y[2][0], journal.Text):
                named = self._text(x[2][0], y[2][0])
            if x[2][1:] != y[2][1:] or (named is None and x[2][0] != y[2][0]):
                raise NoMatch("allocations differ")
            # What the library sets on a tile it has just made: a constant's contents, an
            # address the kernel chose.
            after: dict[str, Any] = {}
            for attr in ("data", "address", "partition_offset"):
                a, b = getattr(x[1], attr), getattr(y[1], attr)
                if attr == "address" and isinstance(b, journal.Affine) and a != b:
                    # an address that moves (`address=(0, base + (i % 2) * 512)`): made
                    # again, and the library's own check repeated (it is not negative)
                    moves = Moves(self._offset(a, b))
                    self.guards.append((moves.spec, ("same", 0), ">=", True, False))
                    after[attr] = moves
                    continue
                if not (a is b is None or np.array_equal(a, b)):
                    raise NoMatch(f"tiles' {attr} differ")
                if b is not None:
                    after[attr] = b
            made = ("alloc", after, y[2], y[1])
            return made if named is None else (*made, named)
        if kind == "emit":
            (_, spec, engine, ops, attrs, span, cycles) = x
            (_, spec2, engine2, ops2, attrs2, span2, cycles2) = y
            if spec is not spec2 or engine != engine2 or span != span2 or cycles != cycles2:
                raise NoMatch("instructions differ")
            ops_spec = self.mapping(ops, ops2)
            attrs_spec = self.mapping(attrs, attrs2)
            # An immediate or attribute that moves (`tile_position=(0, i * 32)`) can make a
            # later iteration's instruction invalid: its replays are checked again.
            if any(_moves(v) for v in (*ops_spec.values(), *attrs_spec.values())):
                cycles2 = None
            return ("emit", spec2, engine2, ops_spec, attrs_spec, span2, cycles2)
        if kind == "holder":  # a block tensor made: one like it, blocks yet to take
            a, b = x[1], y[1]
            if (a.blocks, a.tile_shape, a.dtype, a.kind_of_buffer, a.span, x[2]) != (
                b.blocks,
                b.tile_shape,
                b.dtype,
                b.kind_of_buffer,
                b.span,
                y[2],
            ):
                raise NoMatch("block tensors differ")
            return y
        if kind == "block":  # a block tile, at block indices that stay or move
            if x[3] != y[3] or len(x[2]) != len(y[2]):
                raise NoMatch("block tiles differ")
            key = [self._offset(a, b) for a, b in zip(x[2], y[2])]
            spec = ("block", self._holder(x[1], y[1]), key, y[3], y[4])
            self.blocks.append(spec)
            return spec
        if kind == "guard":  # a condition on the loop variable: the same, as it came out
            if x[3:] != y[3:]:
                raise NoMatch("conditions differ")
            guard = (self._offset(x[1], y[1]), self._offset(x[2], y[2]), *y[3:])
            self.guards.append(guard)
            return ("guard", *guard)
        if kind == "mod":  # `t % n` of a moving t (journal.derive)
            if x[2] != y[2]:
                raise NoMatch("divisors differ")
            t, n = self._offset(x[1], y[1]), y[2]
            if t[0] == "int" and t[2] % n:  # (not by whole runs: within the run, checked)
                if int(x[1]) // n != int(y[1]) // n:
                    raise NoMatch(CHANGED)  # (the recorded iterations straddle two runs)
                low = int(y[1]) - int(y[1]) % n
                self.guards.append((t, ("same", low), ">=", True, False))
                self.guards.append((t, ("same", low + n), "<", True, False))
            return ("mod", t, n)
        if kind == "lookup":  # an item of a list from before the loop, at a moving index
            if x[1] is not y[1] or type(x[3]) is not type(y[3]):
                raise NoMatch("items taken differ")
            index = self._offset(x[2], y[2])
            step = int(y[3]) - int(x[3]) if journal.is_int(y[3]) else 0
            if not step and x[3] != y[3]:
                raise NoMatch(CHANGED)  # (as a condition's outcome: on from the next)
            looked = (y[1], index, y[3], step)
            self.lookups.append(looked)
            return ("lookup", *looked)
        if kind == "name":
            if x[2] != y[2]:
                raise NoMatch("names differ")
            return ("name", self.spec(x[1], y[1]), y[2])
        # a container changed: the same object in both, its arguments moved
        if x[1] is not y[1] or x[2] != y[2] or x[5] != y[5]:
            raise NoMatch("a container made in the iteration changes")
        return (kind, y[1], y[2], self.spec(x[3], y[3]), self.mapping(x[4], y[4]), y[5])

    def mapping(self, x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
        if x.keys() != y.keys():
            raise NoMatch("arguments differ")
        return {k: self.spec(x[k], y[k]) for k in y}

    def spec(self, x: Any, y: Any) -> tuple:
        """How iteration b's value `y` moves on, given iteration a's `x`."""
        if self.picked[0] or self.picked[1]:
            pa, pb = self.picked[0].get(id(x)), self.picked[1].get(id(y))
            if pa is not None or pb is not None:
                return self._pick(pa, pb)
        if isinstance(y, Tensor):
            return self._tensor(x, y)
        if isinstance(y, BlockTensor):
            return self._holder(x, y)
        if x is y:
            if isinstance(y, (list, dict, set)) and self._holds_new(y):
                raise NoMatch("a container holds this iteration's tensors")
            return ("same", y)
        if isinstance(x, journal.Text) or isinstance(y, journal.Text):
            return self._text(x, y)
        if isinstance(y, (list, dict)) and id(x) in self.made[0] and id(y) in self.made[1]:
            return self._container(x, y)
        if isinstance(y, UserObject) and id(x) in self.made[0] and id(y) in self.made[1]:
            return self._object(x, y)
        if type(x) is not type(y):
            raise NoMatch("values differ")
        if isinstance(y, bool) or y is None:
            raise NoMatch("values differ")  # (equal ones were the same object)
        if isinstance(y, int):
            if isinstance(y, journal.Affine) and isinstance(x, journal.Affine):
                return ("int", y, y - x)  # moves with the loop variable
            if x == y and (
                not isinstance(y, journal.Marked)
                or max(getattr(x, "level", 0), y.level) < self.level
            ):
                return ("same", y)
            raise NoMatch("an int that does not move by a constant step")
        if isinstance(y, (float, str, bytes)):
            if x == y:
                return ("same", y)
            raise NoMatch("values differ")
        if isinstance(y, View):
            return self._view(x, y)
        if isinstance(y, (AffineIndex, MGrid, Predicate)):
            return self._index(x, y)
        if isinstance(y, slice):  # bounds that stay or move by a constant step
            parts = zip((x.start, x.stop, x.step), (y.start, y.stop, y.step))
            return ("slice", [self._offset(a, b) for a, b in parts])
        if isinstance(y, tuple):
            if len(x) != len(y):
                raise NoMatch("values differ")
            items = [self.spec(a, b) for a, b in zip(x, y)]
            if all(item[0] == "same" for item in items):
                return ("same", y)  # (made anew in each iteration, of the same items)
            return ("tuple", items)
        if type(y) is list and type(x) is list and _plain(y, [PLAIN_ITEMS]) and x == y:
            # (a list of constants the library made anew, `pattern=[[-1, 512]]`: as a tuple)
            return ("same", y)
        raise NoMatch(f"a {type(y).__name__} made in the iteration")

    def _text(self, x: Any, y: Any) -> tuple:
        """A string an f-string made of ints that move (journal.Text): the same pieces, its
        ints moving by constant steps, each formatted as it was."""
        if not (isinstance(x, journal.Text) and isinstance(y, journal.Text)) or len(
            x.pieces
        ) != len(y.pieces):
            raise NoMatch("strings differ")
        pieces: list = []
        for a, b in zip(x.pieces, y.pieces):
            if isinstance(a, str) or isinstance(b, str):
                if a != b:
                    raise NoMatch("strings differ")
                pieces.append(b)
            elif a[1] != b[1]:
                raise NoMatch("strings differ")
            else:
                pieces.append((self._offset(a[0], b[0]), b[1]))
        return ("text", pieces)

    def _tensor(self, x: Any, y: Tensor) -> tuple:
        """A tensor: one from before the loop (the same in both), or the one each iteration
        made at the same place."""
        i = self.index.get(id(y))
        if i is None:
            if x is y:
                return ("same", y)
            raise NoMatch("a tensor of an earlier iteration")
        if self.pair.get(id(x)) != i:
            raise NoMatch("tensors differ")
        return ("tensor", i)

    def _holder(self, x: Any, y: Any) -> tuple:
        """A block tensor: one from before the loop (the same in both), or the one each
        iteration made at the same place (its position among those it made)."""
        if x is y:
            return ("same", y)
        i = self.holders[1].get(id(y))
        if i is None or self.holders[0].get(id(x)) != i:
            raise NoMatch("a block tensor of an earlier iteration")
        return ("holder", i, y)

    def _index(self, x: Any, y: Any) -> tuple:
        """An `nl.arange`/`nl.mgrid` index (or a grid, or a mask of them) made in the
        iteration: the same terms, on axes drawn one iteration's draws later (or the same
        axes), and an offset that stays or moves by a constant step."""
        if type(x) is not type(y):
            raise NoMatch("indices differ")
        if isinstance(y, MGrid):
            if len(x) != len(y):
                raise NoMatch("indices differ")
            return ("mgrid", [self._index(a, b) for a, b in zip(x, y)])
        if isinstance(y, Predicate):
            if x.never != y.never or len(x.conditions) != len(y.conditions):
                raise NoMatch("indices differ")
            conditions = []
            for (ea, op_a, bound_a), (eb, op_b, bound_b) in zip(x.conditions, y.conditions):
                if op_a != op_b:
                    raise NoMatch("indices differ")
                conditions.append((self._index(ea, eb), op_b, self._offset(bound_a, bound_b)))
            return ("predicate", conditions, y.never)
        if (x.ndim, x.grid, len(x.terms)) != (y.ndim, y.grid, len(y.terms)):
            raise NoMatch("indices differ")
        terms = []
        for (axis_a, *rest_a), (axis_b, *rest_b) in zip(x.terms, y.terms):
            if rest_a != rest_b:
                raise NoMatch("indices differ")
            self.axis_steps.add(axis_b - axis_a)
            terms.append((axis_b, axis_b - axis_a, *rest_b))
        return ("index", y, terms, self._offset(x.offset, y.offset))

    def _offset(self, x: Any, y: Any) -> tuple:
        spec = self.spec(x, y)
        if spec[0] not in ("same", "int"):
            raise NoMatch("an index that does not move by a constant step")
        return spec

    def _pick(self, pa: tuple | None, pb: tuple | None) -> tuple:
        """An item each iteration took from a list (the same list, or one taken so) at an
        index that moves by a constant step: a replay takes the item at the moved index."""
        if pa is None or pb is None or pa[0] is None or pb[0] is None:
            raise NoMatch("a tile taken from a list is also used otherwise")
        known = self._pick_specs.get((id(pa[2]), id(pb[2])))
        if known is not None:
            return known
        container = self.spec(pa[0], pb[0])
        if container[0] in ("list", "tuple") and isinstance(pb[2], Tensor):
            # A list the iteration made (and fills in the same order each time): the tile
            # taken is one the iteration made, or one from before the loop, at the same
            # place in every iteration (else they differ), whatever the index.
            return self._tensor(pa[2], pb[2])
        if container[0] not in ("same", "pick"):
            raise NoMatch("a tile taken from a list made in the iteration")
        index = self.spec(pa[1], pb[1])
        if index[0] not in ("same", "int"):
            raise NoMatch("an index that does not move by a constant step")
        spec = self._pick_specs[(id(pa[2]), id(pb[2]))] = ("pick", container, index, pb[2])
        if container[0] == "pick" or (index[0] == "int" and index[2]):
            self.picks.append(spec)  # (a fixed list at a fixed index gives the same item)
        return spec

    def _container(self, x: Any, y: Any) -> tuple:
        """A list or dict each iteration made: made again, its contents moved (one spec per
        container, so that a replay makes one container where the iteration made one)."""
        spec = self.containers.get(id(y))
        if spec is not None:
            return spec
        if type(x) is not type(y) or len(x) != len(y):
            raise NoMatch("containers differ")
        items: list[Any] = []
        spec = self.containers[id(y)] = (type(y).__name__, items)
        if isinstance(y, dict):
            if list(x) != list(y):
                raise NoMatch("containers differ")
            items.extend((k, self.spec(x[k], y[k])) for k in y)
        else:
            items.extend(self.spec(a, b) for a, b in zip(x, y))
        return spec

    def _object(self, x: Any, y: UserObject) -> tuple:
        """A kernel object each iteration made: made again, of the same class, its
        attributes moved (one spec per object, as `_container`)."""
        spec = self.containers.get(id(y))
        if spec is not None:
            return spec
        if (
            type(x) is not type(y)
            or x.cls is not y.cls
            or list(x.attrs) != list(y.attrs)
            or x.exc_args is not None
            or y.exc_args is not None
        ):
            raise NoMatch("objects differ")
        items: list[Any] = []
        spec = self.containers[id(y)] = ("object", y.cls, items)
        items.extend((k, self.spec(x.attrs[k], y.attrs[k])) for k in y.attrs)
        return spec

    def _holds_new(self, container: Any) -> bool:
        items = container.values() if isinstance(container, dict) else container
        return any(isinstance(v, Tensor) and id(v) in self.index for v in items)

    def _view(self, x: View, y: View) -> tuple:
        """A view that moves by a constant step: its tensor, box (and pattern offset)."""
        for name in _fixed_fields(type(y)):
            if getattr(x, name) != getattr(y, name):
                raise NoMatch("views differ")
        if len(x.box) != len(y.box) or any(
            a[2] != b[2] or b[0] - a[0] != b[1] - a[1] for a, b in zip(x.box, y.box)
        ):  # the same strides and shape, moved
            raise NoMatch("views differ")
        box = tuple((b[0], b[0] - a[0], b[1], b[1] - a[1], b[2]) for a, b in zip(x.box, y.box))
        offset = getattr(y, "offset", None)
        delta = None if offset is None else offset - x.offset  # type: ignore[attr-defined]
        spec = ("view", y, self.spec(x.tensor, y.tensor), box, offset, delta)
        if any(b[1] for b in box) or delta:
            self.views.append(spec)
        return spec


_FIXED: dict[type, tuple[str, ...]] = {}


def _fixed_fields(cls: type) -> tuple[str, ...]:
    """The fields of a view class that must be the same in both iterations (all but what
    moves: the tensor, the box and a pattern's offset)."""
    fixed = _FIXED.get(cls)
    if fixed is None:
        moving = ("tensor", "box", "offset")
        fixed = _FIXED[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in moving)
    return fixed


def _moves(spec: tuple) -> bool:
    """Does a value change from one iteration to the next in a way an instruction's checks
    and cost can see? (Not a view's position, nor a tile of the same kind: what the builder's
    memo of checks leaves out too.)"""
    kind = spec[0]
    if kind == "int":
        return spec[2] != 0
    if kind == "tuple":
        return any(_moves(x) for x in spec[1])
    return kind in ("list", "dict", "index", "mgrid", "predicate", "slice")
