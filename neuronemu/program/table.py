"""A finished program as columns: the one view of it the passes after the build read (the
scheduler, the race and read checks, the critical path, the report).

A program made by replaying loops (neuronemu.replay) holds few distinct instructions and many
repeats of them: `Program.repeats` says which instructions repeat which, on which tiles,
moved on by how much. This module is the one place, outside replay/, that reads those
records: it turns them into per-instruction columns (the instruction each one repeats, the
one whose form it has, dependencies as CSR, streams, costs, every operand access with its
tensor and box), and answers per-instruction questions asked once per distinct instruction
(`per_instr`, `summed`, `by_form`). The passes see instructions and columns only.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from neuronemu.ir import IndirectView, View
from neuronemu.program import reuse_deps
from neuronemu.program.lazy import deps_csr
from neuronemu.replay.records import Form, Repeated

if TYPE_CHECKING:
    from neuronemu.program import Instr, Program

__all__ = [
    "Rows",
    "Table",
    "by_form",
    "distinct",
    "instr_form",
    "operand_form",
    "passes_repeated",
    "run_copy",
    "shared_form",
]

T = TypeVar("T")


@dataclass
class Rows:
    """Columns with one row per operand access (`Table.rows`): the instruction, the root
    tensor's id, the box [lo, hi) per dim (padded with [0, 1)), and `extra` columns that
    depend on the instruction's form alone."""

    instr: np.ndarray
    tensor: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    extra: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.instr)

    def cut(self, first: int) -> Rows:
        """The rows of instructions `first` on (rows in program order)."""
        k = int(np.searchsorted(self.instr, first))
        return Rows(
            self.instr[k:],
            self.tensor[k:],
            self.lo[k:],
            self.hi[k:],
            tuple(c[k:] for c in self.extra),
        )

    @staticmethod
    def joined(parts: list[Rows], consume: bool = False) -> Rows:
        """The rows of `parts`, in order (lo and hi padded with [0, 1) past a part's dims),
        copied into arrays made once. `consume`: each part's columns are let go of as they
        are copied (the parts are left empty): the parts and the whole were the largest
        thing alive at once in the checks (on the 1M-instruction matmul, 110 MB more in use
        after the race check)."""
        dims = max(p.lo.shape[1] for p in parts)
        columns = [[p.instr, p.tensor, p.lo, p.hi, *p.extra] for p in parts]
        gone = np.zeros(0, dtype=np.int64)
        if consume:
            for p in parts:  # (the arrays are `columns`' alone now)
                p.instr = p.tensor = gone
                p.lo = p.hi = gone.reshape(0, 1)
                p.extra = ()
        total = sum(len(cols[0]) for cols in columns)
        out: list[np.ndarray] = []
        for k in range(len(columns[0])):
            dtype = np.result_type(*(cols[k] for cols in columns))
            if k in (2, 3):
                whole = np.full((total, dims), 0 if k == 2 else 1, dtype=dtype)
            else:
                whole = np.empty(total, dtype=dtype)
            at = 0
            for cols in columns:
                part = cols[k]
                if whole.ndim == 2:
                    whole[at : at + len(part), : part.shape[1]] = part
                else:
                    whole[at : at + len(part)] = part
                at += len(part)
                cols[k] = gone  # (let go of as soon as copied, where nothing else holds it)
            out.append(whole)
        return Rows(out[0], out[1], out[2], out[3], tuple(out[4:]))


