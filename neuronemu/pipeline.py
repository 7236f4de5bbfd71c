"""The driver of one run: trace -> build -> check -> time -> execute -> compare, with the
run's options as one frozen `RunOptions`."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from neuronemu.build.builder import Builder
from neuronemu.checks.hazards import (
    JIT_ABOVE,
    RACE_PASSES,
    Accesses,
    check_initialized,
    check_outputs_written,
    check_races,
    first_race,
    race_of,
    uninitialized_reads,
    unwritten_outputs,
)
from neuronemu.errors import KernelTypeError, UsageError
from neuronemu.frontend import ast as A
from neuronemu.frontend import parse_file
from neuronemu.host.gcpolicy import quiet, run_scope
from neuronemu.inputs import made
from neuronemu.ir import IndirectView, Tensor, View
from neuronemu.jit import worker as jit_worker
from neuronemu.limits import Meter, metered, tick
from neuronemu.limits import poll as limits_poll
from neuronemu.program import Program
from neuronemu.program.table import shared_form
from neuronemu.report import Result
from neuronemu.report.explain import explain_mismatch
from neuronemu.report.reference import call_reference, compare
from neuronemu.sim import functional, timing
from neuronemu.sim.loops import deciding, executed_program
from neuronemu.trace.imports import import_roots, kernel_tree
from neuronemu.trace.tracer import Tracer
from neuronemu_isa import REGISTRY, TARGETS, Buffer, Engine, load_arch

DEFAULT_TARGET = "trn2"

# The NKI compiler's documented transformations neuronemu applies to a kernel, by name; a run
# may turn any off (`passes`). None changes values (tests/property/test_psum_zero_init.py,
# test_write_in_place.py).
PASSES = (
    "psum-zero-init",  # neuronemu/build/psum_init.py
    "write-in-place",  # neuronemu/trace/augmented.py, neuronemu/trace/lib/nl_elementwise.py
)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How one run goes, built once (by the API, the command line or a sweep) and passed
    whole. `target` None: the file's platform override, else DEFAULT_TARGET; `grid` None:
    the launch the file asks for; `passes`: the compiler passes applied (PASSES)."""

    kernel: str | None = None
    target: str | None = None
    grid: tuple[int, ...] | None = None
    spill: bool = True
    passes: tuple[str, ...] = PASSES
    precise: bool = True
    allow_uninit: bool = False
    shuffle_seed: int | None = None
    timing_only: bool = False
    explain_mismatch: bool = False
    rtol: float | None = None
    atol: float | None = None
    import_path: tuple[str, ...] = ()  # folders helper modules also come from (`--path`)

    def __post_init__(self) -> None:
        if isinstance(self.import_path, (str, bytes)) or not all(
            isinstance(p, str) for p in self.import_path
        ):
            raise UsageError(
                f"import_path must be a list of folders, got {self.import_path!r}",
                hint="e.g. import_path=['../nki-library/src/nkilib_src']",
            )
        for folder in self.import_path:
            if not Path(folder).is_dir():
                raise UsageError(f"import path {folder!r} is not a folder")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, (int, float)) and math.isfinite(value) and value >= 0
            ):
                raise UsageError(f"{name} must be a finite number >= 0, got {value!r}")
        if isinstance(self.passes, str) or not all(isinstance(p, str) for p in self.passes):
            raise UsageError(f"passes must be a list of pass names, got {self.passes!r}")
        unknown = [p for p in self.passes if p not in PASSES]
        if unknown:
            raise UsageError(
                f"unknown compiler pass {unknown[0]!r}", hint=f"the passes: {', '.join(PASSES)}"
            )


def _arch(target: str):
    try:
        return load_arch(target)
    except KeyError:
        raise UsageError(
            f"unknown target {target!r}", hint=f"choose one of: {', '.join(TARGETS)}"
        ) from None


