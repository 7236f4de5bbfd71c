"""Program-level memory hazards, found without running: races between instructions that no
semaphore orders, and reads of memory no earlier instruction wrote.

Happens-before is tracked with vector clocks over the streams (engines and DMA queues): an
instruction follows everything earlier on its own stream and everything its waits follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from neuronemu.checks.access_table import Accesses
from neuronemu.checks.accesses import Boxes
from neuronemu.checks.written import reads_written
from neuronemu.errors import MemoryAccessError, RaceError, SourceSpan
from neuronemu.ir import View
from neuronemu.ir.footprint import (
    contains,
    mask_shape,
    overlap,
    read_mask,
    set_mask,
    write_mask,
)
from neuronemu.jit import worker as jit_worker
from neuronemu.limits import tick
from neuronemu.program import Instr, Program
from neuronemu.program.table import distinct
from neuronemu_isa import Buffer, Engine

__all__ = [
    "Accesses",
    "JIT_ABOVE",
    "RACE_PASSES",
    "check_races",
    "first_race",
    "uninitialized_reads",
    "UninitializedRead",
    "check_initialized",
    "check_outputs_written",
    "unwritten_outputs",
    "UnwrittenOutput",
]


def _clocks(program: Program) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per instruction: its stream number, its position on the stream, and its vector clock
    (for each stream, how many of that stream's instructions it follows)."""
    streams: dict[str, int] = {}
    for ins in program.instrs:
        streams.setdefault(ins.stream, len(streams))
    n, k = len(program.instrs), len(streams)
    clock = np.zeros((n, k), dtype=np.int64)
    stream_of = np.zeros(n, dtype=np.int64)
    position = np.zeros(n, dtype=np.int64)
    last = [-1] * k
    for ins in program.instrs:
        s = streams[ins.stream]
        i = ins.index
        row = clock[last[s]].copy() if last[s] >= 0 else np.zeros(k, dtype=np.int64)
        for d in ins.deps:
            np.maximum(row, clock[d], out=row)
        position[i] = row[s] + 1
        row[s] = position[i]
        clock[i] = row
        stream_of[i] = s
        last[s] = i
    return stream_of, position, clock


def check_races(
    program: Program,
    base: dict | None = None,
    accesses: Accesses | None = None,
    poll: Callable[[SourceSpan | None], None] | None = None,
) -> list[tuple[int, int]]:
    """Raise a RaceError for two unordered instructions touching the same bytes, one writing.

    Two DMA writes to HBM on the two cores of an LNC2 launch are left to the run, which
    knows the elements each writes (interleaved access patterns and run-time offsets are
    exact there): they race only where they write the same elements with different values
    (nki-library kernels that do not shard a small input write the whole output from both
    cores). Returns those pairs (earlier, later). `base`, `accesses`: `program.table().arrays()`
    and its `Accesses`, if made; `poll`, called every so often (the run's clocks) with the
    span of the instruction reached."""
    deferred: list[tuple[int, int]] = []
    race = first_race(program, deferred, base=base, accesses=accesses, poll=poll)
    if race is not None:
        raise race
    return deferred


def twin_writes(a: Instr, b: Instr) -> bool:
    """DMA writes to HBM from the two cores: settled by the run (`check_races`)."""
    da, db = a.operands.get("dst"), b.operands.get("dst")
    return (
        a.core != b.core
        and a.engine == b.engine == Engine.DMA
        and isinstance(da, View)
        and isinstance(db, View)
        and da.buffer == db.buffer == Buffer.HBM
        and [n for n, _ in a.views("out")] == [n for n, _ in b.views("out")] == ["dst"]
    )


def race_of(program: Program, first: int, second: int) -> RaceError:
    """The RaceError of two writes `twin_writes` deferred, found to write different values
    to the same elements."""
    a, b = program.table().instrs[first], program.table().instrs[second]
    race = _race(a, True, b, True, b.operands["dst"], _text(program))  # type: ignore[arg-type]
    return RaceError(
        race.message + "; the two cores write different values there", race.span, race.hint
    )