class Table:
    """The columns of a finished program (`Program.table()`). `instrs`: its instructions,
    whose `deps` may still lack the reuse dependencies (the `arrays` have them)."""

    def __init__(self, program: Program):
        # (a weak reference: the program keeps its table, which must not keep the program
        # alive after its last use; a run's GC settings leave such cycles for long)
        self._program = weakref.ref(program)
        self.arch = program.arch
        self.instrs: list[Instr] = program.raw_instrs
        self.n = len(self.instrs)
        self._repeats: list[Repeated] = program.repeats
        self._base: np.ndarray | None = None
        self._form_base: np.ndarray | None = None

    # -- which instruction stands for which -------------------------------------------------

    @property
    def base(self) -> np.ndarray:
        """Per instruction, the one it repeats (a replayed loop's iteration has its base's
        kind, engine, queue, core, costs and source line), or its own index."""
        if self._base is None:
            self._base = self._sources(None)
        return self._base

    @property
    def form_base(self) -> np.ndarray:
        """`base`, where the repeat has its base's form as well: for what the form decides
        (checks, costs, FLOPs, HBM bytes); else its own index."""
        if self._form_base is None:
            self._form_base = self._sources(lambda rep: np.array(rep.alike, dtype=np.bool_))
        return self._form_base

    def base_where(
        self, still: Callable[[Instr], Sequence[str]], whole: bool = False
    ) -> np.ndarray:
        """`form_base`, where a repeat takes its base's answer only if the operands
        `still(base)` names start on the same first-dim index (partition) in every repeat
        (`whole`: are the same box, of the same tensor or of the tile its iteration made in
        its base's place); for what depends on the form and on where those start."""

        def moves(move: tuple[int, ...]) -> bool:
            return any(move) if whole else bool(move) and move[0] != 0

        def keep(rep: Repeated) -> np.ndarray:
            out = np.array(rep.alike, dtype=np.bool_)
            for j, sources in enumerate(rep.sources):
                if out[j]:
                    names = still(self.instrs[rep.base + j])
                    out[j] = all(k in sources and not moves(sources[k][1]) for k in names)
            return out

        return self._sources(keep)

    def _sources(self, keep: Callable[[Repeated], np.ndarray] | None) -> np.ndarray:
        source = np.arange(self.n, dtype=np.int64)
        for rep in self._repeats:  # (in program order: a block's base may hold inner blocks)
            end = rep.start + rep.count * rep.period
            moved = np.tile(source[rep.base : rep.start], rep.count)
            if keep is not None:
                kept = keep(rep)
                if not kept.all():
                    moved = np.where(np.tile(kept, rep.count), moved, source[rep.start : end])
            source[rep.start : end] = moved
        return source

    def originals(self, source: np.ndarray | None = None) -> list[int]:
        """The instructions that stand for themselves in `source` (default: `base`)."""
        source = self.base if source is None else source
        return np.flatnonzero(source == np.arange(len(source))).tolist()

    # -- per-instruction answers, asked once per instruction that stands for others ----------

    def per_instr(
        self, get: Callable[[Instr], Any], dtype: Any, source: np.ndarray | None = None
    ) -> np.ndarray:
        """`get(ins)` of every instruction as an array, asked only of the instructions
        `source` (default: `base`) maps to: `get` must depend only on what the others share
        with them."""
        instrs = self.instrs
        if not self._repeats:
            return np.fromiter(map(get, instrs), dtype, self.n)
        source = self.base if source is None else source
        own = self.originals(source)
        out = np.empty(self.n, dtype=dtype)
        out[own] = np.fromiter((get(instrs[i]) for i in own), dtype, len(own))
        return out[source]

    def summed(self, get: Callable[[Instr], Any], source: np.ndarray, start: Any = 0) -> Any:
        """`start` plus `get(ins)` over every instruction, each giving its `source`'s."""
        instrs = self.instrs
        weights = np.bincount(source, minlength=self.n)
        own = np.flatnonzero(weights)
        got = (get(instrs[i]) * w for i, w in zip(own.tolist(), weights[own].tolist()))
        return sum(got, start)

    def engine_counts(self, order: Sequence[str]) -> dict[str, int]:
        """Instructions per engine name (`order`; every DMA queue counted as "dma")."""
        counts = {name: 0 for name in order}
        weights = np.bincount(self.base, minlength=self.n)
        for i in np.flatnonzero(weights).tolist():
            engine = self.instrs[i].engine.value
            counts["dma" if engine == "dma" else engine] += int(weights[i])
        return counts

    def operand_tensors(
        self, rows: np.ndarray, name_of: Callable[[Instr], str | None]
    ) -> np.ndarray:
        """Per instruction, the id of the tensor its operand `name_of(ins)` reads (-1: none,
        or not in `rows`); asked only of the rows that repeat none, the repeats given the
        tiles their iterations took."""
        instrs, base = self.instrs, self.base
        # (every instruction that repeats the same as a row is worked out: a row's value comes
        # from its block's base, which may be a repeat of an inner block)
        asked = np.isin(base, base[rows])
        tensor = np.full(self.n, -1, dtype=np.int64)
        for i in np.flatnonzero(asked & (base == np.arange(self.n))).tolist():
            name = name_of(instrs[i])
            t = instrs[i].tensor_of(name) if name else None
            tensor[i] = -1 if t is None else t.id
        for rep in self._repeats:  # (in program order, as `base`: inner blocks first)
            end = rep.start + rep.count * rep.period
            for j in np.flatnonzero(asked[rep.base : rep.start]).tolist():
                name = name_of(instrs[rep.base + j])
                position = rep.sources[j].get(name, (-1,))[0] if name else -1
                moved = rep.ids[:, position] if position >= 0 else tensor[rep.base + j]
                tensor[rep.start + j : end : rep.period] = moved
        out = np.full(self.n, -1, dtype=np.int64)
        out[rows] = tensor[rows]
        return out

    # -- columns -----------------------------------------------------------------------------

    def arrays(self) -> dict[str, np.ndarray]:
        """Streams (numbered in the order of `Program.streams`), costs, DMA or not, and the
        dependencies with the reuse dependencies as CSR: the scheduler's and the race
        check's plain arrays. Made anew on each call, from the instructions' dependencies
        as they are then (the pipeline makes them once and passes them on)."""
        from neuronemu.program import stream_key

        program, instrs, n = self._program(), self.instrs, self.n
        assert program is not None, "a program's table outlived it"
        names: dict[str, int] = {}
        of = self.per_instr(lambda i: names.setdefault(i.stream, len(names)), np.int64)
        order = sorted(names, key=stream_key)
        renumber = np.zeros(len(names), dtype=np.int64)
        renumber[[names[name] for name in order]] = np.arange(len(order))
        indptr, indices = deps_csr(instrs)  # (the instructions not made yet left so)
        if program.reuse_deps is not None:
            indptr, indices = reuse_deps.merged(indptr, indices, program.reuse_deps, n)
        return {
            "stream": renumber[of],
            "cost_ns": self.per_instr(lambda i: i.ns, np.float64),
            "is_dma": self.per_instr(lambda i: i.engine.value == "dma", np.bool_),
            "dep_indptr": indptr,
            "dep_indices": indices,
            "n_streams": np.int64(len(order)),
            "stream_names": np.array(order, dtype=object),
        }

    def rows(
        self,
        listed: Callable[[Sequence[Instr]], Rows],
        names: Callable[[Instr], list[str]],
    ) -> Rows:
        """One row per operand access of every instruction, in program order: `listed(instrs)`
        gives the rows of instructions one by one, in the order of `names(ins)` (the
        operands each accesses); a replayed block's repeats are made from their base's rows,
        on the tiles each iteration took, boxes moved on by their steps."""
        instrs = self.instrs
        parts: list[Rows] = []
        at = 0
        for rep in self._repeats:
            parts.append(listed(instrs[at : rep.start]))
            parts.append(self._repeated(rep, _rows_from(parts, rep.base), names))
            at = rep.start + rep.count * rep.period
        parts.append(listed(instrs[at:]))
        return Rows.joined(parts, consume=True)

    def _repeated(self, rep: Repeated, base: Rows, names: Callable[[Instr], list[str]]) -> Rows:
        position: list[int] = []
        moves: list[tuple[int, ...]] = []
        for j, ins in enumerate(self.instrs[rep.base : rep.base + rep.period]):
            sources = rep.sources[j]
            for name in names(ins):
                p, moved = sources[name]
                position.append(p)
                moves.append(moved)
        dims = base.lo.shape[1]
        move = np.zeros((len(moves), dims), dtype=np.int64)
        for a, m in enumerate(moves):
            move[a, : len(m)] = m
        pos = np.array(position, dtype=np.int64)
        steps = np.arange(1, rep.count + 1, dtype=np.int64)  # from the base
        instr = base.instr[None, :] + (steps * rep.period)[:, None]
        if rep.ids.shape[1]:
            tensor = np.where(pos >= 0, rep.ids[:, np.maximum(pos, 0)], base.tensor[None, :])
        else:  # (the iterations take no tiles)
            tensor = np.broadcast_to(base.tensor, (rep.count, len(pos)))
        shift = steps[:, None, None] * move[None, :, :]
        n = rep.count * len(pos)
        return Rows(
            instr.reshape(n),
            tensor.reshape(n),
            (base.lo[None] + shift).reshape(n, dims),
            (base.hi[None] + shift).reshape(n, dims),
            tuple(np.tile(c, rep.count) for c in base.extra),
        )


