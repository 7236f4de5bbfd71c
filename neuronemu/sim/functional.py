"""Reference executor: run the instructions' semantics in program order (no cycles).

Program order respects every semaphore (dependencies only point backwards), so it is one
valid interleaving of the engine streams. `shadow_execute` runs a second, unrounded copy of the
machine beside the real one and finds the first instruction whose rounded output departs
from its shadow by more than its dtype's rounding.
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from neuronemu.errors import InternalError, MemoryAccessError, SourceSpan, UsageError
from neuronemu.ir import IndirectView, Tensor, View
from neuronemu.limits import allocate, tick
from neuronemu.program import Instr, Program
from neuronemu.program.pseudo import DEVICE_PRINT
from neuronemu.program.table import distinct
from neuronemu.sim import batched as _batched
from neuronemu.sim.loops import machine_order
from neuronemu.sim.state import Memory, register_reader, register_writer
from neuronemu_isa import Buffer, Engine, InstrSpec
from neuronemu_isa.numerics import FP32_EXACT, cast_to, round_tf32, ulps_apart

if TYPE_CHECKING:
    from neuronemu.checks.access_table import Accesses

__all__ = ["execute", "interleaving", "shadow_execute", "ShadowRun", "Departure", "DEPARTURE_ULPS"]

# An output departs from its shadow when they differ by more than this many units in the last
# place of the output's dtype (at the shadow value): RNE alone errs by at most half a unit,
# and the rest absorbs sub-ulp differences inherited from inputs that were rounded earlier.
DEPARTURE_ULPS = 1.0

# Run matmul chains as one product on the inputs they were loaded from (neuronemu.sim.batched;
# False: every instruction runs; the tests compare the two).
BATCH = True
# Work out the tiles each instruction touches from its views too, and fail where the access
# rows said otherwise (the test suite turns it on: tests/conftest.py).
CROSS_CHECK = False


def execute(
    program: Program,
    inputs: dict[str, np.ndarray],
    precise: bool = True,
    shuffle_seed: int | None = None,
    device_print: Callable[[str], None] | None = None,
    diagnostics: list[str] | None = None,
    executed: list[int] | None = None,
    max_instructions: int = 10**7,
    watch: dict[int, list] | None = None,
    entries: list[tuple[int, int]] | None = None,
    accesses: Accesses | None = None,
    only: set[int] | None = None,
) -> dict[str, np.ndarray]:
    """Run `program` on `inputs` (by input tensor name); return its outputs by name.

    `precise=False` holds bfloat16/float16/fp8/tf32 tensors in fp32 (no low-precision rounding).
    `shuffle_seed` runs the instructions in a seeded random order among those the streams and
    semaphores allow (a race-free program gives the same outputs in every such order).
    Device loops run as their registers say; `executed` (if given) receives the indices of
    the instructions in the order they ran, and more than `max_instructions` of them is a
    BudgetError; `entries` receives when each loop was reached (`machine_order`). `watch`
    (instruction index -> []) receives what each of those instructions wrote to its `dst`,
    each time it ran. `accesses`: the checks' access table of `program`, if made (which
    tiles each instruction touches is read there). `only`: run only these instructions (the
    others pass in order, in `executed` too, their values not made: a timing-only run of
    device loops, `neuronemu.sim.loops.deciding`).
    """
    touched, written = _tiles_touched(program, accesses)
    if (
        CROSS_CHECK
        and accesses is not None
        and _as_ids(touched, written) != _as_ids(*_tiles_touched(program))
    ):
        raise InternalError("the tiles each instruction touches: the access rows and views differ")
    mem = Memory(
        program.tensors,
        inputs,
        None if precise else np.dtype(np.float32),
        program.placements,
        program.arch,
        read_in_place={t.id for t in program.inputs.values()} - written,
    )
    if program.loops and shuffle_seed is not None:
        raise UsageError("shuffle_seed: kernels with device loops run in program order only")
    order: Iterable[int]
    if shuffle_seed is not None:
        order = interleaving(program, shuffle_seed)
    else:
        order = machine_order(
            program,
            register_reader(mem),
            register_writer(mem),
            max_instructions,
            entries,
            runs=only is not None,
        )
        if only is not None:  # (the runs none of `only` is in, passed at once)
            order = _skipping(order, only, program.raw_instrs, executed)
    remaining = {t.id: 0 for ts in touched for t in ts}
    for ts in touched:
        for t in ts:
            remaining[t.id] += 1
    for loop in program.loops:  # a body's tiles live until the program ends
        for ts in touched[loop.begin : loop.end]:
            for t in ts:
                remaining[t.id] = -1
    batch = None
    if BATCH and shuffle_seed is None and watch is None and not program.loops:
        still = {t.id for t in program.inputs.values()} - written
        batch = _batched.plan(program, mem, still)
    skip, ends = (batch.skip, batch.ends) if batch is not None else ((), ())
    prints: dict[tuple[str, int], int] = {}  # source line -> times it printed
    exchanged: dict[int, np.ndarray] = {}  # sendrecv: the peer's src, read when the pair met
    # (running reads no instruction's dependencies but to order them, which `order` did:
    # the reuse dependencies stay unmerged, neuronemu.program.reuse_deps)
    instrs = program.raw_instrs
    for i in order:
        ins = instrs[i]
        if i in skip or (only is not None and i not in only):
            # (a step of a chain, or a load only its steps read; or a value nothing decided
            # by the run reads: nothing to do)
            tick(ins.span, 1)
            if executed is not None:
                executed.append(i)
            for t in touched[i]:
                remaining[t.id] -= 1
                if not remaining[t.id]:
                    mem.release(t)
            continue
        # (the run's clocks and memory, read every so often: by the elements it writes)
        dst = ins.operands.get("dst")
        tick(ins.span, 1 + (dst.size >> _TICK_SHIFT if isinstance(dst, View) else 0))
        if executed is not None:
            executed.append(i)
        if ins.spec is DEVICE_PRINT:
            if device_print is not None:
                values = np.asarray(mem.read(ins.view("src")))
                # Which line, and which of its runs (an unrolled loop prints once a pass).
                line = (ins.span.path, ins.span.line)
                prints[line] = prints.get(line, 0) + 1
                where = f"{ins.span.path}:{ins.span.line} #{prints[line]}"
                device_print(f"{where}: {ins.attrs['prefix']}{values}")
        elif ins.indirect:
            _indirect_copy(ins, mem)
        elif ins.spec.peer is not None:
            _exchange(program, ins, mem, exchanged)
        elif i in ends:
            assert batch is not None
            mem.write(*batch.result(i, mem))
        else:
            for _, view, value in _results(ins, mem, precise, diagnostics):
                mem.write(view, value)
        if watch is not None and i in watch:
            kept, values = _written_elements(ins, mem)
            allocate(kept.nbytes + values.nbytes, "keeping a write to compare it", ins.span)
            watch[i].append((kept, values))
        for t in touched[i]:
            remaining[t.id] -= 1
            if not remaining[t.id]:
                mem.release(t)
    return {t.name: _returned(mem, t) for t in program.outputs}


# An instruction's run is one unit of the run's clock (limits.tick), plus one per 2**this
# elements it writes: a program of large copies reads the clocks as often as one of small.
_TICK_SHIFT = 16


def _exchange(program: Program, ins: Instr, mem: Memory, read: dict[int, np.ndarray]) -> None:
    """One side of a sendrecv: both sides' sources are read when the first side runs (the
    two cores exchange at once, so a dst that is also the other side's src is fine)."""
    pair, peer = int(ins.attrs.get("pair", -1)), ins.spec.peer
    assert peer is not None
    if ins.index not in read and 0 <= pair < len(program.instrs):
        read[pair] = np.array(mem.read(program.instrs[pair].view(peer)))
    value = read.pop(ins.index, None)
    if value is None:
        value = mem.read(ins.view(peer))
    mem.write(ins.view("dst"), value)


