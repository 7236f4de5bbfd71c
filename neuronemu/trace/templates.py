"""Loops traced in part and replicated: a loop over a range whose iterations differ only by
affine offsets is interpreted for three iterations, and the rest are made from the last one.

The second and third iterations are recorded (a `Journal`): the tensors they allocate, the
instructions they emit, the names they give tiles, the Python containers they add to and
the variables they leave bound. When the two records match, value for value, up to the
tensors each allocated and integers (and views) that move by a constant step, each further
iteration is the third one moved by that step: the same builder calls, with the same
arguments moved, in the same order. The program, names, errors and budgets are those of
the loop unrolled (a property test compares both on generated kernels). Anything a record
cannot replay exactly (a print, a generator, a device loop, an explicit dependency, a
container made in the iteration that outlives it...) refuses the loop, which is then
traced in full.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronemu import journal
from neuronemu.builder_repeat import Repeat
from neuronemu.gcpolicy import quiet
from neuronemu.ir import Tensor, View
from neuronemu.ir.tensor import _count
from neuronemu.journal import Journal
from neuronemu.trace.legacy_index import AXES, AffineIndex, MGrid, Predicate
from neuronemu.trace.moving import Made, compiled, value

__all__ = [
    "MIN_TRIPS",
    "SIDE_EFFECTS",
    "REPLAYABLE",
    "MUTATING",
    "NoMatch",
    "Plan",
    "match",
    "value",
]

# Loops of fewer iterations are traced in full (three are traced anyway).
MIN_TRIPS = 4
# Replay loops (False: trace every iteration; the tests compare the two).
ENABLED = True
# Make a replay's instructions from its first iteration's (False: emit each; the tests
# compare the two).
REPEAT = True

# Builtins whose effects a replay does not repeat.
SIDE_EFFECTS = frozenset({"print", "next"})
# Methods of trace-time containers that change them in a way a replay repeats exactly (with
# the arguments moved); they return None. Any other method that changes its object refuses.
REPLAYABLE = frozenset(
    "list.append list.extend list.insert deque.append deque.appendleft deque.extend "
    "deque.extendleft set.add set.update dict.update".split()
)
# Methods that change their object (and are not replayable).
MUTATING = frozenset(
    "list.pop list.remove list.sort list.reverse list.clear deque.pop deque.popleft "
    "deque.rotate deque.clear deque.remove deque.reverse deque.insert dict.pop dict.popitem "
    "dict.setdefault dict.clear set.discard set.remove set.pop set.clear "
    "set.intersection_update set.difference_update set.symmetric_difference_update "
    "ndarray.sort ndarray.fill".split()
)


def method_called(
    meter: Any, func: Any, args: list[Any], kwargs: dict[str, Any], span: Any
) -> None:
    """A method of a trace-time value was called in an iteration being recorded."""
    name = func.name
    if name in REPLAYABLE:
        journal.change(meter, func.obj, ("call", func.obj, name, tuple(args), dict(kwargs), span))
        return
    if name in MUTATING:
        journal.change(meter, func.obj, None)
    elif journal.marked(func.obj, args):
        journal.refuse(meter, f"{name}() of the loop variable")
    journal.read(meter, func.obj)


class NoMatch(Exception):
    pass


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
            for _, holder, key, created, tile in self.blocks:
                k = tuple(int(value(x, s, none)) for x in key)
                if not all(0 <= i < d for i, d in zip(k, holder.blocks)):
                    return False
                keys = have.setdefault(id(holder), set(holder.tiles))
                if created == (k in keys):
                    return False
                old = holder.tiles.get(k)
                if old is not None and _tile_kind(old) != _tile_kind(tile):
                    return False
                keys.add(k)
        return True


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
    m = _Matcher(a.tensors, b.tensors, a.created, b.created, (a.picked, b.picked))
    events = [m.event(x, y) for x, y in zip(a.events, b.events)]
    bindings = {name: m.spec(bound_a[name], bound_b[name]) for name in bound_b}
    if m.axis_steps - {0, b.axes}:  # (an axis drawn in the iteration: one iteration's draws on)
        raise NoMatch("indices differ")
    emits = sum(1 for e in events if e[0] == "emit")
    return Plan(events, bindings, b.steps, b.data_bytes, emits, m.views, m.picks, b.axes, m.blocks)


class _Matcher:
    def __init__(
        self,
        first: list[Tensor],
        second: list[Tensor],
        made_first: dict[int, object],
        made_second: dict[int, object],
        picked: tuple[dict[int, tuple], dict[int, tuple]] = ({}, {}),
    ):
        self.made = (made_first, made_second)  # containers each iteration made
        self.picked = picked  # items each took from a list by a moving index
        self.picks: list[tuple] = []  # the pick specs whose item can change with the step
        self._pick_specs: dict[tuple[int, int], tuple] = {}
        self.containers: dict[int, tuple] = {}  # the spec of each one of the second's
        self.views: list[tuple] = []
        self.axis_steps: set[int] = set()  # how far each index's axes moved
        self.blocks: list[tuple] = []
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
            if x[2] != y[2]:
                raise NoMatch("allocations differ")
            # What the library sets on a tile it has just made: a constant's contents, an
            # address the kernel chose.
            after = {}
            for attr in ("data", "address", "partition_offset"):
                a, b = getattr(x[1], attr), getattr(y[1], attr)
                if not (a is b is None or np.array_equal(a, b)):
                    raise NoMatch(f"tiles' {attr} differ")
                if b is not None:
                    after[attr] = b
            return ("alloc", after, y[2], y[1])
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
        if kind == "block":  # a block tile, at block indices that stay or move
            if x[1] is not y[1] or x[3] != y[3] or len(x[2]) != len(y[2]):
                raise NoMatch("block tiles differ")
            key = [self._offset(a, b) for a, b in zip(x[2], y[2])]
            spec = ("block", y[1], key, y[3], y[4])
            self.blocks.append(spec)
            return spec
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
            i = self.index.get(id(y))
            if i is None:
                if x is y:
                    return ("same", y)
                raise NoMatch("a tensor of an earlier iteration")
            if self.pair.get(id(x)) != i:
                raise NoMatch("tensors differ")
            return ("tensor", i)
        if x is y:
            if isinstance(y, (list, dict, set)) and self._holds_new(y):
                raise NoMatch("a container holds this iteration's tensors")
            return ("same", y)
        if isinstance(y, (list, dict)) and id(x) in self.made[0] and id(y) in self.made[1]:
            return self._container(x, y)
        if type(x) is not type(y):
            raise NoMatch("values differ")
        if isinstance(y, bool) or y is None:
            raise NoMatch("values differ")  # (equal ones were the same object)
        if isinstance(y, int):
            if isinstance(y, journal.Affine) and isinstance(x, journal.Affine):
                return ("int", y, y - x)  # moves with the loop variable
            if x == y and not isinstance(y, journal.Marked):
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
            return ("tuple", [self.spec(a, b) for a, b in zip(x, y)])
        raise NoMatch(f"a {type(y).__name__} made in the iteration")

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

    def _holds_new(self, container: Any) -> bool:
        items = container.values() if isinstance(container, dict) else container
        return any(isinstance(v, Tensor) and id(v) in self.index for v in items)

    def _view(self, x: View, y: View) -> tuple:
        """A view that moves by a constant step: its tensor, box (and pattern offset)."""
        moving = {"tensor", "box", "offset"}
        for f in dataclasses.fields(y):
            if f.name not in moving and getattr(x, f.name) != getattr(y, f.name):
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


class _Watched(dict):
    """A loop's variables while an iteration is recorded: which are read before the
    iteration binds them (a value carried from the iteration before)."""

    def __init__(self, items: dict[str, Any]):
        super().__init__(items)
        self.bound: set[str] = set()
        self.early: set[str] = set()

    def __contains__(self, name: object) -> bool:
        if name not in self.bound:
            self.early.add(name)  # type: ignore[arg-type]
        return super().__contains__(name)

    def __getitem__(self, name: str) -> Any:
        if name not in self.bound:
            self.early.add(name)
        return super().__getitem__(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.bound.add(name)
        super().__setitem__(name, value)

    def close(self, outer: dict[str, Any]) -> dict[str, Any]:
        """The loop's variables after the iteration: within an iteration of an enclosing
        loop being recorded (`outer` watched too), what this one read and bound counts as
        that iteration's reads and bindings."""
        if not isinstance(outer, _Watched):
            return dict(self)
        outer.early |= self.early - outer.bound
        for name in self.bound:
            outer[name] = dict.__getitem__(self, name)
        return outer


