"""Sweeps: a kernel's compile-time configurations (the cross product of parameter values,
input shapes among them) each traced and timed, ranked by predicted time, on local
processes or a Ray cluster, each result appended to a JSONL file a sweep resumes from.

A configuration that fails (SBUF over capacity, an assertion of the kernel...) is a result
too: its located error. Results are plain JSON values, the same on every backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import stat
import string
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuronemu.errors import MismatchError, UsageError, shown
from neuronemu.limits import Limits, Meter
from neuronemu.nasm.write import dumps
from neuronemu.report import jsonout
from neuronemu.sweeps.params import (
    MAX_CONFIGS,
    RECORDABLE,
    configurations,
    parse_param,
    recordable,
    where_filter,
)
from neuronemu.sweeps.results import key_of, open_results, read_done

__all__ = [
    "Sweep",
    "sweep",
    "parse_param",
    "where_filter",
    "configurations",
    "MAX_CONFIGS",
    "ranked",
    "key_of",
    "command_for",
    "top_k",
]

# What a sweep ships to Ray workers: the kernel's tree (its helper modules), up to this, and
# as much of each import path folder.
SHIP_BYTES = 32 * 2**20


@dataclass(frozen=True)
class Sweep:
    """What each configuration is run with (plain data: it travels to other processes)."""

    path: str
    kernel: str | None
    target: str | None
    inputs: tuple[tuple[str, str], ...]  # -i NAME=SPEC, SPEC a template of {PARAM}
    kernel_params: frozenset[str]  # the parameters the kernel itself takes
    ref: str | None = None  # FILE.py:FUNC: then values are computed and checked
    rtol: float | None = None
    atol: float | None = None
    seed: int = 0
    spill: bool = True
    limits: dict[str, Any] = field(default_factory=dict)
    import_path: tuple[str, ...] = ()  # folders helper modules also come from (`--path`)

    def inputs_for(self, config: Mapping[str, Any]) -> dict[str, Any]:
        from neuronemu.inputs import parse_spec

        limits = Limits().replace(**self.limits)
        values: dict[str, Any] = {}
        for name, template in self.inputs:
            spec = _format(template, config)
            if self.ref is None and "~" not in spec and "[" in spec and not spec.startswith("@"):
                spec += "~zeros"  # the timing never reads values: no data to make
            values[name] = parse_spec(name, spec, self.seed, limits)
        values.update({k: v for k, v in config.items() if k in self.kernel_params})
        return values

    def flags(self, config: Mapping[str, Any]) -> list[str]:
        """The -i flags that run this configuration alone."""
        out = [f"{name}={_format(t, config)}" for name, t in self.inputs]
        out += [f"{k}={v!r}" for k, v in config.items() if k in self.kernel_params]
        return out


def _format(template: str, config: Mapping[str, Any]) -> str:
    """`bfloat16[{M},{K}]` with the configuration's values (names only: no attribute or
    index lookups in the fields)."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise UsageError(
            f"-i {template!r}: {exc}", hint="fields are {NAME}; a literal brace is {{ or }}"
        ) from None
    out = []
    for literal, name, spec, conversion in fields:
        out.append(literal)
        if name is None:
            continue
        if name not in config or spec or conversion:
            raise UsageError(
                f"-i {template!r}: {{{name}}} must name a --param",
                hint="write e.g. -i 'x=bfloat16[{M},{K}]' with --param M=... --param K=...",
            )
        out.append(str(config[name]))
    return "".join(out)


# The most instructions of a program a sweep looks up in its memo by its text: writing the
# text takes ~0.2 ms an instruction (it makes every view a replay left unmade), more than
# timing the program, and no budget meters it; past this the program is timed again.
MEMO_MAX_INSTRS = 4096