def _written_elements(ins: Instr, mem: Memory) -> tuple[np.ndarray, np.ndarray]:
    """The flat element indices of its HBM tensor an instruction's `dst` wrote, and the
    values there now (just after the write)."""
    dst = ins.view("dst")
    flat = mem.array(dst.tensor).reshape(-1)
    if isinstance(dst, IndirectView):
        addr, ok, _ = dst.addresses(mem.read(dst.offsets))
        where = np.asarray(addr)[np.asarray(ok)].reshape(-1)
    else:
        where = np.asarray(dst.np_view(np.arange(flat.size).reshape(dst.tensor.shape))).reshape(-1)
    return where, flat[where].copy()


def _returned(mem: Memory, t: Tensor, dtype: Any = None) -> np.ndarray:
    """An output's array, in the shape the kernel returned it as, once the run is over: the
    memory's own array when nothing else holds its bytes, else (a view: of an input read in
    place, of another tensor's bytes) a copy."""
    array = mem.array(t)
    if dtype is not None:
        array = array.astype(dtype)
    elif array.base is not None:
        array = array.copy()
    return array.reshape(t.out_shape or t.shape)


def _indirect_copy(ins: Instr, mem: Memory) -> None:
    """A dma_copy whose src (gather) or dst (scatter) rows come from offsets read now.

    An offset out of bounds is an error naming it, or with oob_mode=skip leaves the
    elements it addresses untouched (nki.isa.dma_copy).
    """
    src, dst = ins.view("src"), ins.view("dst")
    skip = ins.attrs.get("oob_mode") == "skip"
    ok = np.ones(dst.shape, dtype=np.bool_)
    if isinstance(src, IndirectView):
        addr, in_bounds, bad = src.addresses(mem.read(src.offsets))
        _check_bounds(ins, "src", src, bad, skip)
        values = mem.array(src.tensor).reshape(-1)[np.where(in_bounds, addr, 0)]
        ok &= in_bounds.reshape(dst.shape)
    else:
        values = mem.read(src)
    values = np.asarray(values).reshape(dst.shape)
    mem.changing(dst.tensor)
    if isinstance(dst, IndirectView):
        addr, in_bounds, bad = dst.addresses(mem.read(dst.offsets))
        _check_bounds(ins, "dst", dst, bad, skip)
        ok &= in_bounds
        flat = mem.array(dst.tensor).reshape(-1)  # HBM arrays are contiguous: a view
        flat[addr[ok]] = cast_to(values[ok], flat.dtype)
    else:
        target = dst.np_view(mem.array(dst.tensor))
        target[ok] = cast_to(values[ok], target.dtype)


