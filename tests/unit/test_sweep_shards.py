"""Sweeps beyond Ray: `--shard I/N` runs a disjoint part of the configurations into its own
`--out` (an array job's task), `--merge` ranks the union of those files; `top_k` prunes an
autotuner's candidates to the k predicted fastest."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from neuronemu.cli import main
from neuronemu.sweeps import top_k

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
SWEEP = ["sweep", "k.py", "--param", "cols=64,128,256,512", "-i", "a=float32[128,512]", "-j", "1"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_shards_are_disjoint_parts_and_their_merge_is_the_whole_ranking(folder):
    whole = json.loads(invoke(*SWEEP, "--json").stdout)
    parts = []
    for i in range(3):
        result = invoke(*SWEEP, "--shard", f"{i}/3", "--out", f"s{i}.jsonl", "--json")
        assert result.exit_code == 0, result.output
        parts.append([r["config"]["cols"] for r in json.loads(result.stdout)["results"]])
    ran = [c for part in parts for c in part]
    assert sorted(ran) == [64, 128, 256, 512]  # each configuration in exactly one shard
    merged = invoke(*SWEEP, "--json", *(a for i in range(3) for a in ("--merge", f"s{i}.jsonl")))
    assert merged.exit_code == 0, merged.output
    report = json.loads(merged.stdout)
    assert [r["config"] for r in report["results"]] == [r["config"] for r in whole["results"]]
    assert report["best"]["time_ns"] == whole["best"]["time_ns"]


@pytest.mark.parametrize("value", ["3/3", "1", "a/2", "-1/2"])
def test_a_bad_shard_is_a_usage_error(folder, value):
    result = invoke(*SWEEP, "--shard", value)
    assert result.exit_code == 2 and "--shard" in result.stderr


def test_top_k_returns_the_k_candidates_predicted_fastest(folder):
    candidates = [{"cols": 64}, {"cols": 512}, {"cols": 128}, {"cols": 256}]
    best = top_k("k.py", candidates, 2, {"a": "float32[128,512]"}, workers=1)
    whole = json.loads(invoke(*SWEEP, "--json").stdout)["results"]
    assert [r["config"] for r in best] == [r["config"] for r in whole[:2]]
