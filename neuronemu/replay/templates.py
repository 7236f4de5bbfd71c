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
import math
from typing import Any

from neuronemu.host.gcpolicy import quiet
from neuronemu.ir import Tensor
from neuronemu.jit import worker as jit_worker
from neuronemu.replay import journal, lazy_tiles
from neuronemu.replay.journal import Journal
from neuronemu.replay.lazy_tiles import TileTemplate
from neuronemu.replay.moving import Made, compiled, value
from neuronemu.replay.plans import CHANGED, Moves, NoMatch, Plan, match
from neuronemu.replay.repeats import Repeat
from neuronemu.trace.legacy_index import AXES
from neuronemu.trace.state import TracerState

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
# A loop whose conditions on its variable change this many pieces in a row before any
# replays (`i % 2`) has the rest traced, not recorded again (each piece records two) ...
MAX_STALLED = 2
# ... unless they are remainders (`i % n`) of periods up to this long, whose least common
# multiple of iterations it records and replays as one unit (`bufs[i % 2]`: two).
MAX_BLOCK = 8
# Events a replay checks for all its iterations before it makes any (Plan.guarded), and
# does not repeat: conditions, items taken from lists, remainders.
CHECKED = frozenset(("guard", "lookup", "mod"))
# Replay loops (False: trace every iteration; the tests compare the two).
ENABLED = True
# Make a replay's instructions from its first iteration's (False: emit each; the tests
# compare the two).
REPEAT = True
# Replay at once an iteration that takes block tiles too (False: event by event; the tests
# compare the two).
QUICK_BLOCKS = True

# Builtins whose effects a replay does not repeat.
SIDE_EFFECTS = frozenset({"print", "next", "setattr", "delattr"})
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