def run_config(sweep: Sweep, config: dict[str, Any], memo: dict[str, Any] | None = None) -> dict:
    """One configuration's result (a JSON object): its time and what bounds it, or the
    located error that stopped it. `memo`: timings of programs seen before, by their text."""
    from neuronemu.api import as_limits, compile_kernel, run_program
    from neuronemu.pipeline import RunOptions
    from neuronemu.report.reference import load_reference

    record: dict[str, Any] = {"config": config}
    try:
        inputs = sweep.inputs_for(config)
        limits = as_limits(sweep.limits or None, None, None)
        program = compile_kernel(
            sweep.path,
            inputs,
            kernel=sweep.kernel,
            target=sweep.target,
            print_fn=lambda _line: None,
            limits=limits,
            spill=sweep.spill,
            import_path=sweep.import_path,
        )
        digest = None
        if sweep.ref is None and memo is not None and len(program.raw_instrs) <= MEMO_MAX_INSTRS:
            digest = hashlib.sha256(dumps(program).encode()).hexdigest()
            if digest in memo:
                record.update(memo[digest])  # the same program: the same time
                return record
        options = RunOptions(rtol=sweep.rtol, atol=sweep.atol, timing_only=sweep.ref is None)
        result = run_program(
            program,
            inputs,
            Meter(limits),
            options,
            ref=load_reference(sweep.ref) if sweep.ref else None,
            print_fn=lambda _line: None,
        )
    except Exception as err:  # a located kernel error, or (kind "internal") a neuronemu bug
        record["status"] = "error"
        record["error"] = jsonout.error_json(err)["error"]
        return record
    full = json.loads(jsonout.dumps(result.to_json()))
    check = result.check
    found = {
        "status": "ok" if check is None or check.passed else "mismatch",
        "time_ns": full["time_ns"],
        "cycles": full["cycles"],
        "bound_by": full["bound_by"],
        "mfu": full["mfu"],
        "instructions": len(result.program.raw_instrs),
        "sbuf_peak_bytes_per_partition": full["sbuf_peak_bytes_per_partition"],
        "psum_peak_bytes_per_partition": full["psum_peak_bytes_per_partition"],
        "critical_path": full["critical_path"],
        "notes": full["notes"],
        "check": full.get("check"),
    }
    if check is not None and not check.passed:
        mismatch = MismatchError(f"outputs differ from the reference: {check.message}")
        found["error"] = jsonout.error_json(mismatch)["error"]
    if memo is not None and digest is not None:
        memo[digest] = found
    record.update(found)
    return record


def problem_of(inputs: Mapping[str, str], config: Mapping[str, Any]) -> dict[str, str]:
    """The problem a configuration solves: its inputs whose SPEC a parameter changes (a
    shape), as they are for it. Configurations of different problems are not ranked
    together (a smaller problem is not a better configuration)."""
    return {name: _format(t, config) for name, t in inputs.items() if "{" in t}


def ranked(records: Iterable[dict]) -> list[dict]:
    """The configurations that ran, by problem (`problem`, when the sweep changes one) and
    fastest first within each, then those that failed."""
    records = list(records)
    order: dict[str, int] = {}  # problems in the order they first come
    for r in records:
        order.setdefault(json.dumps(r.get("problem", {}), sort_keys=True), len(order))
    ok = sorted(
        (r for r in records if r.get("status") == "ok"),
        key=lambda r: (
            order[json.dumps(r.get("problem", {}), sort_keys=True)],
            r["time_ns"],
            key_of(r["config"]),
        ),
    )
    failed = sorted(
        (r for r in records if r.get("status") != "ok"), key=lambda r: key_of(r["config"])
    )
    return ok + failed


def _local(sweep: Sweep, todo: list[dict], workers: int, report: Callable[[dict], None]) -> None:
    if workers <= 1 or len(todo) <= 1:
        memo: dict[str, Any] = {}
        for config in todo:
            report(run_config(sweep, config, memo))
        return
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(_worker_run, sweep, config) for config in todo]
        try:
            for done in concurrent.futures.as_completed(futures):
                report(done.result())
        except BaseException:  # (a results file that cannot be written: stop, not finish)
            for future in futures:
                future.cancel()
            raise


_MEMO: dict[str, Any] = {}  # a worker process's timings by program text


def _worker_run(sweep: Sweep, config: dict[str, Any]) -> dict:
    return run_config(sweep, config, _MEMO)


