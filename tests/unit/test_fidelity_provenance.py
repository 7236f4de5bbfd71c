"""Provenance (`fidelity`): every machine constant is documented, fitted or inferred as its
comment says; a run's critical path splits over them, and names the constants it rests on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.report.fidelity import PROVENANCES, provenance, rule_weights
from neuronemu_isa import TARGETS, Arch, load_arch

ROOT = Path(__file__).resolve().parents[2]
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
CONSTANT = re.compile(r"^(\w+)\s*=\s*[^#]+?(#.*)?$")

COPY = (
    HEADER
    + """@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out
"""
)


def _comments(target: str) -> dict[str, str]:
    """`section_key` -> its comment, for every constant of a target's file."""
    section, out = "", {}
    for line in (ROOT / "isa" / "arch" / f"{target}.toml").read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[] ") + "_"
        elif (m := CONSTANT.match(line)) and section:
            out[section + m.group(1)] = m.group(2) or ""
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_each_constants_tag_is_what_its_comment_says(target):
    tags = provenance(load_arch(target))
    comments = _comments(target)
    assert set(tags) == set(comments)
    for name, comment in comments.items():
        said = "fitted" if "fitted" in comment else "inferred" if "inferred" in comment else None
        assert tags[name] == (said or "documented"), (name, comment)


def test_a_rules_constants_share_its_result_by_how_far_each_moves_it():
    arch = Arch({"name": "t", "nc_version": 2, "s": {"x": 3.0, "y": 5.0, "z": 7.0}})
    # 4x (12 ns) and 20/y (4 ns): doubled or halved, each term moves by itself; z is unread
    weights = rule_weights(lambda a: 4 * a.s_x + 20 / a.s_y, arch, set(arch.keys()))
    assert weights == pytest.approx({"s_x": 0.75, "s_y": 0.25})


def _run(path, target="trn2", shape=(128, 2048)):
    return neuronemu.run(path, {"a": np.zeros(shape, np.float32)}, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_shares_add_to_one_and_the_constants_to_the_path(target):
    a = np.zeros((256, 1024), np.float32)
    r = neuronemu.run(ROOT / "kernels" / "tensor_add.py", {"a": a, "b": a}, target=target)
    f = r.to_json()["fidelity"]
    assert set(f["shares"]) == set(PROVENANCES)
    assert sum(f["shares"].values()) == pytest.approx(1.0, abs=1e-5)
    assert f["critical_path_ns"] == pytest.approx(r.time_ns, abs=1e-3)
    # the constants' time is the path's (but what no constant accounts for)
    named = sum(c["ns"] for c in f["constants"])
    assert named + r.fidelity.unattributed == pytest.approx(r.time_ns, rel=1e-6)
    for c in f["constants"]:
        assert c["value"] == r.program.arch[c["name"]]
        assert c["provenance"] == provenance(r.program.arch)[c["name"]]


def test_a_constants_tag_moves_its_time_between_shares(kernel_file, monkeypatch):
    path = kernel_file(COPY)
    before = _run(path).fidelity
    fixed = dict((k, ns) for k, _, _, ns in before.constants())["dma_fixed_ns"]
    shares = before.shares()
    assert before.tags["dma_fixed_ns"] == "documented" and fixed > 0
    arch = load_arch("trn2")  # (the run's own: cached)
    key = "provenance_dma.fixed_ns"
    monkeypatch.setitem(arch._values, key, "inferred")
    monkeypatch.setitem(arch.__dict__, key, "inferred")
    after = _run(path).fidelity
    moved = fixed / before.ns
    assert after.shares()["inferred"] == pytest.approx(shares["inferred"] + moved)
    assert after.shares()["documented"] == pytest.approx(shares["documented"] - moved)
    assert after.shares()["fitted"] == pytest.approx(shares["fitted"])


@pytest.mark.parametrize("target", TARGETS)
def test_a_kernel_bound_by_one_transfer_rests_on_the_dma_constants(kernel_file, target):
    r = _run(kernel_file(COPY), target)
    causes = {c for c, _, _ in r.critical_path.by_cause()}
    assert causes <= {"dma transfer", "dma fixed latency", "dma queueing"}
    names = {k for k, *_ in r.fidelity.constants()}
    # its trigger's latency, and the rate that bounds its bytes: the engines' or HBM's
    assert "dma_fixed_ns" in names
    assert names & {"dma_bytes_per_ns_per_engine", "dma_hbm_bytes_per_ns"}
    assert all(k.startswith("dma_") for k in names), names
    fixed = dict((k, ns) for k, _, _, ns in r.fidelity.constants())["dma_fixed_ns"]
    assert fixed == pytest.approx(r.program.arch.dma_fixed_ns)


def test_the_report_says_what_the_path_rests_on_in_one_line(kernel_file):
    path = kernel_file(COPY)
    out = CliRunner().invoke(main, ["run", path, "-i", "a=float32[128,2048]"])
    assert out.exit_code == 0, out.output
    said = [ln for ln in out.output.splitlines() if "fidelity:" in ln]
    assert len(said) == 1
    m = re.search(r"(\d+)% of the critical path rests on inferred costs", said[0])
    assert m, said[0]
    shares = _run(path).fidelity.shares()
    assert int(m.group(1)) == round(100 * shares["inferred"])
    tags = provenance(load_arch("trn2"))
    for tag, names in re.findall(r"(inferred|fitted)(?: costs)? \(([^)]*)\)", said[0]):
        named = [n for n in names.split(", ") if not n.startswith("+")]
        assert named and all(tags[n] == tag for n in named), (tag, names)


def test_each_slice_of_the_trace_says_what_its_cost_rests_on(kernel_file, tmp_path):
    path = kernel_file(
        HEADER
        + """@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    )
    r = _run(path)
    trace = tmp_path / "t.json"
    r.write_trace(str(trace))
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    tags = provenance(r.program.arch)
    assert len(slices) == 3
    for e in slices:
        rests, shares = e["args"]["cost_rests_on"], e["args"]["cost_provenance"]
        assert rests and sum(rests.values()) == pytest.approx(1.0, abs=1e-3)
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
        for tag, share in shares.items():
            assert share == pytest.approx(
                sum(w for k, w in rests.items() if tags[k] == tag), abs=1e-3
            )
    act = next(e for e in slices if e["name"].startswith("activation"))
    # 128 x 2048 fp32 on the Scalar engine: its elements at its rate, over its clock
    assert set(act["args"]["cost_rests_on"]) >= {
        "cost_scalar_elems_per_cycle",
        "clock_ghz_scalar",
    }
    assert not any(k.startswith("dma_") for k in act["args"]["cost_rests_on"])