def _check_bounds(ins: Instr, name: str, view: IndirectView, bad: list[int], skip: bool) -> None:
    if bad and not skip:
        shown = ", ".join(map(str, bad[:8])) + (", ..." if len(bad) > 8 else "")
        verb = "reads" if name == "src" else "writes"
        raise MemoryAccessError(
            f"{ins.spec.name}: {name} {view!r} {verb} out of bounds of {view.tensor.name} at "
            f"offsets {shown} (offsets in [0, {view.limit}) address rows inside it)",
            ins.span,
            hint="pass oob_mode=nisa.oob_mode.skip to skip those rows",
        )


def _tiles_touched(
    program: Program, accesses: Accesses | None = None
) -> tuple[list[list[Tensor]], set[int]]:
    """Per instruction, the SBUF/PSUM tiles it reads or writes (each once), leaving out
    the program's inputs and outputs, whose arrays outlive the run; and the ids of the
    tensors some instruction writes (their roots'). From the checks' `accesses` where
    given (one row per operand view, by root tensor: no view made here)."""
    kept = {t.id for t in program.outputs} | {t.id for t in program.inputs.values()}
    if accesses is not None:
        return _tiles_touched_rows(program, accesses, kept)
    out = []
    written: set[int] = set()
    for ins in program.raw_instrs:
        seen: dict[int, Tensor] = {}
        for role in ("in", "out"):
            for _, view in ins.views(role):
                t = view.tensor.root
                if role == "out":
                    written.add(t.id)
                if t.buffer in (Buffer.SBUF, Buffer.PSUM) and t.id not in kept:
                    seen[t.id] = t
        out.append(list(seen.values()))
    return out, written