# Programs past this many instructions are checked for races by the jitted pass over flat
# arrays (neuronemu.jit.compiled.first_race); smaller ones by the plain one below, which needs no
# Numba (the same answers: tests/property/test_race_twins.py).
JIT_ABOVE = 20_000
# The jitted passes the race check calls (neuronemu.jit.compiled.LAZY).
RACE_PASSES = ("clocks", "first_race", "reuse_race")
# List entries the jitted pass looks at between two calls of its `poll` (about 10 ms' worth).
RACE_WORK = 1 << 23
# The jitted pass files the accesses of a tensor written somewhere and accessed more than
# GRID_ABOVE times by the cells of a grid, and compares an access only with those filed under
# its cells and the tensor's wide ones (over more than MAX_CELLS cells, or empty), and a wide
# one with all. Without it, an output written a column at a time (65,536 writes that never
# supersede each other) was compared pair by pair: 27 s. Inferred: a short list is walked
# faster than cells are worked out (the plain pass's accesses.Boxes does the same from 16).
GRID_ABOVE = 64
MAX_CELLS = 16


def first_race(
    program: Program,
    deferred: list[tuple[int, int]] | None = None,
    use_jit: bool | None = None,
    base: dict | None = None,
    accesses: Accesses | None = None,
    poll: Callable[[SourceSpan | None], None] | None = None,
) -> RaceError | None:
    """The first pair (in program order of the later access) of unordered instructions that
    touch the same bytes, one writing, as a RaceError; None when every such pair is ordered.
    With `deferred`, write pairs of `twin_writes` go there instead. `use_jit`: the jitted
    pass (None: past JIT_ABOVE instructions), which calls `poll` between its parts."""
    if use_jit is None:
        use_jit = len(program.table().instrs) > jit_worker.jit_above(JIT_ABOVE, *RACE_PASSES)
    if use_jit:
        return _first_race_arrays(program, deferred, base, accesses, poll)
    stream_arr, position_arr, clock_arr = _clocks(program)
    # (as lists: indexing them is several times faster than indexing arrays item by item)
    stream_of, position, clock = stream_arr.tolist(), position_arr.tolist(), clock_arr.tolist()

    def ordered(a: int, b: int) -> bool:  # a happens before b
        return clock[b][stream_of[a]] >= position[a]

    # Per tensor, the accesses not yet superseded: a read conflicts only with writes, so
    # read-only tensors (kernel inputs) cost nothing however often they are read. (Filed by
    # grid cell once many: an output written tile by tile is not compared pair by pair.)
    writes_of: dict[int, Boxes] = {}
    reads_of: dict[int, Boxes] = {}
    instrs = program.table().instrs
    for ins in instrs:
        i = ins.index
        for _, view in ins.views("in"):
            view = view.as_root()
            box = view.bounds()
            written = writes_of.get(view.tensor.id)
            if written:
                for _, (other, j) in written.candidates(box):
                    if j != i and overlap(box, other) and not ordered(j, i):
                        return _race(instrs[j], True, ins, False, view, _text(program))
            reads_of.setdefault(view.tensor.id, Boxes()).add(box, i)
        for _, view in ins.views("out"):
            view = view.as_root()
            box = view.bounds()
            tid = view.tensor.id
            for table, other_writes in ((writes_of, True), (reads_of, False)):
                entries = table.get(tid)
                if not entries:
                    continue
                for _, (other, j) in entries.candidates(box):
                    if j != i and overlap(box, other) and not ordered(j, i):
                        if deferred is not None and other_writes and twin_writes(instrs[j], ins):
                            deferred.append((j, i))
                            continue
                        return _race(instrs[j], other_writes, ins, True, view, _text(program))
            # Accesses this write covers and follows can no longer race with anything that
            # does not also race with this write.
            for table in (writes_of, reads_of):
                entries = table.get(tid)
                if entries:
                    entries.remove(
                        [
                            s
                            for s, (b, j) in entries.candidates(box)
                            if j != i and contains(box, b) and ordered(j, i)
                        ]
                    )
            writes_of.setdefault(tid, Boxes()).add(box, i)
    return _reuse_race(program, ordered)


