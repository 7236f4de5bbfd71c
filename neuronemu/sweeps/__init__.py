"""Sweeps: a kernel's compile-time configurations (the cross product of parameter values,
input shapes among them) each traced and timed, ranked by predicted time, on local
processes or a Ray cluster, each result appended to a JSONL file a sweep resumes from.

A configuration that fails (SBUF over capacity, an assertion of the kernel...) is a result
too: its located error. Results are plain JSON values, the same on every backend.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import itertools
import json
import math
import operator
import os
import re
import stat
import string
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronemu.errors import MismatchError, UsageError, shown
from neuronemu.limits import Limits, Meter
from neuronemu.nasm.write import dumps
from neuronemu.report import jsonout
from neuronemu.sweeps.results import key_of, open_results, read_done

__all__ = ["Sweep", "sweep", "parse_param", "ranked", "key_of", "command_for"]

# What a sweep ships to Ray workers: the kernel's folder (its helper modules), up to this.
SHIP_BYTES = 32 * 2**20


def parse_param(text: str) -> tuple[str, list[Any]]:
    """`NAME=v1,v2,...` (Python literals) or `NAME=lo..hi` / `NAME=lo..hi:step` (ints,
    `hi` included)."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(
            f"--param {text!r}: expected NAME=VALUES", hint="e.g. --param TILE_N=128,256"
        )
    m = re.fullmatch(r"\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(\d+))?\s*", values)
    if m:
        lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        if step <= 0 or hi < lo or (hi - lo) // step >= 100_000:
            raise UsageError(f"--param {text!r}: a range lo..hi[:step] with lo <= hi and step > 0")
        return name, list(range(lo, hi + 1, step))
    out = []
    for part in _split_top_level(values):
        try:
            out.append(ast.literal_eval(part.strip()))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise UsageError(
                f"--param {text!r}: cannot read {part.strip()!r}",
                hint="values are Python literals: 128, 0.5, 'causal', (2, 4)",
            ) from None
    if not out:
        raise UsageError(f"--param {text!r} has no values")
    return name, out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}

# What a `--where` expression may be: its text, its nesting, and an integer it computes
# (a `**` tower such as `(9**64)**64**...` would otherwise compute for hours).
WHERE_CHARS = 10_000
WHERE_DEPTH = 100
WHERE_INT_BITS = 8192


