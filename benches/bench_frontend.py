"""Front-end speed: parse + specialize a generated 2,000-line kernel, cold (a new process, no
cached AST) and warm (a new process, the AST cached on disk). Prints a table; asserts nothing.

    python benches/bench_frontend.py [--lines 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

# Run in a fresh interpreter so that "cold" includes the first parse of the process.
_CHILD = """
import json, sys, time
import numpy as np
import neuronemu
from neuronemu.frontend import lalr, parser
t0 = time.perf_counter()
lalr._parser()
t1 = time.perf_counter()
module = parser.parse_file(sys.argv[1])
t2 = time.perf_counter()
program = neuronemu.compile_kernel(sys.argv[1], {"a": np.zeros((128, 512), np.float32)})
t3 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "parse": t2 - t1, "specialize": t3 - t2,
                  "instructions": len(program.instrs)}))
"""


def generate(lines: int) -> str:
    out = [
        "import nki",
        "import nki.isa as nisa",
        "import nki.language as nl",
        "",
        "",
        "@nki.jit",
        "def big(a):",
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)",
    ]
    i = 0
    while len(out) < lines - 1:
        c = (i % 8) * 64
        out += [
            f"    t{i} = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)",
            f"    nisa.dma_copy(dst=t{i}, src=a[0:128, {c}:{c + 64}])",
            f"    nisa.tensor_scalar(dst=t{i}, data=t{i}, op0=nl.multiply, operand0={i % 7}.5)",
            f"    if {i} % 3 == 0:",
            f"        nisa.dma_copy(dst=out[0:128, {c}:{c + 64}], src=t{i})",
        ]
        i += 1
    out.append("    return out")
    return "\n".join(out) + "\n"


def run_child(path: Path, cache: Path) -> dict[str, float]:
    env = dict(os.environ, NEURONEMU_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--lines", type=int, default=2000)
    args.add_argument("--repeat", type=int, default=3)
    opts = args.parse_args()
    table = Table(
        title=f"parse + specialize, {opts.lines}-line kernel (seconds, best of {opts.repeat})"
    )
    for col in ("run", "load parser", "parse", "specialize", "parse + specialize", "instrs"):
        table.add_column(col, justify="left" if col == "run" else "right")
    with tempfile.TemporaryDirectory() as tmp:
        kernel = Path(tmp) / "big.py"
        kernel.write_text(generate(opts.lines))
        rows: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
        for n in range(opts.repeat):
            cache = Path(tmp) / f"cache{n}"
            rows["cold"].append(run_child(kernel, cache))  # empty cache: parses
            rows["warm"].append(run_child(kernel, cache))  # the AST from the cold run
        for name, results in rows.items():
            best = min(results, key=lambda r: r["parse"] + r["specialize"])
            table.add_row(
                name,
                f"{best['load']:.3f}",
                f"{best['parse']:.3f}",
                f"{best['specialize']:.3f}",
                f"{best['parse'] + best['specialize']:.3f}",
                str(int(best["instructions"])),
            )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
