"""Speed at real sizes: the kernels of kernels/ at 4096-class shapes, a 4096^3 bf16 blocked
matmul, 100,000- and 1,000,000-instruction matmuls, a device loop of 100,000 trips, an
output written a column at a time (benches/column_conv.py), a matmul with a ragged last
column tile (benches/ragged_matmul.py), and
(given a checkout of aws-neuron/aws-neuron-sdk, which is not part of this project) the fused
Mamba tutorial's v3 at seq_len 8192 on trn1 and trn2, each in a fresh process.

    python benches/bench_scale.py [--only NAME,...] [--repeat N] [--sdk DIR]

Per case: instructions (as run: a device loop's every pass); the seconds of each phase of
`neuronemu.run`, set up as the `neuronemu` command sets it up (trace: parse and specialize;
check: the race and uninitialized-read checks; schedule; execute: the values, and a device
loop's run, timed and checked as it ran; a timing-only case's inputs, as `--timing-only`
passes them, made only if read);
instructions per second end to end; the process's peak RSS; and, for runs with values, the
ratio of execute to NumPy doing the same math (the kernel's `_ref.py` reference, or a BLAS
matmul) in the same process. With `--repeat N`, each case runs in N fresh processes and each
figure is their median (the ratio: the median of the per-run ratios). Prints a table, with
the machine's load average before and after (other work slows every figure); asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
BLOCKED = ROOT / "tests" / "timing" / "matmul_blocked.py"
TILED = ROOT / "tests" / "timing" / "v12_matmuls.py"
DEVICE_LOOP = ROOT / "benches" / "device_loop.py"
COLUMN_CONV = ROOT / "benches" / "column_conv.py"
RAGGED = ROOT / "benches" / "ragged_matmul.py"
S = 4096


def _square(dtype: str, *names: str) -> dict[str, tuple[str, tuple[int, int]]]:
    return {n: (dtype, (S, S)) for n in names}


# The fused Mamba tutorial's kernels, in a checkout (or bare clone) of aws-neuron-sdk.
MAMBA = "nki/examples/fused_mamba/mamba_nki_kernels.py"


class Case(NamedTuple):
    path: Path | str  # a kernel file, or "sdk:PATH" (PATH in the --sdk checkout)
    kernel: str | None  # None: the file's only kernel
    shapes: dict[str, tuple[str, tuple[int, ...]]]  # input -> (dtype, shape)
    values: bool  # False: timing only
    ref: str | None  # "ref": the kernel's _ref.py; "matmul": a BLAS matmul; None
    target: str | None = None


def _mamba(seq: int, target: str) -> Case:
    """The tutorial's v3 at its test's batch 1, 256 channels, state 16 (fp32), values on."""
    b, c, n = 1, 256, 16
    shapes = {
        "delta": (b, c, seq),
        "u": (b, c, seq),
        "A": (c, n),
        "B": (b, n, seq),
        "C": (b, n, seq),
    }
    return Case(
        f"sdk:{MAMBA}",
        "mamba_v3",
        {k: ("float32", v) for k, v in shapes.items()},
        True,
        None,
        target,
    )


CASES: dict[str, Case] = {
    "tensor_add": Case(KERNELS / "tensor_add.py", None, _square("bfloat16", "a", "b"), True, "ref"),
    "tensor_add_legacy": Case(
        KERNELS / "tensor_add_legacy.py", None, _square("bfloat16", "a", "b"), True, "ref"
    ),
    "scaled_relu_legacy": Case(
        KERNELS / "scaled_relu_legacy.py", None, _square("bfloat16", "x"), True, "ref"
    ),
    "bias_act_multifile": Case(
        KERNELS / "bias_act_multifile.py",
        None,
        {**_square("float32", "x"), "bias": ("float32", (S, 1))},
        True,
        "ref",
    ),
    "softmax_rows": Case(KERNELS / "softmax_rows.py", None, _square("float32", "x"), True, "ref"),
    "layernorm": Case(KERNELS / "layernorm.py", None, _square("float32", "x"), True, "ref"),
    "transpose_pe": Case(KERNELS / "transpose_pe.py", None, _square("float32", "x"), True, "ref"),
    "matmul_tiled": Case(
        KERNELS / "matmul_tiled.py", None, _square("bfloat16", "lhsT", "rhs"), True, "ref"
    ),
    "blocked 4096^3 bf16": Case(BLOCKED, None, _square("bfloat16", "lhsT", "rhs"), True, "matmul"),
    "blocked 4096^3 bf16 timing-only": Case(
        BLOCKED, None, _square("bfloat16", "lhsT", "rhs"), False, None
    ),
    "100k tiled 4096x8192x8192 timing-only": Case(
        TILED,
        "tiled",
        {"lhsT": ("bfloat16", (8192, S)), "rhs": ("bfloat16", (8192, 8192))},
        False,
        None,
    ),
    "matmul_tiled timing-only": Case(
        KERNELS / "matmul_tiled.py", None, _square("bfloat16", "lhsT", "rhs"), False, None
    ),
    "1M tiled 8192x16384x16384 timing-only": Case(
        TILED,
        "tiled",
        {"lhsT": ("bfloat16", (16384, 8192)), "rhs": ("bfloat16", (16384, 16384))},
        False,
        None,
    ),
    "device loop 100k trips timing-only": Case(
        DEVICE_LOOP, None, {"data": ("float32", (128, 512))}, False, None
    ),
    "column at a time 197k timing-only": Case(
        COLUMN_CONV,
        None,
        {"x": ("float32", (1024, 8192)), "taps": ("float32", (1024, 3))},
        False,
        None,
    ),
    "ragged N min() 12.8k timing-only": Case(
        RAGGED,
        None,
        {"lhsT": ("bfloat16", (2048, 2048)), "rhs": ("bfloat16", (2048, 8000))},
        False,
        None,
    ),
    "mamba_v3 seq 8192 trn1": _mamba(8192, "trn1"),
    "mamba_v3 seq 8192 trn2": _mamba(8192, "trn2"),
}  # fmt: skip


def _kernel_file(case: Case, sdk: Path | None, folder: Path) -> Path:
    """The case's kernel file: its own, or the one in the --sdk checkout (a work tree, or a
    bare clone read with `git show`)."""
    if not str(case.path).startswith("sdk:"):
        return Path(case.path)
    rel = str(case.path)[4:]
    if sdk is None:
        raise SystemExit(f"needs --sdk DIR (a checkout of aws-neuron/aws-neuron-sdk) for {rel}")
    if (sdk / rel).is_file():
        return sdk / rel
    shown = subprocess.run(
        ["git", f"--git-dir={sdk}", "show", f"HEAD:{rel}"], capture_output=True, text=True
    )
    if shown.returncode:
        raise SystemExit(f"{rel} is not in {sdk}: {shown.stderr.strip()}")
    path = folder / Path(rel).name
    path.write_text(shown.stdout)
    return path


def _this_checkout() -> dict[str, str]:
    """The environment of a case's process: `neuronemu` imported from the checkout this
    script is in (its own folder, benches/, would come first on the path, and then the
    installed package, which may be another checkout's). `neuronemu_isa` still comes from
    where the project is installed (its folder is isa/, mapped at install)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _child(name: str, sdk: Path | None) -> dict:
    """Run one case in this process; its figures as a dict."""
    import tempfile

    import ml_dtypes
    import numpy as np

    import neuronemu
    from neuronemu.host import malloc
    from neuronemu.inputs import Unmade, random_array
    from neuronemu.jit import ahead
    from neuronemu.jit import compiled as _jit
    from neuronemu.jit import worker as jit_worker
    from neuronemu.report.reference import load_reference

    # As the neuronemu command runs: the passes built ahead of time where they are (said
    # under the table), else Numba without SciPy's BLAS, in a worker process past 20,000
    # instructions; glibc's malloc keeping freed arrays.
    _jit.LINALG = False
    jit_worker.ENABLED = True
    malloc.keep_freed_arrays()

    case = CASES[name]
    folder = tempfile.TemporaryDirectory(prefix="neuronemu-bench-")  # (gone when we exit)
    path = _kernel_file(case, sdk, Path(folder.name))
    kernel, shapes, values, ref = case.kernel, case.shapes, case.values, case.ref
    rng = np.random.default_rng(0)
    dtypes = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
    if values:
        inputs = {
            k: rng.standard_normal(shape).astype(dtypes[dt]) for k, (dt, shape) in shapes.items()
        }
    else:  # (as `neuronemu run --timing-only` passes them: values made only if read)
        inputs = {
            k: Unmade.of(dt, shape, functools.partial(random_array, dt, shape, 0, k))
            for k, (dt, shape) in shapes.items()
        }
    marks: list[tuple[str, float]] = []
    start = time.perf_counter()
    result = neuronemu.run(
        path,
        inputs,
        kernel=kernel,
        target=case.target,
        timing_only=not values,
        print_fn=lambda _line: None,
        limits={
            "trace_seconds": 3600,
            "run_seconds": 7200,
            "memory_bytes": 16 * 2**30,
            "instructions": 4_000_000,
        },
        progress=lambda phase: marks.append((phase.split(" (")[0], time.perf_counter())),
    )
    end = time.perf_counter()
    marks.append(("end", end))
    phase = {}
    for (p, t0), (_, t1) in zip(marks, marks[1:]):
        key = {"checking races": "check", "checking reads": "check"}.get(p, p)
        phase[key] = phase.get(key, 0.0) + t1 - t0
    figures = {
        # (as run: a device loop's passes; `instrs` would make them all)
        "instructions": len(result.timeline.program.raw_instrs),
        "trace": phase.get("tracing", 0.0),
        "check": phase.get("check", 0.0),
        "schedule": phase.get("scheduling", 0.0),
        "execute": phase.get("executing", 0.0),
        "total": end - start,
    }
    if ref == "ref":
        fn = load_reference(f"{str(path)[:-3]}_ref.py:reference")
        t0 = time.perf_counter()
        fn(**inputs)
        figures["numpy"] = time.perf_counter() - t0
    elif ref == "matmul":
        t0 = time.perf_counter()
        lhsT, rhs = (inputs[k].astype(np.float32) for k in ("lhsT", "rhs"))
        _ = (lhsT.T @ rhs).astype(ml_dtypes.bfloat16)
        figures["numpy"] = time.perf_counter() - t0
    figures["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures["ahead"] = ahead.available(*_jit.LAZY)  # (the passes built ahead of time, used)
    return figures


def _medians(runs: list[dict]) -> dict:
    """Each figure's median over the runs of one case, and the median execute/NumPy ratio."""
    f = {k: statistics.median(r[k] for r in runs) for k in runs[0] if runs[0][k] is not None}
    if runs[0].get("numpy") and runs[0]["execute"]:
        f["ratio"] = statistics.median(r["execute"] / r["numpy"] for r in runs)
    return f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated case names (default: all)")
    ap.add_argument(
        "--repeat", type=int, default=1, help="fresh processes per case; figures are medians"
    )
    ap.add_argument(
        "--sdk",
        type=Path,
        metavar="DIR",
        help="checkout or bare clone of aws-neuron/aws-neuron-sdk (the Mamba cases; without "
        "it they are left out)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.sdk)))
        return
    from rich.console import Console
    from rich.table import Table

    names = (
        args.only.split(",")
        if args.only
        else [n for n in CASES if args.sdk is not None or not str(CASES[n].path).startswith("sdk:")]
    )
    load_before = os.getloadavg()[0]
    passes: set[bool] = set()  # (each run: were the passes built ahead of time?)
    table = Table(title="neuronemu at real sizes (one fresh process per case; seconds)")
    for col in (
        "case",
        "instrs",
        "trace",
        "check",
        "schedule",
        "execute",
        "total",
        "instr/s",
        "peak MiB",
        "numpy",
        "execute/numpy",
    ):
        table.add_column(col, justify="left" if col == "case" else "right")
    for name in names:
        runs = []
        for _ in range(max(args.repeat, 1)):
            sdk = [] if args.sdk is None else ["--sdk", str(args.sdk)]
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, *sdk],
                capture_output=True,
                text=True,
                env=_this_checkout(),
            )
            if out.returncode:
                break
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            passes.add(bool(runs[-1].pop("ahead", False)))
        if out.returncode:
            table.add_row(name, "error: " + (out.stderr.strip().splitlines() or ["?"])[-1][:70])
            continue
        f = _medians(runs)
        numpy = f.get("numpy")
        table.add_row(
            name,
            f"{f['instructions']:,}",
            f"{f['trace']:.2f}",
            f"{f['check']:.2f}",
            f"{f['schedule']:.2f}",
            f"{f['execute']:.2f}" if f["execute"] else "-",
            f"{f['total']:.2f}",
            f"{f['instructions'] / f['total']:,.0f}",
            f"{f['peak_mib']:,.0f}",
            f"{numpy:.3f}" if numpy else "-",
            f"{f['ratio']:.1f}x" if numpy and f["execute"] else "-",
        )
    # Other work on the machine slows every figure, BLAS-heavy execution most (8-50x seen
    # with four other processes on 2 cores): say how loaded the machine was.
    table.caption = (
        f"1-minute load average {load_before:.2f} before the cases, {os.getloadavg()[0]:.2f} "
        f"after, on {os.cpu_count()} CPUs: the bench adds about 1; well above that, other "
        "work shared the machine and the figures are slow; the jitted passes "
        + {
            frozenset({True}): "built ahead of time (neuronemu/jit/ahead.py)",
            frozenset({False}): "loaded through Numba (`neuronemu warm-up` builds them ahead)",
        }.get(frozenset(passes), "built ahead of time in some runs only")
    )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