def _as_ids(touched: list[list[Tensor]], written: set[int]) -> tuple[list[list[int]], set[int]]:
    """`_tiles_touched`'s answer as sorted ids (CROSS_CHECK compares two)."""
    return [sorted(t.id for t in ts) for ts in touched], written


def _tiles_touched_rows(
    program: Program, accesses: Accesses, kept: set[int]
) -> tuple[list[list[Tensor]], set[int]]:
    """`_tiles_touched` from the access rows (each instruction's tiles in order of id)."""
    roots = accesses.ids[accesses.tensor]  # (per access, its root tensor's id)
    written = set(distinct(roots[accesses.write]).tolist())
    tiles = {
        t.id: t
        for t in program.tensors
        if t.buffer in (Buffer.SBUF, Buffer.PSUM) and t.id not in kept
    }
    of_tile = np.isin(roots, np.fromiter(tiles, np.int64, len(tiles)))
    # (each (instruction, tile) pair once, in order: np.unique's rows, by a sort, see distinct)
    instr, root = accesses.instr[of_tile], roots[of_tile]
    order = np.lexsort((root, instr))
    instr, root = instr[order], root[order]
    new = np.ones(len(order), dtype=np.bool_)
    new[1:] = (instr[1:] != instr[:-1]) | (root[1:] != root[:-1])
    out: list[list[Tensor]] = [[] for _ in range(len(program.raw_instrs))]
    for i, tid in zip(instr[new].tolist(), root[new].tolist()):
        out[i].append(tiles[tid])
    return out, written


def _skipping(
    order: Iterable[int | range], only: set[int], instrs: list[Instr], executed: Any
) -> Iterator[int]:
    """The instructions of `order` (`machine_order` with its straight runs as ranges) one by
    one, but for the runs `only` holds none of: passed at once (in `executed`, on the run's
    clock), their tiles' releases left to the program's end."""
    for item in order:
        if isinstance(item, range):
            if only.isdisjoint(item):
                if len(item):
                    tick(instrs[item.start].span, len(item))
                if executed is not None:
                    executed.extend(item)
                continue
            yield from item
        else:
            yield item


def interleaving(program: Program, seed: int) -> list[int]:
    """A seeded random order of the instructions that keeps each stream in order and every
    instruction after its waits (a random topological order)."""
    rng = random.Random(seed)
    n = len(program.instrs)
    followers: list[list[int]] = [[] for _ in range(n)]
    waiting = [0] * n
    last: dict[str, int] = {}
    for ins in program.instrs:
        before = set(ins.deps)
        if ins.stream in last:
            before.add(last[ins.stream])
        last[ins.stream] = ins.index
        waiting[ins.index] = len(before)
        for d in before:
            followers[d].append(ins.index)
    ready = [i for i in range(n) if waiting[i] == 0]
    order: list[int] = []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for f in followers[i]:
            waiting[f] -= 1
            if waiting[f] == 0:
                ready.append(f)
    return order