def _files_to_ship(sweep: Sweep) -> tuple[str, dict[str, bytes]]:
    """The folder a Ray worker recreates: the kernel's tree (its folder, or the whole package
    it is in, with the package's own folder, so that absolute imports of it resolve) and the
    reference's file, as {relative path: bytes}. Only regular files that lie inside the
    tree go, found without following a symbolic link (as the kernel's imports resolve): a
    link to elsewhere on this machine ships nothing."""
    from neuronemu.pipeline import import_folders

    kernel = Path(sweep.path).resolve()
    tree, _ = import_folders(sweep.path)
    package = (tree / "__init__.py").is_file()
    paths = [kernel]
    if sweep.ref:
        paths.append(Path(sweep.ref.rpartition(":")[0]).resolve())
    starts = [str(tree.parent if package else tree)] + [str(p.parent) for p in paths[1:]]
    root = Path(os.path.commonpath(starts))
    files = _tree_files(tree, root, "the kernel's folder", paths[1:])
    return str(root), files


def _tree_files(
    folder: Path, root: Path, what: str, extra: Sequence[Path] = ()
) -> dict[str, bytes]:
    """The `.py` files of `folder` (and `extra` files), by their path relative to `root`,
    up to SHIP_BYTES (no dot-folder, no file reached through a link)."""
    files: dict[str, bytes] = {}
    total = 0
    for p in _regular_files(folder, ".py") + list(extra):
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        data = p.read_bytes()
        total += len(data)
        if total > SHIP_BYTES:
            raise UsageError(
                f"{what} {str(folder)!r} holds over "
                f"{SHIP_BYTES // 2**20} MiB of .py files to ship to Ray workers",
                hint="put the kernel and its helper modules in a folder of their own, and "
                "give --path a folder that holds only the packages the kernel imports",
            )
        files[str(p.relative_to(root))] = data
    return files


def _path_trees_to_ship(sweep: Sweep) -> list[tuple[str, dict[str, bytes]]]:
    """Each import path folder (`--path`, then the driver's NEURONEMU_PATH) a Ray worker
    recreates: its `.py` files, as the kernel's tree ships (all of them: which the kernel
    imports is known only as it is traced)."""
    from neuronemu.pipeline import import_folders

    _, folders = import_folders(sweep.path, sweep.import_path)
    return [(str(f), _tree_files(f, f, "the import path folder")) for f in folders if f.is_dir()]


def _regular_files(folder: Path, suffix: str) -> list[Path]:
    """The regular files named `*suffix` in `folder` and its subfolders, sorted: no symbolic
    link is followed (to a file or a folder), and each file's resolved path lies inside
    `folder` (a hard link's contents are the file's own)."""
    found = []
    for parent, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in names:
            path = Path(parent, name)
            try:
                if not name.endswith(suffix) or not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
            except OSError:  # (gone since it was listed)
                continue
            if path.resolve().is_relative_to(folder):
                found.append(path)
    return sorted(found)


