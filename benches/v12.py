"""V12: the fp32 matmuls of AWS's kernel-optimization tutorial against the Trn2 profiles the
tutorial publishes (reference D3, row V12; the profiles are nki/img/how-to/v{2..5}-*.png).

    python benches/v12.py [--sdk DIR] [--versions 2,3,4,5]

Runs neuronemu's own versions of the four kernels (tests/timing/v12_matmuls.py, the ones the
test suite checks) and, with --sdk, the tutorial's originals beside them: the code blocks of
nki/guides/tutorials/kernel-optimization.rst that define `matrix_multiply_kernel` (v1..v5, in
order), read from an aws-neuron-sdk checkout at run time (nothing of AWS's is stored here).
Each runs with --timing-only on lhsT float32[8192, 4096] and rhs float32[8192, 8192], as in
the tutorial. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import textwrap
import time
from pathlib import Path

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
            limits={"trace_seconds": 900, "run_seconds": 1800},
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk", type=Path, help="checkout of aws-neuron/aws-neuron-sdk")
    ap.add_argument("--versions", default="2,3,4,5")
    args = ap.parse_args()
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
