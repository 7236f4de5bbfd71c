"""`neuronemu sweep`: a kernel's configurations ranked by predicted time."""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Callable

import click

import neuronemu
from neuronemu.cli.format import print_sweep
from neuronemu.cli.options import (
    MAX_WORKERS,
    Count,
    handle_errors,
    parse_limits,
    path_option,
    results_file,
    tolerance_option,
)
from neuronemu.errors import shown
from neuronemu.report import jsonout
from neuronemu_isa import TARGETS

__all__ = ["sweep"]


@click.command()
@click.argument("kernel_file", type=click.Path(dir_okay=False))
@click.option("-k", "--kernel", "kernel", metavar="NAME", help="Kernel of the file to sweep.")
@click.option(
    "-i",
    "--input",
    "input_specs",
    multiple=True,
    metavar="NAME=SPEC",
    help="A kernel input as `run` takes it; {PARAM} fields take each configuration's "
    "values, e.g. -i 'x=bfloat16[{M},{K}]'. Repeatable.",
)
@click.option(
    "-p",
    "--param",
    "param_specs",
    multiple=True,
    metavar="NAME=VALUES",
    help="A parameter to sweep: v1,v2,... (Python literals) or lo..hi[:step] (integers, "
    "hi included). A kernel parameter, or a {NAME} of an -i SPEC. Repeatable: the sweep "
    "is the cross product.",
)
@click.option(
    "--where",
    metavar="EXPR",
    help="Keep the configurations where EXPR holds, e.g. 'TILE_N * BUFS <= 2048'.",
)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default=None,
    help="NeuronCore generation to model [default: as `run`].",
)
@click.option(
    "--ref",
    "ref_spec",
    metavar="FILE.py:FUNC",
    help="Also compute values and check them against this NumPy reference (slower); "
    "a mismatch fails the configuration.",
)
@tolerance_option("rtol", "Relative tolerance of --ref (default per dtype).")
@tolerance_option("atol", "Absolute tolerance of --ref (default per dtype).")
@click.option(
    "--seed",
    type=Count(min=0),
    default=0,
    show_default=True,
    help="Seed of the random input data (with --ref).",
)
@click.option(
    "-j",
    "--workers",
    type=Count(min=1, max=MAX_WORKERS),
    default=None,
    help="Processes on this machine (or, with --ray and no cluster, the CPUs of the local "
    "Ray instance) [default: the CPU count].",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Run each configuration as a Ray task: on a cluster (`auto`, or its address "
    "such as ray://head:10001), or on a local instance (`--ray` alone). Needs "
    "pip install 'neuronemu[ray]'.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    callback=results_file,
    metavar="RESULTS.jsonl",
    help="Append each configuration's result as it finishes; a sweep rerun with the "
    "same file runs only the configurations not in it.",
)
@click.option(
    "--max-configs",
    type=Count(min=1),
    default=None,
    metavar="N",
    help="The most configurations the --param values may make, before --where [default: 100,000].",
)
@click.option(
    "--shard",
    callback=lambda ctx, param, value: _parse_shard(value),
    metavar="I/N",
    help="Run only the I-th of N disjoint parts of the configurations (0 <= I < N: a Slurm "
    "or AWS Batch array job's task index), into its own --out.",
)
@click.option(
    "--merge",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True),
    metavar="RESULTS.jsonl",
    help="Run nothing: rank the results these --out files of the shards hold. Repeatable.",
)
@click.option(
    "--top",
    type=Count(min=0),
    default=10,
    show_default=True,
    help="Rows of the table (0: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--no-spill", is_flag=True, help="Refuse kernels that outgrow SBUF (as `run`).")
