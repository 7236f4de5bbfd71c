"""The specialized program: instructions on per-engine streams and DMA queues."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuronemu.errors import SourceSpan
from neuronemu.host.gcpolicy import quiet
from neuronemu.ir import IndirectView, Tensor, View
from neuronemu.program import reuse_deps
from neuronemu.replay.records import Form, Repeated
from neuronemu_isa import Arch, Engine, InstrSpec

if TYPE_CHECKING:
    from neuronemu.program.table import Table

__all__ = [
    "Instr",
    "Loop",
    "Program",
    "STREAM_ORDER",
    "split_stream",
    "stream_key",
]

STREAM_ORDER = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")


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
    # In a device loop's executed run: the program's instruction this is a run of (its
    # number in the program as written, `asm`'s @N), set on the run's copies alone (a class
    # attribute, not a field: the program's instructions hold no more); -1 elsewhere.
    origin = -1

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
    reuses: Sequence[tuple[int, int]] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)  # device loops, outermost first
    cores: int = 1  # physical NeuronCores the launch runs on (2: an LNC2 launch)
    dialect: str | None = None  # the NKI the kernel file imports: "nki" or "neuronxcc.nki"
    # A replayed loop's records of which instructions repeat which (neuronemu.replay), in
    # program order: read by the program table alone (`table()`).
    repeats: list[Repeated] = field(default_factory=list)
    # The reuse dependencies (neuronemu.program.reuse_deps) not yet in the instructions' `deps` and
    # `waits`: added when `instrs` is first read (`raw_instrs` leaves them out).
    reuse_deps: reuse_deps.Pending | None = None
    if TYPE_CHECKING:  # where the `instrs` property below keeps them (see its comment)
        _instrs: list[Instr] = field(init=False)

    @property
    def raw_instrs(self) -> list[Instr]:
        """The instructions, whose `deps` and `waits` may still lack the reuse dependencies:
        for the passes that read neither (the jitted ones take them from `table().arrays()`)."""
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
        return dict(sorted(out.items(), key=lambda kv: stream_key(kv[0])))

    def renumbered(self, instrs: list[Instr], **changes: Any) -> Program:
        """This program with other instructions, numbered anew (`changes`: other fields
        too): the records that index the old ones go (which blocks repeat which, reuse
        dependencies not yet added)."""
        return dataclasses.replace(self, instrs=instrs, repeats=[], reuse_deps=None, **changes)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)  # (a copy or a pickle makes its own table)
        state.pop("_table", None)
        return state

    def table(self) -> Table:
        """The program as columns (neuronemu.program.table): what the passes after the build
        read. Made when first asked for, once the program is finished."""
        key = (id(self._instrs), len(self._instrs), id(self.repeats), len(self.repeats))
        made = self.__dict__.get("_table")
        if made is None or made[0] != key:
            from neuronemu.program.table import Table

            made = self.__dict__["_table"] = (key, Table(self))
        return made[1]

    def engine_counts(self) -> dict[str, int]:
        return self.table().engine_counts(STREAM_ORDER)


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


def stream_key(name: str) -> tuple[int, int, int]:
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
