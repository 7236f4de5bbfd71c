"""Why each line waits: every instruction's span (from when its stream could take it until
its result is visible) split by cause, in the Perfetto trace, `--json` and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.report.stalls import LINE_CAUSES

ROOT = Path(__file__).resolve().parents[2]
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
OWN = {"tensor", "vector", "scalar", "gpsimd", "sync", "dma transfer", "dma fixed latency"}

# Line 10 loads, line 11 waits for it (Scalar), line 12 for line 11 (Vector), line 13 stores.
SERIAL = (
    HEADER
    + """@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=u, op=nl.exp, data=t)
    nisa.tensor_tensor(dst=t, data1=u, data2=u, op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
)


def _slices(result, tmp_path) -> list[dict]:
    out = tmp_path / "trace.json"
    result.write_trace(str(out))
    return [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_each_instructions_causes_add_up_to_its_span_in_the_trace(tmp_path, target):
    a = np.zeros((512, 1024), np.float32)
    r = neuronemu.run(
        ROOT / "kernels" / "tensor_add.py", {"a": a, "b": a}, target=target, timing_only=True
    )
    slices = _slices(r, tmp_path)
    assert len(slices) == len(r.program.raw_instrs)
    for e in slices:
        args, ts, dur = e["args"], e["ts"] * 1e3, e["dur"] * 1e3
        causes = args["causes_ns"]
        assert set(causes) <= set(LINE_CAUSES) and min(causes.values(), default=0) >= 0
        since, done = args["waiting_since_ts_us"] * 1e3, args["done_ts_us"] * 1e3
        assert since <= ts + 1e-6 and done >= ts + dur - 1e-6
        assert sum(causes.values()) == pytest.approx(done - since, abs=0.01)
        # its own time is the slice; before it, the waits; after it, the latency
        own = sum(ns for c, ns in causes.items() if c in OWN)
        queued = causes.get("dma queueing", 0.0)
        if "dma" not in e["name"] and "copy" not in e["name"]:
            assert own == pytest.approx(dur, abs=0.01)
            assert causes.get("engine latency", 0.0) == pytest.approx(done - ts - dur, abs=0.01)
        else:
            assert own + queued >= dur - 0.01
    # an engine's stream takes an instruction when the one before it there ends
    by_track: dict[int, list[dict]] = {}
    for e in slices:
        by_track.setdefault(e["tid"], []).append(e)
    compute = [t for t in by_track.values() if "dma_copy" not in t[0]["name"]]
    assert compute
    for track in compute:
        track.sort(key=lambda e: e["ts"])
        for before, after in zip(track, track[1:]):
            since = after["args"]["waiting_since_ts_us"]
            assert since == pytest.approx(before["ts"] + before["dur"], abs=1e-6)


def test_a_dependency_wait_shows_on_the_line_that_waits(kernel_file, tmp_path):
    path = kernel_file(SERIAL)
    r = neuronemu.run(path, {"a": np.zeros((128, 2048), np.float32)}, timing_only=True)
    arch = r.program.arch
    at = {int(e["args"]["source"].split(":")[-2]): e for e in _slices(r, tmp_path)}
    load, act, add = at[10], at[11], at[12]
    load_end = (load["ts"] + load["dur"]) * 1e3
    # line 11 waits (its engine idle until then) for the load to end, then its semaphore
    why = act["args"]["causes_ns"]
    assert why["dependency"] == pytest.approx(load_end, abs=0.01)
    assert why["semaphore"] == pytest.approx(arch.cost_semaphore_ns, abs=0.01)
    # line 12 for line 11's end, then its pipeline latency and the semaphore
    act_end = (act["ts"] + act["dur"]) * 1e3
    why = add["args"]["causes_ns"]
    assert why["dependency"] == pytest.approx(act_end, abs=0.01)
    assert why["semaphore"] == pytest.approx(add["ts"] * 1e3 - act_end, abs=0.01)
    assert why["semaphore"] > arch.cost_semaphore_ns
    # and the lines say so: the wait is on lines 11 and 12, none on line 10
    lines = {row["line"]: row for row in r.to_json()["lines"]}
    assert lines[11]["by_cause"]["dependency"] == pytest.approx(load_end, abs=0.01)
    assert lines[12]["by_cause"]["dependency"] == pytest.approx(act_end, abs=0.01)
    assert "dependency" not in lines[10]["by_cause"]
    assert lines[11]["source"] == "nisa.activation(dst=u, op=nl.exp, data=t)"
    for row in lines.values():
        assert row["total_ns"] == pytest.approx(sum(row["by_cause"].values()), abs=0.01)


def test_lines_sum_their_instructions_and_list_the_most_first(kernel_file):
    path = kernel_file(
        HEADER
        + """@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(4):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out
"""
    )
    r = neuronemu.run(path, {"a": np.zeros((512, 512), np.float32)}, timing_only=True)
    rows = r.stalls.lines()
    assert [row["instructions"] for row in rows] == [4, 4, 4]
    totals = [row["total_ns"] for row in rows]
    assert totals == sorted(totals, reverse=True)
    tl = r.timeline
    for row in rows:
        mine = [i.index for i in r.program.raw_instrs if i.span.line == row["line"]]
        span = sum(float(tl.ready_ns[i] - r.stalls.span_from[i]) for i in mine)
        assert row["total_ns"] == pytest.approx(span, abs=0.01)


def test_the_report_shows_the_top_lines_one_row_each(kernel_file):
    path = kernel_file(SERIAL)
    out = CliRunner().invoke(main, ["run", path, "-i", "a=float32[128,2048]"])
    assert out.exit_code == 0, out.output
    text = out.output.splitlines()
    head = next(k for k, ln in enumerate(text) if "top source lines" in ln)
    rows = [ln for ln in text[head + 2 : head + 6] if "kernel.py:" in ln]
    assert len(rows) == 4
    assert any("kernel.py:11 " in ln and "dependency" in ln for ln in rows)
