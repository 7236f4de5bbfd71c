"""SBUF and PSUM addresses for a program's tiles, over their live ranges.

A tile is live from its first use to its last (instruction indices). SBUF is allocated in bytes
per partition, PSUM in whole 2 KiB banks (a PSUM tensor starts at a bank boundary, nki docs).
A tile occupies its partitions [p0, p0 + P) (p0 = 0 unless `address=` places it), tracked at
the granularity of 32-partition quadrants (inferred: the start-partition rules of an operand
are quadrant-granular, nki.isa); within them, a byte range of every partition.

Placement rotates through the buffer (a ring cursor, next fit): a tile goes to the first
free range at or after where the previous one ended, wrapping at the end. Freed space is thus
reused as late as possible, so that a loop's next iteration does not wait for the previous one
to let go of its tiles; this models the compiler's address rotation (inferred: the docs name
an `address_rotation` policy, nki.compiler.CompileConfig, without describing it).
`ROTATE = False` gives first fit instead (the most compact layout).

Each tile that takes bytes last held by an earlier, dead tile is a *reuse*: every access to
the new tile must follow every access to the old one (a write-after-read/write hazard across
tensors). `allocate` returns these pairs; `neuronemu.program.reuse_deps` turns them into
dependencies (semaphore waits) and the race checker verifies them.

Capacity overflow is a located error (a matmul result crossing a PSUM bank too, checked once
the tiles are placed: `neuronemu.build.psum_banks`).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from neuronemu.build.columns import _align, _quadrants, _spans, allocate_columns
from neuronemu.build.spill import EARLY_RELOAD, TICK, ByNextAccess, Planner
from neuronemu.errors import AllocationError, ConstraintError, SourceSpan
from neuronemu.ir import Tensor
from neuronemu.jit import worker as jit_worker
from neuronemu.program import Instr
from neuronemu.program.placements import Allocation, Placement
from neuronemu_isa import Arch, Buffer

__all__ = ["Placement", "Allocation", "allocate", "allocate_planned", "partition_offset", "ROTATE"]

# Rotate placements through the buffer (True) or pack them first-fit from address 0 (False).
ROTATE = True
# Past this many instructions, tiles are placed by the jitted twin of the loop below
# (neuronemu.jit.compiled.place; the checks load Numba past the same size anyway).
JIT_ABOVE = 20_000
# A tile that did not fit is tried again over the bytes let go since, up to this many ranges
# of them (the same answer as a search of every offset; past it, that search).
REFIT_WINDOWS = 8


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte ranges [lo, hi) joined where they overlap or touch, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _first_of(found: list[int | None], start: int, capacity: int) -> int | None:
    """The first of the offsets found (None: none) in the order a search from `start`,
    wrapping at `capacity`, meets them."""
    offsets = [f for f in found if f is not None]
    return min(offsets, key=lambda f: (f - start) % capacity) if offsets else None


class _ByteMap:
    """Which placement last held each byte range of one quadrant of partitions: sorted,
    disjoint segments [start, end) -> owner (ranges never used are absent)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.segs: list[tuple[int, int, Placement]] = []

    def copy(self) -> _ByteMap:
        other = _ByteMap()
        other.starts, other.segs = list(self.starts), list(self.segs)
        return other

    def owners(self, lo: int, hi: int) -> list[tuple[int, int, Placement]]:
        """The segments overlapping [lo, hi)."""
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        out = []
        while i < len(self.segs) and self.segs[i][0] < hi:
            if self.segs[i][1] > lo:
                out.append(self.segs[i])
            i += 1
        return out

    def assign(self, lo: int, hi: int, owner: Placement) -> None:
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        while i < len(self.segs) and self.segs[i][1] <= lo:
            i += 1
        j = i
        keep: list[tuple[int, int, Placement]] = []
        while j < len(self.segs) and self.segs[j][0] < hi:
            s, e, o = self.segs[j]
            if s < lo:
                keep.append((s, lo, o))
            if e > hi:
                keep.append((hi, e, o))
            j += 1
        new = sorted([*keep, (lo, hi, owner)])
        self.segs[i:j] = new
        self.starts[i:j] = [s for s, _, _ in new]


