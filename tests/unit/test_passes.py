"""Compiler passes turned off by a run: `--passes none` (`passes=[]`) runs the kernel as
written, instruction for instruction; the default applies every documented pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from neuronemu.cli import main

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = ["kernels/attention_legacy.py"] + [
    a for n in "qkv" for a in ("-i", f"{n}=bfloat16[128,256]")
]


def run_json(*args: str) -> dict:
    result = CliRunner().invoke(main, ["run", *ATTENTION, "--timing-only", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def asm(*args: str) -> str:
    result = CliRunner().invoke(main, ["asm", *ATTENTION, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_passes_none_runs_the_kernel_as_written(monkeypatch):
    monkeypatch.chdir(ROOT)
    compiled, written = asm(), asm("--passes", "none")
    # its two nl.zeros PSUM accumulators: memsets as written, folded into the first matmul
    assert written.count("memset") == 2 and compiled.count("memset") == 0
    assert asm("--passes", "psum-zero-init") == compiled
    assert run_json("--passes", "none")["time_ns"] > run_json()["time_ns"]


@pytest.mark.parametrize("value", ["bogus", "psum-zero-init,bogus"])
def test_an_unknown_pass_is_a_usage_error(monkeypatch, value):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["run", *ATTENTION, "--timing-only", "--passes", value])
    assert result.exit_code == 2
    assert "unknown compiler pass 'bogus'" in result.stderr
    assert "psum-zero-init" in result.stderr