@dataclass
class Departure:
    """Where the rounded run first leaves its shadow: which instruction, operand and element."""

    index: int
    instruction: str
    engine: str
    span: SourceSpan
    operand: str
    dtype: str
    element: tuple[int, ...]
    got: float
    shadow: float
    ulps: float
    n_departed: int
    # Per input operand: its dtype, how far it already departs (ulps of its dtype) and the
    # last instruction that wrote its tensor (None: a kernel input).
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "instruction": self.instruction,
            "engine": self.engine,
            "location": str(self.span),
            "operand": self.operand,
            "dtype": self.dtype,
            "element": list(self.element),
            "got": self.got,
            "shadow": self.shadow,
            "ulps": self.ulps,
            "departed_elements": self.n_departed,
            "inputs": {k: dict(v) for k, v in self.inputs.items()},
        }

    def describe(self) -> str:
        inputs = ", ".join(_describe_input(k, v) for k, v in self.inputs.items() if v["ulps"])
        return (
            f"{self.span}: instruction #{self.index} {self.instruction} ({self.engine}) "
            f"is the first to depart from the unrounded shadow run: {self.operand} "
            f"({self.dtype}) element {list(self.element)} is {self.got!r}, the shadow "
            f"{self.shadow!r} ({_fmt_ulps(self.ulps)}; {self.n_departed} elements depart)"
            + (
                f"; inputs already departing: {inputs}"
                if inputs
                else "; its inputs match the shadow"
            )
        )


def _describe_input(name: str, info: dict[str, Any]) -> str:
    writer = info["written_by"]
    source = (
        "a kernel input"
        if writer is None
        else f"last written by #{writer['index']} {writer['instruction']} at {writer['location']}"
    )
    return f"{name} ({info['dtype']}, {source}) by {_fmt_ulps(info['ulps'])}"


@dataclass(frozen=True)
class NonFinite:
    """The first instruction that makes a NaN or an infinity from finite inputs."""

    instr: Instr
    operand: str
    element: tuple[int, ...]
    value: float

    def describe(self) -> str:
        what = "NaN" if np.isnan(self.value) else "an infinity"
        return (
            f"{self.instr.span}: instruction #{self.instr.index} {self.instr.spec.name} "
            f"({self.instr.engine.value}) makes {what} from finite inputs: {self.operand} "
            f"element {list(self.element)} is {self.value!r}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "instruction": self.instr.index,
            "name": self.instr.spec.name,
            "line": str(self.instr.span),
            "operand": self.operand,
            "element": list(self.element),
            "value": self.value,
        }


@dataclass
class ShadowRun:
    """The rounded run's outputs, the shadow's (float64) outputs, the first departure and
    the first NaN/infinity made from finite inputs."""

    outputs: dict[str, np.ndarray]
    shadow_outputs: dict[str, np.ndarray]
    first: Departure | None
    non_finite: NonFinite | None = None