def _first_race_arrays(
    program: Program,
    deferred: list[tuple[int, int]] | None,
    base: dict | None = None,
    accesses: Accesses | None = None,
    poll: Callable[[SourceSpan | None], None] | None = None,
) -> RaceError | None:
    """first_race by the jitted passes of neuronemu.jit.compiled."""
    from neuronemu.jit import compiled as _jit

    base = program.table().arrays() if base is None else base
    stream = base["stream"]
    position, clock = _jit.clocks(
        stream, base["dep_indptr"], base["dep_indices"], int(base["n_streams"])
    )
    acc = Accesses(program) if accesses is None else accesses
    instrs = program.table().instrs
    n = len(instrs)
    core, twin = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
    if program.cores > 1 and deferred is not None:  # (twin writes come from two cores)
        core[:] = [ins.core for ins in instrs]
        twin[:] = [_twin_writer(ins) for ins in instrs]
    capacity = 64 if deferred is not None else 0
    grid = acc.grid(GRID_ABOVE, MAX_CELLS)
    while True:
        pairs = np.zeros((capacity, 2), dtype=np.int64)
        # (access and filing numbers as int32: past 2**31 of them, at most 16 filings an
        # access, the accesses' boxes alone would take over 8 GB)
        after = np.full((2, len(acc.instr)), -1, dtype=np.int32)
        # [0]: reads, [1]: writes; [2], [3]: the wide ones of gridded tensors
        head = np.full((4, len(acc.ids)), -1, dtype=np.int64)
        tail = head.copy()
        chead = np.full((2, grid.n_cells), -1, dtype=np.int64)
        fnext = np.full(len(grid.cell), -1, dtype=np.int32)
        mark = np.full(len(acc.instr), -1, dtype=np.int32)
        a = n_deferred = 0
        while True:  # (in parts, the clocks read between them: see RACE_WORK)
            e, hit, n_deferred, a = _jit.first_race(
                acc.instr, acc.tensor, acc.write, acc.lo, acc.hi,
                stream, position, clock, core, twin, pairs, after, head, tail,
                grid.gridded, grid.ptr, grid.cell, grid.owner, chead, fnext, mark,
                a, n_deferred, RACE_WORK,
            )  # fmt: skip
            if e >= 0 or a >= len(acc.instr):
                a = hit
                break
            if poll is not None:  # (at the instruction the pass has reached)
                poll(instrs[int(acc.instr[a])].span)
        if n_deferred <= capacity:
            break
        capacity = n_deferred
    if deferred is not None:
        deferred.extend((int(j), int(i)) for j, i in pairs[:n_deferred])
    if e >= 0:
        first, second = instrs[int(acc.instr[e])], instrs[int(acc.instr[a])]
        view = acc.view(program, a).as_root()
        return _race(first, bool(acc.write[e]), second, bool(acc.write[a]), view, _text(program))
    if not program.reuses:
        return None
    # Each tile's first and last access per stream, its streams in order of first access.
    # (in place where it can: on a 1M-instruction program each of these arrays is 19 MB,
    # and they were this check's peak)
    key = acc.tensor * int(base["n_streams"])
    key += stream[acc.instr]
    order = np.argsort(key, kind="stable")
    key = key[order]
    instr = acc.instr[order]
    del order
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], key.size] - 1
    first_of, last_of = instr[starts], instr[ends]
    owner = key[starts] // int(base["n_streams"])
    by_first = np.lexsort((first_of, owner))
    first_of, last_of, owner = first_of[by_first], last_of[by_first], owner[by_first]
    span_ptr = np.searchsorted(owner, np.arange(len(acc.ids) + 1))
    none = len(acc.ids)  # a tile no instruction touches: no spans
    span_ptr = np.r_[span_ptr, span_ptr[-1]]
    pairs = acc.numbers(program.reuses, none).reshape(-1, 2)
    old, new = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
    r, f, last = _jit.reuse_race(old, new, span_ptr, first_of, last_of, stream, position, clock)
    if r < 0:
        return None
    return _reuse_error(
        program, program.reuses[r], program.table().instrs[f], program.table().instrs[last]
    )


def _twin_writer(ins: Instr) -> bool:
    """One side of `twin_writes`: a DMA write to HBM through `dst` only."""
    d = ins.operands.get("dst")
    return (
        ins.engine == Engine.DMA
        and isinstance(d, View)
        and d.buffer == Buffer.HBM
        and [n for n, _ in ins.views("out")] == ["dst"]
    )


