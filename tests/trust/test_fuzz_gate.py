"""The fuzz gate of CI (`python benches/fuzz.py --gate`, the last step of `.ci/run`) fails on
a failing example, says which and how to replay it, and passes a clean sample; a known
failure is reported, not counted, until it passes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    if "fuzz_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fuzz_bench", ROOT / "benches" / "fuzz.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fuzz_bench"] = module
        spec.loader.exec_module(module)
    return sys.modules["fuzz_bench"]


def test_a_planted_internal_error_fails_the_gate(monkeypatch, tmp_path, capsys):
    import neuronemu.api

    bench = _bench()
    F = bench._load_fuzz()
    text, case = F.SOURCES["tensor_add.py"]
    planted = F.Example("generated", "tensor_add.py", text.encode(), case)

    def boom(*args, **kwargs):
        raise IndexError("planted by test_fuzz_gate")

    F.warm_up()  # (which runs kernels here, unplanted)
    # Examples run in children forked from this process: they see the planted bug.
    monkeypatch.setattr(neuronemu.api, "run_program", boom)
    monkeypatch.setattr(bench, "draw_example", lambda F, seed, index: planted)
    argv = ["--gate", "--workers", "0", "--examples", "1", "--no-regressions"]
    code = bench.main([*argv, "--seed", "5", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "=== FAILED: example 0 of seed 5 (generated): internal ===" in out
    assert "IndexError: planted by test_fuzz_gate" in out
    assert f"python benches/fuzz.py --replay {tmp_path}/000000-internal.json" in out
    assert "python benches/fuzz.py --seed 5 --only 0" in out
    assert "fuzz gate: FAILED (1 failing examples" in out
    written = json.loads((tmp_path / "000000-internal.json").read_text())
    assert F.Example.from_json(written["example"]) == planted


def test_a_clean_sample_passes_the_gate(tmp_path, capsys):
    # Through a worker process, as CI runs it.
    argv = ["--gate", "--workers", "1", "--examples", "3", "--no-regressions"]
    code = _bench().main([*argv, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fuzz gate: passed (3 examples, 0 known failures)" in out
    assert "| sweep |" in out and "| nasm |" in out  # every kind has its row
    assert all(f"| {kind} |" in out for kind in ("helpers", "nesting", "cli", "cache"))


def _result(index: int, outcome: str) -> dict:
    F = _bench()._load_fuzz()
    example = F.Example("generated", "k.py", b"x = 1\n", ())
    return {
        "index": index,
        "kind": "generated",
        "label": "",
        "outcome": outcome,
        "elapsed": 0.1,
        "peak_rss": 0,
        "message": "boom",
        "example": example.to_json(),
    }


@pytest.mark.parametrize(
    ("outcomes", "code", "words"),
    [
        ({1: "ran", 2: "internal"}, 0, "known failure (not counted): example 2 of seed 9"),
        ({1: "ran", 2: "located"}, 1, "example 2 of seed 9 no longer fails"),
        ({1: "timeout", 2: "internal"}, 1, "=== FAILED: example 1 of seed 9"),
    ],
)
def test_known_failures_are_shown_not_counted_until_they_pass(
    monkeypatch, tmp_path, capsys, outcomes, code, words
):
    import argparse

    bench = _bench()
    monkeypatch.setattr(bench, "KNOWN_FAILURES", {(9, 2): "a bug"})
    results = [_result(i, o) for i, o in outcomes.items()]
    args = argparse.Namespace(seed=9)
    assert bench.gate(bench._load_fuzz(), results, tmp_path, args) == code
    assert words in capsys.readouterr().out
