"""`neuronemu migrate` (a neuronxcc.nki kernel ported to NKI 0.7, and the port run beside the
original on the same inputs) and `neuronemu lint` (deprecated and removed constructs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

import neuronemu
from neuronemu.cli.options import handle_errors, input_options, output_file, writable_file
from neuronemu.host.files import check_own_output, write_own_file
from neuronemu.migrate import MARK, compare_outputs, lint_file, migrate_file

__all__ = ["lint", "migrate"]

# A port slower than the original by more than this share of its time says why.
SLOWER_SHARE = 0.005


@click.command()
@click.argument("kernel_file", type=click.Path(dir_okay=False))
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@handle_errors
def lint(kernel_file: str, debug: bool) -> None:
    """List the deprecated and removed NKI constructs of KERNEL_FILE (either dialect), each
    with the NKI version that removed or deprecated it and its replacement. Exit 0 when there
    are none, 1 when there are some, 2 when the file is not an NKI kernel file."""
    findings = lint_file(kernel_file)
    for f in findings:
        click.echo(f"{f.span}: warning: {f.message()} [{f.rule.name}]")
    if findings:
        click.echo(f"{len(findings)} deprecated or removed construct(s)", err=True)
        sys.exit(1)


@click.command()
@input_options
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    callback=writable_file,
    metavar="NEW.py",
    help="Where to write the ported kernel [default: <name>_migrated.py beside it, "
    "replaced if a regular file, refused if a link].",
)
@click.option(
    "--check", is_flag=True, help="Exit 1 when the ported kernel's values differ (for CI)."
)
@click.option("--no-run", is_flag=True, help="Only write the port: run neither kernel.")
@handle_errors
def migrate(
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
    output: str | None,
    check: bool,
    no_run: bool,
) -> None:
    """Port KERNEL_FILE from the neuronxcc.nki dialect to NKI 0.7, then run both on the same
    seeded inputs (-i/--inputs, else the CASES of <name>_ref.py beside it) and compare their
    values, time, bound and engine use. What cannot be ported mechanically is left in place
    under a '# neuronemu: ...' comment and listed.

    <name>_ref.py is trusted code: without -i/--inputs or --no-run it is imported and run as
    host Python, with your rights, as `neuronemu check` runs it (the kernel files never are).
    Migrate a folder you do not trust with -i or --no-run."""
    from neuronemu.cli import _gather_inputs, _limits

    old = Path(kernel_file)
    new = Path(output) if output else old.with_name(old.stem + "_migrated.py")
    if new.exists() and old.exists() and new.resolve() == old.resolve():
        raise neuronemu.UsageError(
            f"-o {output} is the kernel itself: the port would overwrite the original",
            hint="write the port to another file, and compare before replacing",
        )
    if no_run and check:
        raise neuronemu.UsageError("--check runs the two kernels: drop --no-run")
    if not output:  # (before either kernel runs)
        check_own_output(new, "the port", _OWN_OUTPUT_HINT)
    cases: list[tuple[str, dict[str, Any]]] = []
    if no_run:
        pass
    elif input_specs or inputs_npz:
        cases = [(" ".join(input_specs), _gather_inputs(input_specs, inputs_npz, seed, limits))]
    else:
        cases = _reference_cases(old, seed)
    if check and not cases:
        raise neuronemu.UsageError(
            "--check needs inputs to run the two kernels on",
            hint=f"give -i NAME=SPEC, or CASES in {old.stem}_ref.py beside {old.name}",
        )
    run = {
        "kernel": kernel,
        "target": target,
        "grid": grid,
        "passes": passes,
        "print_fn": lambda _: None,
        **_limits(max_instructions, limits),
    }
    # (the original first: inputs it cannot run on are the user's error, not the port's)
    first_old = neuronemu.run(old, _copy(cases[0][1]), **run) if cases else None
    results = _results(first_old, old) if first_old is not None else None
    migration, first, kept = _port(
        old, new, limits, cases[0][1] if cases else None, run, results, output is not None
    )
    n_marks = len({line for _, line in migration.marked})
    click.echo(
        f"{old} -> {new}: {len(migration.rewritten)} rewrite(s), "
        f"{n_marks} place(s) marked to finish by hand"
    )
    for finding, why in kept:
        click.echo(
            f"kept {finding.detail or finding.rule.what} at {finding.span} as written: "
            f"its port did not run ({why})"
        )
    if migration.marked:
        click.echo(f"to finish by hand (each under a '{MARK.strip()}' comment):")
        shown = dict.fromkeys(
            (line, migration.message(f), f.rule.name) for f, line in migration.marked
        )
        for line, message, rule in shown:
            click.echo(f"  {new}:{line}: {message} [{rule}]")
    if not cases:
        if not no_run:
            click.echo(f"no inputs (-i, or CASES in {old.stem}_ref.py): the port is not run")
        return
    equal = 0
    for n, (label, inputs) in enumerate(cases):
        given = (first_old, first) if n == 0 else (None, None)
        equal += _proof(old, new, label, inputs, run, *given)
    click.echo(f"values: equal in {equal} of {len(cases)} case(s)")
    if check and equal < len(cases):
        sys.exit(1)


# What to do when the default name of the port is taken by a link, a FIFO or a folder.
_OWN_OUTPUT_HINT = "remove it, or name the port's file with -o NEW.py"

# At most this many runs of the port to find the rewrites to keep as written.
MAX_TRIES = 16


def _results(before: Any, old: Path) -> dict[tuple[int, int, str], str]:
    """The result tile of each instruction of the old kernel's run, by its place and name,
    as `nl.ndarray(...)` text: where all its executions made the same shape, dtype and
    buffer (for the marks of value-returning nisa calls to show)."""
    ours: dict[str, bool] = {}
    seen: dict[tuple[int, int, str], set[str]] = {}
    for ins in before.program.instrs:
        span, dst = ins.span, ins.operands.get("dst")
        if span is None or not hasattr(dst, "shape") or not hasattr(dst, "buffer"):
            continue
        if span.path not in ours:
            ours[span.path] = Path(span.path).resolve() == old.resolve()
        if ours[span.path]:
            tile = (
                f"nl.ndarray({tuple(dst.shape)}, dtype={dst.dtype!r}, buffer=nl.{dst.buffer.value})"
            )
            seen.setdefault((span.line, span.col, ins.spec.name), set()).add(tile)
    return {key: tiles.pop() for key, tiles in seen.items() if len(tiles) == 1}


def _port(
    old: Path,
    new: Path,
    limits: Any,
    inputs: dict[str, Any] | None,
    run: dict,
    results: dict[tuple[int, int, str], str] | None = None,
    written_to: bool = False,
) -> tuple[Any, Any, list[tuple[Any, str]]]:
    """Write the port (`written_to`: at the path -o gave); with inputs, run it once, and keep
    as written (nl.load, nl.store, `psum +=`) each rewrite on the line where the port stops
    with an error, until it runs or the error is on no such line. (the migration, the run's
    result or error, the kept)."""
    keep: frozenset = frozenset()
    kept: list[tuple[Any, str]] = []
    failed: neuronemu.NeuronEmuError | None = None
    for _ in range(MAX_TRIES):
        migration = migrate_file(old, limits, keep, results)
        if written_to:  # (the user's own name: written where it leads, as the shell's >)
            with output_file("-o", str(new)) as f:
                f.write(migration.text.encode("utf-8"))
        else:
            write_own_file(new, migration.text.encode("utf-8"), "the port", _OWN_OUTPUT_HINT)
        if inputs is None:
            return migration, None, kept
        try:
            return migration, neuronemu.run(new, _copy(inputs), **run), kept
        except neuronemu.NeuronEmuError as err:
            span = err.span
            here = span is not None and Path(span.path).resolve() == new.resolve()
            undo = migration.rewritten_at(span.line) if here and span is not None else []
            if not undo:
                return migration, err, kept
            failed = err
            why = err.render().splitlines()[0].split(" error: ", 1)[-1]
            kept += [(f, why) for f in undo]
            keep |= {f.span for f in undo}
    return migration, failed, kept


def _reference_cases(old: Path, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """The CASES of `<name>_ref.py` beside the kernel, as (label, inputs)."""
    from neuronemu.inputs import parse_spec
    from neuronemu.report.reference import case_tolerances, discover_cases

    if not old.with_name(old.stem + "_ref.py").is_file():
        return []
    cases = []
    for path, _, entry in discover_cases(old.parent):
        if path.resolve() != old.resolve():
            continue
        specs = case_tolerances(entry)[0]
        label = " ".join(f"{k}={v}" for k, v in specs.items())
        cases.append((label, {k: parse_spec(k, v, seed) for k, v in specs.items()}))
    return cases


def _copy(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def _proof(
    old: Path,
    new: Path,
    label: str,
    inputs: dict[str, Any],
    run: dict,
    before: Any = None,
    after: Any = None,
) -> bool:
    """Run both kernels on `inputs` (unless `before`, `after` are their results already, or
    the new one's error), print them side by side; True when the values match."""
    click.echo(f"case {label}")
    if before is None:
        before = neuronemu.run(old, _copy(inputs), **run)
    try:
        if after is None:
            after = neuronemu.run(new, _copy(inputs), **run)
        elif isinstance(after, neuronemu.NeuronEmuError):
            raise after
    except neuronemu.NeuronEmuError as err:
        click.echo(f"  the port does not run yet: {err.render().splitlines()[0]}")
        return False
    diffs = compare_outputs(before.outputs or {}, after.outputs or {})
    rows = [("", "old", "new")]
    for d in diffs:
        rows.append((f"output {d.name}", "", d.verdict()))
    rows.append(("time", f"{before.time_ns / 1000:.3f} us", f"{after.time_ns / 1000:.3f} us"))
    rows.append(("bound by", before.bound_by, after.bound_by))
    engines_old, engines_new = before.engines, after.engines
    for engine in engines_old:
        used = (
            f"{100 * engines_old[engine]['utilization']:.1f}%",
            f"{100 * engines_new.get(engine, {'utilization': 0.0})['utilization']:.1f}%",
        )
        rows.append((f"{engine} utilization", *used))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        click.echo("  " + "  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    click.echo(f"  old {before.critical_path.summary()}")
    click.echo(f"  new {after.critical_path.summary()}")
    if after.time_ns > before.time_ns * (1 + SLOWER_SHARE):
        click.echo("  " + _why_slower(before, after))
    return all(d.equal for d in diffs)


def _why_slower(before: Any, after: Any) -> str:
    """The critical-path causes that grew the most from the old kernel to the new."""
    old = {cause: ns for cause, ns, _ in before.critical_path.by_cause()}
    grown = sorted(
        ((ns - old.get(cause, 0.0), cause) for cause, ns, _ in after.critical_path.by_cause()),
        reverse=True,
    )
    share = 100 * (after.time_ns / before.time_ns - 1)
    causes = ", ".join(f"{cause} +{ns / 1000:.3f} us" for ns, cause in grown[:2] if ns > 0)
    return f"the port is {share:.1f}% slower; on its critical path: {causes or 'no cause grew'}"