def where_filter(text: str | None) -> Callable[[Mapping[str, Any]], bool]:
    """`--where EXPR`: a condition on the parameters (arithmetic, comparisons, and/or/not,
    min/max/abs), evaluated by neuronemu itself, not by Python's eval."""
    if not text:
        return lambda _config: True
    if len(text) > WHERE_CHARS:
        raise UsageError(
            f"--where: an expression of {len(text):,} characters (at most {WHERE_CHARS:,})"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise UsageError(f"--where {shown(text)}: not an expression") from None
    _check_depth(tree, text)

    def number(value: Any) -> Any:
        if isinstance(value, int) and value.bit_length() > WHERE_INT_BITS:
            raise UsageError(f"--where {shown(text)}: an integer over {WHERE_INT_BITS} bits")
        return value

    def ev(node: ast.AST, names: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body, names)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            return number(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise UsageError(f"--where {shown(text)}: no parameter {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.Tuple):
            return tuple(ev(e, names) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            values = (ev(v, names) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand, names))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev(node.left, names), ev(node.right, names)
            if not all(isinstance(x, (int, float)) for x in (a, b)):
                raise UsageError(
                    f"--where {shown(text)}: arithmetic takes numbers, "
                    f"not {type(a).__name__} and {type(b).__name__}"
                )
            if isinstance(node.op, ast.Pow):
                if abs(b) > 64:
                    raise UsageError(f"--where {shown(text)}: an exponent over 64")
                if isinstance(a, int) and b > 0 and (abs(a).bit_length() - 1) * b > WHERE_INT_BITS:
                    raise UsageError(
                        f"--where {shown(text)}: an integer over {WHERE_INT_BITS} bits"
                    )
            return number(_OPS[type(node.op)](a, b))
        if isinstance(node, ast.Compare):
            left = ev(node.left, names)
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in _OPS:
                    break
                right = ev(right_node, names)
                if not _OPS[type(op)](left, right):
                    return False
                left = right
            else:
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _FUNCTIONS[node.func.id](*(ev(a, names) for a in node.args))
        raise UsageError(
            f"--where {shown(text)}: {type(node).__name__} is not allowed",
            hint="use parameters, numbers, + - * / // % **, comparisons, and/or/not, min/max/abs",
        )

    def keep(config: Mapping[str, Any]) -> bool:
        try:
            return bool(ev(tree, config))
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise UsageError(f"--where {shown(text)} for {_show(config)}: {exc}") from None

    return keep


def _check_depth(tree: ast.AST, text: str) -> None:
    """An expression nested deeper than WHERE_DEPTH (`- - - ... a`) is refused before it is
    evaluated, which recurses once per level."""
    level = [tree]
    for _ in range(WHERE_DEPTH):
        level = [child for node in level for child in ast.iter_child_nodes(node)]
        if not level:
            return
    raise UsageError(f"--where {shown(text)}: nested deeper than {WHERE_DEPTH} levels")


def _show(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in config.items())


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
        )
        digest = hashlib.sha256(dumps(program).encode()).hexdigest()
        if sweep.ref is None and memo is not None and digest in memo:
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
    if memo is not None and sweep.ref is None:
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


# The configurations a sweep may have, before `where` (whose every test is Python work):
# `--max-configs N` (`max_configs=` in the API) raises it.
MAX_CONFIGS = 100_000


def configurations(
    params: Mapping[str, list[Any]], where: str | None, max_configs: int = MAX_CONFIGS
) -> list[dict[str, Any]]:
    """The cross product of the parameters' values where `where` holds, at most
    `max_configs` of them before the filter."""
    keep = where_filter(where)
    names = list(params)
    total = math.prod(len(params[n]) for n in names)
    if total > max_configs:
        raise UsageError(
            f"the --param values make {total:,} configurations, over the cap of "
            f"{max_configs:,} a sweep may have (max_configs)",
            hint="raise the limit with --max-configs N (max_configs=N in the Python API) "
            "if the sweep really needs them, or take fewer values (lo..hi:step)",
        )
    out = []
    for values in itertools.product(*(params[n] for n in names)):
        config = dict(zip(names, values))
        if keep(config):
            out.append(config)
    return out


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
    """The folder a Ray worker recreates: the kernel's folder (its helper modules and
    packages) and the reference's file, as {relative path: bytes}. Only regular files that
    lie inside the folder go, found without following a symbolic link (as the kernel's
    imports resolve): a link to elsewhere on this machine ships nothing."""
    kernel = Path(sweep.path).resolve()
    paths = [kernel]
    if sweep.ref:
        paths.append(Path(sweep.ref.rpartition(":")[0]).resolve())
    root = Path(os.path.commonpath([str(p.parent) for p in paths]))
    files: dict[str, bytes] = {}
    total = 0
    for p in _regular_files(kernel.parent, ".py") + paths[1:]:
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        data = p.read_bytes()
        total += len(data)
        if total > SHIP_BYTES:
            raise UsageError(
                f"the kernel's folder {str(kernel.parent)!r} holds over "
                f"{SHIP_BYTES // 2**20} MiB of .py files to ship to Ray workers",
                hint="put the kernel and its helper modules in a folder of their own",
            )
        files[str(p.relative_to(root))] = data
    return str(root), files


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


def _ray_run(sweep_fields: dict, root: str, files: dict[str, bytes], config: dict) -> dict:
    """A configuration on a Ray worker: the shipped files in a folder of its own, paths in
    the result as they are where the sweep was started."""
    with tempfile.TemporaryDirectory(prefix="neuronemu-sweep-") as tmp:
        for rel, data in files.items():
            target = Path(tmp, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        moved = dict(sweep_fields)
        moved["path"] = str(Path(tmp, Path(sweep_fields["path"]).resolve().relative_to(root)))
        if moved["ref"]:
            file, _, func = moved["ref"].rpartition(":")
            moved["ref"] = f"{Path(tmp, Path(file).resolve().relative_to(root))}:{func}"
        record = run_config(Sweep(**moved), config, _MEMO)
    # Paths as the local backend gives them: the kernel's as given, its folder's likewise.
    given = os.path.dirname(sweep_fields["path"])
    shown = given if given and Path(given).resolve() == Path(root) else root
    text = json.dumps(record)
    for old, new in ((moved["path"], sweep_fields["path"]), (tmp, shown)):
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
    fields = {f: getattr(sweep, f) for f in Sweep.__dataclass_fields__}
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, logging_level="WARNING")
        else:  # a local instance
            ray.init(
                num_cpus=workers or os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                logging_level="WARNING",
            )
    task = ray.remote(_ray_run)
    shared = ray.put(files)
    pending = [task.remote(fields, root, shared, config) for config in todo]
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
    """
    from neuronemu.api import as_limits
    from neuronemu.frontend import parse_file
    from neuronemu.pipeline import kernel_params

    path = str(path)
    limits = dataclasses.asdict(as_limits(limits))
    params, inputs = _checked(params, inputs, max_configs)
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
    )
    configs = configurations(params, where, max_configs)
    out = None if out is None else str(out)
    done = read_done(out, configs)
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
                raise UsageError(
                    f"--out {out!r}: cannot write it ({exc.strerror or exc})"
                ) from None
        if progress is not None:
            progress(record, len(results), len(configs))

    varying = {n: t for n, t in inputs.items() if "{" in t}
    try:
        if backend == "ray":
            _ray(spec, todo, address, workers, report)
        elif backend == "local":
            _local(spec, todo, workers or os.cpu_count() or 1, report)
        else:
            raise UsageError(f"backend {backend!r}: 'local' or 'ray'")
    finally:
        if sink is not None:
            sink.close()
    if varying:
        for r in results:
            r["problem"] = problem_of(varying, r["config"])
    return ranked(results)


def _checked(
    params: Any, inputs: Any, max_configs: Any
) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The Python API's arguments, checked: `params` {name: values}, `inputs` {name: SPEC}."""
    if isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 1:
        raise UsageError(f"max_configs must be a positive integer, got {shown(max_configs)}")
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
) -> str:
    """The `neuronemu run` command line of one configuration: its -i flags, and the
    sweep's reference check when it had one."""
    import shlex

    from neuronemu.frontend import parse_file
    from neuronemu.pipeline import kernel_params

    names = set(kernel_params(parse_file(path), kernel))
    config = record["config"]
    parts = ["neuronemu", "run", path, *(["-k", kernel] if kernel else [])]
    parts += [*(["--target", target] if target else [])]
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
