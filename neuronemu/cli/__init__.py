"""The `neuronemu` command line: argument parsing, output formatting and exit codes only."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import sys
from typing import Any, Callable, Iterator

import click
import numpy as np

import neuronemu
from neuronemu.cli.format import console, print_result
from neuronemu.cli.migrate_command import lint, migrate
from neuronemu.cli.options import (
    LIMITS_HELP,
    MAX_WORKERS,
    Count,
    handle_errors,
    input_options,
    output_file,
    parse_limits,
    path_option,
    tolerance_option,
    writable_file,
)
from neuronemu.cli.sweep_command import sweep
from neuronemu.cli.warm_up_command import build_later, say_compiling, status_shown, warm_up
from neuronemu.nasm.write import dumps
from neuronemu.report import jsonout
from neuronemu_isa import TARGETS

__all__ = ["main"]


def _gather_inputs(
    input_specs: tuple[str, ...],
    inputs_npz: str | None,
    seed: int,
    limits: Any,
    unmade: bool = False,
) -> dict[str, Any]:
    """The inputs of `-i` and `--inputs`; `unmade`: seeded data made only if the run reads
    it (`neuronemu.inputs.Unmade`)."""
    from neuronemu.inputs import load_npz, parse_assignment

    inputs: dict[str, Any] = load_npz(inputs_npz, limits) if inputs_npz else {}
    budget = limits.memory_bytes - sum(getattr(v, "nbytes", 0) for v in inputs.values())
    for text in input_specs:
        name, value = parse_assignment(
            text, seed, limits.replace(memory_bytes=max(budget, 0)), unmade
        )
        budget -= getattr(value, "nbytes", 0)
        inputs[name] = value
    return inputs


def _limits(max_instructions: int | None, limits: Any) -> dict[str, Any]:
    if max_instructions is not None:
        limits = limits.replace(instructions=max_instructions)
    return {"limits": limits}


class _Commands(click.Group):
    """Click's group, with usage errors written as neuronemu writes every error
    (`error: <what>` and a hint), exit code 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)  # the help text itself
            sys.exit(2)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "neuronemu"
            if "--json" in (kwargs.get("args") or sys.argv[1:]):
                usage = neuronemu.errors.UsageError(
                    exc.format_message(), hint=f"see '{where} --help'"
                )
                click.echo(jsonout.dumps(jsonout.error_json(usage)))
            click.echo(f"error: {exc.format_message()}", err=True)
            click.echo(f"hint: see '{where} --help'", err=True)
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(neuronemu.__version__, prog_name="neuronemu")
def main() -> None:
    """Emulate NKI kernels on a model of the AWS NeuronCore: values, cycles, bottlenecks."""
    from neuronemu.jit import compiled as _jit
    from neuronemu.jit import compiling

    _jit.LINALG = False  # (start-up: see there)
    compiling.ON_COMPILE = say_compiling  # (a cold start says so on stderr)


