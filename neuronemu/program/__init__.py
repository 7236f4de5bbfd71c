"""The specialized program: instructions on per-engine streams and DMA queues."""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from neuronemu.errors import SourceSpan
from neuronemu.host.gcpolicy import quiet
from neuronemu.ir import IndirectView, Tensor, View
from neuronemu.program import reuse_deps
from neuronemu_isa import Arch, Engine, InstrSpec

__all__ = [
    "Form",
    "Instr",
    "LateInstr",
    "Loop",
    "Program",
    "Repeated",
    "STREAM_ORDER",
    "split_stream",
]

STREAM_ORDER = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")


class Form:
    """What the repeats of one instruction in a replayed loop share (`Instr.form`): a key for
    what depends on their form alone, and the names of the operands each role reads."""

    __slots__ = ("views", "_variants")

    def __init__(self) -> None:
        self.views: dict[str, list[tuple[str, bool]]] = {}  # role -> (name, is .index)
        self._variants: dict[tuple, Form] = {}

    def variant(self, flags: tuple) -> Form:
        """The form of the repeats whose accumulation flags, decided from what was written
        (`accumulate=None`), came out as `flags`: one per outcome."""
        if not flags:
            return self
        form = self._variants.get(flags)
        if form is None:
            form = self._variants[flags] = Form()
        return form


@dataclass(eq=False)
class Instr:
    """One instruction: its spec, engine, operands (views or immediates) and attributes."""

    index: int
    spec: InstrSpec
    engine: Engine
    operands: dict[str, View | float | None]
    attrs: dict[str, Any]
    span: SourceSpan
    queue: int = -1  # DMA queue, for DMA instructions
    cycles: int = 0  # cost in the engine's own cycles (ns for DMA)
    ns: float = 0.0
    deps: tuple[int, ...] = ()  # every earlier instruction this one must follow
    waits: tuple[int, ...] = ()  # the semaphore waits: the latest dep on each other stream
    # In a device loop's body: the instructions of the body's previous iteration this one
    # must follow (the loop-carried dependencies; `deps` are those within one iteration).
    carried: tuple[int, ...] = ()
    core: int = 0  # the physical NeuronCore that runs it (an LNC2 launch has two)
    epoch: int = 0  # cross-core synchronizations (core_barrier, sendrecv) before it, on its core
    # Shared by the repeats of one instruction that a replayed loop makes: they have the same
    # kind, attributes and immediates, and operands of the same shapes, dtypes, buffers and
    # strides (only where the views start differs), so what depends on those alone (which
    # operands are read, checks, costs) is worked out once for all of them. None: its own.
    form: Form | None = None

    @property
    def stream(self) -> str:
        return _stream_name(self.engine, self.queue, self.core)

    def views(self, role: str) -> list[tuple[str, View]]:
        """(operand name, view) of each view the instruction reads (`role` "in"; an indirect
        view's offsets too) or writes ("out"); computed once per operands dict."""
        cache: tuple[Any, dict[str, list[tuple[str, View]]]] | None = self.__dict__.get(
            "_view_cache"
        )
        if cache is None or cache[0] is not self.operands:
            cache = self.__dict__["_view_cache"] = (self.operands, {})
        found = cache[1].get(role)
        if found is None:
            found = cache[1][role] = self._views(role)
        return found

    def view_names(self, role: str) -> list[str]:
        """The names `views(role)` gives, in order (from the form a loop's repeats share,
        where it has them: their views are not made)."""
        names = self.form.views.get(role) if self.form is not None else None
        if names is None:
            return [name for name, _ in self.views(role)]
        return [name for name, _ in names]

    def _views(self, role: str) -> list[tuple[str, View]]:
        if self.form is not None:
            names = self.form.views.get(role)
            if names is None:
                names = self.form.views[role] = [
                    (name, name.endswith(".index")) for name, _ in self._find_views(role)
                ]
            ops: dict[str, Any] = self.operands  # (the form names views and their offsets)
            return [(name, ops[name[:-6]].index if index else ops[name]) for name, index in names]
        return self._find_views(role)

    def _find_views(self, role: str) -> list[tuple[str, View]]:
        out = []
        for op in self.spec.operands:
            v = self.operands.get(op.name)
            if not isinstance(v, View):
                continue
            reads = op.reads(self.attrs)
            if (role == "in" and reads) or (role == "out" and op.role == "out"):
                out.append((op.name, v))
            if role == "in" and isinstance(v, IndirectView) and v.index is not None:
                out.append((f"{op.name}.index", v.index))  # its offsets are read too
        return out

    def operand(self, name: str) -> Any:
        """`operands.get(name)` (LateInstr makes no other operand)."""
        return self.operands.get(name)

    def view(self, name: str) -> View:
        """Operand `name`, which the instruction's spec makes a view (a tile or tensor)."""
        v = self.operand(name)
        assert isinstance(v, View), f"{self.spec.name}: {name} is no view"
        return v

    def tensor_of(self, name: str) -> Tensor | None:
        """The tensor of operand `name`, a view (None: not a view)."""
        v = self.operand(name)
        return v.tensor if isinstance(v, View) else None

    def start_of(self, name: str) -> int:
        """Where operand `name`, a view, starts in its tensor's first dim (on chip: its
        first partition)."""
        return self.operand(name).bounds()[0][0]

    def bounds_of(self, name: str) -> tuple[tuple[int, int], ...]:
        """The bounds of operand `name`, a view, in its tensor (`View.bounds`)."""
        return self.operand(name).bounds()

    @property
    def indirect(self) -> bool:
        """Does an operand address memory from values read at run time?"""
        return any(isinstance(v, IndirectView) for v in self.operands.values())


