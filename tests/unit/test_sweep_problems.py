"""A sweep whose parameters change an input's shape ranks each problem on its own (the
"best" configuration was simply the smaller problem), and its best command keeps the
sweep's reference check."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main

KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy(a, cols=128):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(a.shape[1] // cols):
        t = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * cols:(j + 1) * cols])
        nisa.dma_copy(dst=out[:, j * cols:(j + 1) * cols], src=t)
    return out
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "k_ref.py").write_text("def reference(a):\n    return a\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def sweep_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["sweep", "k.py", "-j", "1", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_each_problem_is_ranked_on_its_own(files):
    report = sweep_json(
        "--param", "M=512,1024", "--param", "cols=128,256", "-i", "a=float32[128,{M}]"
    )
    problems = report["problems"]
    assert [p["inputs"] for p in problems] == [
        {"a": "float32[128,512]"},
        {"a": "float32[128,1024]"},
    ]
    for p in problems:
        mine = [r for r in report["results"] if r["status"] == "ok" and r["problem"] == p["inputs"]]
        assert len(mine) == 2 and p["best"] == min(mine, key=lambda r: r["time_ns"])
        assert p["best"]["config"]["M"] == int(p["inputs"]["a"].split(",")[1][:-1])
    # the ranked results: problem by problem, fastest first within each
    ok = [r for r in report["results"] if r["status"] == "ok"]
    assert [r["problem"]["a"] for r in ok] == ["float32[128,512]"] * 2 + ["float32[128,1024]"] * 2


def test_a_sweep_of_one_problem_has_one_ranking(files):
    report = sweep_json("--param", "cols=128,256", "-i", "a=float32[128,512]")
    assert len(report["problems"]) == 1 and "problem" not in report["results"][0]
    assert report["problems"][0]["best"] == report["best"]


def test_the_best_command_keeps_the_reference(files):
    report = sweep_json(
        "--param",
        "cols=128,256",
        "-i",
        "a=float32[128,512]",
        "--ref",
        "k_ref.py:reference",
        "--rtol",
        "0.001",
    )
    command = report["best_command"]
    assert "--ref k_ref.py:reference" in command and "--rtol 0.001" in command


def test_the_python_api_marks_each_result_with_its_problem(files):
    results = neuronemu.sweep(
        "k.py", {"M": [512, 1024], "cols": [128]}, {"a": "float32[128,{M}]"}, workers=1
    )
    assert [r["problem"] for r in results] == [
        {"a": "float32[128,512]"},
        {"a": "float32[128,1024]"},
    ]


def test_the_table_ranks_each_problem_under_its_own_heading(files):
    args = ["--param", "M=512,1024", "--param", "cols=128,256", "-i", "a=float32[128,{M}]"]
    result = CliRunner().invoke(main, ["sweep", "k.py", "-j", "1", *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    headings = [n for n, line in enumerate(lines) if line.startswith("problem ")]
    assert [lines[n] for n in headings] == [
        "problem 1 of 2: a=float32[128,512]",
        "problem 2 of 2: a=float32[128,1024]",
    ]
    for n, (start, end) in enumerate(zip(headings, [*headings[1:], len(lines)])):
        part = lines[start:end]
        m = (512, 1024)[n]
        ranked = [line.split() for line in part if line.startswith(("  1 ", "  2 "))]
        assert [row[1] for row in ranked] == [str(m), str(m)]  # (only this problem's M)
        assert float(ranked[0][3]) <= float(ranked[1][3])  # fastest first
        best = next(line for line in part if line.startswith("best: "))
        assert best.startswith(f"best: M={m} cols={ranked[0][2]}, ")