def allocate_planned(
    tensors: list[Tensor],
    uses: Mapping[int, list[int]],
    instrs: list[Instr],
    arch: Arch,
    planner: Planner,
) -> tuple[Allocation, Planner]:
    """Addresses where tiles may spill, and the planner whose spills they hold. Tiles that
    outgrow SBUF are placed by a second plan, with first loads hoisted where room can be
    made (`Planner.hoisting`; with room to spare, nothing delays a load into a fresh tile);
    the first plan, as the kernel is written, tells whether they do, which past JIT_ABOVE
    instructions the jitted placement tells sooner (it declines exactly where the plain
    path would give up a tile or fail), and the first plan is then not made. A kernel fails
    only where neither plan fits, with the first plan's error (the one naming the kernel's
    own order)."""
    error: AllocationError | None = None
    if len(instrs) > jit_worker.jit_above(JIT_ABOVE, "place"):
        from neuronemu.jit import compiled as _jit

        fitted = allocate_columns(tensors, uses, arch, ROTATE, _jit.place)
        if fitted is not None:
            return fitted, planner
        first_made = False
    else:
        first_made = True
        try:
            allocation = allocate(tensors, uses, instrs, arch, planner=planner, use_jit=False)
        except AllocationError as e:
            error = e
        else:
            if not planner.spills:
                return allocation, planner
    hoisting = planner.hoisting()
    try:
        return allocate(tensors, uses, instrs, arch, planner=hoisting), hoisting
    except AllocationError as e:
        hoisted_error = e
    # (out of the handler: the error told is the only one its traceback shows)
    if error is None:
        if not first_made:  # (the first plan's error, if it has one, is the one told)
            allocate(tensors, uses, instrs, arch, planner=planner, use_jit=False)
        error = hoisted_error
    raise error