class LateInstr(Instr):
    """An instruction a replayed loop made from its base (neuronemu.replay.repeats) whose
    views of the iteration's own tiles are made when first asked for: making them was most
    of a replay's time, and the passes that take a repeated block as one (`Repeated`) or
    ask only for a view's tensor, bounds, start or one operand (`tensor_of`, `bounds_of`,
    `start_of`, `operand`) never need them all. `_late`: (the recipe of every operand, in
    order: (name, value, None) or (name, None, maker); the iteration's step; its tensors;
    per operand not made yet, (its maker, its tensor's maker, its bounds as a function of
    the step, or None)), None once made; `_operands`: the operands made so far."""

    _operands: dict[str, View | float | None]
    _late: tuple | None

    @classmethod
    def made(
        cls,
        base: Instr,
        index: int,
        kind: tuple[InstrSpec, Engine, SourceSpan],
        operands: dict,
        attrs: dict,
        form: Form | None,
        late: tuple,
    ) -> LateInstr:
        """Instruction `index` of `kind` (spec, engine, source), a repeat of `base` (its
        queue, costs and core) with these attributes and form, its operands `operands` and,
        to be made, `late`; no dependencies yet. (Made directly: Instr's __init__ would set
        `operands` through the property.)"""
        ins = object.__new__(cls)
        # (set one by one, in the same order for all: their dicts then share one key table,
        # as those a class's __init__ makes do: made by dict.update they held 24 MB more
        # on the 100k matmul)
        ins.index = index
        ins.spec, ins.engine, ins.span = kind
        ins._operands = operands
        ins._late = late
        ins.attrs = attrs
        ins.queue = base.queue
        ins.cycles = base.cycles
        ins.ns = base.ns
        ins.deps = ins.waits = ins.carried = ()
        ins.core = base.core
        ins.epoch = base.epoch
        ins.form = form
        return ins

    @property
    def operands(self) -> dict[str, View | float | None]:
        late = self._late
        if late is not None:
            recipe, s, tensors, _ = late
            have = self._operands
            self._operands = {
                k: v if make is None else have[k] if k in have else make(s, tensors)
                for k, v, make in recipe
            }
            self._late = None
        return self._operands

    @operands.setter
    def operands(self, value: dict[str, View | float | None]) -> None:
        self._operands = value
        self._late = None

    def __getstate__(self) -> dict[str, Any]:
        self.operands  # noqa: B018  (the recipe's makers are closures: the views go instead)
        return dict(self.__dict__)

    def operand(self, name: str) -> Any:
        late = self._late
        if late is None or (made := late[3].get(name)) is None:  # (made, or made at once)
            return self._operands.get(name)
        return made[0](late[1], late[2])

    def tensor_of(self, name: str) -> Tensor | None:
        late = self._late
        if late is None or (made := late[3].get(name)) is None:
            return super().tensor_of(name)
        return made[1](late[1], late[2])

    def start_of(self, name: str) -> int:
        return self.bounds_of(name)[0][0]

    def bounds_of(self, name: str) -> tuple[tuple[int, int], ...]:
        late = self._late
        if late is None or (made := late[3].get(name)) is None or made[2] is None:
            return self.operand(name).bounds()
        return made[2](late[1])


@dataclass(eq=False)
class Repeated:
    """Instructions [start, start + count * period) that repeat [base, base + period) (a
    replayed loop's iterations, neuronemu.replay.repeats): instruction j of repeat r is
    base + j's, its operands of tiles the iteration took at `ids[r, position]` (not the
    base's) and its moving views moved on by r + 1 steps."""

    base: int
    period: int
    count: int
    # per instruction of the period: operand -> (position of its tensor among the tiles an
    # iteration takes, or -1 for a tensor from before the loop; its move per dim per step)
    sources: list[dict[str, tuple[int, tuple[int, ...]]]]
    ids: np.ndarray  # (count, positions): the tensor ids each repeat took
    # per instruction of the period: its repeats have the base's attributes and operands of
    # the base's shapes, dtypes and buffers (its form: what its checks, costs, FLOPs and HBM
    # bytes depend on, but where operands start); False where an accumulation flag was
    # decided per repeat or a tile taken from a list differs from the base's
    alike: list[bool] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.base + self.period


