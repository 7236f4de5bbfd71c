"""Small things a kernel author meets at the command line (issue 43, item 8): `check` takes
tolerances and budgets, `--trace` says where it wrote and how to open it, and the critical
path's line names no cause at 0%."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_check_takes_tolerances_that_override_the_cases(monkeypatch):
    monkeypatch.chdir(ROOT)
    loose = invoke("check", "kernels", "-k", "softmax_rows")
    exact = invoke("check", "kernels", "-k", "softmax_rows", "--rtol", "0", "--atol", "0")
    assert loose.exit_code == 0, loose.output
    assert exact.exit_code == 1 and "MISMATCH" in exact.output


def test_check_takes_budgets(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = invoke("check", "kernels", "-k", "tensor_add", "--limit", "instructions=3")
    assert result.exit_code == 1
    assert "over the instructions budget of 3" in result.stderr


def test_trace_says_where_it_wrote_and_how_to_open_it(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "t.json"
    result = invoke(
        "run",
        "kernels/tensor_add.py",
        "-i",
        "a=float32[128,512]",
        "-i",
        "b=float32[128,512]",
        "--trace",
        str(out),
    )
    assert result.exit_code == 0 and out.is_file()
    assert f"trace: {out} (open it in the Perfetto UI" in result.stderr


def test_the_critical_path_line_names_no_cause_at_zero_percent():
    r = neuronemu.run(
        ROOT / "kernels" / "tensor_add.py",
        {"a": np.zeros((128, 512), np.float32), "b": np.zeros((128, 512), np.float32)},
        timing_only=True,
    )
    path = r.critical_path
    ns = path.ns
    causes = [("dma transfer", ns * 0.996, [("k.py:1:1", 1.0)]), ("vector", ns * 0.004, [])]
    path.by_cause = lambda: causes  # (a second cause worth 0.4%)
    assert path.summary() == f"critical path {ns / 1000:.3f} us: 100% dma transfer at k.py:1:1"
