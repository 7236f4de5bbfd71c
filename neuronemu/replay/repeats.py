"""A replayed loop's iterations, made from its last traced one (the base): what an
instruction's accesses to the iteration's own tiles depend on, moved by the
instructions between; only accesses to other tensors are looked up in the access history
(and reads of a tensor nothing has written, which depend on nothing, are recorded there only
when something accesses it again)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronemu.checks.accesses import (
    History,
    RootBox,
    conflicts,
    copy_history,
    record,
    shifted_history,
)
from neuronemu.ir import View
from neuronemu.ir.footprint import Box
from neuronemu.program import Instr, Program
from neuronemu.program.lazy import Instrs, Later
from neuronemu.replay import journal
from neuronemu.replay.deferred import Deferred, DeferredTiles
from neuronemu.replay.late import LateInstr
from neuronemu.replay.records import Form, Repeated
from neuronemu_isa import Engine, InstrSpec

__all__ = ["ALL_WRITTEN", "DEFER", "Repeat", "Repeats"]

# A PSUM tensor's flags once some write covered the whole tensor: every region is written.
ALL_WRITTEN = np.ones((), dtype=np.bool_)
# Leave the histories and live ranges of a quick iteration's tiles to be made when asked for
# (`Deferred`; False: made at once, as any iteration's; the tests compare the two).
DEFER = True


class Repeats(DeferredTiles):
    """Mixed into Builder (whose state it keeps): the tiles of iterations a Repeat made have
    their access histories made when an instruction touches them again (most never are)."""

    _pending: dict[int, tuple[History, int]]  # tile id -> (the base tile's history, shift)
    # root tensor id -> reads a Repeat left out of its history, in order: runs of them as
    # ((bounds as a function of the step, instruction's offset), ...), step, first
    # instruction
    _unrecorded: dict[int, list[tuple[tuple[tuple[Callable[[int], Box], int], ...], int, int]]]

    repeats: list[Repeated]  # the replayed blocks made, in program order

    def _start_replays(self) -> None:
        """The replay part's state, empty (the Builder's start, and when it renumbers)."""
        self._pending = {}
        self._unrecorded = {}
        self._start_deferred()
        self.repeats = []

    def _replays_moved(self) -> None:
        """The instructions were put in another order: the replayed blocks' records no
        longer hold (every instruction stays in the program, each standing for itself)."""
        self.repeats = []

    def _replays_into(self, program: Program) -> None:
        """The finished program takes the replayed blocks' records (its table reads them)."""
        program.repeats = self.repeats

    def _share(self, ins: Instr, shared: Form) -> None:
        """`ins`, made from a replay's instruction of form `shared`, takes that form's
        variant of its attributes (one per outcome of a flag decided by what was written)."""
        ins.form = shared.variant(tuple(ins.attrs[name] for name in self._flag_names(ins.spec)))

    def _settle(self, reads: list[View], writes: list[View]) -> None:
        """Make what repeats left unmade of the histories of the tensors `reads` and
        `writes` are of: a tile's history (its base tile's, moved on), a tensor's reads
        left unrecorded."""
        for v in (*reads, *writes):
            self.settle_tensor(v.tensor.id)

    def settle_tensor(self, tid: int) -> None:
        """`_settle` for the tensor of id `tid`."""
        super().settle_tensor(tid)  # (a deferred tile's state, first)
        history = self._history
        got = self._pending.pop(tid, None)
        if got is not None:
            history[tid] = shifted_history(*got)
        left = self._unrecorded.pop(tid, None)
        if left is not None:
            h = history.get(tid)
            if h is None:
                h = history[tid] = History()
            add = h.reads.add
            for runs, s, first in left:
                for bounds, offset in runs:
                    add(bounds(s), first + offset)

    def repeated(self, repeat: Repeat) -> None:
        """A replay made by `repeat` is over."""
        made = repeat.repeated()
        if made is not None:
            self.repeats.append(made)

    def repeat(self, events: list[tuple]) -> Repeat | None:
        """How to make the iterations of a replayed loop (`events`: its compiled events, see
        neuronemu.replay.templates) after the base, or None where they must be emitted one
        instruction at a time: within a device loop or a no_reorder block, on two cores,
        after a device loop (its body's tiles are checked per access), or when an instruction
        is checked again per iteration or a tile the iteration makes is off chip. (While an
        enclosing loop's iteration is recorded, what they emit is recorded as Builder.emit
        records it.)"""
        if self.cores > 1 or self._body_local or self._open or self.no_reorder_depth:
            return None
        fresh: set[int] = set()  # positions of the tiles each iteration makes
        shapes: list[_Shape] = []
        made = 0
        for ev, args in events:
            kind = ev[0]
            if kind == "alloc" or kind == "block":
                tile = ev[3] if kind == "alloc" else ev[4]
                if kind == "alloc" or ev[3]:
                    if not tile.on_chip:
                        return None
                    fresh.add(made)
                made += 1
            elif kind == "emit":
                if ev[6] is None or not isinstance(args[1], dict) or args[2] is None:
                    return None
                shapes.append(_Shape(ev[1], ev[2], ev[5], args[0], args[1], args[2], ev[3]))
        if not shapes:
            return None
        return Repeat(self, shapes, fresh)


