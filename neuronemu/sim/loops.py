"""Device loops as the machine runs them: the order of a run, and that run as a flat program.

A program with device loops holds each body once. `machine_order` is the sequence of
instruction indices the machine executes, deciding each loop from the registers as the run
reaches it (so it is driven by the executor, which keeps the registers up to date).
`executed_program` turns one such run into the straight-line program the timing model
schedules: one copy of an instruction per execution, with each dependency on the latest
copy of the instruction it names (within an iteration, on the previous iteration for the
loop-carried ones).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterator, Union

import numpy as np

from neuronemu.errors import BudgetError
from neuronemu.ir import REGISTERS, View
from neuronemu.jit import worker as jit_worker
from neuronemu.program import Instr, Loop, Program
from neuronemu.program.lazy import Instrs, Later
from neuronemu.program.pseudo import DEVICE_PRINT
from neuronemu.program.table import passes_repeated, run_copy

__all__ = ["deciding", "machine_order", "executed_program"]

# A region of the program: runs of plain instructions and loops with their own regions.
_Item = Union[range, tuple[Loop, list]]


def _regions(loops: list[Loop], begin: int, end: int, k: int = 0) -> tuple[list[_Item], int]:
    items: list[_Item] = []
    i = begin
    while i < end:
        if k < len(loops) and loops[k].begin == i:
            loop = loops[k]
            body, k = _regions(loops, loop.begin, loop.end, k + 1)
            items.append((loop, body))
            i = loop.end
        else:
            stop = loops[k].begin if k < len(loops) and loops[k].begin < end else end
            items.append(range(i, stop))
            i = stop
    return items, k


def machine_order(
    program: Program,
    read: Callable[[View], int],
    write: Callable[[View, int], None],
    max_instructions: int,
    entries: list[tuple[int, int]] | None = None,
    runs: bool = False,
) -> Iterator[Any]:
    """The instruction indices in the order the machine runs them (with `runs`, each straight
    run of them as a range). `read` gives a register's value now; `write` sets a loop's
    variable. Raises BudgetError past `max_instructions` executed instructions and loop
    passes (a loop that never ends). `entries` receives (instructions run so far, loop
    number) each time a loop is reached."""
    if not program.loops:
        everything = range(len(program.raw_instrs))
        if runs:
            yield everything
        else:
            yield from everything
        return
    loops = sorted(program.loops, key=lambda lp: (lp.begin, -lp.end))
    number = {id(lp): k for k, lp in enumerate(program.loops)}
    items, _ = _regions(loops, 0, len(program.instrs))
    count = 0
    ran = 0  # instructions yielded so far

    def value(v: int | View) -> int:
        return v if isinstance(v, int) else read(v)

    def passes(loop: Loop) -> Iterator[None]:
        if loop.kind == "for":
            i = value(loop.lower)
            while i < value(loop.upper):
                assert loop.var is not None
                write(loop.var, i)
                yield None
                i += loop.step
        elif loop.kind == "while":
            assert loop.var is not None and loop.cond is not None
            r = value(loop.lower)
            while r != 0:
                write(loop.var, r)
                yield None
                r = read(loop.cond)
        elif (value(loop.cond) != 0) == (loop.kind == "if"):  # type: ignore[arg-type]
            yield None

    def spend(n: int, span) -> None:
        nonlocal count
        if count <= jit_worker.START_ABOVE < count + n:
            # (a long run: its checks and schedule will take the jitted passes; Numba loads
            # in the worker meanwhile, where it can, as for a long trace)
            jit_worker.expect(count + n)
        count += n
        if count > max_instructions:
            raise BudgetError(
                f"the kernel executes more than {max_instructions:,} instructions "
                "(a device loop that does not end?)",
                span,
                hint="check the loop's bound or condition, or raise it with --limit instructions=N",
            )

    def run(region: list[_Item]) -> Iterator[int | range]:
        nonlocal ran
        for item in region:
            if isinstance(item, range):
                spend(len(item), program.instrs[item.start].span)
                ran += len(item)
                if runs:
                    yield item
                else:
                    yield from item
            else:
                loop, body = item
                if entries is not None:
                    entries.append((ran, number[id(loop)]))
                for _ in passes(loop):
                    spend(1, loop.span)  # a pass counts, even of an empty region
                    yield from run(body)

    yield from run(items)


def deciding(program: Program) -> set[int]:
    """The instructions whose values decide a run: those that write a register (a loop's
    bounds and conditions, dynamic offsets) or print, and every instruction that writes a
    tensor one of them reads, transitively. The others' values change neither the order
    `machine_order` gives nor what prints: a timing-only run executes only these (its
    checks and schedule read no values).

    Every writer of such a tensor, not only those the reader depends on: what a reader sees
    is the last write that ran, and that may be one its dependencies reach only through
    order (a covering write in a body run zero times, or a branch not taken, stands
    between them), or one on the other core (their dependencies are not kept, the bytes
    pass through shared HBM). Taking more than needed costs only time."""
    instrs = program.raw_instrs

    def tensors(ins: Instr, role: str) -> set[int]:
        return {v.as_root().tensor.id for _, v in ins.views(role)}

    writers: dict[int, list[int]] = {}
    for ins in instrs:
        for tid in tensors(ins, "out"):
            writers.setdefault(tid, []).append(ins.index)
    todo = [
        ins.index
        for ins in instrs
        if ins.spec is DEVICE_PRINT
        or any(v.tensor.kind_of_buffer is REGISTERS for _, v in ins.views("out"))
    ]
    found = set(todo)
    read: set[int] = set()  # (the tensors whose writers are found)
    while todo:
        for tid in tensors(instrs[todo.pop()], "in") - read:
            read.add(tid)
            for w in writers.get(tid, ()):
                if w not in found:
                    found.add(w)
                    todo.append(w)
    return found


def executed_program(
    program: Program, order: list[int], entries: list[tuple[int, int]] | None = None
) -> Program:
    """The run `order` of `program` as a straight-line program (no loops). `entries` (from
    `machine_order`) says when each loop was reached: a copy of a body's instruction from
    before the loop was last reached is not what an instruction after the loop follows
    (the body may have run zero times since)."""
    if not program.loops:
        return program
    latest: dict[int, int] = {}  # instruction -> index of its latest copy
    instrs = Instrs()
    streams: list[str] = []  # (each copy's: read without making a copy left for later)
    inside: dict[int, list[int]] = {}  # instruction -> the loops whose body holds it
    for k, loop in enumerate(program.loops):
        for i in range(loop.begin, loop.end):
            inside.setdefault(i, []).append(k)
    reached = [-1] * len(program.loops)  # loop -> copies made when it was last reached
    forms: dict[int, Any] = {}  # instruction -> the form its runs share
    pending = list(entries or [])[::-1]

    def copy_of(d: int, s: int) -> int | None:
        """The latest copy of `d`, if `s` (running now) follows it, not an older pass."""
        k = latest.get(d)
        if k is None:
            return None
        held = inside.get(d, ())
        if held:
            around = inside.get(s, ())
            if any(k < reached[lp] for lp in held if lp not in around):
                return None
        return k

    # What an instruction that has not run stands in for, by (instruction, loops around the
    # one asking): the instructions found, kept until something they were found by changes
    # (an instruction walked through runs, or a loop holding one found is reached again).
    # Without it, 6,000 instructions after a zero-trip loop around a 6,000-long chain walked
    # the chain each (36 M steps, 35-46 s); with it each chain is walked once.
    found: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
    on_run: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    on_reach: dict[int, list[tuple[int, tuple[int, ...]]]] = {}

    def stand_ins(d: int, s: int) -> set[int]:
        """For an instruction that has not run (a body run zero times): what it followed."""
        around = tuple(inside.get(s, ()))
        key = (d, around)
        front = found.get(key)
        if front is None:
            front = found[key] = walk(d, s, key)
        out: set[int] = set()
        for e in front:
            out.add(latest[e])
        return out

    def walk(d: int, s: int, key: tuple[int, tuple[int, ...]]) -> tuple[int, ...]:
        front: list[int] = []
        seen = {d}
        todo = [d]
        while todo:
            e = todo.pop()
            if e != d and copy_of(e, s) is not None:
                front.append(e)
                for lp in inside.get(e, ()):
                    if lp not in key[1]:
                        on_reach.setdefault(lp, []).append(key)
                continue
            on_run.setdefault(e, []).append(key)
            for f in program.instrs[e].deps:
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
        return tuple(front)

    def changed(keys: list[tuple[int, tuple[int, ...]]] | None) -> None:
        for key in keys or ():
            found.pop(key, None)

    runs = _repeated_passes(program.loops, order)
    # (a run's passes from the third on: left to be made when read, `_Passes`)
    later = {f + 2 * period: (f, period, count) for f, period, count in runs if count >= 2}
    at_ = 0
    while at_ < len(order):
        while pending and pending[-1][0] <= len(instrs):
            at, lp = pending.pop()
            reached[lp] = at
            changed(on_reach.pop(lp, None))
        run_of = later.get(at_)
        # (not where a loop is reached inside them: what follows what changes there)
        left = 0 if run_of is None else (run_of[2] - 1) * run_of[1]
        if run_of is not None and not (pending and pending[-1][0] < at_ + left):
            first, period, count = run_of
            body = [program.instrs[i] for i in order[first : first + period]]
            instrs.add_later(_Passes(body, instrs, first, period, forms), left)
            streams.extend([ins.stream for ins in body] * (count - 1))
            for j in range(period):  # (the last pass's copies: what comes after follows)
                latest[order[first + j]] = first + count * period + j
            at_ += left
            continue
        s = order[at_]
        at_ += 1
        ins = program.instrs[s]
        deps: set[int] = set()
        for d in ins.deps:
            got = copy_of(d, s)
            if got is not None:
                deps.add(got)
            else:
                deps |= stand_ins(d, s)
        for d in ins.carried:
            got = latest.get(d)
            if got is not None:
                deps.add(got)
        run = run_copy(ins, forms)
        run.index = len(instrs)
        run.deps = tuple(sorted(deps))
        run.carried = ()
        waits: dict[str, int] = {}
        for d in run.deps:
            stream = streams[d]
            if stream != run.stream:
                waits[stream] = max(waits.get(stream, -1), d)
        run.waits = tuple(sorted(waits.values()))
        latest[s] = run.index
        changed(on_run.pop(s, None))
        instrs.append(run)
        streams.append(run.stream)
    # (the copies took the reuse dependencies: reading the instructions settled them)
    executed = program.renumbered(instrs, loops=[])
    passes_repeated(executed, runs)
    return executed


class _Passes(Later):
    """The passes of a run over a loop body (`_repeated_passes`) from the third on, made when
    read: slot `index`'s is the body's instruction again, its dependencies the second
    pass's moved on by the passes between (within the run, each pass follows the one before
    and the instructions before the run as the second does)."""

    __slots__ = ("body", "instrs", "first", "period", "forms", "_second")

    def __init__(
        self, body: list[Instr], instrs: Instrs, first: int, period: int, forms: dict[int, Any]
    ):
        self.body, self.instrs, self.forms = body, instrs, forms  # (body: the originals)
        self.first, self.period = first, period
        self._second: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _moved(self, index: int, deps: tuple[int, ...]) -> tuple[int, ...]:
        by = ((index - self.first) // self.period - 1) * self.period
        first = self.first
        return tuple([d + by if d >= first else d for d in deps])

    def _twin(self, index: int) -> Instr:
        """The second pass's copy of slot `index`'s instruction."""
        return self.instrs[self.first + self.period + (index - self.first) % self.period]

    def make(self, index: int) -> Instr:
        twin = self._twin(index)
        run = run_copy(self.body[(index - self.first) % self.period], self.forms)
        run.index = index
        run.deps = self._moved(index, twin.deps)
        run.waits = self._moved(index, twin.waits)
        run.carried = ()
        return run

    def deps_at(self, index: int) -> tuple[int, ...]:
        return self._moved(index, self._twin(index).deps)

    def deps_block(self, index: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self._second is None:
            second = self.instrs[self.first + self.period : self.first + 2 * self.period]
            deps = [ins.deps for ins in second]
            counts = np.fromiter(map(len, deps), np.int64, len(deps))
            flat = np.fromiter(chain.from_iterable(deps), np.int64, int(counts.sum()))
            self._second = (counts, flat, flat >= self.first)
        counts, flat, inside = self._second
        slots = np.arange(index, index + n, dtype=np.int64) - self.first
        j, k = slots % self.period, slots // self.period
        per = counts[j]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[j]
        total = int(per.sum())
        begin = np.concatenate(([0], np.cumsum(per)[:-1]))
        at = np.repeat(starts - begin, per) + np.arange(total, dtype=np.int64)
        by = np.repeat((k - 1) * self.period, per)
        return per, flat[at] + by * inside[at]


def _repeated_passes(loops: list[Loop], order: list[int]) -> list[tuple[int, int, int]]:
    """The runs of two or more consecutive passes over the body of a loop that holds no
    other (whose every pass runs its whole body in order) in the run `order`: (position of
    the first pass, body length, passes after the first), in order."""
    ran = np.asarray(order, dtype=np.int64)
    runs = []
    for loop in loops:
        period = loop.end - loop.begin
        if period <= 0 or any(
            loop.begin <= other.begin and other.end <= loop.end and other is not loop
            for other in loops
        ):
            continue
        starts = np.flatnonzero(ran[: len(ran) - period + 1] == loop.begin)
        if len(starts) < 2:
            continue
        whole = (ran[starts[:, None] + np.arange(period)] == np.arange(loop.begin, loop.end)).all(1)
        starts = starts[whole]
        # (passes back to back: a run of them goes on while the next starts where one ends)
        breaks = np.flatnonzero(np.diff(starts) != period) + 1
        for group in np.split(starts, breaks):
            if len(group) >= 2:
                runs.append((int(group[0]), period, len(group) - 1))
    return sorted(runs)
