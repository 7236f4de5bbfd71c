"""Held-out attacks on issue 38, third set: work after the trace that no clock saw. The run's
passes after tracing (the values, the check of reads nothing wrote, the two cores' writes
compared, the race check of a program as it ran) read the clocks only between passes, so a
small kernel ran on for minutes past `run_seconds`. Each must now end on the budget within a
fraction of a second of it running out, located at the instruction the pass was at."""

from __future__ import annotations

import time

import numpy as np
import pytest
from _guard import Sandbox

from neuronemu.errors import BudgetError
from neuronemu.limits import Limits, Meter, metered, tick

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n@nki.jit\n"

# Each: the source, the command line's arguments, and the line(s) the error may point at.
_PASSES = {
    # the values: 10,000 copies of 64 MiB (about 40 s)
    "values-of-large-copies": (
        HEAD + "def k(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    for i in nl.sequential_range(10000):\n"
        "        nisa.dma_copy(dst=out, src=a)\n"
        "    return out\n",
        ["-i", "a=float32[4096,4096]"],
        10,
    ),
    # the two cores' writes compared, every pass of a device loop against every other
    # (1,500 passes: 2.25 million comparisons)
    "two-cores-writes-compared": (
        HEAD + "def k(n):\n"
        "    out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    t = nl.zeros((1, 8), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "    count = nisa.scalar_load(n_sb)\n"
        "\n"
        "    def body(i):\n"
        "        nisa.dma_copy(dst=out, src=t)\n"
        "\n"
        "    nl.fori_loop(0, count, body)\n"
        "    return out\n",
        ["-i", "n=@n.npy", "--grid", "2"],
        15,
    ),
    # reads nothing wrote: 8M validity flags walked for each of 20,000 copies (timing only)
    "uninitialized-read-check": (
        HEAD + "def k(a):\n"
        "    out = nl.ndarray((128, 1), dtype=nl.int8, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 65536), dtype=nl.int8, buffer=nl.sbuf)\n"
        "    u = nl.ndarray((128, 65536), dtype=nl.int8, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t[:, 0:1], src=a)\n"
        "    for i in nl.sequential_range(20000):\n"
        "        nisa.tensor_copy(dst=u, src=t)\n"
        "    nisa.dma_copy(dst=out, src=t[:, 0:1])\n"
        "    return out\n",
        ["-i", "a=int8[128,1]", "--timing-only"],
        13,
    ),
    # a mismatch explained: the program run again in high precision beside its values
    # (45,000 passes of a device loop)
    "mismatch-explained": (
        HEAD + "def k(a, n):\n"
        "    out = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "    count = nisa.scalar_load(n_sb)\n"
        "\n"
        "    def body(i):\n"
        "        nisa.tensor_reduce(dst=t[:, 1:2], data=t[:, 0:2], op=nl.maximum, axis=1)\n"
        "\n"
        "    nl.fori_loop(0, count, body)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n",
        ["-i", "a=float32[1,2]", "-i", "n=@m.npy", "--ref", "ref.py:ref", "--explain-mismatch"],
        # (the race check of the run as it ran may stop at the loop's own line; on a slow
        # machine the run itself may spend the budget first, in the body: located all the same)
        (16, 17, 18),
    ),
}


@pytest.mark.parametrize("case", list(_PASSES))
def test_the_passes_after_the_trace_end_on_the_run_budget(tmp_path, case):
    source, args, line = _PASSES[case]
    box = Sandbox(tmp_path)
    box.write("k.py", source)
    np.save(box.work / "n.npy", np.array([[1500]], dtype=np.int32))
    np.save(box.work / "m.npy", np.array([[45000]], dtype=np.int32))
    box.write("ref.py", "def ref(a, n):\n    return a + 1.0\n")  # (wrong: a mismatch)
    out = box.run("run", "k.py", *args, "--limit", "run_seconds=2")
    m = out.assert_located("k.py")
    assert "run_seconds" in out.first_line, out.describe()
    assert int(m["line"]) in (line if isinstance(line, tuple) else (line,)), out.describe()
    out.assert_budget_message()


def test_tick_reads_the_clock_of_the_run_under_way_only():
    meter = Meter(Limits().replace(run_seconds=0.0))
    time.sleep(0.01)
    for _ in range(10 * Meter._POLL_EVERY):  # outside a run: nothing is read
        tick(None)
    with metered(meter), pytest.raises(BudgetError, match="run_seconds"):
        for _ in range(Meter._POLL_EVERY):
            tick(None)
    with metered(meter), pytest.raises(BudgetError, match="run_seconds"):
        tick(None, Meter._POLL_EVERY)  # one large unit of work counts as many
    for _ in range(10 * Meter._POLL_EVERY):  # and once it is over, nothing again
        tick(None)
