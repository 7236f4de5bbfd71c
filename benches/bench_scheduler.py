"""Scheduler throughput: instructions per second of the jitted list scheduler in timing-only
mode, kept apart from the builder/tracer side, on the 4096^3 blocked bf16 matmul and on a
synthetic million-instruction program. Prints a table; asserts nothing.

    python benches/bench_scheduler.py [--repeat 3] [--n 4096] [--synthetic 1000000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from bench_emulation import _best
from rich.console import Console
from rich.table import Table

import neuronemu
from neuronemu.jit import compiled as _jit
from neuronemu.sim import timing

BLOCKED = Path(__file__).resolve().parent.parent / "tests" / "timing" / "matmul_blocked.py"


def _synthetic(n: int, seed: int = 0) -> dict:
    """A program shaped like a kernel's: 5 engines and 16 DMA queues, 1-3 backward deps."""
    rng = np.random.default_rng(seed)
    n_streams = 21
    stream = rng.integers(0, n_streams, n)
    kind = np.where(
        stream >= 5, _jit.KIND_DMA, np.where(stream == 0, _jit.KIND_TENSOR, _jit.KIND_COMPUTE)
    ).astype(np.int64)
    n_deps = rng.integers(0, 4, n)
    n_deps[0] = 0
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(n_deps)
    owner = np.repeat(np.arange(n), n_deps)
    back = rng.integers(1, 64, owner.size)
    indices = np.maximum(owner - back, 0)
    keep = indices < owner
    indptr[1:] = np.cumsum(np.bincount(owner[keep], minlength=n))
    lo = rng.integers(0, 16, n)
    return {
        "stream": stream.astype(np.int64),
        "kind": kind,
        "cost_ns": rng.uniform(50, 500, n),
        "latency_ns": rng.uniform(0, 200, n),
        "chain_ns": rng.uniform(0, 200, n),
        "dep_indptr": indptr,
        "dep_indices": indices[keep].astype(np.int64),
        "n_streams": n_streams,
        "dma_lo": lo.astype(np.int64),
        "dma_hi": np.minimum(lo + 4, 16).astype(np.int64),
        "hbm_bytes": np.where(kind == _jit.KIND_DMA, 65536.0, 0.0),
        "port_mask": np.zeros(n, dtype=np.int64),
        "machine": np.array([1300.0, 30.0, 365.0, 16, 0.5, 3000.0, 1500.0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n", type=int, default=4096, help="matmul size (M = N = K)")
    parser.add_argument("--synthetic", type=int, default=1_000_000)
    parser.add_argument("--target", default="trn2")
    args = parser.parse_args()
    bf16 = ml_dtypes.bfloat16
    inputs = {
        "lhsT": np.zeros((args.n, args.n), bf16),
        "rhs": np.zeros((args.n, args.n), bf16),
        "block_m": min(2048, args.n),
        "block_n": 512,
    }

    t0 = time.perf_counter()
    result = neuronemu.run(BLOCKED, inputs, target=args.target, timing_only=True)
    first_run = time.perf_counter() - t0  # includes loading the jit cache
    program = result.program
    n = len(program.instrs)
    t_run = _best(
        lambda: neuronemu.run(BLOCKED, inputs, target=args.target, timing_only=True).to_json(),
        args.repeat,
    )
    t_compile = _best(
        lambda: neuronemu.compile_kernel(BLOCKED, inputs, target=args.target), args.repeat
    )
    t_arrays = _best(lambda: timing.schedule_arrays(program), args.repeat)
    arrays = timing.schedule_arrays(program)
    call = [arrays[k] for k in timing.SCHEDULER_ARGS]
    _jit.schedule(*call)
    t_jit = _best(lambda: _jit.schedule(*call), args.repeat)
    t_py = _best(lambda: _jit._schedule_py(*call), 1)
    t_report = _best(lambda: result.to_json(), args.repeat)

    synth = _synthetic(args.synthetic)
    scall = [synth[k] for k in timing.SCHEDULER_ARGS]
    t_synth = _best(lambda: _jit.schedule(*scall), args.repeat)

    table = Table(
        title=f"neuronemu scheduler, {args.n}^3 blocked bf16 matmul on {args.target} "
        f"({n:,} instructions), best of {args.repeat}"
    )
    for col in ("stage", "seconds", "instructions/s"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    rows = [
        ("run(timing_only=True) + to_json, end to end", t_run, n),
        ("  of which: parse + trace + build (compile_kernel)", t_compile, n),
        ("  of which: scheduler arrays (schedule_arrays)", t_arrays, n),
        ("  of which: jitted scheduler", t_jit, n),
        ("  of which: report (to_json)", t_report, n),
        ("plain-Python scheduler twin", t_py, n),
        (f"jitted scheduler, synthetic {args.synthetic:,} instructions", t_synth, args.synthetic),
        ("first run in this process (jit cache load)", first_run, n),
    ]
    for name, seconds, count in rows:
        table.add_row(name, f"{seconds:.4f}", f"{count / seconds:,.0f}")
    Console(width=120).print(table)
    print(
        f"modelled: {result.time_ns / 1e3:,.1f} us, MFU {result.mfu:.3f}, bound by "
        f"{result.bound_by}, tensor floor {result.tensor_floor_ns / 1e3:,.1f} us"
    )


if __name__ == "__main__":
    main()