@main.command()
@input_options
@path_option
@click.option(
    "--ref",
    "ref_spec",
    metavar="FILE.py:FUNC",
    help="NumPy reference taking the same inputs by name; outputs are checked.",
)
@tolerance_option("rtol", "Relative tolerance (default per dtype).")
@tolerance_option("atol", "Absolute tolerance (default per dtype).")
@click.option(
    "--save",
    "save_path",
    type=click.Path(dir_okay=False),
    metavar="OUT.npz",
    callback=writable_file,
    help="Save the outputs (bfloat16/fp8 widened to float32).",
)
@click.option(
    "--save-inputs",
    "save_inputs_path",
    type=click.Path(dir_okay=False),
    metavar="IN.npz",
    callback=writable_file,
    help="Save the run's exact input arrays (before it runs), for --inputs to replay.",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    metavar="OUT.json",
    callback=writable_file,
    help="Write a Chrome/Perfetto trace of the engine timeline.",
)
@click.option("--timing-only", is_flag=True, help="Schedule without computing values.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--precise/--no-precise",
    default=True,
    show_default=True,
    help="--no-precise holds bfloat16/float16/fp8/tf32 tensors in fp32, to tell an "
    "algorithm bug from rounding.",
)
@click.option(
    "--allow-uninit",
    is_flag=True,
    help="Report reads of never-written memory as notes (reading NaN) instead of errors.",
)
@click.option(
    "--no-spill",
    is_flag=True,
    help="Refuse a kernel whose live tiles outgrow SBUF instead of modelling the NKI "
    "compiler's spills to HBM.",
)
@click.option(
    "--shuffle-seed",
    type=int,
    default=None,
    metavar="N",
    help="Execute instructions the semaphores leave unordered in a seeded random order.",
)
@click.option(
    "--memory-map",
    is_flag=True,
    help="Print the SBUF/PSUM allocation map (tile, addresses, live range, line).",
)
@click.option(
    "--explain-mismatch",
    is_flag=True,
    help="On a mismatch with --ref, re-run with an unrounded shadow and name the "
    "first instruction (and line) whose output departs from it.",
)
@handle_errors
def run(
    kernel_file: str,
    kernel: str | None,
    input_specs: tuple[str, ...],
    inputs_npz: str | None,
    target: str | None,
    grid: tuple[int, ...] | None,
    seed: int,
    max_instructions: int | None,
    limits: Any,
    passes: tuple[str, ...] | None,
    debug: bool,
    import_path: tuple[str, ...],
    ref_spec: str | None,
    rtol: float | None,
    atol: float | None,
    save_path: str | None,
    save_inputs_path: str | None,
    trace_path: str | None,
    timing_only: bool,
    as_json: bool,
    precise: bool,
    allow_uninit: bool,
    no_spill: bool,
    shuffle_seed: int | None,
    memory_map: bool,
    explain_mismatch: bool,
) -> None:
    """Run KERNEL_FILE: execute, time, and (with --ref) check it."""
    from neuronemu.report.reference import load_reference

    if explain_mismatch and not ref_spec:
        raise neuronemu.UsageError(
            "--explain-mismatch needs a reference", hint="add --ref FILE.py:FUNC"
        )
    if timing_only and (ref_spec or save_path):
        dropped = "--ref" if ref_spec else "--save"
        raise neuronemu.UsageError(
            f"--timing-only computes no values, so {dropped} has nothing to work on",
            hint=f"drop --timing-only to check or save outputs, or drop {dropped}",
        )
    unmade = timing_only and not save_inputs_path  # (a run that times only may read no value)
    inputs = _gather_inputs(input_specs, inputs_npz, seed, limits, unmade)
    if save_inputs_path:
        from neuronemu.inputs import save_npz

        with output_file("--save-inputs", save_inputs_path) as f:
            save_npz(f, inputs)
    ref = load_reference(ref_spec) if ref_spec and not timing_only else None
    print_fn = functools.partial(click.echo, err=as_json)
    with _kept_to_the_end(), _progress(enabled=not as_json) as step:
        result = neuronemu.run(
            kernel_file,
            inputs,
            kernel=kernel,
            target=target,
            ref=ref,
            rtol=rtol,
            atol=atol,
            timing_only=timing_only,
            print_fn=print_fn,
            grid=grid,
            precise=precise,
            explain_mismatch=explain_mismatch,
            allow_uninit=allow_uninit,
            shuffle_seed=shuffle_seed,
            spill=not no_spill,
            passes=passes,
            import_path=import_path,
            progress=step,
            **_limits(max_instructions, limits),
        )
    for note in result.program.notes:
        click.echo(f"note: {note}", err=True)
    if memory_map:
        click.echo(result.program.memory_map(), err=as_json, nl=False)
    if trace_path:
        with output_file("--trace", trace_path) as f:
            f.write(json.dumps(result.trace_events()).encode())
        click.echo(
            f"trace: {trace_path} (open it in the Perfetto UI, https://ui.perfetto.dev, "
            "or chrome://tracing)",
            err=True,
        )
    if save_path and result.outputs is not None:
        from neuronemu.inputs import write_npz

        with output_file("--save", save_path) as f:
            write_npz(f, {k: _savable(v) for k, v in result.outputs.items()})
    if as_json:
        click.echo(jsonout.dumps(result.to_json()))
    else:
        print_result(result)
    if result.check is not None and not result.check.passed:
        click.echo(f"error: outputs differ from the reference: {result.check.message}", err=True)
        if result.check.explanation is not None:
            click.echo(f"explanation: {result.check.explanation['message']}", err=True)
        sys.exit(1)


# The command runs as its own process (`entry`): what a run makes may live to its end. False
# when a host calls `main` in its own process (click's CliRunner, a script).
_OWN_PROCESS = False