@run_scope
def compile_program(
    path: str | Path,
    inputs: dict[str, Any],
    options: RunOptions,
    print_fn: Callable[[str], None],
    meter: Meter,
) -> Program:
    """Trace and build a kernel file's program (its tiles placed, its checks to come)."""
    kernel, target, grid = options.kernel, options.target, options.grid
    for name, value in inputs.items():
        if isinstance(value, np.ndarray):
            meter.allocate(value.nbytes, f"input {name!r}", None)
    module = parse_file(path, meter.limits)
    notes: list[str] = []
    override = platform_override(module)
    if override is not None:
        value, span = override
        chosen = _PLATFORMS.get(value)
        if chosen is None:
            notes.append(
                f"{span}: NEURON_PLATFORM_TARGET_OVERRIDE={value!r} is not a known "
                "platform; ignored"
            )
        elif target is None:
            target = chosen
            notes.append(
                f"{span}: NEURON_PLATFORM_TARGET_OVERRIDE={value!r} selects target {chosen}"
            )
        elif target != chosen:
            notes.append(f"{span}: the file asks for {value!r}; --target {target} wins")
    arch = _arch(target or DEFAULT_TARGET)
    builder = Builder(arch, meter)
    builder.spill = options.spill
    builder.fold_psum_zero_init = "psum-zero-init" in options.passes
    builder.write_in_place = "write-in-place" in options.passes
    saved_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved_limit, _TRACE_RECURSION_LIMIT))
    try:
        tracer = Tracer(
            module, str(path), arch, builder, print_fn=print_fn, import_path=options.import_path
        )
        return _trace(path, module, inputs, kernel, grid, tracer, builder, notes)
    finally:
        sys.setrecursionlimit(saved_limit)
        meter.end_trace()


# Python frames while tracing: enough for nested inlined calls of nested statements; deeper
# is a located "nested too deeply" error (the tracer catches RecursionError), never a crash.
_TRACE_RECURSION_LIMIT = 8000