def _reuse_race(program: Program, ordered) -> RaceError | None:
    """A tile placed over bytes a dead tile held: every access to the new tile must follow
    every access to the old one. It suffices that each stream's first access to the new tile
    follows each stream's last access to the old one."""
    if not program.reuses:
        return None
    wanted = {t for pair in program.reuses for t in pair}
    spans: dict[int, dict[str, list[Instr]]] = {}
    for ins in program.table().instrs:
        for role in ("in", "out"):
            for _, view in ins.views(role):
                tid = view.tensor.root.id
                if tid in wanted:
                    span = spans.setdefault(tid, {}).setdefault(ins.stream, [ins, ins])
                    span[1] = ins
    for old, new in program.reuses:
        for first_new, _ in spans.get(new, {}).values():
            for _, last_old in spans.get(old, {}).values():
                if last_old.index < first_new.index and not ordered(
                    last_old.index, first_new.index
                ):
                    return _reuse_error(program, (old, new), first_new, last_old)
    return None


def _reuse_error(
    program: Program, reuse: tuple[int, int], first_new: Instr, last_old: Instr
) -> RaceError:
    a, b = (program.placements[t] for t in reuse)
    lo, hi = max(a.offset, b.offset), min(a.offset + a.size, b.offset + b.size)
    buffer = b.tensor.buffer.value.upper()
    cores = bool(first_new.core or last_old.core)
    return RaceError(
        f"race on {buffer} bytes [{lo}, {hi}): {_named(first_new, cores)} "
        f"{first_new.spec.name} uses {b.tensor.name}, placed where "
        f"{a.tensor.name} was, while {_named(last_old, cores)} {last_old.spec.name} "
        f"({last_old.span}) may still use {a.tensor.name}, and no semaphore "
        "orders the two",
        first_new.span,
        hint=_ordering_hint(last_old, first_new, a.tensor.name, _text(program)),
    )


def _race(
    first: Instr, first_writes: bool, second: Instr, second_writes: bool, view: View, text: bool
) -> RaceError:
    verb = {True: "writes", False: "reads"}
    cores = bool(first.core or second.core)
    earlier = " in an earlier pass of their loop" if _carried(first, second) else ""
    return RaceError(
        f"race on {view.tensor.name}: {_named(second, cores)} {second.spec.name} "
        f"{verb[second_writes]} {view!r} while {_named(first, cores)} {first.spec.name} "
        f"({first.span}) "
        f"{verb[first_writes]} it{earlier}, and no semaphore orders the two",
        second.span,
        hint=_ordering_hint(first, second, view.tensor.name, text),
    )


def _named(ins: Instr, cores: bool) -> str:
    """`#7`, or `#7 (core 1)` when the two instructions' cores are to be named; a device
    loop's run of an instruction by the instruction's number (as `asm` writes it)."""
    return f"#{_number(ins)} (core {ins.core})" if cores else f"#{_number(ins)}"


def _number(ins: Instr) -> int:
    """The instruction's number in the program as written (a run's copy: what it runs)."""
    return ins.index if ins.origin < 0 else ins.origin


def _carried(first: Instr, second: Instr) -> bool:
    """Is `first`, run before `second`, a run of a device loop's body from an earlier pass
    (it runs an instruction no earlier in the program than `second` runs)?"""
    return 0 <= second.origin <= first.origin


def _text(program: Program) -> bool:
    """Whether the program was read from its text form (a .nasm file). Its instructions'
    spans may name the kernel lines `asm` wrote them from, so the spans cannot tell."""
    return str(program.file).endswith(".nasm")


def _ordering_hint(first: Instr, second: Instr, tensor: str, text: bool) -> str:
    """How to order the two, in the words of the file that was run: a text program's own
    syntax, else what an NKI kernel can write."""
    if text:
        a, b = _number(first), _number(second)
        if _carried(first, second):
            return (
                f"make #{b} wait for #{a} of the pass before (carry(@{a})), or use separate tiles"
            )
        return f"make #{b} wait for #{a} (wait({first.stream}@{a})), or use separate tiles"
    if first.core != second.core:
        return (
            f"the two cores touch the same bytes of {tensor}: give each core its own part "
            "(index it by nl.program_id(0)), or put nisa.core_barrier between the two"
        )
    return (
        "order them in the kernel (both in one `with nl.no_reorder():` block, or the second "
        "made to depend on the first), or use separate tiles"
    )