def _rows_from(parts: list[Rows], first: int) -> Rows:
    """The rows of instructions `first` on, from `parts` (in program order, the last ones
    reaching the latest instruction): a repeated block's base, listed already (or made from
    an inner block's base), is not listed again."""
    taken: list[Rows] = []
    for p in reversed(parts):
        if not len(p):
            continue
        if p.instr[0] >= first:
            taken.append(p)
            continue
        taken.append(p.cut(first))
        break
    taken.reverse()
    if not taken:
        return parts[-1]  # (an empty part: the base has no accesses)
    return Rows.joined(taken)


# -- forms: what an instruction's checks and costs depend on ---------------------------------


def operand_form(v: Any) -> tuple | None:
    """What an operand's checks and costs can depend on: its tensor's shape, its dtype,
    buffer and strides, and its element counts (not where it starts); None for a run-time
    (indirect) view."""
    if isinstance(v, IndirectView):
        return None
    if type(v) is View:  # its box says it without working out the pattern
        return (
            v.tensor.shape,
            v.dtype.name,
            v.buffer,
            v.kept,
            tuple((b - a, c) for a, b, c in v.box),
        )
    return (v.tensor.shape, v.dtype.name, v.buffer, v.as_pattern()[1])


def instr_form(ins: Instr) -> tuple | None:
    """An instruction's form: its kind, its operands' forms and its attributes (None when
    some operand has no form). What its checks and costs depend on, so a loop's repeats
    share one answer. Hashable (a value that is not stands as its repr)."""
    parts: list = [ins.spec.name]
    for name, v in ins.attrs.items():
        parts.append((name, _hashable(v)))
    parts.append(None)  # (the attributes end here)
    for name, v in ins.operands.items():
        f = operand_form(v) if isinstance(v, View) else _hashable(v)
        if f is None and isinstance(v, View):
            return None
        parts.append((name, f))
    return tuple(parts)


