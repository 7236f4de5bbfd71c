"""Memory use of emulation: peak RSS of a process running a large kernel, against the bytes
of its HBM tensors plus the SBUF and PSUM it models. Prints a table; asserts nothing.

    python benches/bench_memory.py [--size 4096]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

KERNELS = Path(__file__).resolve().parent.parent / "kernels"

# Each case runs in a fresh interpreter, so that ru_maxrss is this kernel's peak alone.
_CHILD = """
import json, resource, sys, time
import numpy as np
import neuronemu
size, kernel = int(sys.argv[1]), sys.argv[2]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rng = np.random.default_rng(0)
inputs = {"a": rng.standard_normal((size, size), dtype=np.float32),
          "b": rng.standard_normal((size, size), dtype=np.float32)}
t0 = time.perf_counter()
result = neuronemu.run(kernel, inputs)
elapsed = time.perf_counter() - t0
arch = result.program.arch
hbm = sum(t.size * t.dtype.itemsize for t in result.program.tensors if not t.on_chip)
on_chip = arch.sbuf_partitions * (arch.sbuf_bytes_per_partition + arch.psum_bytes_per_partition)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"base_kib": base, "peak_kib": peak, "hbm": hbm, "on_chip": on_chip,
                  "instructions": len(result.program.instrs), "seconds": elapsed}))
"""


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--size", type=int, default=4096)
    opts = args.parse_args()
    table = Table(title=f"peak memory, {opts.size} x {opts.size} float32")
    for col in (
        "kernel",
        "instrs",
        "run s",
        "HBM tensors MiB",
        "SBUF+PSUM MiB",
        "peak RSS MiB (after imports)",
        "ratio to HBM+SBUF+PSUM",
    ):
        table.add_column(col, justify="left" if col == "kernel" else "right")
    for name in ("tensor_add", "tensor_add_legacy"):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(opts.size), str(KERNELS / f"{name}.py")],
            check=True,
            capture_output=True,
            text=True,
        )
        r = json.loads(done.stdout.strip().splitlines()[-1])
        mib = 1 << 20
        grew = (r["peak_kib"] - r["base_kib"]) * 1024
        table.add_row(
            name,
            str(r["instructions"]),
            f"{r['seconds']:.2f}",
            f"{r['hbm'] / mib:.0f}",
            f"{r['on_chip'] / mib:.0f}",
            f"{grew / mib:.0f}",
            f"{grew / (r['hbm'] + r['on_chip']):.2f}",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