def _trace(
    path: str | Path,
    module: Any,
    inputs: dict[str, Any],
    kernel: str | None,
    grid: tuple[int, ...] | None,
    tracer: Tracer,
    builder: Builder,
    notes: list[str],
) -> Program:
    arch = tracer.arch
    kernels = tracer.kernels()
    if kernel is not None and kernel not in kernels:
        # A kernel wrapped where it is called (`nki.baremetal()(f)`) has no decorator:
        # naming it is enough.
        plain = next(
            (f for f in module.body if isinstance(f, A.FunctionDef) and f.name == kernel), None
        )
        if plain is not None:
            kernels = {kernel: plain}
            notes.append(
                f"{plain.span}: {kernel!r} has no @nki.jit; traced as a kernel because it was named"
            )
    if not kernels and kernel is not None:
        functions = [f.name for f in module.body if isinstance(f, A.FunctionDef)]
        inside = _enclosing(module.body, kernel)
        raise UsageError(
            f"{path} has no function {kernel!r} at module level"
            + (f" (functions: {', '.join(functions)})" if functions else ""),
            hint=(
                f"{kernel!r} is made inside {inside!r}: call it from a module-level function, "
                f"e.g. `def entry(a, b): return {inside}(...)(a, b)`, and run -k entry"
                if inside
                else None
            ),
        )
    if not kernels:
        raise UsageError(
            f"{path}: no @nki.jit kernel found",
            hint="name an undecorated kernel function with -k NAME",
        )
    if kernel is None:
        if len(kernels) > 1:
            raise UsageError(
                f"{path} has several kernels ({', '.join(kernels)})", hint="pick one with -k NAME"
            )
        kernel = next(iter(kernels))
    if kernel not in kernels:
        import difflib

        close = difflib.get_close_matches(kernel, list(kernels), n=1)
        raise UsageError(
            f"{path} has no kernel {kernel!r} (kernels: {', '.join(kernels)})",
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    fn = kernels[kernel]
    builder.meter.where = fn.span  # (a budget between the passes after the trace: here)
    if (
        grid is not None
        and all(isinstance(g, int) for g in grid)
        and math.prod(grid) > builder.meter.limits.grid_instances
    ):
        limit = builder.meter.limits.grid_instances
        raise UsageError(
            f"grid {list(grid)} has {math.prod(grid):,} program instances, over "
            f"the grid_instances budget of {limit}",
            hint="raise it with --limit grid_instances=N",
        )
    if grid is None:
        grid = tracer.launch_grid(fn) or _lnc_grid(module, arch, notes)
    if not grid or not all(isinstance(g, int) and g > 0 for g in grid):
        raise UsageError(f"grid {grid!r} must be positive integers, e.g. (2, 4)")
    try:
        returned, bound = tracer.call_kernel(fn, dict(inputs), tuple(grid))
    finally:
        tracer.close_generators()
    tracer.apply_schedule(kernel)
    if returned is None:
        # Older kernels write into output arrays passed as arguments and return nothing.
        outputs = [t for t in bound.values() if isinstance(t, Tensor) and t.id in builder.written]
    else:
        outputs = _outputs(returned, fn)
    tensor_inputs = {k: v for k, v in bound.items() if isinstance(v, Tensor)}
    params = {k: v for k, v in bound.items() if not isinstance(v, Tensor)}
    program = builder.finish(kernel, str(path), tensor_inputs, outputs, params, tuple(grid))
    program.dialect = tracer.dialect
    program.notes = notes + program.notes + _small_transfer_notes(program)
    return program


def _small_transfer_notes(program: Program) -> list[str]:
    """Once per source line, DMA transfers under the recommended bytes per partition: each
    costs about as much as one at the minimum, so they run latency-bound."""
    arch = program.arch
    least = arch.dma_efficient_bytes_per_partition
    notes: dict[str, str] = {}
    seen: set[int] = set()  # the forms of replayed transfers looked at (their repeats: alike)
    table = program.table()
    for ins in (table.instrs[i] for i in table.originals()):  # (a repeat's is its base's note)
        if ins.engine != Engine.DMA or id(ins.spec) not in _ISA_SPECS:
            continue  # device_print prints; it is no transfer
        shared = shared_form(ins)
        if shared is not None:
            if id(shared) in seen:
                continue
            seen.add(id(shared))
        if str(ins.span) in notes:
            continue
        sides = [
            v
            for _, v in ins.views("in") + ins.views("out")
            if v.buffer == Buffer.SBUF and not isinstance(v, IndirectView)
        ]
        if len(sides) != 1:
            continue
        hbm = [
            v
            for _, v in ins.views("in") + ins.views("out")
            if v.buffer == Buffer.HBM and not isinstance(v, IndirectView)
        ]
        if hbm and all(v.size == v.tensor.root.size for v in hbm):
            continue  # (all of its HBM tensor at once, a scalar or a bias: nothing to merge)
        per_partition = sides[0].size // max(sides[0].shape[0], 1) * sides[0].dtype.itemsize
        if per_partition < least:
            notes[str(ins.span)] = (
                f"{ins.span}: {ins.spec.name} moves {per_partition} B per partition; transfers "
                f"under {least} B per partition are latency-bound (nki-dma-overview.rst): fewer, "
                "larger transfers move the same bytes faster"
            )
    return list(notes.values())


_ISA_SPECS = frozenset(map(id, REGISTRY.values()))  # (by identity: hashing a spec costs)

# Platform names the Neuron tools accept in NEURON_PLATFORM_TARGET_OVERRIDE, by target.
_PLATFORMS = {"trn1": "trn1", "inf2": "trn1", "trn1n": "trn1", "trn2": "trn2", "trn3": "trn3"}


def _lnc_grid(module: Any, arch: Any, notes: list[str]) -> tuple[int, ...]:
    """A kernel launched with no grid: on two cores when the file sets
    NEURON_LOGICAL_NC_CONFIG=2 (nki/get-started/about/lnc.rst: the LNC degree from the
    environment), else on one."""
    setting = environ_setting(module, "NEURON_LOGICAL_NC_CONFIG")
    if setting is None:
        return (1,)
    value, span = setting
    if value == "2" and arch.lnc_physical_cores == 2:
        notes.append(f"{span}: NEURON_LOGICAL_NC_CONFIG=2: the kernel runs on two cores")
        return (2,)
    if value not in ("1", "2"):
        notes.append(f"{span}: NEURON_LOGICAL_NC_CONFIG={value!r} is not 1 or 2; ignored")
    return (1,)


def platform_override(module: Any) -> tuple[str, Any] | None:
    """`os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"` (or `.setdefault(...)`) at
    module level, read from the AST: the file's host code is never run."""
    return environ_setting(module, "NEURON_PLATFORM_TARGET_OVERRIDE")


def environ_setting(module: Any, key: str) -> tuple[str, Any] | None:
    """`os.environ[key] = "value"` (or `.setdefault(key, "value")`) at module level, read
    from the AST: the value and where."""

    def is_environ(node: Any) -> bool:
        return (
            isinstance(node, A.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, A.Name)
            and node.value.id == "os"
        )

    def is_key(node: Any) -> bool:
        return isinstance(node, A.Const) and node.value == key

    for stmt in module.body:
        if isinstance(stmt, A.Assign) and isinstance(stmt.value, A.Const):
            for t in stmt.targets:
                if isinstance(t, A.Subscript) and is_environ(t.value) and is_key(t.index):
                    return str(stmt.value.value), stmt.span
        if isinstance(stmt, A.ExprStmt) and isinstance(stmt.value, A.Call):
            call = stmt.value
            if (
                isinstance(call.func, A.Attribute)
                and call.func.attr == "setdefault"
                and is_environ(call.func.value)
                and len(call.args) == 2
                and is_key(call.args[0])
                and isinstance(call.args[1], A.Const)
            ):
                return str(call.args[1].value), stmt.span
    return None


def _outputs(returned: Any, fn: Any) -> list[Tensor]:
    items = returned if isinstance(returned, (tuple, list)) else (returned,)
    outs: list[Tensor] = []
    for item in items:
        if isinstance(item, View) and not item.tensor.on_chip and _whole(item):
            item.tensor.out_shape = tuple(item.shape)  # a reshape of the whole tensor
            item = item.tensor
        if not isinstance(item, Tensor) or item.on_chip:
            raise KernelTypeError(
                f"kernel {fn.name!r} must return HBM tensors (nl.ndarray(..., "
                f"buffer=nl.shared_hbm)); got {item!r}",
                fn.span,
            )
        if item.kind == "tile":
            item.kind = "output"
        outs.append(item)
    return outs


def _whole(view: View) -> bool:
    """Does the view walk every element of its tensor in order (a reshape)?"""
    offset, pairs = view.as_pattern()
    expected = 1
    for stride, count in reversed(pairs):
        if count > 1 and stride != expected:
            return False
        expected *= count
    return offset == 0 and expected == view.tensor.size and view.tensor.base is None


@run_scope
def run_program(
    program: Program,
    inputs: dict[str, Any],
    meter: Meter,
    options: RunOptions,
    ref: Callable[..., Any] | None = None,
    print_fn: Callable[[str], None] = print,
    step: Callable[[str], None] = lambda _phase: None,
) -> Result:
    """The rest of `run` for a program traced already: its checks, its time and (unless
    `options.timing_only`) its values, checked against `ref`."""
    meter.check_run_time()
    with metered(meter):  # (the passes below read its clocks as they go: limits.tick)
        return _run_program(program, inputs, meter, options, ref, print_fn, step)


def _run_program(
    program: Program,
    inputs: dict[str, Any],
    meter: Meter,
    options: RunOptions,
    ref: Callable[..., Any] | None,
    print_fn: Callable[[str], None],
    step: Callable[[str], None],
) -> Result:
    timing_only, precise, allow_uninit = options.timing_only, options.precise, options.allow_uninit
    rtol, atol = options.rtol, options.atol
    with quiet(len(program.raw_instrs)):
        twins, timeline, accesses = _checked_and_timed(program, meter, allow_uninit, step)
    if timing_only and timeline is not None and not twins:
        # (writes of both cores to settle need the values)
        return Result(program, timeline, None, grid=program.grid)
    # (timing only: the values that decide the run, where no twin writes need settling;
    # only the inputs those instructions read are made)
    only = deciding(program) if timing_only and program.loops and not twins else None
    needed = program.inputs.keys() if only is None else _inputs_read(program, only)
    arrays = {k: np.asarray(made(inputs[k]) if k in needed else inputs[k]) for k in program.inputs}
    diagnostics: list[str] = []
    executed: list[int] = []
    entries: list[tuple[int, int]] = []
    watched: dict[int, list] | None = {i: [] for pair in twins for i in pair} or None
    step("executing")
    outputs = functional.execute(
        program,
        arrays,
        precise=precise,
        shuffle_seed=options.shuffle_seed,
        device_print=print_fn,
        diagnostics=diagnostics,
        executed=executed if program.loops else None,
        max_instructions=meter.limits.instructions,
        watch=watched,
        entries=entries,
        accesses=accesses,
        only=only,
    )
    del accesses
    if program.loops:  # device loops: the checks and the time of the run the values decided
        run_program = executed_program(program, executed, entries)
        step(f"checking the run ({len(executed):,} instructions executed)")
        _check_run(run_program, allow_uninit)
        step("scheduling")
        timeline = timing.schedule(run_program)
        meter.check_run_time()
    program.notes.extend(dict.fromkeys(diagnostics))  # once per line and message
    _settle_twin_writes(program, twins, watched)
    if timing_only:
        return Result(program, timeline, None, grid=program.grid)
    check = None
    if ref is not None:
        step("comparing")
        expected = call_reference(ref, dict(inputs))
        dtypes = {t.name: t.dtype.name for t in program.outputs}
        check = compare(outputs, expected, dtypes, rtol, atol, precise=precise)
        if options.explain_mismatch and not check.passed:
            check.explanation = explain_mismatch(
                program, arrays, ref, dict(inputs), expected, dtypes, rtol, atol, precise
            )
    return Result(program, timeline, outputs, check, program.grid)


def _checked_and_timed(
    program: Program, meter: Meter, allow_uninit: bool, step: Callable[[str], None]
) -> tuple[list, Any, Accesses]:
    """The race, read and output checks (raising on what they find, or noting it with
    `allow_uninit`), then the schedule where values cannot change it (None with device
    loops): the twin writes to settle, the timeline and the checks' access table."""
    step(f"checking races ({len(program.raw_instrs):,} instructions)")
    # (the arrays of the jitted passes, made once for the race check and the scheduler;
    # every access, once for the three checks)
    jitted = len(program.raw_instrs) > jit_worker.jit_above(
        JIT_ABOVE, *RACE_PASSES, "schedule", size=len(program.raw_instrs)
    )
    base = program.table().arrays() if jitted else None
    accesses = Accesses(program)
    twins = check_races(program, base, accesses, poll=meter.check_run_time)
    step("checking reads")
    if allow_uninit:
        _note_allowed(program, accesses)
    else:
        check_initialized(program, accesses)
        check_outputs_written(program, accesses)
    meter.check_run_time()
    if program.loops:  # (device loops: the time of the run the values decide)
        return twins, None, accesses
    step("scheduling")
    timeline = timing.schedule(program, base=base)
    meter.check_run_time()
    return twins, timeline, accesses


def _inputs_read(program: Program, instrs: set[int]) -> set[str]:
    """The names of the kernel inputs the instructions `instrs` read."""
    names = {t.id: name for name, t in program.inputs.items()}
    read = {v.as_root().tensor.id for i in instrs for _, v in program.raw_instrs[i].views("in")}
    return {names[tid] for tid in read if tid in names}


def _enclosing(body: list[Any], name: str) -> str | None:
    """The module-level function whose body defines a function `name` (a kernel factory),
    at any depth; None if none does."""
    for stmt in body:
        if isinstance(stmt, A.FunctionDef):
            todo = list(stmt.body)
            while todo:
                inner = todo.pop()
                if isinstance(inner, A.FunctionDef):
                    if inner.name == name:
                        return stmt.name
                    todo.extend(inner.body)
    return None


def _check_run(run: Program, allow_uninit: bool) -> None:
    """A program with device loops, checked again as it ran: loop-carried orders a text
    program dropped, reads that only a body run zero times would have written."""
    accesses = Accesses(run)  # (every access, once for the three checks)
    race = first_race(run, [], accesses=accesses, poll=limits_poll)
    if race is not None:
        raise race
    if allow_uninit:
        _note_allowed(run, accesses)
    else:
        check_initialized(run, accesses)
        check_outputs_written(run, accesses)


def _note_allowed(program: Program, accesses: Accesses) -> None:
    """`--allow-uninit`: what the read checks would stop on, as notes (once each: a device
    loop's run is checked after its program)."""
    lines = [
        f"{read.instr.span}: uninitialized read (allowed): {read.message()}; it reads NaN"
        for read in uninitialized_reads(program, limit=5, accesses=accesses)
    ]
    lines += [
        f"{gap.tensor.span}: {gap.message()} (allowed; it reads NaN)"
        for gap in unwritten_outputs(program, accesses)
    ]
    program.notes.extend(line for line in dict.fromkeys(lines) if line not in program.notes)


# Elements compared per unit of the run's clock (limits.tick) settling the two cores' writes.
_ELEMENTS_PER_TICK = 4096


def _settle_twin_writes(
    program: Program, twins: list[tuple[int, int]], watched: dict[int, Any] | None
) -> None:
    """The two cores' writes to HBM: a race where they wrote the same elements with
    different values, else a note when they overlap (the bytes end the same whichever core
    writes last)."""
    lines: dict[str, None] = {}
    for a, b in twins:
        assert watched is not None
        overlapped = False
        span = program.raw_instrs[b].span
        for where_a, values_a in watched[a]:  # every run of each (device loops: each pass)
            for where_b, values_b in watched[b]:
                tick(span, 1 + (where_a.size + where_b.size) // _ELEMENTS_PER_TICK)
                _, ia, ib = np.intersect1d(where_a, where_b, return_indices=True)
                if not ia.size:
                    continue
                if values_a[ia].tobytes() != values_b[ib].tobytes():
                    raise race_of(program, a, b)
                overlapped = True
        if overlapped:
            lines[str(program.raw_instrs[b].span)] = None
    for line in lines:
        program.notes.append(
            f"{line}: both cores write the same values to the same HBM bytes, unordered "
            "(the same result in either order; a race if the values ever differ)"
        )


def import_folders(path: str | Path, import_path: Sequence[str] = ()) -> tuple[Path, list[Path]]:
    """Where a kernel file's helper modules may come from: its tree (its folder, or the top
    folder of the package it is in) and the import path's folders in order (`import_path`,
    then NEURONEMU_PATH's), resolved."""
    return kernel_tree(str(path)), [root.folder for root in import_roots(import_path)]


def kernel_params(module: Any, kernel: str | None) -> list[str]:
    """The names of `kernel`'s positional parameters (of the file's @nki.jit kernel if None)."""
    from neuronemu.trace.kernel import is_jit

    for stmt in module.body:
        if isinstance(stmt, A.FunctionDef) and (
            stmt.name == kernel or (kernel is None and any(is_jit(d) for d in stmt.decorators))
        ):
            return [p.name for p in stmt.params if p.kind == "normal"]
    raise UsageError(f"no @nki.jit kernel {kernel or ''!r} found")