@dataclass
class UninitializedRead:
    """Never-written memory whose data reaches an HBM output."""

    instr: Instr  # the first instruction that read never-written memory on the way
    view: View
    first_index: tuple[int, ...]  # the first element it read that nothing wrote
    output: Instr | None = None  # the instruction that wrote the data out to HBM
    output_view: View | None = None

    def message(self) -> str:
        text = (
            f"{self.instr.spec.name} reads {self.view!r}, but nothing wrote "
            f"{self.view.tensor.name}{list(self.first_index)} before it"
        )
        if self.output is not None and self.output_view is not None:
            text += (
                f"; the result reaches {self.output_view!r} through "
                f"{_named(self.output, False)} "
                f"{self.output.spec.name} ({self.output.span})"
            )
        return text


def uninitialized_reads(
    program: Program, limit: int = 1, accesses: Accesses | None = None
) -> list[UninitializedRead]:
    """Never-written SBUF/PSUM (or output HBM) memory whose data reaches an HBM output.

    Validity is tracked per element through the program (in program order, which respects
    every wait): elementwise instructions pass it element by element, instructions that keep
    the partitions pass it row by row, others (matmul, transpose) all or nothing. Reading
    never-written padding whose results are never stored (a ragged tile computed whole) is
    not an error.

    A tensor whose every element is written is known to be so without looking (most reads
    are of such tensors), and an instruction whose inputs are all written writes its outputs
    whole: only the rest walks the per-element flags. With the program's `accesses`, a
    program each of whose reads follows a whole write of its tensor, or lies inside what one
    earlier write wrote, is known to read nothing unwritten at once (neuronemu.checks.written).
    """
    if accesses is not None and reads_written(program, accesses):
        return []
    valid: dict[int, np.ndarray] = {}  # made when a tensor is first partly written or read
    shapes: dict[int, tuple[int, ...]] = {}  # the flags' shape of each tensor that has them
    # Per tensor with flags: how many are still unset (None: not known since a partial write).
    unset: dict[int, int | None] = {}
    origin: dict[int, UninitializedRead] = {}
    found: list[UninitializedRead] = []
    granule = {t.id: t.dtype.itemsize for t in program.tensors if t.base is None}
    for t in program.tensors:  # one flag per the smallest item any view of the bytes reads
        if t.base is not None:
            granule[t.base.id] = min(granule[t.base.id], t.dtype.itemsize)
    for t in program.tensors:
        if t.kind not in ("input", "constant", "loopvar") and t.base is None:
            shapes[t.id] = mask_shape(t, granule[t.id])
            unset[t.id] = math.prod(shapes[t.id])

    def flags(tid: int) -> np.ndarray:
        mask = valid.get(tid)
        if mask is None:  # (a tensor written whole before has every flag set)
            mask = valid[tid] = np.full(shapes[tid], unset[tid] == 0, dtype=np.bool_)
        return mask

    def complete(tid: int) -> bool:  # every flag of the tensor set (or no flags kept)
        left = unset.get(tid, 0)
        if left is None:
            left = unset[tid] = int(valid[tid].size - np.count_nonzero(valid[tid]))
        return left == 0

    merges: dict[str, set[str]] = {}  # instruction kind -> its merge outputs
    for ins in program.table().instrs:
        tick(ins.span)  # (the run's clocks: a partly written tile's flags are walked each time)
        reads: list[tuple[View, np.ndarray | None]] = []  # None: all written
        by_name: dict[str, tuple[View, np.ndarray | None]] = {}
        source: UninitializedRead | None = None
        merged = merges.get(ins.spec.name)
        if merged is None:
            merged = merges[ins.spec.name] = {op.name for op in ins.spec.outputs if op.merge}
        for name, view in ins.views("in"):
            tid = view.tensor.root.id
            region = None
            if name not in merged and not complete(tid):
                region = read_mask(flags(tid), view)
                if region.all():
                    region = None
            reads.append((view, region))
            if ins.spec.validity is not None:
                by_name[name] = (view, region)
            if source is None and region is not None:
                source = origin.get(tid)
                if source is None:
                    local = (
                        np.unravel_index(int(np.argmin(region)), region.shape)
                        if region.ndim
                        else ()
                    )
                    source = UninitializedRead(ins, view, _absolute(view, local))
        whole = source is None  # every input written: so is every output element
        for k, (name, view) in enumerate(ins.views("out")):
            tid = view.tensor.root.id
            ok = None if whole else _propagate(view, reads)
            if ok is not None and k == 0 and not ok.all() and ins.spec.validity is not None:
                ok = _moved(ins, view, by_name, ok)
            if ok is not None and ok.all():
                ok = None
            if ok is not None:
                origin.setdefault(tid, source)  # type: ignore[arg-type]
                if not view.tensor.on_chip and view.tensor.kind != "input" and source:
                    found.append(
                        UninitializedRead(source.instr, source.view, source.first_index, ins, view)
                    )
                    if len(found) >= limit:
                        return found
            if tid not in shapes or (ok is None and complete(tid)):
                continue
            if ok is None and tid not in valid and view.tensor.base is None and view.is_full():
                unset[tid] = 0  # written whole at once: no flags needed
                continue
            # (counted over the view's flags, not the tensor's: a large output is written
            # a tile at a time)
            newly = set_mask(flags(tid), view, np.True_ if ok is None else ok)
            left = unset[tid]
            unset[tid] = None if newly is None or left is None else left - newly
    return found


