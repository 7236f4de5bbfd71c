"""The trace's critical-path arrows go forward in time: each leaves an instruction at its
end and lands, later or at once, inside the slice of the instruction that waited for it
(a transfer's slice starts at its trigger, before what it waits for ends: arrows landed
there went back in time)."""

from __future__ import annotations

from pathlib import Path

import pytest

import neuronemu
from neuronemu.inputs import parse_spec
from neuronemu.report.reference import discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
CASES = {p.stem: (p, case) for p, _ref, case in discover_cases(KERNELS)}  # (one per kernel)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_critical_path_arrow_goes_forward_into_the_waiting_slice(name):
    path, case = CASES[name]
    inputs = {k: parse_spec(k, spec, seed=1) for k, spec in case.items()}
    trace = neuronemu.run(path, inputs, timing_only=True).trace_events()["traceEvents"]
    slices = [e for e in trace if e["ph"] == "X"]
    starts = {e["id"]: e for e in trace if e["ph"] == "s"}
    ends = [e for e in trace if e["ph"] == "f"]
    assert ends and len(ends) == len(starts)
    for f in ends:
        s = starts[f["id"]]
        assert f["ts"] >= s["ts"] - 1e-9, (s, f)
        inside = [
            e for e in slices if e["tid"] == f["tid"] and e["ts"] <= f["ts"] <= e["ts"] + e["dur"]
        ]
        assert inside, f"arrow {f['id']} lands outside every slice of its track"
