"""V12: the fp32 matmuls of AWS's kernel-optimization tutorial against the Trn2 profiles the
tutorial publishes (reference D3, row V12; the profiles are nki/img/how-to/v{2..5}-*.png);
V10: the bf16 matmuls of the matrix-multiplication tutorial against its Trn1 latencies.

    python benches/v12.py [--sdk DIR] [--versions 2,3,4,5]
    python benches/v12.py --figure v10 --sdk DIR

V12 runs neuronemu's own versions of the four kernels (tests/timing/v12_matmuls.py, the ones
the test suite checks) and, with --sdk, the tutorial's originals beside them: the code blocks
of nki/guides/tutorials/kernel-optimization.rst that define `matrix_multiply_kernel` (v1..v5,
in order), read from an aws-neuron-sdk checkout at run time (nothing of AWS's is stored here).
Each runs with --timing-only on lhsT float32[8192, 4096] and rhs float32[8192, 8192], as in
the tutorial. V10 runs the four kernels of nki/examples/matrix_multiplication/
matrix_multiplication_nki_kernels.py from a checkout at 61e24fff (the revision whose tutorial,
nki/tutorials/matrix_multiplication.rst, publishes their latencies on trn1.32xlarge) on lhsT
bfloat16[8192, 4096] and rhs bfloat16[8192, 8192], on trn1. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import textwrap
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from rich.console import Console
from rich.table import Table

import neuronemu

TUTORIAL = "nki/guides/tutorials/kernel-optimization.rst"
OURS = Path(__file__).resolve().parents[1] / "tests" / "timing" / "v12_matmuls.py"
# version -> (our kernel, total ms, TensorE active ms, DMA active %), read off the profiles
PUBLISHED = {
    2: ("tiled", 39.89, 34.82, 99.93),
    3: ("hoisted", 28.20, 28.16, 99.73),
    4: ("blocked_free", 28.41, 28.28, 95.70),
    5: ("blocked_all", 28.30, 28.16, 21.54),
}
SHAPES = {"lhsT": (8192, 4096), "rhs": (8192, 8192)}
V10_KERNELS = "nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py"
# kernel -> (published latency ms, published HFU), nki/tutorials/matrix_multiplication.rst
# at aws-neuron-sdk 61e24fff (reference D3, row V10), in the tutorial's order
V10 = {
    "nki_matmul_tiled_": (51.80, 0.1098),
    "nki_matmul_hoist_load_": (42.96, 0.1324),
    "nki_matmul_block_free_dimension_": (22.07, 0.2651),
    "nki_matmul_fully_optimized_": (6.97, 0.8524),
}
V10_COLUMNS = (
    "kernel",
    "published ms",
    "neuronemu ms",
    "error",
    "bound",
    "published HFU",
    "neuronemu MFU",
    "HBM GB moved",
    "seconds",
)
LIMITS = {"trace_seconds": 900, "run_seconds": 1800, "instructions": 5_000_000}
COLUMNS = (
    "version",
    "kernel",
    "published total ms",
    "neuronemu total ms",
    "error",
    "published TensorE active ms",
    "neuronemu TensorE active ms",
    "published DMA active",
    "neuronemu DMA active",
    "HBM GB moved",
    "spill notes",
    "seconds",
)


def tutorial_kernels(sdk: Path) -> list[str]:
    """The tutorial's code blocks that define matrix_multiply_kernel, in order."""
    lines = (sdk / TUTORIAL).read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if re.match(r"\s*\.\. code-block:: python\s*$", lines[i]):
            j = i + 1
            body = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith((" ", "\t"))):
                body.append(lines[j])
                j += 1
            code = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
            if "def matrix_multiply_kernel" in code:
                blocks.append(code)
            i = j
        else:
            i += 1
    return blocks


def row(version: int, label: str, path: Path, kernel: str | None, inputs) -> list[str]:
    _, total, tensor, dma = PUBLISHED[version]
    start = time.perf_counter()
    try:
        r = neuronemu.run(
            path,
            inputs,
            kernel=kernel,
            target="trn2",
            timing_only=True,
            print_fn=lambda _line: None,
            limits=LIMITS,
        )
    except neuronemu.NeuronEmuError as e:
        return [f"v{version}", label, f"{total:.2f}", str(e).splitlines()[0][:60]]
    ms = r.time_ns / 1e6
    engines, moved = r.engines, r.hbm_bytes
    return [
        f"v{version}",
        label,
        f"{total:.2f}",
        f"{ms:.2f}",
        f"{ms / total - 1:+.1%}",
        f"{tensor:.2f}",
        f"{engines['tensor']['active_ns'] / 1e6:.2f}",
        f"{dma:.1f}%",
        f"{engines['dma']['active_ns'] / r.time_ns:.1%}",
        f"{(moved['read'] + moved['write']) / 1e9:.2f}",
        str(sum("SBUF full" in n for n in r.program.notes)),
        f"{time.perf_counter() - start:.0f}",
    ]


def v10_row(path: Path, kernel: str, inputs) -> list[str]:
    total, hfu = V10[kernel]
    start = time.perf_counter()
    try:
        r = neuronemu.run(
            path,
            inputs,
            kernel=kernel,
            target="trn1",
            timing_only=True,
            print_fn=lambda _line: None,
            limits=LIMITS,
        )
    except neuronemu.NeuronEmuError as e:
        return [kernel, f"{total:.2f}", str(e).splitlines()[0][:60]]
    ms = r.time_ns / 1e6
    return [
        kernel,
        f"{total:.2f}",
        f"{ms:.2f}",
        f"{ms / total - 1:+.1%}",
        r.bound_by,
        f"{hfu:.1%}",
        f"{r.mfu:.1%}",
        f"{(r.hbm_bytes['read'] + r.hbm_bytes['write']) / 1e9:.2f}",
        f"{time.perf_counter() - start:.0f}",
    ]


def v10(sdk: Path) -> None:
    path = sdk / V10_KERNELS
    source = path.read_text()
    missing = [k for k in V10 if f"def {k}(" not in source]
    if missing or "neuronxcc" not in source:
        raise SystemExit(f"{path}: not the 61e24fff kernels (check out 61e24fff of the SDK)")
    inputs = {k: np.zeros(shape, ml_dtypes.bfloat16) for k, shape in SHAPES.items()}
    table = Table(title="V10: matrix-multiplication tutorial on trn1, published vs neuronemu")
    for col in V10_COLUMNS:
        table.add_column(col, justify="right")
    for kernel in V10:
        table.add_row(*v10_row(path, kernel, inputs))
    Console(width=200).print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk", type=Path, help="checkout of aws-neuron/aws-neuron-sdk")
    ap.add_argument("--versions", default="2,3,4,5")
    ap.add_argument("--figure", choices=("v12", "v10"), default="v12")
    args = ap.parse_args()
    if args.figure == "v10":
        if args.sdk is None:
            ap.error("--figure v10 runs the SDK's kernels: give --sdk DIR")
        v10(args.sdk)
        return
    originals = tutorial_kernels(args.sdk) if args.sdk else []
    inputs = {k: np.zeros(shape, np.float32) for k, shape in SHAPES.items()}
    table = Table(title="V12: kernel-optimization tutorial on trn2, published vs neuronemu")
    for col in COLUMNS:
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for v in (int(x) for x in args.versions.split(",")):
            table.add_row(*row(v, PUBLISHED[v][0], OURS, PUBLISHED[v][0], inputs))
            if originals:
                path = Path(tmp) / f"v{v}.py"
                path.write_text(originals[v - 1])
                table.add_row(*row(v, "tutorial's", path, None, inputs))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