def allocate(
    tensors: list[Tensor],
    uses: Mapping[int, list[int]],
    instrs: list[Instr],
    arch: Arch,
    rotate: bool | None = None,
    planner: Planner | None = None,
    use_jit: bool | None = None,
) -> Allocation:
    """Addresses for every on-chip tensor some instruction uses, by tensor id. With a
    `planner`, a tile that does not fit in SBUF makes room by giving up live tiles (spills,
    `neuronemu.build.spill`): the planner keeps them, and the placements then include the clones;
    their live ranges are set when the program is rebuilt. `use_jit`: place the tiles by the
    jitted pass first (None: past JIT_ABOVE instructions); a program that needs spills or
    has a misplaced tile then takes the plain path below, which makes them (or the error)."""
    rotate = ROTATE if rotate is None else rotate
    if use_jit is None:
        use_jit = len(instrs) > jit_worker.jit_above(JIT_ABOVE, "place")
    if use_jit and (planner is None or not planner.hoist):  # (hoisted loads move live ranges)
        from neuronemu.jit import compiled as _jit

        fitted = allocate_columns(tensors, uses, arch, rotate, _jit.place)
        if fitted is not None:
            return fitted
    out = Allocation({})
    quadrant = arch.tile_quadrant_partitions
    for buffer in (Buffer.SBUF, Buffer.PSUM):
        if buffer == Buffer.SBUF:
            capacity = arch.sbuf_usable_bytes_per_partition
            unit = arch.sbuf_min_align_bytes
        else:
            capacity = arch.psum_bytes_per_partition
            unit = arch.psum_bank_bytes
        # One map per quadrant, shared by quadrants whose maps are the same (most tiles span
        # every partition): a tile of some quadrants only gives them maps of their own.
        maps = [_ByteMap()] * -(-arch.sbuf_partitions // quadrant)
        shared = [True]  # is every quadrant's map still the one map?
        sizes: dict[tuple, tuple[int, int, list[int]]] = {}  # a tile's step, size, quadrants
        mine, used_from = _used(tensors, buffer, uses)
        # Live ranges in allocator time (TICK per instruction: room for spill copies).
        ranges = {t.id: (TICK * a, TICK * b) for t, (a, b) in zip(mine, used_from.tolist())}
        # First loads the scheduler may issue early: tile id -> (load, first reader).
        hoists: dict[int, tuple[int, int]] = {}
        if planner is not None and buffer == Buffer.SBUF:
            for t in mine:
                h = planner.hoistable(t) if t.address is None else None
                if h is not None:
                    load, earliest, reader = h
                    hoists[t.id] = (load, reader)
                    ranges[t.id] = (TICK * (earliest - 1) + EARLY_RELOAD, ranges[t.id][1])
        pending = [(ranges[t.id][0], t.id, t) for t in mine]
        heapq.heapify(pending)
        # Tiles placed by the kernel hold their bytes over their live ranges: automatic
        # placement keeps clear of them, even of those first used later.
        pinned = [
            (
                t.address,
                t.address + _align(max(t.bytes_per_partition, 1), unit),
                set(_quadrants(t, quadrant)),
                *ranges[t.id],
            )
            for t in mine
            if t.address is not None
        ]
        cursor = 0
        # (last use, id) of the live tiles, a heap; bytes in use per quadrant
        ends: list[tuple[int, int]] = []
        live: dict[int, Placement] = {}
        dropped: set[int] = set()  # placements of clones given up unused (by id())
        in_use = [0] * len(maps)
        peak = 0
        # Releases so far (the byte ranges let go, in order), and the count when each tile
        # last did not fit: a tile that did not fit does not until some tile lets its bytes
        # go (placing others only adds), and then only at an offset over those bytes.
        released = [0]
        freed: list[tuple[int, int]] = []
        failed_at: dict[int, int] = {}
        quadrants_of: dict[int, frozenset[int]] = {}  # by tile id
        # a live tile's origin id and quadrants (by its id), for make_room
        candidates: dict[int, tuple[int, frozenset[int]]] = {}
        # a live tile's first use (planner.first_use), by id, once make_room asked
        used: dict[int, int | None] = {}

        # the live tiles make_room may give up, by next access (from its first call: most
        # programs fit, and the planner's table of accesses is made when first asked)
        by_next: ByNextAccess[Placement] = ByNextAccess()

        def release(p: Placement) -> None:
            del live[p.tensor.id]
            if by_next.on:
                by_next.remove(p.tensor.id)
            for q in _quadrants(p.tensor, quadrant):
                in_use[q] -= p.size
            released[0] += 1
            freed.append((p.offset, p.offset + p.size))

        def may_give_up(p: Placement, now: int) -> None:
            """Note a live placement in by_next if make_room may give it up."""
            assert planner is not None
            if not p.pinned and planner.movable(p.tensor):
                tile = planner.origin(p.tensor)
                candidates[p.tensor.id] = (tile.id, quadrants(tile))
                by_next.add(p, planner.accesses(p.tensor), now)

        def quadrants(tile: Tensor) -> frozenset[int]:
            qs = quadrants_of.get(tile.id)
            if qs is None:
                qs = quadrants_of[tile.id] = frozenset(_quadrants(tile, quadrant))
            return qs

        def make_room(t: Tensor, now: int, fit: Callable[[int, int], int | None]) -> int | None:
            """Give up live tiles, the furthest next use first, until `t` fits (`fit(lo, hi)`:
            where, among the offsets whose bytes overlap [lo, hi))."""
            assert planner is not None
            planner.tick()
            i = -(-now // TICK)  # the instruction that needs the room
            # An early reload only trades places with tiles needed after it.
            hoisting = t.id in hoists
            need_by = planner.need_by(t, i, hoists[t.id][1] if hoisting else None)
            if not by_next.on:
                by_next.on = True
                for p in live.values():
                    may_give_up(p, i)
            # (live tiles whose next access comes after need_by, the latest first)
            after = by_next.after(need_by, i)
            if not after:
                return None
            busy = planner.busy(i) if i >= 0 else set()  # (a load hoisted above the start)
            qids = quadrants(t)

            def victims() -> Iterator[Placement]:
                assert planner is not None
                for _, p in after:
                    tile_id, tile_quadrants = candidates[p.tensor.id]
                    if tile_id in busy or qids.isdisjoint(tile_quadrants):
                        continue
                    if hoisting:
                        use = used.get(p.tensor.id, -1)
                        if use == -1:
                            use = used[p.tensor.id] = planner.first_use(p.tensor)
                        if use is None or use >= i:
                            continue
                    yield p

            # (a hoisted load's choice reads first uses, which giving up may change: taken
            # before any goes; otherwise one by one, until the tile fits)
            for p in list(victims()) if hoisting else victims():
                given = planner.give_up(p.tensor, now)
                if given is None:
                    continue
                spill, p.last, clone_first, unused = given
                release(p)
                if unused:
                    del out.placements[p.tensor.id]
                    dropped.add(id(p))
                ranges[spill.clone.id] = (clone_first, ranges[p.tensor.id][1])
                heapq.heappush(pending, (clone_first, spill.clone.id, spill.clone))
                # Nothing fitted before: only an offset over p's bytes can now.
                found = fit(p.offset, p.offset + p.size)
                if found is not None:
                    return found
            return None

        while pending:
            first, _, t = heapq.heappop(pending)
            last = ranges[t.id][1]
            while ends and ends[0][0] < first:
                _, tid = heapq.heappop(ends)
                if tid in live and live[tid].last < first:
                    release(live[tid])
            kind = (t.shape, t.dtype.itemsize, t.partition_offset)
            sized = sizes.get(kind)
            if sized is None:
                # Tiles align to their dtype's size too (inferred: natural alignment).
                step = max(unit, t.dtype.itemsize) if buffer == Buffer.SBUF else unit
                size = _align(max(t.bytes_per_partition, 1), step)
                sized = sizes[kind] = (step, size, _quadrants(t, quadrant))
            step, size, qids = sized
            partition = t.partition_offset or 0
            every = len(qids) == len(maps)  # (most tiles: over every quadrant)
            if every and shared[0]:
                quads = [maps[0]]
            else:
                quads = list({id(maps[q]): maps[q] for q in qids}.values())
            placement = Placement(t, 0, size, first, last, t.address is not None, partition)
            if t.address is not None:
                offset = t.address
                if offset % step:
                    raise AllocationError(
                        f"{buffer.value.upper()} tensor {t.name!r} at offset {offset} is not "
                        f"aligned to {step} bytes",
                        t.span,
                    )
                if offset + size > capacity:
                    raise _over_capacity(t, buffer, size, offset, capacity, quads, first, arch)
                clash = _live_owner(quads, offset, offset + size, first)
                if clash is not None:
                    c = clash.tensor
                    raise AllocationError(
                        f"{t.name!r} at offset {offset} overlaps {c.name!r} [{clash.offset}, "
                        f"{clash.offset + clash.size}) of partitions "
                        f"[{clash.partition}, {clash.partition + c.shape[0]}) while both are "
                        "live",
                        t.span,
                    )
            else:
                reserved = [
                    (lo, hi)
                    for lo, hi, qs, f, la in pinned
                    if qs & set(qids) and f <= last and first <= la
                ]

                def fit(lo: int = 0, hi: int = capacity) -> int | None:
                    start = cursor if rotate else 0
                    return _fit(quads, reserved, size, step, capacity, start, first, lo, hi)

                since = failed_at.get(t.id)
                if since == released[0]:
                    found = None
                elif since is not None and not pinned and released[0] - since <= REFIT_WINDOWS:
                    start = cursor if rotate else 0
                    found = _first_of(
                        [fit(lo, hi) for lo, hi in _merged(freed[since:])], start, capacity
                    )
                else:
                    found = fit()
                if found is None and planner is not None and buffer == Buffer.SBUF:
                    found = make_room(t, first, fit)
                    if found is None:
                        failed_at[t.id] = released[0]
                    if found is None and t.id in hoists:
                        # no room yet: an instruction later, at the latest its own place
                        load = hoists[t.id][0]
                        later = first + TICK
                        if later >= TICK * (load - 1):
                            del hoists[t.id]
                            later = TICK * load
                        ranges[t.id] = (later, last)
                        heapq.heappush(pending, (later, t.id, t))
                        continue
                    if found is None and planner.early(t):
                        # an early reload without room: try again an instruction later
                        later = planner.defer(t)
                        ranges[t.id] = (later, last)
                        heapq.heappush(pending, (later, t.id, t))
                        continue
                if found is None:
                    raise _over_capacity(
                        t, buffer, size, None, capacity, quads, first, arch, planner is not None
                    )
                if t.id in hoists and planner is not None:
                    planner.hoisted[hoists[t.id][0]] = first
                offset = found
            placement.offset = offset
            old = {id(o): o for m in quads for _, _, o in m.owners(offset, offset + size)}
            out.reuses.extend((o, placement) for o in old.values())
            for m in quads:
                if not every and any(maps[q] is m for q in range(len(maps)) if q not in qids):
                    own = m.copy()  # the quadrants outside the tile keep the map as it was
                    for q in qids:
                        if maps[q] is m:
                            maps[q] = own
                    m = own
                    shared[0] = False
                m.assign(offset, offset + size, placement)
            cursor = offset + size if rotate else 0
            out.placements[t.id] = placement
            live[t.id] = placement
            if by_next.on:
                may_give_up(placement, -(-first // TICK))
            heapq.heappush(ends, (last, t.id))
            for q in qids:
                in_use[q] += size
            peak = max(peak, *(in_use[q] for q in qids))
        out.peak[buffer] = peak
        if dropped:
            out.reuses = _bypass(out.reuses, dropped)
    for p in out.placements.values():  # back to instruction indices
        p.first, p.last = -(-p.first // TICK), p.last // TICK
    return out


def _used(
    tensors: list[Tensor], buffer: Buffer, uses: Mapping[int, list[int]]
) -> tuple[list[Tensor], np.ndarray]:
    """The tiles of `buffer` some instruction uses, and their [first, last] uses, (n, 2)."""
    ours = [t for t in tensors if t.buffer == buffer]
    has, first, last = _spans(np.fromiter((t.id for t in ours), np.int64, len(ours)), uses)
    mine = [ours[k] for k in np.flatnonzero(has).tolist()]
    return mine, np.stack([first[has], last[has]], axis=1)


def _bypass(
    reuses: list[tuple[Placement, Placement]], dropped: set[int]
) -> list[tuple[Placement, Placement]]:
    """Reuse pairs without the dropped placements: a tile placed over a dropped one's bytes
    follows the tiles the dropped one followed."""
    before: dict[int, list[Placement]] = {}
    for old, new in reuses:
        if id(new) in dropped:
            before.setdefault(id(new), []).append(old)

    known: dict[int, list[Placement]] = {}  # (a dropped placement's, worked out once)

    def owners(p: Placement) -> list[Placement]:
        if id(p) not in dropped:
            return [p]
        found = known.get(id(p))
        if found is None:
            found = known[id(p)] = [o for q in before.get(id(p), []) for o in owners(q)]
        return found

    out: list[tuple[Placement, Placement]] = []
    for old, new in reuses:
        if id(new) not in dropped:
            out.extend((o, new) for o in owners(old))
    return out


def _live_owner(quads: list[_ByteMap], lo: int, hi: int, now: int) -> Placement | None:
    """A tile still live at instruction `now` that holds part of [lo, hi)."""
    for m in quads:
        for _, _, owner in m.owners(lo, hi):
            if owner.last >= now:
                return owner
    return None


def _fit(
    quads: list[_ByteMap],
    reserved: list[tuple[int, int]],
    size: int,
    step: int,
    capacity: int,
    start: int,
    now: int,
    lo: int = 0,
    hi: int | None = None,
) -> int | None:
    """The first offset at or after `start` (wrapping once) where `size` bytes are free in
    every quadrant at instruction `now` and clear of the `reserved` byte ranges, or None.
    With a window [lo, hi): among the offsets whose bytes overlap it only (the same answer
    when no other offset can be free)."""
    if hi is not None:  # the window's offsets, in the same order
        first = max(lo - size + 1, 0)
        found = _fit_between(quads, reserved, size, step, capacity, max(start, first), hi, now)
        if found is None and start:
            found = _fit_between(quads, reserved, size, step, capacity, first, min(hi, start), now)
        return found
    found = _fit_between(quads, reserved, size, step, capacity, start, capacity, now)
    if found is None and start:
        found = _fit_between(quads, reserved, size, step, capacity, 0, start, now)
    return found


def _fit_between(
    quads: list[_ByteMap],
    reserved: list[tuple[int, int]],
    size: int,
    step: int,
    capacity: int,
    lo: int,
    hi: int,
    now: int,
) -> int | None:
    """The first `step`-aligned offset in [lo, hi) where `size` bytes fit below `capacity`,
    free in every quadrant at instruction `now` and clear of `reserved`, or None.

    One pass over each map's segments, in offset order: a tile live at `now` over part of
    the candidate bytes blocks every offset up to its end (it holds all its bytes while
    live), so the candidate moves past the furthest blocker found, and each map's cursor
    only moves forward."""
    offset = _align(lo, step)
    if len(quads) == 1 and not reserved:  # (most tiles: every quadrant, nothing pinned)
        return _fit_one(quads[0].segs, quads[0].starts, size, step, capacity, offset, hi, now)
    cursors = [max(bisect.bisect_right(m.starts, offset) - 1, 0) for m in quads]
    while True:
        if offset >= hi or offset + size > capacity:
            return None
        end = offset + size
        jump = -1
        for k, m in enumerate(quads):
            segs = m.segs
            i, n = cursors[k], len(segs)
            while i < n and segs[i][1] <= offset:
                i += 1
            cursors[k] = i
            while i < n and segs[i][0] < end:
                owner = segs[i][2]
                if owner.last >= now:
                    jump = max(jump, owner.offset + owner.size)
                    break
                i += 1
        for r0, r1 in reserved:
            if r0 < end and offset < r1:
                jump = max(jump, r1)
        if jump < 0:
            return offset
        offset = _align(jump, step)


def _fit_one(
    segs: list[tuple[int, int, Placement]],
    starts: list[int],
    size: int,
    step: int,
    capacity: int,
    offset: int,
    hi: int,
    now: int,
) -> int | None:
    """`_fit_between` over one map's segments, nothing reserved (`offset` aligned)."""
    i, n = max(bisect.bisect_right(starts, offset) - 1, 0), len(segs)
    while offset < hi and offset + size <= capacity:
        end = offset + size
        while i < n and segs[i][1] <= offset:
            i += 1
        j = i
        while j < n and segs[j][0] < end:
            owner = segs[j][2]
            if owner.last >= now:  # (live: it blocks every offset up to its end)
                offset = -(-(owner.offset + owner.size) // step) * step
                break
            j += 1
        else:
            return offset
    return None


def _over_capacity(
    t: Tensor,
    buffer: Buffer,
    size: int,
    offset: int | None,
    capacity: int,
    quads: list[_ByteMap],
    now: int,
    arch: Arch,
    spilling: bool = False,
) -> AllocationError:
    live = {id(o): o for m in quads for _, _, o in m.owners(0, capacity) if o.last >= now}
    used = sum(p.size for p in live.values())
    names = ", ".join(
        f"{p.tensor.name} ({p.size} B)" for p in sorted(live.values(), key=lambda p: -p.size)[:4]
    )
    if offset is not None:
        where = f"at offset {offset}, past the {capacity} usable on {arch.name}"
    elif used + size > capacity:
        where = f"but live tiles take {used} of the {capacity} usable on {arch.name}"
    else:
        where = (
            f"and {capacity - used} of the {capacity} usable on {arch.name} are free, "
            "but not in one piece"
        )
    if offset is not None:  # the kernel chose the address
        hint = f"place it below {capacity - size} (or use a smaller tile)"
    elif names:
        if spilling and buffer == Buffer.SBUF:
            why = (
                "none of them can be spilled (the instruction here uses them, or they are "
                "partly written, read in another dtype or placed with address=)"
            )
        elif buffer == Buffer.SBUF:
            why = "without --no-spill, neuronemu models the NKI compiler's spills to HBM"
        else:
            why = "PSUM tiles are never spilled"
        hint = (
            f"live here: {names}; {why}; free tiles sooner (allocate them in the loop that "
            "uses them) or use smaller tiles"
        )
    else:
        hint = None
    return AllocationError(
        f"{buffer.value.upper()} over capacity: tile {t.name!r} needs {size} bytes per "
        f"partition {where}",
        t.span,
        hint=hint,
    )


def partition_offset(p0: int, t: Tensor, arch: Arch, span: SourceSpan) -> int:
    """The first partition of an explicitly placed tile, checked against the start rules:
    more than 64 partitions start at 0, more than 32 at 0 or 64, the rest at a multiple of 32
    (nki.isa operand rules; reference B1)."""
    parts, quadrant = t.shape[0], arch.tile_quadrant_partitions
    allowed = (
        [0]
        if parts > 2 * quadrant
        else [0, 2 * quadrant]
        if parts > quadrant
        else list(range(0, arch.tile_pmax, quadrant))
    )
    if p0 not in allowed or p0 + parts > arch.tile_pmax:
        raise ConstraintError(
            f"{t.label!r} spans {parts} partitions, so it may start at partition "
            f"{' or '.join(map(str, allowed))}, not {p0}",
            span,
            hint="a tile of at most 32 partitions may start at 0, 32, 64 or 96; of at most 64 "
            "at 0 or 64; larger tiles at 0",
        )
    return p0