def shadow_execute(
    program: Program,
    inputs: dict[str, np.ndarray],
    precise: bool = True,
    observe: Callable[[Instr, list[tuple[str, View, Any]], list[tuple[str, View, Any]]], None]
    | None = None,
) -> ShadowRun:
    """Run `program` twice in lockstep: as `execute` does, and as a shadow that holds every
    float tensor in float64 and never rounds on write. `observe` (if given) sees each
    instruction as it runs with what it read from the shadow and what it wrote there, as
    (operand, view, values), the values valid only during the call (no indirect views).

    Each instruction's semantics are applied to the shadow's own copies of its inputs; an
    instruction departs when an element of its rounded output is further than DEPARTURE_ULPS
    units of its dtype from the shadow's (unrounded) result, or only one of them is NaN/inf.
    The semantics' arithmetic is the engines' fp32 (they cast their inputs), so the shadow
    removes the storage rounding that a kernel's choice of dtypes causes.
    """
    mem = Memory(
        program.tensors,
        inputs,
        None if precise else np.dtype(np.float32),
        program.placements,
        program.arch,
    )
    shadow = Memory(program.tensors, inputs, np.dtype(np.float64))
    first: Departure | None = None
    non_finite: NonFinite | None = None
    writers: dict[int, Instr] = {}  # tensor id -> the last instruction that wrote it
    starts: dict[int, list[View]] = {}  # a body's first instruction -> its loops' variables
    for loop in program.loops:
        if loop.var is not None:
            starts.setdefault(loop.begin, []).append(loop.var)
    for i in machine_order(program, register_reader(mem), register_writer(mem), 10**7):
        ins = program.instrs[i]
        tick(ins.span)
        for var in starts.get(i, ()):  # the shadow's loop variables follow the machine's
            shadow.write(var, mem.read(var))
        if ins.indirect:  # a copy: nothing to round but the dtype conversion
            _indirect_copy(ins, mem)
            _indirect_copy(ins, shadow)
            writers[ins.view("dst").tensor.root.id] = ins
            if observe is not None:
                dst = ins.view("dst")
                gathered = not isinstance(dst, IndirectView)
                observe(ins, [], [("dst", dst, shadow.read(dst))] if gathered else [])
            continue
        real = _results(ins, mem, precise)
        ideal = _results(ins, shadow, tf32=False)
        finite_in = non_finite is None and all(
            _all_finite(mem.read(view)) for _, view in ins.views("in")
        )
        if first is None:
            read = {
                name: (
                    view,
                    mem.read(view).astype(np.float64),
                    shadow.read(view).astype(np.float64),
                )
                for name, view in ins.views("in")
            }
        taken: list[tuple[str, View, Any]] = []
        if observe is not None:  # (copied where this instruction writes what it read)
            outs = {view.tensor.root.id for _, view, _ in ideal}
            for name, view in ins.views("in"):
                if not isinstance(view, IndirectView):
                    got = shadow.read(view)
                    taken.append((name, view, got.copy() if view.tensor.root.id in outs else got))
        seen: list[tuple[str, View, Any]] = []
        for (name, view, value), (_, _, exact) in zip(real, ideal):
            stored = mem.write(view, value)
            seen.append((name, view, shadow.write(view, exact)))
            if first is None:
                first = _departure(ins, name, view, stored, exact, read, writers)
            if finite_in and non_finite is None and not _all_finite(stored):
                flat = np.asarray(stored, dtype=np.float64)
                at = np.unravel_index(int(np.argmin(np.isfinite(flat))), flat.shape)
                element = tuple(int(i) for i in view.tensor_index(at))
                non_finite = NonFinite(ins, name, element, float(flat[at]))
            writers[view.tensor.root.id] = ins
        if observe is not None:
            observe(ins, taken, seen)
    return ShadowRun(
        {t.name: _returned(mem, t) for t in program.outputs},
        {t.name: _returned(shadow, t, np.float64) for t in program.outputs},
        first,
        non_finite,
    )


def _all_finite(values: Any) -> bool:
    """No NaN or infinity among `values` (integers never have one; bfloat16 and fp8 are
    NumPy kind "V" through ml_dtypes)."""
    a = np.asarray(values)
    if a.dtype.kind in "iub":
        return True
    return bool(np.isfinite(a.astype(np.float64)).all())


def _results(
    ins: Instr, mem: Memory, tf32: bool, diagnostics: list[str] | None = None
) -> list[tuple[str, View, Any]]:
    """Apply `ins`'s semantics to its operands read from `mem`: (output, view, value)."""
    spec = ins.spec
    args: dict[str, Any] = {}
    wants = _shape_params(spec)
    for op in spec.operands:
        v = ins.operands.get(op.name)
        if v is None:
            continue
        reads = op.reads(ins.attrs)
        if reads:
            if not isinstance(v, View):
                args[op.name] = v
            # (an operand of a dtype fp32 holds exactly, that the semantics take as fp32, is
            # read converted, the conversion kept while the bytes stay: Memory.read_fp32)
            elif op.fp32 and op.as_fp32(ins.attrs) and v.dtype.name in FP32_EXACT:
                args[op.name] = mem.read_fp32(v)
            else:
                args[op.name] = _read(ins, mem, v, tf32)
        if op.role == "out" and isinstance(v, View):  # (an output is a view)
            if op.name in wants:
                args[f"{op.name}_shape"] = v.shape
            if f"{op.name}_dtype" in wants:
                args[f"{op.name}_dtype"] = mem.held_dtype(v.tensor, mem.widen)
        if f"{op.name}_dtype_name" in wants and isinstance(v, View):
            args[f"{op.name}_dtype_name"] = v.dtype.name
    if "engine" in wants:
        args["engine"] = ins.engine
    result = spec.semantics(**args, **ins.attrs)
    if spec.diagnose is not None and diagnostics is not None:
        diagnostics.extend(f"{ins.span}: {m}" for m in spec.diagnose(**args, **ins.attrs))
    outs = spec.outputs
    if not isinstance(result, dict):
        result = {outs[0].name: result}
    pairs = []
    for op in outs:
        view = ins.operands.get(op.name)
        if isinstance(view, View):
            pairs.append((op.name, view, result[op.name]))
    return pairs


