"""What `--explain-mismatch` costs against the run it explains: for kernels of `kernels/` on
their first case, against a reference that is off by a final step (so the shadow run fails
too and the reference's own steps are compared), in one process: the run, the shadow run
alone (what the explanation cost before it compared steps), the whole explanation, its parts
(tracing the reference, the observed shadow run and, within it, the time in the observer and
in finding the first wrong step), and what comparing steps adds (tracing and observing), also
as a share of the explained run (the run, the reference traced, the observed shadow run).
Prints a table; asserts nothing.

    python benches/bench_explain.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import neuronemu
from neuronemu.inputs import made, parse_spec
from neuronemu.pipeline import RunOptions, run_program
from neuronemu.report import explain
from neuronemu.report.reference import call_reference, case_tolerances, discover_cases
from neuronemu.sim import functional

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("matmul_blocked", "matmul_tiled", "softmax_rows", "layernorm", "attention_legacy")


def _off_by_a_step(fn):
    """The reference, then one more step (x 1.5 + 1) that the kernel does not take."""

    def reference(**inputs):
        return [np.asarray(r, dtype=np.float64) * 1.5 + 1 for r in call_reference(fn, inputs)]

    reference.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return reference


def _best(repeat: int, work) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = work()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    table = Table(title="--explain-mismatch: seconds (best of --repeat)")
    for column in (
        "kernel",
        "instructions",
        "run",
        "shadow alone",
        "explanation",
        "trace ref",
        "observed shadow",
        "in the observer",
        "added",
        "added / explained run",
    ):
        table.add_column(column, justify="right")
    seen = set()
    for kernel, fn, case in discover_cases(ROOT / "kernels"):
        name = kernel.stem
        if name not in KERNELS or name in seen:
            continue
        seen.add(name)
        specs, _, _ = case_tolerances(case)
        inputs = {k: made(parse_spec(k, v, 0)) for k, v in specs.items()}
        ref = _off_by_a_step(fn)
        program = neuronemu.compile_kernel(str(kernel), inputs)
        options = RunOptions()
        arrays = {k: np.asarray(inputs[k]) for k in program.inputs}
        run_s, _ = _best(args.repeat, lambda: run_program(program, inputs, _meter(), options))
        shadow_s, _ = _best(args.repeat, lambda: functional.shadow_execute(program, arrays))
        expected = call_reference(ref, inputs)
        dtypes = {t.name: t.dtype.name for t in program.outputs}
        explain_s, found = _best(
            args.repeat,
            lambda: explain.explain_mismatch(
                program, arrays, ref, inputs, expected, dtypes, None, None, True
            ),
        )
        trace_s, traced = _best(args.repeat, lambda: explain.trace_reference(ref, inputs))
        refs, skipped = traced
        observing, observed_s = None, float("inf")
        for _ in range(args.repeat):  # (the repeat with the least time in the observer)
            timed = _Timed()
            steps = explain.Steps(program, refs, skipped)
            t0 = time.perf_counter()
            functional.shadow_execute(program, arrays, observe=timed.wrap(steps.observe))
            t1 = time.perf_counter()
            steps.first_wrong()
            timed.seconds += time.perf_counter() - t1
            if observing is None or timed.seconds < observing.seconds:
                observing, observed_s = timed, t1 - t0
        assert observing is not None
        added_s = trace_s + observing.seconds
        assert isinstance(found, dict)
        table.add_row(
            name,
            f"{len(program.raw_instrs):,}",
            f"{run_s:.3f}",
            f"{shadow_s:.3f}",
            f"{explain_s:.3f}",
            f"{trace_s:.3f}",
            f"{observed_s:.3f}",
            f"{observing.seconds:.3f}",
            f"{added_s:.3f}",
            f"{added_s / (run_s + observed_s + trace_s):.0%}",
        )
    Console(width=160).print(table)


class _Timed:
    """Seconds spent inside a wrapped function, summed over its calls."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn):
        def timed(*args):
            t0 = time.perf_counter()
            fn(*args)
            self.seconds += time.perf_counter() - t0

        return timed


def _meter():
    from neuronemu.limits import Limits, Meter

    return Meter(Limits())


if __name__ == "__main__":
    main()