def entry() -> None:
    """The `neuronemu` command as a process of its own (the console script, and
    `python -m neuronemu`)."""
    global _OWN_PROCESS
    _OWN_PROCESS = True
    from neuronemu.host import malloc
    from neuronemu.jit import worker as jit_worker

    jit_worker.ENABLED = True  # (large programs: Numba loads in a second process meanwhile)
    malloc.keep_freed_arrays()  # (tiles' temporaries reuse the heap: see there)
    try:
        main()
    except SystemExit:
        _after_a_run()
        raise
    _after_a_run()


def _after_a_run() -> None:
    from neuronemu.jit import ahead
    from neuronemu.jit import worker as jit_worker

    # (the passes built ahead of time, or again: the next large runs need no worker)
    if jit_worker.started() or ahead.missed():
        build_later()


@contextlib.contextmanager
def _kept_to_the_end() -> Iterator[None]:
    """In the command's own process, the run's objects live until the process ends: no full
    collection walks them, during the run or after (one took ~1.5 s as a
    100,000-instruction run returned, and again while its result printed). Young
    collections go on, so cycles that die young are still freed. In a host's process,
    nothing changes: the host's later collections free the run's objects."""
    if not _OWN_PROCESS:
        yield
        return
    saved = gc.get_threshold()
    gc.set_threshold(saved[0], saved[1], 2**31 - 1)
    try:
        yield
    finally:
        gc.freeze()  # (into the permanent generation, which no collection walks)
        gc.set_threshold(*saved)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A status line on stderr naming the run's phase, when stderr is a terminal (never in
    --json output, never in a pipe or a log)."""
    if not (enabled and sys.stderr.isatty()):
        yield lambda _phase: None
        return
    from rich.console import Console

    with Console(stderr=True).status("neuronemu") as status, status_shown(status):
        yield lambda phase: status.update(f"neuronemu: {phase}")


def _savable(a: np.ndarray) -> np.ndarray:
    # ml_dtypes types (bfloat16, fp8) are not portable in .npy files: widen them.
    return a if a.dtype.kind in "biuf" else a.astype(np.float32)


@main.command()
@input_options
@path_option
@handle_errors
def asm(
    kernel_file: str,
    kernel: str | None,
    input_specs: tuple[str, ...],
    inputs_npz: str | None,
    target: str | None,
    grid: tuple[int, ...] | None,
    seed: int,
    max_instructions: int | None,
    limits: Any,
    passes: tuple[str, ...] | None,
    debug: bool,
    import_path: tuple[str, ...],
) -> None:
    """Print the per-engine instruction streams of KERNEL_FILE for the given inputs (the
    program the compiler would make of it; `--passes none`: the kernel as written)."""
    inputs = _gather_inputs(input_specs, inputs_npz, seed, limits)
    with _kept_to_the_end():
        program = neuronemu.compile_kernel(
            kernel_file,
            inputs,
            kernel=kernel,
            target=target,
            print_fn=functools.partial(click.echo, err=True),
            grid=grid,
            passes=passes,
            import_path=import_path,
            **_limits(max_instructions, limits),
        )
    text = dumps(program)
    click.echo(text, nl=False)
    size = len(text.encode("utf-8"))
    if size > limits.file_bytes:  # (a program file is read back under the kernel's budget)
        click.echo(
            f"note: this program is {size:,} bytes; to run it, raise the file_bytes budget "
            f"of {limits.file_bytes:,} (--limit file_bytes={size})",
            err=True,
        )


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True), default="kernels")
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default=None,
    help=f"NeuronCore generation to model [default: {neuronemu.DEFAULT_TARGET}, or the file's "
    "NEURON_PLATFORM_TARGET_OVERRIDE].",
)
@click.option(
    "--seed",
    type=Count(min=0),
    default=0,
    show_default=True,
    help="Seed of the random input data.",
)
@click.option("-k", "name_filter", default=None, metavar="NAME", help="Only kernels named so.")
@click.option(
    "-j",
    "jobs",
    type=Count(min=1, max=MAX_WORKERS),
    default=1,
    show_default=True,
    help="Cases at once.",
)
@tolerance_option(
    "rtol", "Relative tolerance for every case (default: the case's own, else per dtype)."
)
@tolerance_option(
    "atol", "Absolute tolerance for every case (default: the case's own, else per dtype)."
)
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    callback=parse_limits,
    help=LIMITS_HELP,
)
@path_option
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@handle_errors
def check(
    directory: str,
    target: str | None,
    seed: int,
    name_filter: str | None,
    jobs: int,
    rtol: float | None,
    atol: float | None,
    limits: Any,
    import_path: tuple[str, ...],
    as_json: bool,
    debug: bool,
) -> None:
    """Run every kernel in DIRECTORY against its `<name>_ref.py` reference, for each CASE.

    The kernels are untrusted input, parsed and interpreted, never run as Python; each
    `<name>_ref.py` is trusted code, imported and run as host Python (its CASES and
    reference()), as a test file is: check only a directory whose references you trust.
    """
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path

    from rich.table import Table

    from neuronemu.report.reference import discover_cases

    cases = [
        (str(k), n)
        for n, (k, _, _) in enumerate(discover_cases(directory))
        if name_filter is None or name_filter in k.stem
    ]
    without = sorted(
        p.name
        for p in Path(directory).glob("*.py")
        if not p.name.startswith("_")
        and not p.name.endswith("_ref.py")
        and not p.with_name(p.stem + "_ref.py").is_file()
        and (name_filter is None or name_filter in p.stem)
    )
    if not cases:
        raise neuronemu.UsageError(
            f"no <name>.py with a <name>_ref.py defining CASES in {directory}"
            + (f" named {name_filter!r}" if name_filter else "")
        )
    work = [(directory, n, target, seed, rtol, atol, limits, import_path) for _, n in cases]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_check_case, work))
    else:
        results = [_check_case(w) for w in work]
    failed = sum(r["result"] != "passed" for r in results)
    if as_json:
        report = {
            "schema": jsonout.SCHEMA_VERSION,
            "cases": results,
            "without_reference": without,
            "passed": len(results) - failed,
            "failed": failed,
        }
        click.echo(jsonout.dumps(report))
    else:
        table = Table(box=None, padding=(0, 2))
        for col in ("kernel", "inputs", "target", "result", "cycles", "bound by"):
            table.add_column(col)
        for r in results:
            shown = " ".join(f"{k}={v}" for k, v in r["inputs"].items())
            cycles = "" if r["cycles"] is None else f"{r['cycles']:,}"
            table.add_row(
                r["kernel"], shown, r["target"] or "", r["result"], cycles, r["bound_by"] or ""
            )
        console().print(table)
        for r in results:
            if r["result"] != "passed":
                click.echo(f"{r['kernel']} ({r['result']}): {r['detail']}", err=True)
        if without:
            click.echo(f"no <name>_ref.py, not checked: {', '.join(without)}", err=True)
        click.echo(f"{len(results) - failed} passed, {failed} failed")
    if failed:
        sys.exit(1)


def _check_case(work: tuple[Any, ...]) -> dict[str, Any]:
    """One case of `neuronemu check` (a process of its own with -j: by index, so that the
    worker loads the reference itself): (directory, index, target, seed, rtol, atol,
    limits, import_path), the tolerances given on the command line overriding the case's."""
    from neuronemu.inputs import parse_spec
    from neuronemu.report.reference import case_tolerances, discover_cases

    directory, index, target, seed, given_rtol, given_atol, limits, import_path = work
    kernel_path, reference, entry = discover_cases(directory)[index]
    case, rtol, atol = case_tolerances(entry)
    rtol = rtol if given_rtol is None else given_rtol
    atol = atol if given_atol is None else given_atol
    row: dict[str, Any] = {
        "kernel": kernel_path.name,
        "inputs": dict(case),
        "target": target,
        "result": "error",
        "detail": "",
        "cycles": None,
        "time_ns": None,
        "bound_by": None,
    }
    try:
        inputs = {name: parse_spec(name, spec, seed) for name, spec in case.items()}
        result = neuronemu.run(
            kernel_path,
            inputs,
            target=target,
            ref=reference,
            rtol=rtol,
            atol=atol,
            print_fn=lambda _: None,
            limits=limits,
            import_path=import_path,
        )
    except neuronemu.NeuronEmuError as err:
        row["detail"] = err.render().splitlines()[0]
        return row
    check = result.check
    row.update(
        target=result.program.arch.name,
        cycles=result.cycles,
        time_ns=result.time_ns,
        bound_by=result.bound_by,
        result="passed" if check is not None and check.passed else "MISMATCH",
        detail="" if check is None or check.passed else check.message,
    )
    return row


main.add_command(sweep)
main.add_command(migrate)
main.add_command(lint)
main.add_command(warm_up)

if __name__ == "__main__":  # (`python -m neuronemu.cli` as `python -m neuronemu`)
    main()