def _read(ins: Instr, mem: Memory, view: View, tf32: bool) -> np.ndarray:
    value = mem.read(view)
    # tfloat32 is stored as fp32; the Tensor engine multiplies it at tf32 precision
    # (nki.isa.nc_matmul: tfloat32 inputs; nki.api.shared: tfloat32 is 1S,8E,10M).
    if tf32 and ins.engine == Engine.TENSOR and view.dtype.name == "tfloat32":
        return round_tf32(value)
    return value


def _departure(
    ins: Instr,
    name: str,
    view: View,
    stored: np.ndarray,
    exact: Any,
    read: dict[str, tuple[View, np.ndarray, np.ndarray]],
    writers: dict[int, Instr],
) -> Departure | None:
    """The departure of one output (None if every element is within DEPARTURE_ULPS); `read`
    holds the instruction's inputs as the real run and the shadow read them."""
    got = stored.astype(np.float64)
    want = np.broadcast_to(
        np.asarray(exact, dtype=np.float64).reshape(
            got.shape if np.size(exact) == got.size else ()
        ),
        got.shape,
    )
    ulps = ulps_apart(got, want, view.dtype.name)
    departed = ulps > DEPARTURE_ULPS
    n = int(departed.sum())
    if not n:
        return None
    where = np.unravel_index(int(np.argmax(departed)), departed.shape)
    described = {}
    for in_name, (in_view, in_got, in_want) in read.items():
        apart = ulps_apart(in_got, in_want, in_view.dtype.name)
        writer = writers.get(in_view.tensor.root.id)
        described[in_name] = {
            "dtype": in_view.dtype.name,
            "ulps": float(apart.max()) if apart.size else 0.0,
            "written_by": None
            if writer is None
            else {
                "index": writer.index,
                "instruction": writer.spec.name,
                "location": str(writer.span),
            },
        }
    return Departure(
        ins.index,
        ins.spec.name,
        ins.engine.value,
        ins.span,
        name,
        view.dtype.name,
        tuple(int(i) for i in where),
        float(got[where]),
        float(want[where]),
        float(ulps[where]),
        n,
        described,
    )


def _fmt_ulps(u: float) -> str:
    return "non-finite" if not np.isfinite(u) else f"{u:.3g} ulp"


_SHAPE_PARAMS: dict[str, frozenset[str]] = {}


def _shape_params(spec: InstrSpec) -> frozenset[str]:
    """The outputs whose shape the semantics asks for (a `<name>_shape` parameter) and
    those whose dtype it asks for (`<name>_dtype`: the NumPy dtype the tile holds), the
    operands whose NKI dtype name it asks for (`<name>_dtype_name`: which packed MX format a
    tile's words hold), plus "engine" when it asks which engine runs it (the engines'
    arithmetic can differ)."""
    found = _SHAPE_PARAMS.get(spec.name)
    if found is None:
        params = inspect.signature(spec.semantics).parameters
        found = frozenset(o.name for o in spec.outputs if f"{o.name}_shape" in params)
        found |= {f"{o.name}_dtype" for o in spec.outputs if f"{o.name}_dtype" in params}
        found |= {f"{o.name}_dtype_name" for o in spec.operands if f"{o.name}_dtype_name" in params}
        if "engine" in params:
            found |= {"engine"}
        _SHAPE_PARAMS[spec.name] = found
    return found