def shared_form(ins: Instr) -> Hashable | None:
    """A key the repeats of one replayed instruction share (they have one form: the same
    kind, attributes and operand shapes, only where operands start differs), None for an
    instruction that shares its form with none."""
    return ins.form


def run_copy(ins: Instr, forms: dict[int, Any]) -> Instr:
    """A copy of `ins` for one of its runs (a device loop's executed program), with the form
    every run of it shares (kept in `forms` by instruction index; a replayed instruction
    keeps its own): what depends on its form alone is worked out once for all its runs."""
    run = copy.copy(ins)
    if ins.origin < 0:
        run.origin = ins.index
    if run.form is None:
        form = forms.get(ins.index)
        if form is None:
            form = forms[ins.index] = Form()
        run.form = form
    return run


def passes_repeated(program: Program, runs: Sequence[tuple[int, int, int]]) -> None:
    """Record in `program`, a device loop's executed run (neuronemu.sim.loops), its runs of
    consecutive passes over a body, each (first instruction, body length, passes after the
    first), as repeated blocks: every pass is the first's instructions again on the same
    operands (copies of one body), so what the table works out per instruction or operand
    access is worked out for the first pass and taken by the others."""
    instrs = program.raw_instrs
    blocks = []
    for first, period, count in runs:
        body = instrs[first : first + period]
        none: tuple[int, ...] = ()  # (no move: the same box in every pass)
        still = [
            {name: (-1, none) for role in ("in", "out") for name in ins.view_names(role)}
            for ins in body
        ]
        ids = np.zeros((count, 0), dtype=np.int64)  # (the passes take no tiles of their own)
        blocks.append(Repeated(first, period, count, still, ids, [True] * period))
    program.repeats = blocks


def by_form(ins: Instr, known: dict[Any, T], work: Callable[[], T]) -> T:
    """`work()`, which depends on `ins`'s form alone (its checks, costs, FLOPs), kept in
    `known` by the form a replayed loop's repeats of it share and by its `instr_form`. (A
    shared form is made per replay: on one not seen yet, the answer is looked up by the
    operands' forms, which the same instruction's repeats in other replays have too.)"""
    shared = ins.form
    if shared is not None and shared in known:
        return known[shared]
    own = instr_form(ins)
    if own is not None and own in known:
        got = known[own]
    else:
        got = work()
        if own is not None:
            known[own] = got
    if shared is not None:
        known[shared] = got
    return got


def _hashable(v: Any) -> Any:
    """`v` as a key that tells apart values equal across types (1, 1.0, True), as a repr
    says them."""
    if isinstance(v, (tuple, list, dict, set, frozenset, np.ndarray)):
        return ("repr", repr(v))
    try:
        hash(v)
    except TypeError:
        return ("repr", repr(v))
    return (type(v), v)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D integer array, ascending: `np.unique(values)`, by a sort. (NumPy
    2's `unique` imports `numpy.ma` on its first call, ~15 ms of every run.)"""
    ordered = np.sort(values, kind="stable")
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
