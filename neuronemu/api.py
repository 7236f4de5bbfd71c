"""The public entry points: compile a kernel file, run it, simulate it like `nki.simulate`."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from neuronemu.errors import UsageError, shown
from neuronemu.frontend import parse_file
from neuronemu.inputs import array_inputs, checked_inputs
from neuronemu.limits import Limits, Meter, checked
from neuronemu.pipeline import (
    DEFAULT_TARGET,
    RunOptions,
    compile_program,
    kernel_params,
    run_program,
)
from neuronemu.program import Program
from neuronemu.report import Result

__all__ = ["compile_kernel", "run", "simulate", "DEFAULT_TARGET", "RunOptions", "as_limits"]


def as_limits(
    limits: Limits | Mapping[str, Any] | None = None,
    max_instructions: int | None = None,
    max_loop_iterations: int | None = None,
) -> Limits:
    """`Limits` from a Limits, a mapping of budget names to values, or the defaults; the two
    older keyword arguments override their budgets."""
    if limits is None:
        limits = Limits()
    elif not isinstance(limits, Limits):
        if not isinstance(limits, Mapping):
            raise UsageError(
                f"limits must be a neuronemu.Limits or a dict of budget names to values, "
                f"got {type(limits).__name__}"
            )
        known = [f.name for f in dataclasses.fields(Limits)]
        for name in limits:
            if name not in known:
                raise UsageError(
                    f"limits: no budget {shown(name)}", hint=f"the budgets: {', '.join(known)}"
                )
        limits = Limits().replace(**limits)
    if max_instructions is not None:
        limits = limits.replace(instructions=max_instructions)
    if max_loop_iterations is not None:
        limits = limits.replace(loop_iterations=max_loop_iterations)
    return checked(limits)


def compile_kernel(
    path: str | Path,
    inputs: dict[str, Any],
    kernel: str | None = None,
    target: str | None = None,
    print_fn: Callable[[str], None] = print,
    max_instructions: int | None = None,
    grid: tuple[int, ...] | None = None,
    max_loop_iterations: int | None = None,
    limits: Limits | Mapping[str, Any] | None = None,
    spill: bool = True,
    passes: Sequence[str] | None = None,
    import_path: Sequence[str | Path] | None = None,
) -> Program:
    """Parse and specialize `kernel` of `path` for these inputs (arrays or literals).

    `target` defaults to the file's NEURON_PLATFORM_TARGET_OVERRIDE, else trn2.

    `grid` is the SPMD launch grid; by default the grid of a constant `kernel[gx, gy](...)`
    launch in the file, else (1,).

    `limits` bounds what the run may cost (`Limits`, or a dict such as
    `{"trace_seconds": 60}`); running out is a `BudgetError` naming the budget.

    Live tiles that outgrow SBUF are spilled to HBM and back as the NKI compiler would
    (`neuronemu.build.spill`; a note per source line); `spill=False` refuses them instead.
    `passes`: the compiler's documented transformations applied (`pipeline.PASSES`, all by
    default; `[]` runs the kernel as written, instruction for instruction).

    `import_path`: folders holding other packages' source trees that helper modules also
    come from, after the kernel's folder and package (as `--path`; then NEURONEMU_PATH).
    """
    options = RunOptions(
        kernel=kernel,
        target=target,
        grid=grid,
        spill=spill,
        **_passes(passes),
        **_import_path(import_path),
    )
    meter = Meter(as_limits(limits, max_instructions, max_loop_iterations))
    return compile_program(path, checked_inputs(inputs), options, print_fn, meter)


def _passes(passes: Sequence[str] | None) -> dict[str, Any]:
    return {} if passes is None else {"passes": tuple(passes)}


def _import_path(import_path: Sequence[str | Path] | None) -> dict[str, Any]:
    if import_path is None:
        return {}
    if isinstance(import_path, (str, bytes, os.PathLike)) or not isinstance(
        import_path, (list, tuple)
    ):
        raise UsageError(
            f"import_path must be a list of folders, got {shown(import_path)}",
            hint="e.g. import_path=['../nki-library/src/nkilib_src']",
        )
    return {
        "import_path": tuple(os.fspath(p) if isinstance(p, os.PathLike) else p for p in import_path)
    }


def run(
    path: str | Path,
    inputs: dict[str, Any],
    kernel: str | None = None,
    target: str | None = None,
    ref: Callable[..., Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    timing_only: bool = False,
    print_fn: Callable[[str], None] = print,
    max_instructions: int | None = None,
    grid: tuple[int, ...] | None = None,
    max_loop_iterations: int | None = None,
    precise: bool = True,
    explain_mismatch: bool = False,
    allow_uninit: bool = False,
    shuffle_seed: int | None = None,
    limits: Limits | Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    spill: bool = True,
    passes: Sequence[str] | None = None,
    import_path: Sequence[str | Path] | None = None,
) -> Result:
    """Compile, execute and time a kernel (a `.nasm` text program runs as written); with
    `ref`, check its outputs against NumPy.

    `precise=False` holds bfloat16/float16/fp8/tf32 tensors in fp32, to tell an algorithm bug
    from rounding. `explain_mismatch`: when the check fails, re-run with an unrounded shadow
    and name the first instruction that departs from it (`check.explanation`).

    Before running, races between unordered instructions are RaceErrors, and reads of
    never-written memory MemoryAccessErrors (notes instead, with `allow_uninit`).
    `shuffle_seed` executes in a seeded random order the semaphores allow. `limits` bounds
    what the run may cost (see `compile_kernel`). `progress` is told each phase as it starts
    ("tracing", "checking races", "checking reads", "scheduling", "executing", "comparing").
    `spill`, `passes`, `import_path`: as for `compile_kernel`.
    """
    step = progress or (lambda _phase: None)
    options = RunOptions(
        kernel=kernel,
        target=target,
        grid=grid,
        spill=spill,
        precise=precise,
        allow_uninit=allow_uninit,
        shuffle_seed=shuffle_seed,
        timing_only=timing_only,
        explain_mismatch=explain_mismatch,
        rtol=rtol,
        atol=atol,
        **_passes(passes),
        **_import_path(import_path),
    )
    inputs = checked_inputs(inputs)
    meter = Meter(as_limits(limits, max_instructions, max_loop_iterations))
    step("tracing")
    if str(path).endswith(".nasm"):
        from neuronemu.nasm.read import load_program

        array_inputs(inputs)
        program = load_program(path, inputs, target, meter)
    else:
        program = compile_program(path, inputs, options, print_fn, meter)
    return run_program(program, inputs, meter, options, ref=ref, print_fn=print_fn, step=step)


def simulate(
    path: str | Path | Callable[..., Any],
    kernel: str | None = None,
    target: str | None = None,
    grid: tuple[int, ...] | None = None,
    import_path: Sequence[str | Path] | None = None,
) -> Callable[..., Any]:
    """Like `nki.simulate(kernel)`: a function of the kernel's inputs returning its outputs.

    `path` is the kernel file, or the kernel function itself as the user's own Python
    imported it (its file and name are looked up; neuronemu still parses that file, never
    runs the function). `import_path`: as for `compile_kernel`."""
    if callable(path) and not isinstance(path, (str, Path)):
        path, kernel = _function_source(path, kernel)

    def call(*args: Any, **kwargs: Any) -> Any:
        module = parse_file(path)
        names = kernel_params(module, kernel)
        inputs = dict(zip(names, args)) | kwargs
        result = run(path, inputs, kernel=kernel, target=target, grid=grid, import_path=import_path)
        assert result.outputs is not None
        outs = list(result.outputs.values())
        return outs[0] if len(outs) == 1 else tuple(outs)

    return call


def _function_source(fn: Callable[..., Any], kernel: str | None) -> tuple[str, str]:
    """The file and name of a kernel function (through decorators that wrap it)."""
    import inspect

    target = inspect.unwrap(fn)
    for attr in ("func", "fn", "__wrapped__"):  # nki.jit-like wrappers keep the function
        target = getattr(target, attr, target) if not inspect.isfunction(target) else target
    try:
        source = inspect.getsourcefile(target)
    except TypeError:
        source = None
    if source is None:
        raise UsageError(
            f"neuronemu.simulate: cannot find the source file of {fn!r}",
            hint="pass the kernel file's path (and kernel= its name) instead",
        )
    return source, kernel or getattr(target, "__name__", None) or ""