@click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    callback=parse_limits,
    help="A budget of each configuration's run (as `run`). Repeatable.",
)
@path_option
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@handle_errors
def sweep(
    kernel_file: str,
    kernel: str | None,
    input_specs: tuple[str, ...],
    param_specs: tuple[str, ...],
    where: str | None,
    target: str | None,
    ref_spec: str | None,
    rtol: float | None,
    atol: float | None,
    seed: int,
    workers: int | None,
    ray_address: str | None,
    out: str | None,
    max_configs: int | None,
    shard: tuple[int, int] | None,
    merge: tuple[str, ...],
    top: int,
    as_json: bool,
    no_spill: bool,
    limits: Any,
    import_path: tuple[str, ...],
    debug: bool,
) -> None:
    """Rank KERNEL_FILE's configurations by predicted time (timing only unless --ref)."""
    from neuronemu import sweeps

    if not param_specs:
        raise neuronemu.UsageError(
            "nothing to sweep", hint="add --param NAME=v1,v2,... (or lo..hi[:step])"
        )
    params = dict(sweeps.parse_param(text) for text in param_specs)
    inputs = {}
    for text in input_specs:
        name, sep, spec = text.partition("=")
        if not sep or not name.strip().isidentifier():
            raise neuronemu.UsageError(
                f"-i {text!r}: expected NAME=SPEC", hint="e.g. -i 'x=bfloat16[{M},512]'"
            )
        inputs[name.strip()] = spec.strip()
    results = neuronemu.sweep(
        kernel_file,
        params,
        inputs,
        kernel=kernel,
        target=target,
        where=where,
        ref=ref_spec,
        rtol=rtol,
        atol=atol,
        seed=seed,
        spill=not no_spill,
        limits=limits,
        backend="local" if ray_address is None else "ray",
        workers=workers,
        address=None if ray_address in (None, "local") else ray_address,
        out=out,
        max_configs=max_configs or sweeps.MAX_CONFIGS,
        shard=shard,
        merge=merge,
        progress=_sweep_progress(),
        log=lambda message: click.echo(message, err=True),
        import_path=import_path,
    )
    ok = [r for r in results if r["status"] == "ok"]

    def command(record: dict) -> str:
        return sweeps.command_for(
            kernel_file, kernel, inputs, record, target, ref_spec, rtol, atol, import_path
        )

    # (one ranking per problem: configurations that change an input's shape solve another)
    problems: dict[str, list[dict]] = {}
    for r in ok:
        problems.setdefault(json.dumps(r.get("problem", {}), sort_keys=True), []).append(r)
    groups = [(group[0].get("problem", {}), group) for group in problems.values()]
    if as_json:
        report = {
            "schema": jsonout.SCHEMA_VERSION,
            "kernel_file": kernel_file,
            "params": params,
            "results": results,
            "best": ok[0] if ok else None,
            "best_command": command(ok[0]) if ok else None,
            "problems": [
                {"inputs": problem, "best": group[0], "best_command": command(group[0])}
                for problem, group in groups
            ],
            "ran": len(ok),
            "failed": len(results) - len(ok),
        }
        click.echo(jsonout.dumps(report))
    else:
        failed = [r for r in results if r["status"] != "ok"]
        for n, (problem, group) in enumerate(groups):
            if len(groups) > 1:
                shown = " ".join(f"{k}={v}" for k, v in problem.items())
                click.echo(f"problem {n + 1} of {len(groups)}: {shown}")
            last = n == len(groups) - 1
            print_sweep(group + (failed if last else []), list(params), top, command(group[0]))
        if not groups:
            print_sweep(failed, list(params), top, "")
    if not ok:
        click.echo("error: no configuration ran; see the errors above", err=True)
        sys.exit(1)


def _sweep_progress() -> Callable[[dict, int, int], None]:
    """A line on stderr per finished configuration."""

    def report(record: dict, done: int, total: int) -> None:
        config = " ".join(f"{k}={v!r}" for k, v in record["config"].items())
        if record["status"] == "ok":
            what = f"{record['time_ns'] / 1000:,.2f} us, bound by {record['bound_by']}"
        else:
            what = f"{record['status']}: {record['error']['message']}"
        click.echo(f"[{done}/{total}] {config}: {what}", err=True)

    return report


# The most parts a sweep is split into (each an array job's task; far more than any has).
MAX_SHARDS = 10**9


def _parse_shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    i, sep, n = (part.strip() for part in value.partition("/"))
    if not (sep and re.fullmatch("[0-9]+", i) and re.fullmatch("[0-9]+", n)):
        raise click.BadParameter(
            f"{shown(value)}: expected I/N, two whole numbers with 0 <= I < N (e.g. "
            "$SLURM_ARRAY_TASK_ID/8 with #SBATCH --array=0-7)"
        )
    # (the length first: Python reads no int of over 4,300 digits)
    if len(n.lstrip("0")) > len(str(MAX_SHARDS)) or int(n) > MAX_SHARDS:
        raise click.BadParameter(f"{shown(value)}: N is over {MAX_SHARDS:,}, the most parts")
    if int(n) == 0:
        raise click.BadParameter(f"{shown(value)}: N is 0; a sweep has at least 1 part")
    if len(i.lstrip("0")) > len(n) or int(i) >= int(n):
        raise click.BadParameter(
            f"{shown(value)}: I must be below N (0 <= I < N: the parts are numbered from 0)"
        )
    return int(i), int(n)