class Replay:
    """Mixed into the Tracer: loops over ranges traced in part and replayed."""

    def _templated(self, loop: Any, env: Any, r: range) -> bool:
        """A loop over a range: three iterations traced, the rest replayed from the third
        when the second and third match, else traced. False when it breaks out."""
        records: list[tuple[Journal, dict[str, Any]]] = []
        targets = _names(loop.target)
        for i in range(3):
            # The recorded iterations' loop variable is marked: what the kernel computes
            # from it is watched (neuronemu.journal.Marked).
            self.assign(loop.target, journal.Affine(r[i]) if i else r[i], env)
            if i == 0:
                if not self._iteration(loop, env):
                    return False
                continue
            rec = Journal(steps=self.meter.steps, data_bytes=self.meter.data_bytes, axes=AXES.drawn)
            before = env.vars
            env.vars = watched = _Watched(before)
            self.meter.journals.append(rec)
            try:
                done = self._iteration(loop, env)
            finally:
                self.meter.journals.remove(rec)
                env.vars = watched.close(before)
            if not done:
                return False
            rec.steps = self.meter.steps - rec.steps
            rec.data_bytes = self.meter.data_bytes - rec.data_bytes
            rec.axes = AXES.drawn - rec.axes
            if (watched.early & watched.bound) - targets:
                rec.why = "a variable carried from one iteration to the next"
            if rec.reads.keys() & rec.changed.keys():
                rec.why = "a container read and changed in the loop"
            bound = {k: v for k, v in env.vars.items() if k in watched.bound and k not in targets}
            records.append((rec, bound))
        try:
            plan = match(records[0][0], records[1][0], records[0][1], records[1][1])
        except NoMatch:
            plan = None
        rest = len(r) - 3
        if plan is not None and self._room_for(plan, rest):
            self._replay(plan, rest, env)
            self.assign(loop.target, r[-1], env)
            return True
        if plan is not None:
            self._over_instructions(plan, rest)
        for item in r[3:]:
            self.assign(loop.target, item, env)
            if not self._iteration(loop, env):
                return False
        return True

    def _block(self, ev: tuple, s: int, tensors: Made) -> Tensor:
        """A block tile taken (allocated, if the recorded one was) at the moved indices, as
        the iteration unrolled takes it; noted in any journal open, as the access does."""
        _, holder, key, created, _ = ev
        k = tuple(value(x, s, tensors) for x in key)
        meter = self.meter
        journals, steps, data_bytes = meter.journals, meter.steps, meter.data_bytes
        meter.journals = []
        try:  # (what allocating it costs the meter is in the plan's steps already)
            tile = holder.block(tuple(int(i) for i in k))
        finally:
            meter.journals, meter.steps, meter.data_bytes = journals, steps, data_bytes
        journal.block(meter, holder, k, tile, created)
        return tile

    def _room_for(self, plan: Plan, n: int, instructions: bool = True) -> bool:
        """Would `n` more iterations fit the budgets (but the instruction budget, without
        `instructions`)? (If not, they are traced, to fail where the loop unrolled would.)"""
        limits = self.meter.limits
        return (  # (the budgets first: the other checks take time in proportion to n)
            self.meter.steps + n * plan.steps <= limits.loop_iterations
            and (
                not instructions
                or len(self.builder.instrs) + n * plan.instructions <= self.builder.max_instructions
            )
            and self.meter.data_bytes + n * plan.data_bytes <= limits.memory_bytes
            and plan.inside(n)
            and plan.picks_hold(n)
            and plan.blocks_hold(n)
        )

    def _over_instructions(self, plan: Plan, n: int) -> None:
        """Raise the instruction budget's error where the loop unrolled would, when `n` more
        iterations emit past it and nothing else can fail first: the iterations up to the
        one that crosses fit the other budgets, and no instruction decides its accumulation
        flag from what was written or is checked again (either could fail later). Else
        return (the iterations are traced, to fail where they fail)."""
        builder = self.builder
        room = builder.max_instructions - len(builder.instrs)
        if plan.instructions == 0 or n * plan.instructions <= room:
            return
        whole = room // plan.instructions  # iterations that fit; the next one crosses
        if not self._room_for(plan, whole + 1, instructions=False) or any(
            ev[0] == "emit" and (ev[6] is None or _decides_flags(ev)) for ev in plan.events
        ):
            return
        emits = [ev for ev in plan.events if ev[0] == "emit"]
        raise builder.too_many_instructions(emits[room - whole * plan.instructions][5])

    def _replay(self, plan: Plan, n: int, env: Any) -> None:
        """The `n` iterations after the third, made from it by `plan`. (When it only emits
        and allocates, no kernel code runs and what it makes lives to the run's end: it
        goes without GC collections, neuronemu.gcpolicy.)"""
        emits_only = all(ev[0] in ("emit", "alloc", "block", "name") for ev in plan.events)
        size = len(self.builder.instrs) + n * plan.instructions
        with quiet(size) if emits_only else contextlib.nullcontext():
            self._replayed(plan, n, env)

    def _replayed(self, plan: Plan, n: int, env: Any) -> None:
        steps, data_bytes, axes = self.meter.steps, self.meter.data_bytes, AXES.drawn
        builder = self.builder
        tensors = Made(self.meter)
        # Each event's arguments as makers (iteration step, tensors made) -> value, built
        # once; values that do not move are taken as they are.
        events = [compiled(ev) for ev in plan.events]
        # From the second iteration on, instructions are made from the first's (exact:
        # neuronemu.builder_repeat), where the builder can.
        repeat = builder.repeat(events) if REPEAT and n > 1 else None
        # What an iteration makes but instructions, where that is tiles and their names.
        tiles = [ev for ev, _ in events if ev[0] != "emit"]
        if not all(ev[0] == "alloc" or (ev[0] == "name" and ev[1][0] == "tensor") for ev in tiles):
            tiles = None
        try:
            for s in range(1, n + 1):
                tensors = Made(self.meter)
                base = repeat is not None and not repeat.ready
                if base:
                    repeat.begin_base()  # type: ignore[union-attr]
                if (
                    not base
                    and repeat is not None
                    and tiles is not None
                    and not self.meter.journals
                    and len(builder.instrs) + plan.instructions <= builder.max_instructions
                ):
                    self._quick_iteration(tiles, s, tensors, repeat)
                    continue
                self._replay_iteration(events, s, tensors, repeat if not base else None)
                if base:
                    if not repeat.end_base(tensors):  # type: ignore[union-attr]
                        repeat = None
                elif repeat is not None:
                    repeat.end_iteration(s, tensors)
        finally:
            builder._base = None
        if repeat is not None:
            builder.repeated(repeat)
        self.meter.steps = steps + n * plan.steps
        self.meter.data_bytes = data_bytes + n * plan.data_bytes
        AXES.drawn = axes + n * plan.axes  # (as the iterations unrolled would have drawn)
        for name, spec in plan.bindings.items():
            env.vars[name] = value(spec, n, tensors)
        for made in tensors.containers.values():
            journal.create(self.meter, made)

    def _quick_iteration(self, tiles: list[tuple], s: int, tensors: Made, repeat: Repeat) -> None:
        """Replay iteration `s` as `_replay_iteration` would, where it makes only tiles (their
        names) and instructions a Repeat makes, with no journal open: the tiles first (no
        instruction makes one, so their ids and names come out the same), then the
        instructions, at once."""
        again, name = self.builder.again, self._unique_name
        for ev in tiles:
            if ev[0] == "alloc":
                t = again(ev[3], ev[2])
                for attr, v in ev[1].items():
                    setattr(t, attr, v)
                tensors.append(t)
            else:
                tensors[ev[1][1]].name = name(ev[2])
        repeat.emit_iteration(s, tensors)
        repeat.end_iteration(s, tensors)

    def _replay_iteration(
        self, events: list[tuple], s: int, tensors: Made, repeat: Repeat | None
    ) -> None:
        """Replay iteration `s` (`repeat`: how to make its instructions from the base's;
        None: emit them as any, noting the base's tiles in the builder's Repeat if one is
        taking it)."""
        builder = self.builder
        taking = builder._base
        j = 0  # instructions so far
        for ev, args in events:
            kind = ev[0]
            if kind == "emit":
                if repeat is not None:
                    repeat.emit(j, s, tensors)
                    j += 1
                    continue
                _, spec, engine, _, _, span, cycles = ev
                ops, attrs, form = args
                builder.emit(
                    spec,
                    engine,
                    {k: v if make is None else make(s, tensors) for k, v, make in ops},
                    attrs
                    if isinstance(attrs, dict)
                    else {k: v if make is None else make(s, tensors) for k, v, make in attrs},
                    span,
                    cycles,
                    form,
                )
            elif kind == "alloc":
                t = builder.again(ev[3], ev[2])
                for attr, v in ev[1].items():
                    setattr(t, attr, v)
                if taking is not None:
                    taking.made(len(tensors), t)
                tensors.append(t)
            elif kind == "block":
                t = self._block(ev, s, tensors)
                if taking is not None:
                    taking.made(len(tensors), t)
                tensors.append(t)
            elif kind == "name":
                t = value(ev[1], s, tensors)
                t.name = self._unique_name(ev[2])
                if self.meter.journals:
                    journal.record(self.meter, ("name", t, ev[2]))
            else:  # a container changed, as the recorded iteration changed it
                _, obj, name, args, kwargs, span = ev
                args = value(args, s, tensors)
                if kind == "setitem":
                    self.set_item(obj, args[0], args[1], span)
                else:
                    method = self.getattr(obj, name.split(".", 1)[1], span)
                    kwargs = {k: value(v, s, tensors) for k, v in kwargs.items()}
                    self.call(method, list(args), kwargs, span)
        for made in tensors.containers.values():  # (made within an enclosing record)
            journal.create(self.meter, made)


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


def _decides_flags(emit: tuple) -> bool:
    """Does a recorded instruction leave an accumulation flag to what was written before
    (neuronemu.builder: `accumulate=None`), which can fail where a region is half written?"""
    spec, attrs = emit[1], emit[4]  # (the attributes as the kernel gave them, as specs)
    for op in spec.outputs:
        if isinstance(op.reads_if, str):
            given = attrs.get(op.reads_if)
            if given is None or given[0] != "same" or given[1] is None:
                return True
    return False


def _names(target: Any) -> set[str]:
    """The variable names a loop target binds."""
    if hasattr(target, "id"):
        return {target.id}
    return {n for t in getattr(target, "elts", ()) for n in _names(getattr(t, "value", t))}
