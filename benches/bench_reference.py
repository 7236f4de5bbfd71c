"""The reference check against the run it checks: `neuronemu run kernels/tensor_add.py` on
two bfloat16 [N, N] inputs, with and without `--ref`, each in a process of its own (wall
time, peak RSS); then, in one process, the run, the reference's call and the comparison
timed apart, against a reference that rounds to bfloat16 as the kernel does (every element
equal) and one that returns float32 (every element differs). Prints tables; asserts nothing.

    python benches/bench_reference.py [--size 8192]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernels" / "tensor_add.py"
REFERENCE = ROOT / "kernels" / "tensor_add_ref.py"

# The parts of a checked run, in a process set up as the command sets up its own.
_CHILD = """
import json, sys, time
import numpy as np
import neuronemu
from neuronemu.host import malloc
from neuronemu.inputs import parse_spec
from neuronemu.report.reference import call_reference, compare, load_reference
malloc.keep_freed_arrays()
size, kernel, ref = int(sys.argv[1]), sys.argv[2], sys.argv[3]
inputs = {k: parse_spec(k, f"bfloat16[{size},{size}]", 0) for k in ("a", "b")}
t0 = time.perf_counter()
result = neuronemu.run(kernel, inputs, print_fn=lambda _: None)
t1 = time.perf_counter()
references = {
    "equal (bf16 reference)": load_reference(ref),
    "differs (fp32 reference)": lambda a, b: a.astype(np.float32) + b.astype(np.float32),
}
rows = []
for label, fn in references.items():
    t2 = time.perf_counter()
    expected = call_reference(fn, inputs)
    t3 = time.perf_counter()
    check = compare(result.outputs, expected, {"out": "bfloat16"}, None, None)
    t4 = time.perf_counter()
    rows.append({"reference": label, "run": t1 - t0, "call": t3 - t2, "compare": t4 - t3,
                 "passed": check.passed, "max_abs_err": check.max_abs_err})
    del expected
print(json.dumps(rows))
"""


def _timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of a command run to its end."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status:
        raise SystemExit(f"{' '.join(command)} failed ({status})")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--size", type=int, default=8192)
    opts = args.parse_args()
    n = opts.size
    base = [sys.executable, "-m", "neuronemu", "run", str(KERNEL)]
    base += ["-i", f"a=bfloat16[{n},{n}]", "-i", f"b=bfloat16[{n},{n}]"]
    console = Console()
    table = Table(title=f"neuronemu run tensor_add, bfloat16 [{n}, {n}]")
    for col in ("command", "wall s", "peak RSS MiB"):
        table.add_column(col, justify="left" if col == "command" else "right")
    walls = {}
    for label, command in (
        ("run", base),
        ("run --ref", [*base, "--ref", f"{REFERENCE}:reference"]),
    ):
        wall, peak = _timed(command)
        walls[label] = wall
        table.add_row(label, f"{wall:.2f}", f"{peak:,.0f}")
    console.print(table)

    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), str(KERNEL), f"{REFERENCE}:reference"],
        check=True,
        capture_output=True,
        text=True,
    )
    parts = Table(title="the check's parts in one process, seconds; compare as a share of the run")
    columns = ("reference", "run", "reference call", "compare", "/ run", "/ run --ref command")
    for col in (*columns, "passed"):
        parts.add_column(col, justify="left" if col == "reference" else "right")
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        parts.add_row(
            row["reference"],
            f"{row['run']:.2f}",
            f"{row['call']:.2f}",
            f"{row['compare']:.3f}",
            f"{row['compare'] / row['run']:.1%}",
            f"{row['compare'] / walls['run --ref']:.1%}",
            str(row["passed"]),
        )
    console.print(parts)


if __name__ == "__main__":
    main()