@dataclass(eq=False)
class Loop:
    """A device loop: the instructions [begin, end) are its body, run as the machine decides.

    "for": `var` takes lower, lower + step, ... below upper (ints or register views).
    "while": `var` starts as `lower` (a register view) and the body runs while it is not 0;
    after each pass `var` becomes the body's `cond`. "if" / "else": the body runs once when
    `cond` is nonzero / zero.
    """

    kind: str
    begin: int
    end: int
    span: SourceSpan
    var: View | None = None
    lower: int | View = 0
    upper: int | View = 0
    step: int = 1
    cond: View | None = None


@dataclass
class Program:
    """A kernel specialized for concrete inputs, ready to run on a target."""

    kernel: str
    file: str
    arch: Arch
    instrs: list[Instr]
    tensors: list[Tensor]
    inputs: dict[str, Tensor]
    outputs: list[Tensor]
    params: dict[str, Any] = field(default_factory=dict)
    sbuf_peak_bytes: int = 0
    psum_peak_bytes: int = 0
    grid: tuple[int, ...] = (1,)
    notes: list[str] = field(default_factory=list)  # things the user should know (overrides)
    # tensor id -> its SBUF/PSUM address (neuronemu.program.placements)
    placements: MutableMapping[int, Any] = field(default_factory=dict)
    # (old, new) tensor ids: `new` was placed over bytes that `old`, dead by then, held
    reuses: list[tuple[int, int]] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)  # device loops, outermost first
    cores: int = 1  # physical NeuronCores the launch runs on (2: an LNC2 launch)
    dialect: str | None = None  # the NKI the kernel file imports: "nki" or "neuronxcc.nki"
    repeats: list[Repeated] = field(default_factory=list)  # in program order
    # The reuse dependencies (neuronemu.program.reuse_deps) not yet in the instructions' `deps` and
    # `waits`: added when `instrs` is first read (`raw_instrs` leaves them out).
    reuse_deps: reuse_deps.Pending | None = None
    if TYPE_CHECKING:  # where the `instrs` property below keeps them (see its comment)
        _instrs: list[Instr] = field(init=False)

    @property
    def raw_instrs(self) -> list[Instr]:
        """The instructions, whose `deps` and `waits` may still lack the reuse dependencies:
        for the passes that read neither (the jitted ones take them from `as_arrays`)."""
        return self._instrs

    def memory_map(self) -> str:
        """The SBUF/PSUM allocation: tile, buffer, byte range per partition, live range."""
        rows = [
            (
                "tile",
                "buffer",
                "partitions",
                "bytes/partition",
                "live (instructions)",
                "allocated at",
            )
        ]
        for p in sorted(
            self.placements.values(),
            key=lambda p: (p.tensor.buffer.value != "sbuf", p.offset, p.first),
        ):
            t = p.tensor
            rows.append(
                (
                    t.name,
                    t.buffer.value,
                    f"[{p.partition}, {p.partition + t.shape[0]})",
                    f"[{p.offset}, {p.offset + p.size})",
                    f"#{p.first}..#{p.last}",
                    str(t.span),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return (
            "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
            + "\n"
        )

    def streams(self) -> dict[str, list[Instr]]:
        out: dict[str, list[Instr]] = {}
        for ins in self.instrs:
            out.setdefault(ins.stream, []).append(ins)
        return dict(sorted(out.items(), key=lambda kv: _stream_key(kv[0])))

    def engine_counts(self) -> dict[str, int]:
        counts = {name: 0 for name in STREAM_ORDER}
        instrs, source = self._instrs, self.sources()
        weights = np.bincount(source, minlength=len(instrs))
        for i in np.flatnonzero(weights).tolist():
            engine = instrs[i].engine
            counts["dma" if engine == Engine.DMA else engine.value] += int(weights[i])
        return counts

    def sources(self, keep: Callable[[Repeated], np.ndarray] | None = None) -> np.ndarray:
        """Per instruction, the one it repeats (`repeats`: a replayed loop's iterations,
        which have their base's kind, engine, queue, core, costs and source line), or its own
        index when it repeats none. `keep(rep)`: which instructions of a block's period take
        their base's (the others are their own sources), for what not every repeat shares."""
        source = np.arange(len(self._instrs), dtype=np.int64)
        for rep in self.repeats:  # (in program order: a block's base may hold inner blocks)
            end = rep.start + rep.count * rep.period
            moved = np.tile(source[rep.base : rep.start], rep.count)
            if keep is not None:
                kept = keep(rep)
                if not kept.all():
                    moved = np.where(np.tile(kept, rep.count), moved, source[rep.start : end])
            source[rep.start : end] = moved
        return source

    def alike_sources(self) -> np.ndarray:
        """`sources`, where a repeat takes its base's form as well (`Repeated.alike`): for
        what the form decides (checks, costs, FLOPs, HBM bytes)."""
        return self.sources(lambda rep: np.array(rep.alike, dtype=np.bool_))

    def summed(self, get: Callable[[Instr], Any], source: np.ndarray, start: Any = 0) -> Any:
        """`start` plus `get(ins)` summed over every instruction, where each gives its
        `source`'s (as `per_instr`): asked once per instruction that repeats none, times its
        repeats."""
        instrs = self._instrs
        weights = np.bincount(source, minlength=len(instrs))
        own = np.flatnonzero(weights)
        got = (get(instrs[i]) * w for i, w in zip(own.tolist(), weights[own].tolist()))
        return sum(got, start)

    def per_instr(
        self, get: Callable[[Instr], Any], dtype: Any, source: np.ndarray | None = None
    ) -> np.ndarray:
        """`get(ins)` of every instruction as an array: `get` must depend only on what an
        instruction shares with those that repeat it (`sources`, if made), and is asked once
        per instruction that repeats none."""
        instrs = self._instrs
        n = len(instrs)
        if not self.repeats:
            return np.fromiter(map(get, instrs), dtype, n)
        source = self.sources() if source is None else source
        own = self.originals(source)
        out = np.empty(n, dtype=dtype)
        out[own] = np.fromiter((get(instrs[i]) for i in own), dtype, len(own))
        return out[source]

    def originals(self, source: np.ndarray | None = None) -> list[int]:
        """The indices of the instructions that repeat none (`sources`, if made)."""
        source = self.sources() if source is None else source
        return np.flatnonzero(source == np.arange(len(source))).tolist()

    def as_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for the jitted scheduler: streams, costs, dependency lists (CSR)."""
        instrs = self._instrs
        names: dict[str, int] = {}
        source = self.sources()
        of = self.per_instr(lambda i: names.setdefault(i.stream, len(names)), np.int64, source)
        # Streams numbered in the order of streams()
        order = sorted(names, key=_stream_key)
        renumber = np.zeros(len(names), dtype=np.int64)
        renumber[[names[name] for name in order]] = np.arange(len(order))
        n = len(instrs)
        deps = [i.deps for i in instrs]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, deps), np.int64, n), out=indptr[1:])
        indices = np.fromiter(chain.from_iterable(deps), dtype=np.int64, count=int(indptr[-1]))
        if self.reuse_deps is not None:
            indptr, indices = reuse_deps.merged(indptr, indices, self.reuse_deps, n)
        return {
            "stream": renumber[of],
            "cost_ns": self.per_instr(lambda i: i.ns, np.float64, source),
            "is_dma": self.per_instr(lambda i: i.engine is Engine.DMA, np.bool_, source),
            "dep_indptr": indptr,
            "dep_indices": indices,
            "n_streams": np.int64(len(order)),
            "stream_names": np.array(order, dtype=object),
        }


def _settled_instrs(program: Program) -> list[Instr]:
    pending = program.reuse_deps
    if pending is not None:
        program.reuse_deps = None
        with quiet(len(program._instrs)):  # (what it makes lives on: neuronemu.host.gcpolicy)
            reuse_deps.settle(program._instrs, pending)
    return program._instrs


def _set_instrs(program: Program, instrs: list[Instr]) -> None:
    program._instrs = instrs


# Every instruction with all its dependencies: the reuse dependencies are added the first
# time the instructions are read (the dataclass's `instrs` field, kept in `_instrs`).
Program.instrs = property(_settled_instrs, _set_instrs)  # type: ignore[assignment]


@functools.lru_cache(maxsize=None)
def _stream_name(engine: Engine, queue: int, core: int) -> str:
    own = f"dma.q{queue}" if engine == Engine.DMA else engine.value
    return f"nc{core}.{own}" if core else own


def _stream_key(name: str) -> tuple[int, int, int]:
    core, own = split_stream(name)
    if own.startswith("dma.q"):
        return (core, len(STREAM_ORDER), int(own[5:]))
    return (core, STREAM_ORDER.index(own), 0)


def split_stream(name: str) -> tuple[int, str]:
    """`nc1.vector` -> (1, "vector"); `vector` -> (0, "vector")."""
    if name.startswith("nc") and "." in name and name[2 : name.index(".")].isdigit():
        dot = name.index(".")
        return int(name[2:dot]), name[dot + 1 :]
    return 0, name