def _moved(
    ins: Instr, out: View, reads: dict[str, tuple[View, np.ndarray | None]], coarse: np.ndarray
) -> np.ndarray:
    """The output's sound elements by the spec's own rule (data moved across partitions),
    or the coarse answer when the rule does not fit this form. `reads`: each input's view
    and its written elements (None: all)."""
    assert ins.spec.validity is not None
    attrs = {k: v for k, v in ins.attrs.items() if v is not None}
    regions = {
        name: np.ones(view.shape, np.bool_) if region is None else region
        for name, (view, region) in reads.items()
    }
    try:
        got = np.asarray(ins.spec.validity(**regions, **attrs), dtype=np.bool_)
    except (TypeError, ValueError):
        return coarse
    return got.reshape(out.shape) if got.size == out.size else coarse


def _propagate(out: View, reads: list[tuple[View, np.ndarray | None]]) -> np.ndarray:
    """Which elements of `out` are computed from written data only."""
    ok = np.ones(out.size, dtype=np.bool_)
    parts = out.shape[0] if out.shape else 1
    for view, region in reads:
        if region is None:  # all written
            continue
        if region.size == out.size:  # elementwise, or a reshaping copy
            ok &= region.reshape(-1)
        elif view.shape and view.shape[0] == parts and out.size % parts == 0:
            rows_ok = region.reshape(parts, -1).all(axis=1)  # per partition (row reductions)
            ok &= np.repeat(rows_ok, out.size // parts)
        else:  # across partitions (matmul, transpose): all or nothing
            ok[:] = False
    return ok.reshape(out.shape) if out.shape else ok


def _absolute(view: View, local: tuple) -> tuple[int, ...]:
    return view.tensor_index(local)


@dataclass(frozen=True)
class UnwrittenOutput:
    """An output the kernel allocated and returns whose elements are not all written."""

    tensor: Any
    region: str  # the box of the never-written elements, e.g. out[384:512, 0:256]
    missing: int  # how many elements
    total: int

    def message(self) -> str:
        return (
            f"output {self.tensor.label!r} is never written at {self.region} "
            f"({self.missing:,} of {self.total:,} elements)"
        )


def unwritten_outputs(program: Program, accesses: Accesses | None = None) -> list[UnwrittenOutput]:
    """Outputs (allocated by the kernel, not passed in) with elements no instruction writes:
    a tile loop one short, a ragged edge forgotten. Each with the box of what is missing.
    (With the program's `accesses`, only the writes to outputs are looked at, and an output
    that only whole boxes write is checked on the grid their edges cut: `_boxes_cover`.)"""
    roots = {t.id: t for t in program.outputs if t.kind != "input" and t.base is None}
    if not roots:
        return []
    shapes = {tid: mask_shape(t, t.dtype.itemsize) for tid, t in roots.items()}
    found: dict[int, UnwrittenOutput] = {}
    masked = set(roots)  # the outputs checked on a flag per element
    boxes: list[int] = []  # ... and their writes of whole boxes (accesses)
    if accesses is None:
        views = (view for ins in program.table().instrs for _, view in ins.views("out"))
    else:
        mine = accesses.numbers(list(roots), -1)
        picked = np.flatnonzero(accesses.write & np.isin(accesses.tensor, mine))
        whole = accesses.plain[picked]  # (a write of every element of its box)
        tids = accesses.ids[accesses.tensor[picked]]
        masked = set(tids[~whole].tolist())  # (some write of theirs is not a box)
        for tid, t in roots.items():
            if tid not in masked:
                ndim = len(shapes[tid])
                at = picked[whole & (tids == tid)]
                gap = _boxes_cover(shapes[tid], accesses.lo[at, :ndim], accesses.hi[at, :ndim])
                if gap is not None:
                    found[tid] = UnwrittenOutput(t, f"{t.label}[{gap[0]}]", *gap[1:])
        boxes = picked[whole & np.isin(tids, list(masked))].tolist()
        views = (accesses.view(program, a) for a in picked[~whole].tolist())
    written = {tid: np.zeros(shapes[tid], np.bool_) for tid in masked}
    for a in boxes:  # (the box, without making its view)
        mask = written[int(accesses.ids[accesses.tensor[a]])]  # type: ignore[union-attr]
        bounds = zip(accesses.lo[a, : mask.ndim].tolist(), accesses.hi[a, : mask.ndim].tolist())  # type: ignore[union-attr]
        mask[tuple(slice(lo, hi) for lo, hi in bounds)] = True
    for view in views:
        flags = written.get(view.tensor.root.id)
        if flags is not None:
            write_mask(flags, view, True)
    for tid, mask in written.items():
        if mask.all():
            continue
        missing = ~mask
        where = np.nonzero(missing)
        box = ", ".join(f"{int(ix.min())}:{int(ix.max()) + 1}" for ix in where)
        found[tid] = UnwrittenOutput(
            roots[tid], f"{roots[tid].label}[{box}]", int(missing.sum()), missing.size
        )
    return [found[tid] for tid in roots if tid in found]


def _boxes_cover(
    shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray
) -> tuple[str, int, int] | None:
    """Do the boxes [lo, hi) (one per row) cover every element of `shape`? None if so, else
    the box of the elements none covers (as "a:b, c:d"), how many they are and how many
    elements there are. Worked out on
    the grid the boxes' edges cut each dim into (a cell is covered whole or not at all)."""
    if len(lo) == 0:  # (no write at all: the table may be narrower than the output)
        total = math.prod(shape)
        return ", ".join(f"0:{n}" for n in shape), total, total
    cuts = [
        distinct(np.concatenate(([0, n], np.clip(lo[:, d], 0, n), np.clip(hi[:, d], 0, n))))
        for d, n in enumerate(shape)
    ]
    grid = np.zeros([len(c) - 1 for c in cuts], dtype=np.bool_)
    first = [np.searchsorted(c, lo[:, d]) for d, c in enumerate(cuts)]
    last = [np.searchsorted(c, hi[:, d]) for d, c in enumerate(cuts)]
    for cell_lo, cell_hi in zip(np.stack(first, 1).tolist(), np.stack(last, 1).tolist()):
        grid[tuple(slice(a, b) for a, b in zip(cell_lo, cell_hi))] = True
    if grid.all():
        return None
    where = np.nonzero(~grid)
    box = ", ".join(f"{int(c[ix.min()])}:{int(c[ix.max() + 1])}" for c, ix in zip(cuts, where))
    volume = np.ones(grid.shape, dtype=np.int64)  # (elements per cell)
    for d, c in enumerate(cuts):
        volume = volume * np.diff(c).reshape([-1 if k == d else 1 for k in range(grid.ndim)])
    return box, int(volume[~grid].sum()), math.prod(shape)


def check_outputs_written(program: Program, accesses: Accesses | None = None) -> None:
    for gap in unwritten_outputs(program, accesses):
        raise MemoryAccessError(
            gap.message(),
            gap.tensor.span,
            hint="write every element of the output (a loop one tile short? a ragged edge?), "
            "or run with --allow-uninit to leave them unwritten (they read NaN)",
        )


def check_initialized(program: Program, accesses: Accesses | None = None) -> None:
    for read in uninitialized_reads(program, accesses=accesses):
        raise MemoryAccessError(
            f"uninitialized read: {read.message()}",
            read.instr.span,
            hint="write it first (nl.zeros, nisa.memset, a DMA...), or run with --allow-uninit "
            "to read NaN as AWS's simulator does",
        )