def _ray_run(
    sweep_fields: dict,
    root: str,
    files: dict[str, bytes],
    config: dict,
    trees: Sequence[tuple[str, dict[str, bytes]]] = (),
) -> dict:
    """A configuration on a Ray worker: the shipped files in a folder of its own (and each
    import path folder in one of its own, keeping its name), paths in the result as they
    are where the sweep was started."""
    with (
        tempfile.TemporaryDirectory(prefix="neuronemu-sweep-") as tmp,
        tempfile.TemporaryDirectory(prefix="neuronemu-path-") as copies,
    ):
        for rel, data in files.items():
            target = Path(tmp, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        moved_path: list[tuple[str, str]] = []  # (the copy, the folder it copies)
        for n, (folder, tree) in enumerate(trees):
            copy = Path(copies, str(n), Path(folder).name or "root")
            copy.mkdir(parents=True)
            for rel, data in tree.items():
                target = copy / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            moved_path.append((str(copy), folder))
        moved = dict(sweep_fields)
        if trees:
            moved["import_path"] = tuple(copy for copy, _ in moved_path)
        moved["path"] = str(Path(tmp, Path(sweep_fields["path"]).resolve().relative_to(root)))
        if moved["ref"]:
            file, _, func = moved["ref"].rpartition(":")
            moved["ref"] = f"{Path(tmp, Path(file).resolve().relative_to(root))}:{func}"
        record = run_config(Sweep(**moved), config, _MEMO)
    # Paths as the local backend gives them: the kernel's as given, its folder's likewise.
    given = os.path.dirname(sweep_fields["path"])
    shown = given if given and Path(given).resolve() == Path(root) else root
    text = json.dumps(record)
    for old, new in [*moved_path, (moved["path"], sweep_fields["path"]), (tmp, shown)]:
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    return json.loads(text)


def _ray(
    sweep: Sweep,
    todo: list[dict],
    address: str | None,
    workers: int | None,
    report: Callable[[dict], None],
) -> None:
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--ray needs Ray, which is not installed",
            hint="pip install 'neuronemu[ray]'",
        ) from None
    root, files = _files_to_ship(sweep)
    trees = _path_trees_to_ship(sweep)
    fields = {f: getattr(sweep, f) for f in Sweep.__dataclass_fields__}
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        else:  # a local instance
            ray.init(
                num_cpus=workers or os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
    task = ray.remote(_ray_run)
    shared, shared_trees = ray.put(files), ray.put(trees)
    pending = [task.remote(fields, root, shared, config, shared_trees) for config in todo]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        report(ray.get(done[0]))


def sweep(
    path: str | Path,
    params: Mapping[str, Iterable[Any]],
    inputs: Mapping[str, str] | None = None,
    kernel: str | None = None,
    target: str | None = None,
    where: str | None = None,
    ref: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    spill: bool = True,
    limits: Limits | Mapping[str, Any] | None = None,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    out: str | Path | None = None,
    progress: Callable[[dict, int, int], None] | None = None,
    log: Callable[[str], None] = lambda _message: None,
    max_configs: int = MAX_CONFIGS,
    shard: tuple[int, int] | None = None,
    merge: Sequence[str | Path] = (),
    candidates: Sequence[Mapping[str, Any]] | None = None,
    import_path: Sequence[str | Path] = (),
) -> list[dict]:
    """Run every configuration of `params` (name -> values; their cross product, filtered
    by `where`) and return the results ranked, fastest first, failed ones last.

    `inputs` maps kernel inputs to SPECs as `-i` takes them, with `{PARAM}` fields (e.g.
    `{"x": "bfloat16[{M},{K}]"}`); parameters the kernel takes are passed to it. Timing only,
    unless `ref` (`FILE.py:FUNC`) asks for values checked too. `backend` "local" (`workers`
    processes, default the CPU count) or "ray" (`address`: "auto", a cluster's, or None for a
    local instance). With `out`, each result is appended to that JSONL file as it finishes,
    and configurations already there are not run again. `progress(record, done, total)` after
    each configuration; `log(message)` for what the sweep does besides. A sweep of more than
    `max_configs` configurations (before `where`) is refused.

    `shard=(i, n)` runs only the i-th of n disjoint parts of the configurations (0 <= i < n,
    every n-th from the i-th: a Slurm or AWS Batch array job's task index), each into its
    own `out`. `merge` (the `out` files of the shards) runs nothing: it ranks the results
    those files hold for this sweep's configurations. `candidates` (configurations, each
    a {name: value}) replaces the cross product of `params` (see `top_k`).

    `import_path`: folders helper modules also come from (as `neuronemu.run` takes it); the
    Ray backend ships their `.py` files with the kernel's tree.
    """
    from neuronemu.api import as_limits
    from neuronemu.frontend import parse_file
    from neuronemu.pipeline import RunOptions, kernel_params

    path = str(path)
    limits = dataclasses.asdict(as_limits(limits))
    if isinstance(import_path, (str, bytes, os.PathLike)):
        raise UsageError(f"import_path must be a list of folders, got {shown(import_path)}")
    folders = tuple(os.fspath(p) if isinstance(p, os.PathLike) else p for p in import_path)
    RunOptions(import_path=folders)  # (checked: folders that exist)
    params, inputs = _checked(params, inputs, max_configs, workers)
    module = parse_file(path, Limits().replace(**limits))  # parsed once, shared
    names = kernel_params(module, kernel)
    # `@x.npy` from where the sweep starts, whichever folder a worker runs in.
    templates = tuple(
        (n, "@" + os.path.abspath(t[1:]) if t.startswith("@") else t) for n, t in inputs.items()
    )
    for _, template in templates:  # every field names a parameter
        _format(template, {name: 0 for name in params})
    used = {f for _, t in templates for _, f, _, _ in string.Formatter().parse(t) if f}
    for name in params:
        if name not in names and name not in used:
            raise UsageError(
                f"--param {name}: the kernel has no parameter {name!r} and no -i uses {{{name}}}",
                hint=f"the kernel's parameters: {', '.join(names) or 'none'}",
            )
    spec = Sweep(
        path,
        kernel,
        target,
        templates,
        frozenset(n for n in params if n in names),
        ref,
        rtol,
        atol,
        seed,
        spill,
        limits,
        tuple(os.path.abspath(f) for f in folders),  # (from where the sweep starts)
    )
    if candidates is None:
        configs = configurations(params, where, max_configs)
    else:
        configs = [dict(c) for c in candidates]
        if len(configs) > max_configs:
            raise UsageError(f"{len(configs):,} candidates, over max_configs ({max_configs:,})")
    if shard is not None:
        index, parts = _checked_shard(shard)
        configs = configs[index::parts]
    budget = Limits().replace(**limits).memory_bytes  # (of the records a results file keeps)
    if merge:
        merged: dict[str, dict] = {}
        for source in merge:
            merged.update(read_done(str(source), configs, budget, "--merge"))
        missing = len(configs) - len(merged)
        if missing:
            log(f"{missing} of {len(configs)} configurations are in none of the merged files")
        return _ranked_by_problem(
            [merged[key_of(c)] for c in configs if key_of(c) in merged], inputs
        )
    out = None if out is None else str(out)
    done = read_done(out, configs, budget)
    todo = [c for c in configs if key_of(c) not in done]
    results = [done[key_of(c)] for c in configs if key_of(c) in done]
    if results:
        log(
            f"{len(results)} of {len(configs)} configurations are in {out} already; "
            "running the rest"
        )
    sink = open_results(out) if out else None

    def report(record: dict) -> None:
        results.append(record)
        if sink is not None:
            try:
                sink.write(json.dumps(record) + "\n")
                sink.flush()
            except OSError as exc:
                raise _cannot_write(out, exc) from None
        if progress is not None:
            progress(record, len(results), len(configs))

    try:
        if backend == "ray":
            _ray(spec, todo, address, workers, report)
        elif backend == "local":
            _local(spec, todo, workers or os.cpu_count() or 1, report)
        else:
            raise UsageError(f"backend {backend!r}: 'local' or 'ray'")
    finally:
        if sink is not None:
            try:
                sink.close()  # (flushes what a failed write left in the buffer: fails again)
            except OSError as exc:
                raise _cannot_write(out, exc) from None
    return _ranked_by_problem(results, inputs)


def _cannot_write(out: str | None, exc: OSError) -> UsageError:
    return UsageError(f"--out {out!r}: cannot write it ({exc.strerror or exc})")


def top_k(
    path: str | Path,
    candidates: Iterable[Mapping[str, Any]],
    k: int,
    inputs: Mapping[str, str] | None = None,
    **options: Any,
) -> list[dict]:
    """For an autotuner, a pruner: of these candidate configurations (each {name: value}),
    the `k` predicted fastest, fastest first (their results as `sweep` gives them), so that
    the tuner measures only those on hardware. `options` as for `sweep`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a positive integer, got {shown(k)}")
    chosen = []
    for c in candidates:
        if not isinstance(c, Mapping) or not all(isinstance(n, str) for n in c):
            raise UsageError(f"a candidate is a dict of parameter names to values, got {shown(c)}")
        chosen.append(dict(c))
    if not chosen:
        raise UsageError("top_k needs at least one candidate")
    params: dict[str, list[Any]] = {}
    for c in chosen:
        for name, value in c.items():
            params.setdefault(name, []).append(value)
    results = sweep(path, params, inputs, candidates=chosen, **options)
    return [r for r in results if r["status"] == "ok"][:k]


def _ranked_by_problem(results: list[dict], inputs: Mapping[str, str]) -> list[dict]:
    varying = {n: t for n, t in inputs.items() if "{" in t}
    if varying:
        for r in results:
            r["problem"] = problem_of(varying, r["config"])
    return ranked(results)


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _checked_shard(shard: Any) -> tuple[int, int]:
    ok = (
        isinstance(shard, tuple)
        and len(shard) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
        and 0 <= shard[0] < shard[1]
    )
    if not ok:
        raise UsageError(
            f"shard must be (i, n) with 0 <= i < n, got {shown(shard)}",
            hint="e.g. --shard 3/8 (the 4th of 8 parts; an array job's task index is i)",
        )
    return shard


# The most processes a local sweep (or `check -j`) runs at once: far more than any machine
# has cores, each a Python process of its own.
MAX_WORKERS = 1024


def _checked(
    params: Any, inputs: Any, max_configs: Any, workers: Any = None
) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The Python API's arguments, checked: `params` {name: values}, `inputs` {name: SPEC},
    `max_configs` (at most what a list may hold) and `workers`."""
    if not _whole(max_configs, 1, sys.maxsize):
        raise UsageError(
            f"max_configs must be an integer from 1 to {sys.maxsize:,}, got {shown(max_configs)}"
        )
    if workers is not None and not _whole(workers, 1, MAX_WORKERS):
        raise UsageError(
            f"workers must be an integer from 1 to {MAX_WORKERS}, got {shown(workers)}"
        )
    if not isinstance(params, Mapping):
        raise UsageError(f"params must be a dict of name to values, got {type(params).__name__}")
    checked: dict[str, list[Any]] = {}
    for name, values in params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"params: {shown(name)} is not a parameter name")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise UsageError(
                f"params[{name!r}] must be a list of values, got {type(values).__name__}"
            )
        checked[name] = list(itertools.islice(values, max_configs + 1))
        if not checked[name]:
            raise UsageError(f"parameter {name!r} needs at least one value")
        for k, value in enumerate(checked[name]):
            if isinstance(value, np.generic):  # (a NumPy number or string: as Python's)
                value = checked[name][k] = value.item()
            if not recordable(value):
                raise UsageError(
                    f"params[{name!r}]: {shown(value)} is of type {type(value).__name__}, "
                    "which a sweep cannot record (its results name each configuration in JSON)",
                    hint=RECORDABLE,
                )
    if inputs is not None and not isinstance(inputs, Mapping):
        raise UsageError(f"inputs must be a dict of name to SPEC, got {type(inputs).__name__}")
    for name, spec in (inputs or {}).items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"inputs: {shown(name)} is not an input name")
        if not isinstance(spec, str):
            raise UsageError(
                f"input {name!r}: a sweep takes a SPEC string (e.g. 'bfloat16[{{M}},512]'), "
                f"got {type(spec).__name__}",
                hint="save an array with numpy.save and pass '@file.npy'",
            )
    return checked, dict(inputs or {})


def command_for(
    path: str,
    kernel: str | None,
    inputs: Mapping[str, str],
    record: dict,
    target: str | None = None,
    ref: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    import_path: Sequence[str] = (),
) -> str:
    """The `neuronemu run` command line of one configuration: its -i flags, and the
    sweep's reference check and --path folders when it had them."""
    import shlex

    from neuronemu.frontend import parse_file
    from neuronemu.pipeline import kernel_params

    names = set(kernel_params(parse_file(path), kernel))
    config = record["config"]
    parts = ["neuronemu", "run", path, *(["-k", kernel] if kernel else [])]
    parts += [*(["--target", target] if target else [])]
    for folder in import_path:
        parts += ["--path", folder]
    for name, template in inputs.items():
        parts += ["-i", f"{name}={_format(template, config)}"]
    for k, v in config.items():
        if k in names and k not in inputs:
            parts += ["-i", f"{k}={v!r}"]
    if ref:
        parts += ["--ref", ref]
        parts += [*(["--rtol", repr(rtol)] if rtol is not None else [])]
        parts += [*(["--atol", repr(atol)] if atol is not None else [])]
    return " ".join(shlex.quote(p) for p in parts)
