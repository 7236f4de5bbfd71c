"""Spills: what the NKI compiler does when a kernel's live tiles outgrow SBUF.

When a tile cannot be placed, the allocator gives up the bytes of live SBUF tiles that the
instruction at hand does not use, the furthest next use first (Belady's choice; inferred: the
compiler's spill policy is not documented, only that it spills to HBM). A tile given up is
held again, from its next access on, by a new tensor of its shape, its *clone* (`t.r1`,
`t.r2`, ...), with a placement of its own:

- a tile written only by copies (`dma_copy`) from HBM that nothing in the kernel writes
  is *reloaded*: those copies run again, into the clone (rematerialization: no store); if
  nothing read it yet, its copies move to the reload instead (the load is *sunk* to where
  there is room, as the compiler's scheduler would issue it);
- any other tile is *spilled*: a copy to a scratch HBM tensor (`t.spill`) before the room is
  needed, and a copy back into the clone before the tile's next access;
- a clone not written since it was filled goes again without a new store.

A reload is issued up to RELOAD_LEAD instructions ahead of the access it serves, where there
is room (it only displaces tiles needed after it; without room it waits), so that its latency
can hide behind other work. When tiles outgrow SBUF, a tile's first load, from a kernel input
into a tile nothing touched yet, is *hoisted* the same way, up to LOAD_LEAD instructions (the
compiler's scheduler issues loads ahead of the work that needs them, making room by giving up
tiles in use that are needed later: a loop's next block of inputs arrives while the current
one is used). A tile only partly written, read in another dtype (aliased), placed with
`address=`, a constant, or in PSUM is never given up. `rebuild` then inserts the
copies into the program, points later accesses at the clones, and derives every dependency
again; each source line whose tiles were given up gets a note.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import heapq
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from neuronemu.ir import BUFFERS, IndirectView, Tensor, View
from neuronemu.program import Instr
from neuronemu_isa import REGISTRY, Buffer


class Builder(Protocol):
    """What `rebuild` needs of `neuronemu.build.builder.Builder` (which imports this module)."""

    instrs: list[Instr]
    tensors: list[Tensor]

    def spill_copy(
        self, spec: Any, dst: View, src: View, span: Any, attrs: dict[str, Any] | None = None
    ) -> Instr: ...

    def rederive(self, instrs: list[Instr], renumber: dict[int, int]) -> None: ...

    def use_range(self, tensor_id: int) -> tuple[int, int]: ...


__all__ = ["Spill", "Planner", "rebuild", "ByNextAccess"]

# Allocator time: instruction i happens at TICK * i. Right after it come the early reloads
# (at + EARLY_RELOAD, after its own tiles are placed) and, one slot before, the stores that
# make room for them; just before instruction i + 1, the stores that make room for its tiles
# (- STORE) and the reloads that bring tiles back just in time for it (- RELOAD). A copy's
# time says where it goes in the program: before instruction ceil(time / TICK).
TICK = 6
EARLY_RELOAD = 2
STORE = 2
RELOAD = 1

# A reload is issued this many instructions (program order, all engines) before the access
# it serves, so that its DMA latency (~2 us) overlaps other work, as the compiler's scheduler
# would hoist it; never before the instruction that gave the tile up. Inferred: the compiler
# does not document its spill scheduling. Tunable; 0 reloads just in time.
RELOAD_LEAD = 16
# A tile's first load from a kernel input is issued up to this many instructions before its
# place in the kernel, where there is room (inferred, as RELOAD_LEAD). 0 turns hoisting off.
LOAD_LEAD = 64


@dataclass(eq=False)
class Spill:
    """One tile given up before instruction `at` and held by `clone` from `resume` on."""

    tile: Tensor  # the kernel's tile
    segment: Tensor  # the tensor (the tile or an earlier clone) that gives up its bytes
    clone: Tensor
    store_time: int  # allocator time of the store (if any): just before the room is needed
    resume: int  # original instruction index of the tile's next access
    reload_time: int  # allocator time of the reload
    store: Tensor | None  # the scratch HBM tensor written before `at` (None: no store)
    reload: list[Instr] | Tensor | None  # the loads to repeat, the scratch to read, or none
    cancelled: bool = False  # the clone was given up again before any access: no reload
    sunk: bool = False  # the tile's own loads moved to the reload (nothing read them yet)


class Planner:
    """What the allocator needs to choose and give up tiles: every tile's accesses."""

    def __init__(
        self,
        instrs: list[Instr],
        written: set[int],
        hoist: bool = False,
        poll: Callable[[], None] | None = None,
    ):
        self.instrs = instrs
        self._poll, self._asked = poll, 0  # (the run's clock, looked at now and then)
        self.written = written  # ids of tensors some instruction writes
        self.hoist = hoist  # plan hoisted first loads too
        self._spill_of: dict[int, Spill] = {}  # clone id -> the spill that made it
        self._scratch: dict[int, Tensor] = {}  # tile id -> its HBM scratch
        self._clones: dict[int, int] = {}  # tile id -> clones made (they are named .r1, ...)
        self.spills: list[Spill] = []
        self.scratch: list[Tensor] = []
        self.dropped: set[int] = set()  # loads moved to a reload (instruction indices)
        # hoisted first loads: instruction index -> allocator time it is issued at
        self.hoisted: dict[int, int] = {}

    def hoisting(self) -> Planner:
        """A plan of the same program afresh, with first loads hoisted; the table of
        accesses, if made, is shared (it is the program's, and only read)."""
        other = Planner(self.instrs, self.written, hoist=True, poll=self._poll)
        if "_accesses" in self.__dict__:
            other.__dict__["_accesses"] = self._accesses
        return other

    @functools.cached_property
    def _accesses(self) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """Per tile id, the sorted indices of the instructions that touch it and of those
        that write it (built when something first has to go: most programs fit)."""
        touch: dict[int, set[int]] = {}
        writes: dict[int, set[int]] = {}
        for ins in self.instrs:
            for role in ("in", "out"):
                for _, v in ins.views(role):
                    tid = v.as_root().tensor.id
                    touch.setdefault(tid, set()).add(ins.index)
                    if role == "out":
                        writes.setdefault(tid, set()).add(ins.index)
        return (
            {tid: sorted(seq) for tid, seq in touch.items()},
            {tid: sorted(seq) for tid, seq in writes.items()},
        )

    def hoistable(self, t: Tensor) -> tuple[int, int, int] | None:
        """(load, earliest, first read) when `t`'s first access is a load the scheduler may
        issue earlier: a plain copy from a kernel input nothing writes into `t` alone, with
        nothing else touching `t` before it is read; `earliest` is the first instruction it
        may precede (after its dependencies, at most LOAD_LEAD before it)."""
        if not self.hoist or LOAD_LEAD <= 0 or not self.movable(t):
            return None
        touch, written = self._accesses
        seq = touch.get(t.id, [])
        if len(seq) < 2:
            return None
        load, reader = seq[0], seq[1]
        if written.get(t.id, [None])[0] != load or not self._reloadable(t, [load]):
            return None
        ins = self.instrs[load]
        outs = [v for _, v in ins.views("out")]
        if len(outs) != 1 or outs[0].as_root().tensor.id != t.id or reader in written[t.id]:
            return None
        # Every load moves by the same lead (before the kernel's start too), so that hoisted
        # loads keep their order.
        earliest = max(load - LOAD_LEAD, max(ins.deps, default=-LOAD_LEAD - 1) + 1)
        return (load, earliest, reader) if earliest < load else None

    def origin(self, t: Tensor) -> Tensor:
        spill = self._spill_of.get(t.id)
        return t if spill is None else spill.tile

    def need_by(self, t: Tensor, i: int, reader: int | None = None) -> int:
        """The instruction that first needs `t` placed: a clone's next access, a hoisted
        load's first reader (`reader`), else `i`."""
        spill = self._spill_of.get(t.id)
        if spill is not None:
            return spill.resume
        return i if reader is None else reader

    def tick(self) -> None:
        """One more search for room (spills can take a while): the run's budget is looked at
        every 1024 of them."""
        self._asked += 1
        if self._poll is not None and not self._asked & 1023:
            self._poll()

    def early(self, t: Tensor) -> bool:
        """Is `t` a clone whose reload is issued before the access it serves?"""
        spill = self._spill_of.get(t.id)
        return spill is not None and spill.reload_time < TICK * spill.resume - RELOAD

    def defer(self, clone: Tensor) -> int:
        """Issue `clone`'s early reload an instruction later; its new first time."""
        spill = self._spill_of[clone.id]
        spill.reload_time = _reload_time(spill.reload_time // TICK + 1, spill.resume)
        return spill.reload_time

    def busy(self, i: int) -> set[int]:
        """Ids of the tiles instruction `i` accesses (they must stay)."""
        ins = self.instrs[i]
        return {v.as_root().tensor.id for role in ("in", "out") for _, v in ins.views(role)}

    def accesses(self, t: Tensor) -> list[int]:
        """The instructions that access `t`'s tile, in order."""
        return self._accesses[0].get(self.origin(t).id, [])

    def next_access(self, t: Tensor, i: int) -> int | None:
        """The first access to `t`'s tile at or after instruction `i`."""
        seq = self.accesses(t)
        k = bisect.bisect_left(seq, i)
        return seq[k] if k < len(seq) else None

    def first_use(self, t: Tensor) -> int | None:
        """The first instruction that accesses `t` (a tile, or a clone from where it
        resumes), a hoisted first load aside, or None. A hoisted load makes room only by
        giving up tiles accessed before it (`first_use(p) < i`), never another tile loaded
        ahead of its use (which would only trade places with it). (While `t` is live, none
        of its accesses becomes a hoisted load: those are set as their tile is placed.)"""
        spill = self._spill_of.get(t.id)
        seq = self.accesses(t)
        lo = 0 if spill is None else bisect.bisect_left(seq, spill.resume)
        hoisted = self.hoisted
        return next((j for j in seq[lo:] if j not in hoisted), None)

    def movable(self, t: Tensor) -> bool:
        o = self.origin(t)
        return (
            o.buffer == Buffer.SBUF
            and not o.aliased
            and o.address is None
            and o.kind != "constant"
            and o.base is None
        )

    def give_up(self, seg: Tensor, now: int) -> tuple[Spill, int, int, bool] | None:
        """Give up `seg`'s bytes at allocator time `now`: the spill, the segment's new last
        time, the clone's first time (allocator times) and whether `seg` goes unused (a clone
        given up before its reload served any access: the reload is dropped; a tile only
        loaded so far: its loads move to the clone's reload), or None if it cannot go."""
        i = -(-now // TICK)  # the next instruction
        o = self.origin(seg)
        resume = self.next_access(seg, i)
        if resume is None or not self.movable(seg):
            return None
        earlier = self._spill_of.get(seg.id)  # the spill that made seg, if seg is a clone
        start = -1 if earlier is None else earlier.resume
        touch, written = self._accesses
        writes = _between(written.get(o.id, []), start, i)
        touched = _between(touch.get(o.id, []), start, i)
        if start < 0:  # a first load hoisted above `i` has run already
            early = [j for j in written.get(o.id, []) if j >= i and j in self.hoisted]
            if early:  # held again from the access after it, loaded again then
                writes, touched = writes + early, touched + early
                resume = self.next_access(seg, early[-1] + 1)
                if resume is None:
                    return None
        filled = None if earlier is None else earlier.reload
        store: Tensor | None = None
        if not writes:
            source = filled  # as it was filled (or never written: nothing to keep)
        elif start < 0 and self._reloadable(o, writes):
            source = [self.instrs[j] for j in writes]
        elif filled is not None or self._covered(o, writes):
            store = self._scratch.get(o.id)
            if store is None:
                store = Tensor(f"{o.name}.spill", o.shape, o.dtype, BUFFERS["hbm"], o.span)
                self._scratch[o.id] = store
                self.scratch.append(store)
            source = store
        else:
            return None  # partly written: its unwritten bytes cannot be copied
        self._clones[o.id] = n = self._clones.get(o.id, 0) + 1
        clone = Tensor(f"{o.name}.r{n}", o.shape, o.dtype, o.kind_of_buffer, o.span, o.kind)
        clone.partition_offset = o.partition_offset
        first = _reload_time(max(i, resume - RELOAD_LEAD), resume) if source else TICK * resume
        # just before the room is needed: before an instruction's stores slot, else the slot
        # before the reload that needs it
        store_time = now - (STORE if now % TICK == 0 else 1)
        self.spills.append(Spill(o, seg, clone, store_time, resume, first, store, source))
        self._spill_of[clone.id] = self.spills[-1]
        # Given up before anything read it: a clone is never filled, and a tile only loaded
        # so far is loaded later instead (its loads move to the reload: the compiler's
        # scheduler sinks a load it has no room for).
        sunk = start < 0 and isinstance(source, list) and touched == writes
        unused = (earlier is not None and not touched) or sunk
        if sunk:
            self.dropped.update(writes)
            for j in writes:  # loaded when it is brought back instead
                self.hoisted.pop(j, None)
            self.spills[-1].sunk = True
            last = -1
        elif earlier is not None and not touched:
            earlier.cancelled = True
            last = -1
        elif store is not None:
            last = store_time
        else:
            last = TICK * touched[-1]
        return self.spills[-1], last, first, unused

    def _reloadable(self, o: Tensor, writes: list[int]) -> bool:
        """Is every write a plain `dma_copy` from HBM that nothing in the kernel writes?"""
        for j in writes:
            ins = self.instrs[j]
            if not ins.spec.pure_copy or ins.indirect:
                return False
            for _, v in ins.views("in"):
                src = v.as_root().tensor
                if src.on_chip or src.id in self.written or src.aliased:
                    return False
        return True

    def _covered(self, o: Tensor, writes: list[int]) -> bool:
        """Do these instructions write every element of `o`?"""
        mask = np.zeros(o.shape, dtype=np.bool_)
        for j in writes:
            for _, v in self.instrs[j].views("out"):
                if isinstance(v, IndirectView):
                    return False
                root = v.as_root()
                if root.tensor.id == o.id:
                    root.np_view(mask)[...] = True
        return bool(mask.all())


def _reload_time(after: int, resume: int) -> int:
    """Allocator time of a reload issued after instruction `after` for an access at
    `resume`: early, or just in time."""
    if after < resume:
        return TICK * after + EARLY_RELOAD
    return TICK * resume - RELOAD


def _between(seq: list[int], lo: int, hi: int) -> list[int]:
    """The items of sorted `seq` in [lo, hi)."""
    return seq[bisect.bisect_left(seq, lo) : bisect.bisect_left(seq, hi)]


# -- the program with its spills ------------------------------------------------------------


def rebuild(builder: Builder, planner: Planner, placements: MutableMapping[int, Any]) -> list[str]:
    """Insert the spill copies into `builder`'s program, point each access at the tensor
    that holds its tile then, derive every dependency again and renumber. Returns a note
    per tile spilled."""
    old = builder.instrs
    added: list[tuple[int, int, Instr]] = []  # (allocator time, order, copy)
    spec = REGISTRY["dma_copy"]
    segments: dict[int, list[tuple[int, Tensor]]] = {}  # tile id -> [(first index, tensor)]
    for s in planner.spills:
        if s.store is not None:
            copy = builder.spill_copy(spec, s.store.full(), s.segment.full(), s.segment.span)
            added.append((s.store_time, len(added), copy))
        if s.cancelled:
            # (never accessed: the clone that gave it up holds the tile, even where that
            # one resumes earlier, as when a sunk tile's loads come back before its reads)
            continue
        segments.setdefault(s.tile.id, [(-1, s.tile)]).append((s.resume, s.clone))
        if isinstance(s.reload, Tensor):
            loads = [builder.spill_copy(spec, s.clone.full(), s.reload.full(), s.tile.span)]
        elif s.reload is not None:
            loads = [_retarget(ins, {s.tile.id: s.clone}, builder) for ins in s.reload]
        else:
            loads = []
        added.extend((s.reload_time, len(added) + k, copy) for k, copy in enumerate(loads))
    starts: dict[int, tuple[list[int], list[Tensor]]] = {}
    for tid, seq in segments.items():
        seq.sort(key=lambda x: x[0])  # stable: a later clone of the same start wins
        starts[tid] = ([f for f, _ in seq], [t for _, t in seq])
    for load, time in planner.hoisted.items():  # first loads issued earlier
        added.append((time, len(added), old[load]))
        planner.dropped.add(load)
    before: dict[int, list[Instr]] = {}  # original index -> the copies just before it
    for time, _, copy in sorted(added, key=lambda a: a[:2]):
        before.setdefault(max(-(-time // TICK), 0), []).append(copy)

    instrs: list[Instr] = []
    renumber: dict[int, int] = {}
    for ins in old:
        for copy in before.get(ins.index, ()):
            if copy.index >= 0 and copy.index in planner.hoisted:
                renumber[copy.index] = len(instrs)
            instrs.append(copy)
        if ins.index in planner.dropped:
            continue
        moved: dict[int, Tensor] = {}  # tile id -> the clone holding it at this instruction
        for tid in planner.busy(ins.index):
            if tid in starts:
                firsts, held = starts[tid]
                t = held[bisect.bisect_right(firsts, ins.index) - 1]
                if t.id != tid:
                    moved[tid] = t
        if moved:
            ins.operands = {k: _view_on(v, moved) for k, v in ins.operands.items()}
        renumber[ins.index] = len(instrs)
        instrs.append(ins)
    builder.tensors.extend(s.clone for s in planner.spills if not s.cancelled)
    builder.tensors.extend(planner.scratch)
    builder.rederive(instrs, renumber)
    for tid, p in placements.items():
        first, last = builder.use_range(tid)
        p.first, p.last = first, last
    return _notes(planner.spills)


def _view_on(v: Any, moved: dict[int, Tensor]) -> Any:
    """`v` with its tensor (or its index view's) replaced per `moved` (by tensor id)."""
    if not isinstance(v, View):
        return v
    out = v
    if v.tensor.id in moved:
        out = dataclasses.replace(v, tensor=moved[v.tensor.id])
    if isinstance(out, IndirectView) and out.index is not None:
        out = dataclasses.replace(out, index=_view_on(out.index, moved))
    return out


def _retarget(ins: Instr, moved: dict[int, Tensor], builder: Builder) -> Instr:
    operands = {k: _view_on(v, moved) for k, v in ins.operands.items()}
    return builder.spill_copy(ins.spec, operands["dst"], operands["src"], ins.span, ins.attrs)


def _notes(spills: list[Spill]) -> list[str]:
    """One note per source line whose tiles were given up."""
    by_line: dict[str, list[Spill]] = {}
    for s in spills:
        by_line.setdefault(str(s.tile.span), []).append(s)
    notes = []
    for line, group in by_line.items():
        tiles = {s.tile.id: s.tile for s in group}
        stores = sum(s.store is not None for s in group)
        back = [s for s in group if not s.cancelled and s.reload is not None]
        scratch = sum(isinstance(s.reload, Tensor) for s in back)
        later = sum(s.sunk for s in back)
        again = len(back) - scratch - later
        t = group[0].tile
        nbytes = (stores + len(back) - later) * t.size * t.dtype.itemsize
        what = f"tile {t.name!r}" if len(tiles) == 1 else f"{len(tiles)} tiles ({t.name!r}, ...)"
        notes.append(
            f"{line}: SBUF full: {what} of {t.bytes_per_partition} bytes per partition, as "
            f"the NKI compiler spills: {stores} store(s) to HBM, {scratch} load(s) back, "
            f"{again} load(s) again from the kernel's inputs ({nbytes / 2**20:.1f} MiB of "
            f"extra DMA), {later} load(s) issued later, when there was room; free tiles "
            "sooner or use smaller ones to avoid it"
        )
    return notes


class Placed(Protocol):
    """What ByNextAccess needs of `build.allocator.Placement` (which imports this module)."""

    tensor: Tensor


_P = TypeVar("_P", bound=Placed)


class ByNextAccess(Generic[_P]):
    """The live tiles the allocator's make_room may give up, by their next access at or after
    the instruction now, latest first (ties by tile id), kept up to date as now moves on (it
    only does): a search for tiles accessed after a bound looks at those alone."""

    def __init__(self) -> None:
        self.on = False  # (kept from make_room's first call on)
        self.keys: list[tuple[int, int]] = []  # (-next access, tile id), ascending
        self.key_of: dict[int, tuple[int, int]] = {}
        self.stale: list[tuple[int, int]] = []  # (next access, tile id): past it, recompute
        self.tiles: dict[int, tuple[_P, list[int]]] = {}  # id -> (placement, accesses)

    def add(self, p: _P, accesses: list[int], now: int) -> None:
        """A placement, accessed at `accesses` (sorted instruction indices), now at `now`."""
        k = bisect.bisect_left(accesses, now)
        if k == len(accesses):
            return  # (no access left: never a candidate again)
        tid = p.tensor.id
        key = (-accesses[k], tid)
        bisect.insort(self.keys, key)
        self.key_of[tid] = key
        self.tiles[tid] = (p, accesses)
        heapq.heappush(self.stale, (accesses[k], tid))

    def remove(self, tid: int) -> None:
        key = self.key_of.pop(tid, None)
        if key is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]
            del self.tiles[tid]

    def after(self, bound: int, now: int) -> list[tuple[int, _P]]:
        """(next access, placement) of the tiles next accessed after `bound`, at `now`."""
        stale = self.stale
        while stale and stale[0][0] < now:  # (their next access is past: the one after it)
            nxt, tid = heapq.heappop(stale)
            key = self.key_of.get(tid)
            if key is not None and -key[0] == nxt:
                p, accesses = self.tiles[tid]
                self.remove(tid)
                self.add(p, accesses, now)
        keys, tiles = self.keys, self.tiles
        # (keys are (-next access, id) ascending: those next accessed after `bound` lead)
        return [(-nxt, tiles[tid][0]) for nxt, tid in keys[: bisect.bisect_left(keys, (-bound,))]]
