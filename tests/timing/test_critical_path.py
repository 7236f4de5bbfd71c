"""The critical path: it accounts for the whole run, names the cause a kernel was built to
have, and reaches the `--json` result, the text report and the Perfetto trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _timing_testing import HEADER, KERNELS
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.report.critical import CAUSES

# A serial chain of tiny transfers: each load waits for the store before it to read the
# tile, so every step pays the DMA fixed latency and almost nothing else.
DMA_CHAIN = HEADER + (
    "@nki.jit\ndef k(a):\n"
    "    out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)\n"
    "    for i in range(20):\n"
    "        nisa.dma_copy(dst=t, src=a)\n"
    "        nisa.dma_copy(dst=out, src=t)\n"
    "    return out\n"
)
# One element bounced between the Scalar and Vector engines: every step is a dependency
# on the other engine, each a few cycles of work behind a semaphore.
SEMAPHORE_CHAIN = HEADER + (
    "@nki.jit\ndef k(a):\n"
    "    out = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)\n"
    "    u = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=t, src=a)\n"
    "    for i in range(100):\n"
    "        nisa.activation(dst=u, op=nl.copy, data=t)\n"
    "        nisa.tensor_scalar(dst=t, data=u, op0=nl.add, operand0=1.0)\n"
    "    nisa.dma_copy(dst=out, src=t)\n"
    "    return out\n"
)


def _line_of(source: str, text: str) -> set[str]:
    """The line numbers (as strings) of the source lines containing `text`."""
    return {str(n) for n, line in enumerate(source.splitlines(), 1) if text in line}


def _run(kernel_file, source, **kw):
    a = np.ones((1, 1), np.float32)
    return neuronemu.run(kernel_file(source), {"a": a}, target="trn2", **kw)


def test_a_chain_of_tiny_transfers_is_bound_by_the_dma_fixed_latency(kernel_file):
    r = _run(kernel_file, DMA_CHAIN)
    (top, ns, lines), *_ = r.critical_path.by_cause()
    assert top == "dma fixed latency" and ns / r.time_ns > 0.6
    # 40 transfers, each paying the whole fixed latency on the path.
    assert ns == pytest.approx(40 * r.program.arch.dma_fixed_ns)
    assert {line.split(":")[-2] for line, _ in lines} == _line_of(DMA_CHAIN, "dma_copy")
    assert r.bound_by == "latency"


def test_a_ping_pong_between_engines_is_bound_by_semaphores(kernel_file):
    r = _run(kernel_file, SEMAPHORE_CHAIN)
    (top, ns, lines), *_ = r.critical_path.by_cause()
    assert top == "semaphore" and ns / r.time_ns > 0.4
    ping_pong = _line_of(SEMAPHORE_CHAIN, "activation") | _line_of(SEMAPHORE_CHAIN, "tensor_scalar")
    assert ping_pong <= {line.split(":")[-2] for line, _ in lines}


@pytest.mark.parametrize("source", [DMA_CHAIN, SEMAPHORE_CHAIN], ids=["dma", "semaphore"])
def test_the_path_accounts_for_the_whole_run(kernel_file, source):
    r = _run(kernel_file, source, timing_only=True)
    stretches = r.critical_path.stretches
    assert sum(s.ns for s in stretches) == pytest.approx(r.time_ns)
    assert all(s.ns >= 0 and s.cause in CAUSES for s in stretches)


@pytest.mark.parametrize(
    "kernel, inputs",
    [
        ("tensor_add.py", {"a": (256, 1024), "b": (256, 1024)}),
        ("matmul_tiled.py", {"lhsT": (256, 128), "rhs": (256, 512)}),
        ("softmax_rows.py", {"x": (256, 512)}),
    ],
)
def test_the_path_of_the_example_kernels_adds_up_to_their_time(kernel, inputs):
    arrays = {k: np.zeros(shape, np.float32) for k, shape in inputs.items()}
    r = neuronemu.run(KERNELS / kernel, arrays, timing_only=True)
    causes = r.to_json()["critical_path"]["causes"]
    assert sum(c["ns"] for c in causes) == pytest.approx(r.time_ns, rel=1e-6)
    assert [c["ns"] for c in causes] == sorted((c["ns"] for c in causes), reverse=True)


@pytest.mark.parametrize(
    "kernel, inputs",
    [
        ("matmul_tiled.py", {"lhsT": (256, 128), "rhs": (256, 512)}),
        ("softmax_rows.py", {"x": (256, 512)}),
    ],
)
def test_the_jitted_walk_finds_the_path_its_twin_finds(kernel, inputs, monkeypatch):
    # (programs past JIT_ABOVE instructions walk jitted; these are forced both ways)
    from neuronemu.report import critical as walk

    arrays = {k: np.ones(shape, np.float32) for k, shape in inputs.items()}
    timeline = neuronemu.run(KERNELS / kernel, arrays, timing_only=True).timeline
    paths = []
    for jit_above in (0, 10**9):
        monkeypatch.setattr(walk, "JIT_ABOVE", jit_above)
        paths.append(walk.critical_path(timeline))
    jitted, twin = paths
    assert len(twin.stretches) > 10 and {s.cause for s in twin.stretches} > {"semaphore"}
    assert jitted.stretches == twin.stretches and jitted.lines == twin.lines
    assert sum(s.ns for s in jitted.stretches) == pytest.approx(timeline.total_ns)


def test_json_text_and_trace_carry_the_critical_path(kernel_file, tmp_path):
    path = kernel_file(DMA_CHAIN)
    runner = CliRunner()
    out = runner.invoke(main, ["run", path, "-i", "a=float32[1,1]", "--json"])
    assert out.exit_code == 0, out.output
    cp = json.loads(out.stdout)["critical_path"]
    assert cp["causes"][0]["cause"] == "dma fixed latency"
    assert cp["causes"][0]["lines"][0]["line"].startswith(path)

    trace = tmp_path / "t.json"
    text = runner.invoke(main, ["run", path, "-i", "a=float32[1,1]", "--trace", str(trace)])
    assert "critical path" in text.output and "dma fixed latency" in text.output
    events = json.loads(trace.read_text())["traceEvents"]
    starts = {e["id"] for e in events if e["ph"] == "s"}
    ends = {e["id"] for e in events if e["ph"] == "f"}
    assert starts and starts == ends  # every arrow has both ends
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"DMA transfers in flight", "HBM GB/s"}
    in_flight = [e["args"]["value"] for e in events if e["name"] == "DMA transfers in flight"]
    assert max(in_flight) == 1 and in_flight[-1] == 0  # the chain is serial, and it drains