@dataclass(eq=False)
class _Shape:
    """One instruction of the iteration: as recorded, and as the base emitted it."""

    spec: InstrSpec
    engine: Engine
    span: Any
    ops: list[tuple[str, Any, Any]]  # (name, value, None) or (name, None, maker)
    given: dict[str, Any]  # the attributes as the kernel gave them
    form: Form
    specs: dict[str, tuple]  # each operand's spec (neuronemu.replay.templates)
    kind: tuple = ()  # (spec, engine, span), as LateInstr.made takes them
    base: Instr | None = None
    fresh_deps: tuple[int, ...] = ()  # the base's dependencies through the iteration's tiles
    fresh_waits: tuple[int, ...] = ()  # ... and the waits they alone make
    reads: tuple[str, ...] = ()  # the operands of other tensors it reads
    writes: tuple[str, ...] = ()  # ... and writes
    flags: bool = False  # an accumulation flag decided from what another tensor holds
    # operand -> (position of its tile among the iteration's tensors, or -1; move per dim)
    sources: dict[str, tuple[int, tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    picked: tuple[str, ...] = ()  # the operands of tiles taken from lists
    # The operands made at once when the others are left to be made when asked for
    # (program.LateInstr): all but the views of tiles it accesses as the base does.
    eager: list[tuple[str, Any, Any]] | None = None
    # ... and per operand left, its maker, its tensor's maker and its bounds' (or None)
    late: dict[str, tuple[Any, Any, Any]] = dataclasses.field(default_factory=dict)
    # Per operand of `reads`, then `writes`: (name, None, None) for a view the dependencies
    # take as made, (name, its root tensor, its bounds' maker) for one whose access they take
    # as an accesses.RootBox when the views are left unmade
    accesses: tuple[list[tuple[str, Any, Any]], ...] = ((), ())  # type: ignore[assignment]
    # The reads left out of the history (Repeat.take_base): (root tensor id, bounds' maker)
    unrecorded: tuple[tuple[int, Any], ...] = ()
    # ... by tensor, as `emit` notes them (Repeat._leave_out): ((bounds' maker, 0), ...)
    left: dict[int, tuple] = dataclasses.field(default_factory=dict)
    # Made by `Repeat.emit_iteration` itself: it accesses only the iteration's own tiles and
    # reads left out of the history, its views made when asked for, its attributes the base's
    quick: bool = False
    rform: Form | None = None  # the form its repeats share (Instr.form)


class Repeat:
    """The iterations after the base of one replayed loop. Exact: a tile an iteration makes
    is accessed, in that iteration, by the same instructions in the same way as the base's
    tile (the recorded events are the same), so what those accesses depend on and leave
    behind is the base's, moved on by the instructions between. Tensors made elsewhere go
    through the history as they do for any instruction."""

    def __init__(self, builder: Any, shapes: list[_Shape], fresh: set[int]):
        self.builder = builder
        self.shapes = shapes
        self.fresh = fresh  # positions in the iteration's tensors
        self.start = 0  # where the base's instructions start
        # per tile the base made: (position, history, live range, per stream, written, PSUM
        # regions written, whether all of them are)
        self.tiles: list[tuple] = []
        # per iteration after the base: its tensors' ids, then those of the tiles it took
        # from lists (by instruction, operand)
        self.ids: list[list[int]] = []
        self.picks: list[int] = []  # the current iteration's tiles taken from lists
        self.flat = True  # each access's root box moves with the iteration (Repeated)
        self.alike: list[bool] = []  # per instruction: its repeats have its form (Repeated)
        # The iteration as `emit_iteration` makes it: runs of instructions it makes itself
        # (first, end, per tensor the reads they leave out of its history: ((bounds, offset
        # in the iteration), ...)), and between them the positions `emit` makes.
        self.runs: list[tuple[int, int, dict[int, tuple]] | int] = []
        self.at_position: dict[int, tuple] = {}  # `tiles` by position
        self.flagged: list[tuple] = []  # (position, mask, whole) of the PSUM tiles written
        self._run: Deferred | None = None  # the run of its iterations' deferred tiles
        self._fresh: tuple[np.ndarray, np.ndarray] | None = None  # (fresh_csr)

    # The base ------------------------------------------------------------------------------

    def take_base(self, start: int, tensors: list[Any]) -> bool:
        """Take the loop's last traced iteration as the base: its instructions from `start`
        on, its tiles `tensors` (as the replay's iterations number them). What each
        instruction's accesses to the iteration's own tiles depended on is worked out again
        from those accesses alone: nothing before the iteration touched its tiles. False
        when its instructions cannot be made so (an operand of a kind not moved as a view, a
        transfer whose queue may change)."""
        b = self.builder
        self.start = start
        instrs = b.instrs[start:]
        if len(instrs) != len(self.shapes):
            return False
        fresh = {t.id for p, t in enumerate(tensors) if p in self.fresh}
        own: dict[int, History] = {}  # (the accesses to the iteration's own tiles)
        for shape, ins in zip(self.shapes, instrs):
            reads = [r for _, v in ins.views("in") if (r := v.as_root()).tensor.id in fresh]
            writes = [r for _, v in ins.views("out") if (r := v.as_root()).tensor.id in fresh]
            deps = conflicts(own, reads, writes) if reads or writes else set()
            record(own, reads, writes, ins.index)
            if not self._take(shape, ins, deps, fresh):
                return False
        self._leave_unrecorded()
        for shape in self.shapes:
            shape.quick = (
                shape.eager is not None
                and not shape.flags
                and not shape.picked
                and not shape.reads
                and not shape.writes
            )
        self.alike = [not shape.flags for shape in self.shapes]
        self._runs()
        position = len(tensors)  # tiles taken from lists: after the iteration's tensors
        for shape in self.shapes:
            for name in shape.picked:
                shape.sources[name] = (position, shape.sources[name][1])
                position += 1
        history, uses, stream_uses = b._history, b._uses, b._stream_uses
        for position in sorted(self.fresh):
            tid = tensors[position].id
            # (a tile an inner replay made has its history still to be made: make it now,
            # or the repeats of this loop's tiles would have none, and what reads them later
            # would not wait for what wrote them)
            b.settle_tensor(tid)
            h = history.get(tid)
            use = uses.get(tid)
            streams = stream_uses.get(tid)
            mask = b._written.get(tid)
            self.tiles.append(
                (
                    position,
                    None if h is None else copy_history(h),
                    None if use is None else tuple(use),
                    None if streams is None else [(k, tuple(v)) for k, v in streams.items()],
                    tid in b.written,
                    None if mask is None or mask is ALL_WRITTEN else mask.copy(),
                    mask is ALL_WRITTEN,
                )
            )
        self.at_position = {tile[0]: tile for tile in self.tiles}
        self.flagged = [(t[0], t[5], t[6]) for t in self.tiles if t[5] is not None or t[6]]
        return True

    def _runs(self) -> None:
        j, shapes = 0, self.shapes
        for shape in shapes:  # (`emit` makes any of them in an iteration not made at once)
            shape.left = _left_out([(shape, 0)])
        while j < len(shapes):
            if not shapes[j].quick:
                self.runs.append(j)
                j += 1
                continue
            first = j
            while j < len(shapes) and shapes[j].quick:
                j += 1
            self.runs.append((first, j, _left_out([(shapes[k], k) for k in range(first, j)])))

    def _leave_unrecorded(self) -> None:
        """The reads the repeats leave out of the history: those of a tensor from before the
        loop (its root box alone, `_Shape.accesses`) that nothing has written so far, such
        as a kernel input the loop reads tile by tile (so the iteration does not write it
        either: the base's writes are in the history). They depend on nothing; they are
        recorded when something accesses the tensor again (Repeats._settle), which for most
        inputs is never."""
        history = self.builder._history
        for shape in self.shapes:
            reads, writes = shape.accesses
            kept, left = [], []
            for entry in reads:
                _, tensor, bounds = entry
                h = None if tensor is None else history.get(tensor.id)
                if tensor is None or (h is not None and h.writes):
                    kept.append(entry)
                else:
                    left.append((tensor.id, bounds))
            if left:
                shape.accesses = (kept, writes)
                shape.reads = tuple(name for name, _, _ in kept)
                shape.unrecorded = tuple(left)

    def _take(self, shape: _Shape, ins: Instr, deps: set[int], fresh_ids: set[int]) -> bool:
        b = self.builder
        views: dict[str, tuple[bool, bool]] = {}  # operand name -> (fresh, static)
        for name, v in ins.operands.items():
            spec = shape.specs[name]
            if not isinstance(v, View):
                if spec[0] not in ("same", "int", "tuple"):
                    return False
                continue
            if type(v) is not View:  # (an indirect view's offsets: looked up each time)
                return False
            if spec[0] == "same":
                views[name] = (False, True)
                shape.sources[name] = (-1, (0,) * len(v.as_root().box))
            elif spec[0] == "view" and spec[2][0] in ("same", "tensor", "pick"):
                # A tile from before the loop, one the iteration makes or takes, or one it
                # takes from a list (never one it makes: the lists do not change in a
                # replayed loop, neuronemu.replay.plans.match).
                kind = spec[2][0]
                static = kind == "same"
                views[name] = (kind == "tensor" and v.tensor.id in fresh_ids, static)
                move = tuple(b[1] for b in spec[3])
                if spec[5] or (v.tensor.base is not None and (any(move) or not static)):
                    self.flat = False  # (an alias's root box need not move in step)
                if not any(move):
                    move = (0,) * len(v.as_root().box)
                if kind == "pick":  # (its position: after the tensors, set by take_base)
                    shape.picked += (name,)
                shape.sources[name] = (spec[2][1] if kind == "tensor" else -1, move)
            else:
                return False
        if ins.engine == Engine.DMA and any(
            not v.tensor.on_chip and not views[name][1]
            for name, v in ins.operands.items()
            if isinstance(v, View)
        ):
            return False  # (its queue follows the HBM tensors it moves)
        reads = [name for name, _ in ins.views("in")]
        writes = [name for name, _ in ins.views("out")]
        if any(name not in views for name in (*reads, *writes)):
            return False
        shape.base = ins
        shape.kind = (shape.spec, shape.engine, shape.span)
        # (the form the repeats share: the recorded instruction's, with the base's flags)
        shape.rform = shape.form.variant(tuple(ins.attrs[n] for n in b._flag_names(shape.spec)))
        shape.reads = tuple(n for n in reads if not views[n][0])
        shape.writes = tuple(n for n in writes if not views[n][0])
        shape.fresh_deps = tuple(sorted(deps - {ins.index}))
        shape.fresh_waits = b._waits_of(ins, shape.fresh_deps)
        shape.flags = any(
            isinstance(op.reads_if, str)
            and shape.given.get(op.reads_if) is None
            and op.name in views
            and not views[op.name][0]
            for op in shape.spec.outputs
        )
        makers = {name: make for name, _, make in shape.ops if make is not None}
        late = {
            name
            for name in views
            if shape.specs[name][0] == "view"
            and shape.specs[name][2][0] in ("same", "tensor")
            and name not in (*shape.reads, *shape.writes)
        }
        # Off-chip views the dependencies look up by their root box alone (the view makers
        # of neuronemu.replay.moving say what they make a view of, its bounds and, most,
        # where it starts): a view of a root tensor made before the loop, which has no
        # written-regions mask.
        boxed = {
            name
            for name in (*shape.reads, *shape.writes)
            if shape.specs[name][0] == "view"
            and shape.specs[name][2][0] == "same"
            and not ins.operands[name].tensor.on_chip  # type: ignore[union-attr]
            and ins.operands[name].tensor.base is None  # type: ignore[union-attr]
            and hasattr(makers.get(name), "bounds")
        }
        shape.accesses = tuple(
            [
                (name, ins.operands[name].tensor, makers[name].bounds)  # type: ignore[union-attr]
                if name in boxed
                else (name, None, None)
                for name in names
            ]
            for names in (shape.reads, shape.writes)
        )
        if (late or boxed) and not shape.flags:
            shape.eager = [op for op in shape.ops if op[0] not in late | boxed]
            shape.late = {
                name: (make, make.tensor, getattr(make, "bounds", None))
                for name, make in makers.items()
                if name in late or name in boxed
            }
        return True

    # The iterations after it ---------------------------------------------------------------

    def emit(self, j: int, s: int, tensors: list[Any]) -> Instr:
        """Instruction `j` of the iteration `s` after the base (the last traced, s = 0)."""
        shape = self.shapes[j]
        b = self.builder
        index = len(b.instrs)
        if index >= b.max_instructions:
            raise b.too_many_instructions(shape.span)
        if not index & 255:  # (as Builder.emit: the clocks and memory, now and then)
            b.meter.poll(shape.span)
        eager = shape.eager if not b.meter.journals else None
        recipe = shape.ops if eager is None else eager
        ops = (
            {k: v if make is None else make(s, tensors) for k, v, make in recipe} if recipe else {}
        )
        base = shape.base
        assert base is not None
        for name in shape.picked:
            tile = ops[name].tensor
            self.picks.append(tile.id)
            if tile.base is not None:
                self.flat = False
            was = base.operands[name].tensor  # type: ignore[union-attr]
            if (tile.shape, tile.dtype, tile.buffer) != (was.shape, was.dtype, was.buffer):
                self.alike[j] = False
        spec = shape.spec
        if shape.flags:
            attrs = b._attr_defaults(spec) | shape.given
            b._resolve_overwrite_flags(spec, ops, attrs, shape.span)
            form: Form | None = shape.form.variant(tuple(attrs[n] for n in b._flag_names(spec)))
        else:  # (its base's attributes: nothing changes an instruction's once made, but a
            # sendrecv's pair, and a replay runs on one core, where there is none)
            attrs, form = base.attrs, shape.rform
        if eager is None:
            ins = Instr(
                index,
                spec,
                shape.engine,
                ops,
                attrs,
                shape.span,
                base.queue,
                base.cycles,
                base.ns,
                core=base.core,
                epoch=base.epoch,
                form=form,
            )
        else:
            ins = LateInstr.made(
                base, index, shape.kind, ops, attrs, form, (shape.ops, s, tensors, shape.late)
            )
        by = index - base.index
        if shape.left:
            self._leave_out(shape.left, s, index)
        deps = None
        if shape.reads or shape.writes:
            boxes = eager is not None  # (else every view was made)
            read_from, write_from = shape.accesses
            reads = [
                RootBox(t, bounds(s)) if boxes and t is not None else ops[n].as_root()
                for n, t, bounds in read_from
            ]
            writes = [
                RootBox(t, bounds(s)) if boxes and t is not None else ops[n].as_root()
                for n, t, bounds in write_from
            ]
            deps = b._accessed(ins, reads, writes)
        if deps:
            deps.update([d + by for d in shape.fresh_deps])
            deps.discard(index)
            b._set_deps(ins, deps)
        else:
            ins.deps = tuple(map(by.__add__, shape.fresh_deps))
            ins.waits = tuple(map(by.__add__, shape.fresh_waits))
        b.instrs.append(ins)
        if b.meter.journals:  # (an enclosing loop's iteration is being recorded)
            journal.record(
                b.meter,
                ("emit", spec, shape.engine, dict(ops), dict(shape.given), shape.span, base.cycles),
            )
        return ins

    def _leave_out(self, left: dict[int, tuple], s: int, first: int) -> None:
        """Instructions from `first` on (of iteration `s`) read tensors nothing has written
        yet: their reads `left` (per tensor: (bounds' maker, offset from `first`), ...) are
        left out of the histories (`Repeats._settle` makes them)."""
        unrecorded, uses = self.builder._unrecorded, self.builder._uses
        for tid, reads in left.items():
            kept = unrecorded.get(tid)
            if kept is None:
                kept = unrecorded[tid] = []
            kept.append((reads, s, first))
            uses[tid][1] = first + reads[-1][1]

    def emit_iteration(self, s: int, tensors: list[Any]) -> None:
        """Every instruction of iteration `s`, as `emit` makes them one by one (the caller
        made the iteration's tiles, and knows its instructions fit the budget), with no
        journal open: those that only access the iteration's own tiles and tensors nothing
        has written (most) are left to be made when read (`_Iteration`), the others are
        made by `emit`."""
        b = self.builder
        instrs, meter, shapes = b.instrs, b.meter, self.shapes
        if not isinstance(instrs, Instrs):
            b.instrs = instrs = Instrs(instrs)
        first = len(instrs)
        later = _Iteration(self, s, tensors, first)
        for run in self.runs:
            if type(run) is int:
                self.emit(run, s, tensors)
                continue
            start, end, left = run  # type: ignore[misc]
            # (as `emit`: the clocks and memory at every 256th instruction)
            poll = first + start + (-(first + start) & 255)
            while poll < first + end:
                meter.poll(shapes[poll - first].span)
                poll += 256
            instrs.add_later(later, end - start)
            if left:
                self._leave_out(left, s, first)

    def fresh_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The base's dependencies through the iteration's tiles (`_Shape.fresh_deps`) of
        every instruction, as CSR: row pointers, and all of them in order."""
        if self._fresh is None:
            counts = np.fromiter(map(len, (shape.fresh_deps for shape in self.shapes)), np.int64)
            ptr = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            flat = np.fromiter(
                (d for shape in self.shapes for d in shape.fresh_deps), np.int64, int(ptr[-1])
            )
            self._fresh = (ptr, flat)
        return self._fresh

    def make(self, j: int, index: int, s: int, tensors: list[Any], first: int) -> Instr:
        """Instruction `j` of iteration `s` (its tensors `tensors`), made by `emit_iteration`
        at `index` (the iteration's first at `first`), as `emit` would have made it."""
        shape = self.shapes[j]
        eager = shape.eager
        ops = {k: v if make is None else make(s, tensors) for k, v, make in eager} if eager else {}
        base = shape.base
        assert base is not None
        ins = LateInstr.made(
            base,
            index,
            shape.kind,
            ops,
            base.attrs,
            shape.rform,
            (shape.ops, s, tensors, shape.late),
        )
        if shape.fresh_deps:  # (else none: as made)
            by = first - self.start
            ins.deps = tuple(map(by.__add__, shape.fresh_deps))
            ins.waits = tuple(map(by.__add__, shape.fresh_waits))
        return ins

    def end_iteration(self, s: int, tensors: list[Any], defer: bool = False) -> None:
        """The tiles of iteration `s` (made with `emit`): their live ranges, what wrote them,
        and their access histories to come, the base's moved on. `defer`: the live ranges
        and histories are left to be made when asked for (`Deferred`) where the tiles'
        ids run on from the last iteration's (made by `emit_iteration`, nothing between)."""
        b = self.builder
        by = s * len(self.shapes)  # (the base: the last traced iteration, s = 0)
        ids_of = getattr(tensors, "ids", None)  # (Made: ids of tiles not made yet too)
        ids = ids_of() if ids_of is not None else [t.id for t in tensors]
        self.ids.append([*ids, *self.picks] if self.picks else ids)
        self.picks = []
        deferred = defer and DEFER and self._defer(s, ids)
        pending, uses, stream_uses, written, masks = (
            b._pending,
            b._uses,
            b._stream_uses,
            b.written,
            b._written,
        )
        if deferred:  # (what wrote them too: DeferredTiles.settle_tensor; PSUM flags now)
            for position, mask, whole in self.flagged:
                masks[ids[position]] = ALL_WRITTEN if whole else mask.copy()
            return
        for position, h, use, streams, wrote, mask, whole in self.tiles:
            tid = ids[position]
            if h is not None:
                pending[tid] = (h, by)
            if use is not None:
                uses[tid] = [use[0] + by, use[1] + by]
            if streams is not None:  # (a loop, not a comprehension: no call per tile)
                spans = stream_uses[tid] = {}
                for k, (first, last) in streams:
                    spans[k] = [first + by, last + by]
            if wrote:
                written.add(tid)
            if whole:
                masks[tid] = ALL_WRITTEN
            elif mask is not None:
                masks[tid] = mask.copy()

    def _defer(self, s: int, ids: list[int]) -> bool:
        """Leave the state of iteration `s`'s tiles (of ids `ids`, in order) to `Deferred`
        runs: True where their ids run on without a gap (and after every run's)."""
        if not ids or not _consecutive(ids):
            return False
        run, b = self._run, self.builder
        if run is not None and run.s0 + run.count == s and run.hi == ids[0]:
            run.count += 1
            return True
        if b._deferred and ids[0] < b._deferred[-1].hi:
            return False
        run = self._run = Deferred(self, s, ids[0], len(ids))
        b._deferred.append(run)
        b._deferred_los.append(run.lo)
        return True

    def repeated(self) -> Repeated | None:
        """The iterations made, for the checks (None: none, or accesses that do not move in
        step with them)."""
        if not self.ids or not self.flat:
            return None
        return Repeated(
            self.start,
            len(self.shapes),
            len(self.ids),
            [shape.sources for shape in self.shapes],
            np.array(self.ids, dtype=np.int64).reshape(len(self.ids), -1),
            self.alike,
        )


class _Iteration(Later):
    """The instructions of one iteration that `Repeat.emit_iteration` left to be made when
    read (neuronemu.program.lazy): slot `index`'s is the iteration's instruction
    `index - first`."""

    __slots__ = ("repeat", "s", "tensors", "first")

    def __init__(self, repeat: Repeat, s: int, tensors: list[Any], first: int):
        self.repeat, self.s, self.tensors, self.first = repeat, s, tensors, first

    def make(self, index: int) -> Instr:
        return self.repeat.make(index - self.first, index, self.s, self.tensors, self.first)

    def deps_at(self, index: int) -> tuple[int, ...]:
        by = self.first - self.repeat.start
        return tuple(map(by.__add__, self.repeat.shapes[index - self.first].fresh_deps))

    def deps_block(self, index: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        ptr, flat = self.repeat.fresh_csr()
        j = index - self.first
        by = self.first - self.repeat.start
        return np.diff(ptr[j : j + n + 1]), flat[ptr[j] : ptr[j + n]] + by


def _consecutive(ids: Sequence[int]) -> bool:
    """Do `ids` run on from the first, one by one? (An iteration's tiles made afresh do; one
    that takes block tiles holds older ids too, a block taken twice twice, and its first and
    last ids can still be as far apart as a run's.)"""
    if isinstance(ids, range):
        return ids.step == 1
    first = ids[0]
    return ids[-1] - first == len(ids) - 1 and all(i == first + k for k, i in enumerate(ids))


def _left_out(shapes: list[tuple[_Shape, int]]) -> dict[int, tuple]:
    """The reads instructions `shapes` (each with its offset) leave out of the history, by
    tensor: ((bounds' maker, offset), ...) in order."""
    left: dict[int, list] = {}
    for shape, offset in shapes:
        for tid, bounds in shape.unrecorded:
            left.setdefault(tid, []).append((bounds, offset))
    return {tid: tuple(reads) for tid, reads in left.items()}
