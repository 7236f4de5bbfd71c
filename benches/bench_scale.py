"""Speed at real sizes: the kernels of kernels/ at 4096-class shapes, a 4096^3 bf16 blocked
matmul, and a 100,000-instruction matmul, each in a fresh process.

    python benches/bench_scale.py [--only NAME,...] [--repeat N]

Per case: instructions; the seconds of each phase of `neuronemu.run`, set up as the
`neuronemu` command sets it up (trace: parse and specialize; check: the race and
uninitialized-read checks; schedule; execute: the values);
instructions per second end to end; the process's peak RSS; and, for runs with values, the
ratio of execute to NumPy doing the same math (the kernel's `_ref.py` reference, or a BLAS
matmul) in the same process. With `--repeat N`, each case runs in N fresh processes and each
figure is their median (the ratio: the median of the per-run ratios). Prints a table, with
the machine's load average before and after (other work slows every figure); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
BLOCKED = ROOT / "tests" / "timing" / "matmul_blocked.py"
TILED = ROOT / "tests" / "timing" / "v12_matmuls.py"
S = 4096


def _square(dtype: str, *names: str) -> dict[str, tuple[str, tuple[int, int]]]:
    return {n: (dtype, (S, S)) for n in names}


# name -> (kernel file, kernel name or None, {input: (dtype, shape)}, values?, reference)
CASES: dict[str, tuple] = {
    "tensor_add": (KERNELS / "tensor_add.py", None, _square("bfloat16", "a", "b"), True, "ref"),
    "tensor_add_legacy": (
        KERNELS / "tensor_add_legacy.py", None, _square("bfloat16", "a", "b"), True, "ref"
    ),
    "scaled_relu_legacy": (
        KERNELS / "scaled_relu_legacy.py", None, _square("bfloat16", "x"), True, "ref"
    ),
    "bias_act_multifile": (
        KERNELS / "bias_act_multifile.py",
        None,
        {**_square("float32", "x"), "bias": ("float32", (S, 1))},
        True,
        "ref",
    ),
    "softmax_rows": (KERNELS / "softmax_rows.py", None, _square("float32", "x"), True, "ref"),
    "layernorm": (KERNELS / "layernorm.py", None, _square("float32", "x"), True, "ref"),
    "transpose_pe": (KERNELS / "transpose_pe.py", None, _square("float32", "x"), True, "ref"),
    "matmul_tiled": (
        KERNELS / "matmul_tiled.py", None, _square("bfloat16", "lhsT", "rhs"), True, "ref"
    ),
    "blocked 4096^3 bf16": (BLOCKED, None, _square("bfloat16", "lhsT", "rhs"), True, "matmul"),
    "blocked 4096^3 bf16 timing-only": (
        BLOCKED, None, _square("bfloat16", "lhsT", "rhs"), False, None
    ),
    "100k tiled 4096x8192x8192 timing-only": (
        TILED,
        "tiled",
        {"lhsT": ("bfloat16", (8192, S)), "rhs": ("bfloat16", (8192, 8192))},
        False,
        None,
    ),
}  # fmt: skip


def _child(name: str) -> dict:
    """Run one case in this process; its figures as a dict."""
    import ml_dtypes
    import numpy as np

    import neuronemu
    from neuronemu.host import malloc
    from neuronemu.jit import compiled as _jit
    from neuronemu.jit import worker as jit_worker
    from neuronemu.report.reference import load_reference

    # As the neuronemu command runs: Numba without SciPy's BLAS, in a worker process past
    # 20,000 instructions; glibc's malloc keeping freed arrays.
    _jit.LINALG = False
    jit_worker.ENABLED = True
    malloc.keep_freed_arrays()

    path, kernel, shapes, values, ref = CASES[name]
    rng = np.random.default_rng(0)
    dtypes = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
    inputs = {k: rng.standard_normal(shape).astype(dtypes[dt]) for k, (dt, shape) in shapes.items()}
    marks: list[tuple[str, float]] = []
    start = time.perf_counter()
    result = neuronemu.run(
        path,
        inputs,
        kernel=kernel,
        timing_only=not values,
        print_fn=lambda _line: None,
        limits={"trace_seconds": 3600, "run_seconds": 7200, "memory_bytes": 16 * 2**30},
        progress=lambda phase: marks.append((phase.split(" (")[0], time.perf_counter())),
    )
    end = time.perf_counter()
    marks.append(("end", end))
    phase = {}
    for (p, t0), (_, t1) in zip(marks, marks[1:]):
        key = {"checking races": "check", "checking reads": "check"}.get(p, p)
        phase[key] = phase.get(key, 0.0) + t1 - t0
    figures = {
        "instructions": len(result.program.instrs),
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
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return
    from rich.console import Console
    from rich.table import Table

    names = args.only.split(",") if args.only else list(CASES)
    load_before = os.getloadavg()[0]
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
            out = subprocess.run(
                [sys.executable, __file__, "--child", name], capture_output=True, text=True
            )
            if out.returncode:
                break
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
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
        "work shared the machine and the figures are slow"
    )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
