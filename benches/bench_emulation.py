"""Emulation speed: parse+specialize, functional execution and scheduling per kernel, against
NumPy doing the same math directly. Prints a table; asserts nothing.

    python benches/bench_emulation.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from rich.console import Console
from rich.table import Table

import neuronemu
from neuronemu.sim import functional, timing

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
BF16 = ml_dtypes.bfloat16


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = [
        (
            "tensor_add",
            {"a": (2048, 2048), "b": (2048, 2048)},
            lambda a, b: (a.astype(np.float32) + b.astype(np.float32)).astype(BF16),
        ),
        (
            "tensor_add_legacy",
            {"a": (2048, 2048), "b": (2048, 2048)},
            lambda a, b: (a.astype(np.float32) + b.astype(np.float32)).astype(BF16),
        ),
        (
            "matmul_tiled",
            {"lhsT": (1024, 512), "rhs": (1024, 2048)},
            lambda lhsT, rhs: (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(BF16),
        ),
    ]
    table = Table(title="neuronemu emulation speed (best of %d, seconds)" % args.repeat)
    for col in (
        "kernel",
        "shapes",
        "instrs",
        "compile",
        "execute",
        "schedule",
        "numpy",
        "execute/numpy",
        "sim cycles",
    ):
        table.add_column(col, justify="left" if col in ("kernel", "shapes") else "right")
    for name, shapes, direct in cases:
        inputs = {
            k: rng.standard_normal(s, dtype=np.float32).astype(BF16) for k, s in shapes.items()
        }
        path = KERNELS / f"{name}.py"
        program = neuronemu.compile_kernel(path, inputs)
        timing.schedule(program)  # warm the jit cache
        t_compile = _best(lambda: neuronemu.compile_kernel(path, inputs), args.repeat)
        t_exec = _best(lambda: functional.execute(program, inputs), args.repeat)
        t_sched = _best(lambda: timing.schedule(program), args.repeat)
        t_numpy = _best(lambda: direct(**inputs), args.repeat)
        cycles = neuronemu.run(path, inputs, timing_only=True).cycles
        table.add_row(
            name,
            " ".join(f"{k}{list(s)}" for k, s in shapes.items()),
            str(len(program.instrs)),
            f"{t_compile:.3f}",
            f"{t_exec:.3f}",
            f"{t_sched:.4f}",
            f"{t_numpy:.3f}",
            f"{t_exec / t_numpy:.1f}x",
            f"{cycles:,}",
        )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