class Replay(TracerState):
    """Mixed into the Tracer: loops over ranges traced in part and replayed."""

    # The trip counts of the range loops being traced, multiplied: how many times the
    # innermost one's body will run, if none breaks out.
    trips_nested = 1

    def _templated(self, loop: Any, env: Any, r: range) -> bool:
        """A loop over a range: three iterations traced, the rest replayed from the third
        when the second and third match, else traced. False when it breaks out."""
        outer = self.trips_nested
        self.trips_nested = outer * len(r)
        try:
            return self._templated_trips(loop, env, r)
        finally:
            self.trips_nested = outer

    def _templated_trips(self, loop: Any, env: Any, r: range) -> bool:
        stalled = 0  # pieces in a row that replayed nothing (`i % 2`: a change every 2)
        block = 1  # iterations recorded and replayed as one (`_unit`)
        while True:  # (a range left: a condition on the loop variable changed there)
            moduli: set[int] = set()  # (of the remainders its recorded units took)
            done = self._templated_piece(loop, env, r, block, moduli)
            if not isinstance(done, tuple):
                return done
            r, replayed = done
            stalled = 0 if replayed else stalled + 1
            if stalled >= MAX_STALLED and block == 1 and moduli:
                # `bufs[i % 2]`: whole periods of the remainders at a time move evenly
                block = math.lcm(*moduli)
                stalled = 0
                if block > MAX_BLOCK:
                    block, stalled = 1, MAX_STALLED
            if len(r) < MIN_TRIPS * block or stalled >= MAX_STALLED:
                for item in r:  # (the rest traced, not recorded again)
                    self.assign(loop.target, item, env)
                    if not self._iteration(loop, env):
                        return False
                return True

    def _unit(self, loop: Any, env: Any, r: range, u: int, block: int, level: int) -> bool:
        """Iterations `u * block` to `u * block + block` of `r`, the loop variable marked at
        `level` (0: unmarked); False when one breaks out."""
        for item in r[u * block : (u + 1) * block]:
            mark = journal.at_level(journal.Affine(item), level) if level else item
            self.assign(loop.target, mark, env)
            if not self._iteration(loop, env):
                return False
        return True

    def _templated_piece(
        self, loop: Any, env: Any, r: range, block: int, moduli: set[int]
    ) -> bool | tuple[range, bool]:
        """The loop's iterations `r`, `block` at a time (a unit): three units traced, the
        rest replayed (or traced); where a condition on the loop variable changes
        (`Plan.guarded`), up to there, and the iterations left (a range) to do likewise,
        and whether it replayed any. (`moduli`: the divisors of the remainders `i % n` the
        recorded units took, added to.)"""
        records: list[tuple[Journal, dict[str, Any]]] = []
        targets = target_names(loop.target)
        for i in range(3):
            # The recorded iterations' loop variable is marked: what the kernel computes
            # from it is watched (neuronemu.replay.journal.Marked).
            # (its level: the journals open around it, and the one this iteration opens)
            level = len(self.meter.journals) + 1
            if i == 0:
                first = len(self.builder.instrs)
                if not self._unit(loop, env, r, 0, block, 0):
                    return False
                # (the first pass of a loop nest's body tells how large the program will be
                # long before the replays do: Numba loads meanwhile, where it can)
                made = len(self.builder.instrs) - first
                jit_worker.expect(made * self.trips_nested // block)
                continue
            base_at = len(self.builder.instrs)  # (the last traced unit's: the base)
            rec = Journal(steps=self.meter.steps, data_bytes=self.meter.data_bytes, axes=AXES.drawn)
            before = env.vars
            env.vars = watched = _Watched(before)
            self.meter.journals.append(rec)
            rec.level = len(self.meter.journals)
            try:
                done = self._unit(loop, env, r, i, block, level)
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
            moduli.update(ev[2] for ev in rec.events if ev[0] == "mod")
        units = len(r) // block
        try:
            plan = match(records[0][0], records[1][0], records[0][1], records[1][1])
        except NoMatch as e:
            refused = records[0][0].why or records[1][0].why
            if e.args == (CHANGED,) or (block == 1 and moduli and not refused):
                # (the units on may match, as those from here on; or, with remainders of
                # the loop variable, whole periods of them: `_templated_trips`)
                return r[3 * block :], False
            plan = None
        rest = units - 3
        held = rest if plan is None else plan.guarded(rest)
        if plan is not None and held and self._room_for(plan, held):
            self._replay(plan, held, env, (base_at, records[1][0].tensors))
            self.assign(loop.target, r[(3 + held) * block - 1], env)
            left = r[(3 + held) * block :]
            return (left, True) if left else True
        if plan is not None and held == 0:  # (a branch changes at once: on from the next)
            return self._unit(loop, env, r, 3, block, 0) and (r[4 * block :], False)
        if plan is not None and held == rest and block == 1:
            self._over_instructions(plan, rest)
        for item in r[3 * block :]:
            self.assign(loop.target, item, env)
            if not self._iteration(loop, env):
                return False
        return True

    def _block(self, ev: tuple, s: int, tensors: Made) -> Tensor:
        """A block tile taken (allocated, if the recorded one was) at the moved indices, as
        the iteration unrolled takes it; noted in any journal open, as the access does."""
        _, of, key, created, _ = ev
        holder = value(of, s, tensors)
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

    def _replay(self, plan: Plan, n: int, env: Any, base: tuple[int, list[Tensor]]) -> None:
        """The `n` iterations after the third, made from it by `plan` (`base`: where the
        third's instructions start, and its tiles). (When it only emits and allocates, no
        kernel code runs and what it makes lives to the run's end: it goes without GC
        collections, neuronemu.host.gcpolicy.)"""
        emits_only = all(
            ev[0] in ("emit", "alloc", "block", "name", "holder") or ev[0] in CHECKED
            for ev in plan.events
        )
        size = len(self.builder.instrs) + n * plan.instructions
        jit_worker.expect(size)  # (a large program: Numba loads meanwhile, where it can)
        with quiet(size) if emits_only else contextlib.nullcontext():
            self._replayed(plan, n, env, base)
        # An enclosing loop being recorded replays this one's iterations as they are: its
        # conditions there hold as its first iterations (noted as they ran) and its last one
        # test them, and between those (what a replay of it checks, Plan.guarded).
        for op, left, right, outcome in plan.guards_at(n) if self.meter.journals else ():
            journal.guard(self.meter, op, left, right, outcome, ranged=True)
        # Its items taken from lists, in every iteration it made: noted as the unrolled
        # iterations would note them (an enclosing loop's replay checks each).
        for container, index, item in plan.looked_up(n) if self.meter.journals else ():
            journal.lookup(self.meter, container, index, item)

    def _replayed(self, plan: Plan, n: int, env: Any, base: tuple[int, list[Tensor]]) -> None:
        steps, data_bytes, axes = self.meter.steps, self.meter.data_bytes, AXES.drawn
        builder = self.builder
        tensors = Made(self.meter)
        # Each event's arguments as makers (iteration step, tensors made) -> value, built
        # once; values that do not move are taken as they are.
        events = [compiled(ev) for ev in plan.events]
        # The iterations' instructions are made from the third traced one's (exact:
        # neuronemu.replay.repeats), where the builder can.
        repeat = builder.repeat(events) if REPEAT else None
        if repeat is not None and not repeat.take_base(*base):
            repeat = None
        # What an iteration makes but instructions, where that is tiles (allocated, or taken
        # from block tensors) and their names.
        others = [ev for ev, _ in events if ev[0] != "emit" and ev[0] not in CHECKED]
        blocks = any(ev[0] == "block" for ev in others)
        only_tiles = (QUICK_BLOCKS or not blocks) and all(
            ev[0] in ("alloc", "block", "holder")
            or (ev[0] == "name" and ev[1][0] in ("tensor", "holder"))
            for ev in others
        )
        tiles: list[tuple] | TileTemplate | None = others if only_tiles else None
        # (tiles alone, named and placed as recorded)
        plain = all(ev[0] == "name" or (ev[0] == "alloc" and _as_recorded(ev)) for ev in others)
        if only_tiles and plain and repeat is not None and lazy_tiles.ENABLED:
            tiles = TileTemplate(others, builder._core)
        for s in range(1, n + 1):
            tensors = Made(self.meter)
            if (
                repeat is not None
                and tiles is not None
                and not self.meter.journals
                and len(builder.instrs) + plan.instructions <= builder.max_instructions
            ):
                self._quick_iteration(tiles, s, tensors, repeat)
                continue
            self._replay_iteration(events, s, tensors, repeat)
            if repeat is not None:
                repeat.end_iteration(s, tensors)
        if repeat is not None:
            builder.repeated(repeat)
        self.meter.steps = steps + n * plan.steps
        self.meter.data_bytes = data_bytes + n * plan.data_bytes
        AXES.drawn = axes + n * plan.axes  # (as the iterations unrolled would have drawn)
        for name, spec in plan.bindings.items():
            env.vars[name] = value(spec, n, tensors)
        for made in tensors.containers.values():
            journal.create(self.meter, made)

    def _quick_iteration(
        self, tiles: list[tuple] | TileTemplate, s: int, tensors: Made, repeat: Repeat
    ) -> None:
        """Replay iteration `s` as `_replay_iteration` would, where it makes only tiles (their
        names) and instructions a Repeat makes, with no journal open: the tiles first (no
        instruction makes one, so their ids and names come out the same; left to be made
        when read, by a TileTemplate; block tiles taken, or allocated, as the unrolled
        iteration takes them), then the instructions, at once."""
        if isinstance(tiles, TileTemplate):
            tiles.iteration(self.builder, self._name_counts, tensors)  # type: ignore[attr-defined]
            repeat.emit_iteration(s, tensors)
            repeat.end_iteration(s, tensors, defer=True)
            return
        again, name = self.builder.again, self._unique_name
        for ev in tiles:
            if ev[0] == "alloc":
                tensors.append(_allocated(again, ev, s, tensors))
            elif ev[0] == "block":
                tensors.append(self._block(ev, s, tensors))
            elif ev[0] == "holder":
                tensors.holders.append(_holder_again(ev))
            else:
                value(ev[1], s, tensors).name = name(ev[2])
        repeat.emit_iteration(s, tensors)
        repeat.end_iteration(s, tensors, defer=True)

    def _replay_iteration(
        self, events: list[tuple], s: int, tensors: Made, repeat: Repeat | None
    ) -> None:
        """Replay iteration `s` (`repeat`: how to make its instructions from the base's;
        None: emit them as any)."""
        builder = self.builder
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
                tensors.append(_allocated(builder.again, ev, s, tensors))
            elif kind == "block":
                t = self._block(ev, s, tensors)
                tensors.append(t)
            elif kind == "holder":
                made = _holder_again(ev)
                tensors.holders.append(made)
                if self.meter.journals:
                    journal.holder(self.meter, made)
            elif kind in CHECKED:
                continue  # (checked for every iteration before: Plan.guarded)
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


def _as_recorded(alloc: tuple) -> bool:
    """Does every replayed iteration make this allocation's tile as the recorded one was
    made: its name and what the library set on it the same (else `_allocated` makes them)?"""
    return len(alloc) == 4 and not any(isinstance(v, Moves) for v in alloc[1].values())


def _allocated(again: Any, ev: tuple, s: int, tensors: Made) -> Tensor:
    """A recorded allocation made again (by `again`, Builder.again) for iteration `s`: a name
    an f-string made of the loop variable made again (its spec last in the event), and
    what the library set on the tile (an address that moves, made again)."""
    args = ev[2] if len(ev) == 4 else (value(ev[4], s, tensors), *ev[2][1:])
    t: Tensor = again(ev[3], args)
    for attr, v in ev[1].items():
        setattr(t, attr, value(v.spec, s, tensors) if isinstance(v, Moves) else v)
    return t


def _holder_again(ev: tuple) -> Any:
    """A replayed iteration's block tensor: like the recorded one, named as it was when
    made, none of its blocks taken yet."""
    return dataclasses.replace(ev[1], name=ev[2], tiles={})


def _decides_flags(emit: tuple) -> bool:
    """Does a recorded instruction leave an accumulation flag to what was written before
    (neuronemu.build.builder: `accumulate=None`), which can fail where a region is half written?"""
    spec, attrs = emit[1], emit[4]  # (the attributes as the kernel gave them, as specs)
    for op in spec.outputs:
        if isinstance(op.reads_if, str):
            given = attrs.get(op.reads_if)
            if given is None or given[0] != "same" or given[1] is None:
                return True
    return False


def target_names(target: Any) -> set[str]:
    """The variable names a loop target binds."""
    if hasattr(target, "id"):
        return {target.id}
    return {n for t in getattr(target, "elts", ()) for n in target_names(getattr(t, "value", t))}
