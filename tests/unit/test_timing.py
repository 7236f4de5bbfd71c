"""Timing: the jitted scheduler equals its plain twin; engines overlap; waits are honoured."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neuronemu
from neuronemu.jit import compiled as _jit
from neuronemu.sim import timing
from neuronemu.sim.timing import schedule

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


@st.composite
def programs(draw):
    """Random scheduler inputs: streams of every kind, DMA engine ranges, HBM bytes, DMA
    packet overheads, ports."""
    n = draw(st.integers(1, 60))
    n_streams = draw(st.integers(1, 6))
    n_dma = draw(st.integers(1, 16))

    def ints(lo, hi):
        return np.array([draw(st.integers(lo, hi)) for _ in range(n)], np.int64)

    def floats(hi):
        return np.array([draw(st.floats(0, hi, allow_nan=False)) for _ in range(n)])

    stream = ints(0, n_streams - 1)
    kind = ints(0, 2)
    lo = ints(0, n_dma - 1)
    hi = np.array([draw(st.integers(int(a) + 1, n_dma)) for a in lo], np.int64)
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)]
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(d) for d in deps])
    indices = np.array([d for ds in deps for d in ds], dtype=np.int64)
    machine = np.array(
        [
            draw(st.floats(0, 2000)),
            draw(st.floats(0, 100)),
            draw(st.floats(1, 600)),
            n_dma,
            draw(st.floats(0.1, 1.0)),
            draw(st.floats(1, 5000)),
            draw(st.floats(0, 3000)),
            draw(st.floats(0, 1000)),
            draw(st.integers(1, 6)),
        ]
    )
    return (
        stream,
        kind,
        floats(1e4),
        floats(500),
        floats(500),
        indptr,
        indices,
        n_streams,
        lo,
        hi,
        floats(1e6),
        floats(200),
        floats(300),
        ints(0, 3),
        machine,
    )


@given(programs())
def test_jitted_scheduler_equals_plain_twin(prog):
    jit = _jit.schedule(*prog)
    py = _jit._schedule_py(*prog)
    for a, b in zip(jit, py):
        np.testing.assert_array_equal(a, b)


@given(programs())
def test_schedule_respects_streams_dependencies_and_ports(prog):
    stream, kind, cost, latency, chain, indptr, indices = prog[:7]
    start, xfer, end = _jit._schedule_py(*prog)
    gap, pre, port_mask, machine = prog[11], prog[12], prog[13], prog[14]
    assert np.all(xfer >= start) and np.all(end >= xfer + cost - 1e-6)
    assert np.all(xfer[kind == _jit.KIND_DMA] >= start[kind == _jit.KIND_DMA] + machine[0] - 1e-6)
    for i in range(len(stream)):
        for d in indices[indptr[i] : indptr[i + 1]]:
            lag = chain[d] if stream[d] == stream[i] else latency[d] + machine[1]
            assert start[i] >= end[d] + lag - 1e-6
            if kind[i] == _jit.KIND_TENSOR and stream[d] != stream[i]:  # a preload's data
                assert xfer[i] >= end[d] + lag + pre[i] - 1e-6
        earlier = [j for j in range(i) if stream[j] == stream[i]]
        if earlier and kind[earlier[-1]] == _jit.KIND_DMA:  # a queue: one per issue interval
            assert start[i] >= start[earlier[-1]] + machine[7] - 1e-9
        elif earlier:  # an engine runs one at a time
            assert start[i] >= end[earlier[-1]] - 1e-9
        transfers = [j for j in earlier if kind[j] == _jit.KIND_DMA]
        depth = int(machine[8])  # a queue holds at most `depth` transfers not yet done
        if kind[i] == _jit.KIND_DMA and len(transfers) >= depth:
            assert start[i] >= end[transfers[-depth]] - 1e-9
    for bit in (_jit.PORT_SBUF, _jit.PORT_PSUM):
        users = sorted((start[i], end[i]) for i in range(len(stream)) if port_mask[i] & bit)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(users, users[1:]))
    dma_lo, dma_hi = prog[8], prog[9]
    for e in range(int(machine[3])):
        users = sorted(  # an engine takes its next transfer after this one's packet overhead
            (xfer[i], end[i] + gap[i])
            for i in range(len(stream))
            if kind[i] == _jit.KIND_DMA and dma_lo[i] <= e < dma_hi[i]
        )
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(users, users[1:]))


def _run(kernel_file, body, inputs):
    return neuronemu.run(kernel_file(HEADER + body), inputs, timing_only=True)


def test_independent_engines_overlap(kernel_file):
    result = _run(
        kernel_file,
        """
@nki.jit
def k(a):
    t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0, engine=nisa.engine.vector)
    nisa.memset(dst=u, value=2.0, engine=nisa.engine.gpsimd)
    return a
""",
        {"a": np.zeros((1, 1), np.float32)},
    )
    tl = result.timeline
    assert tl.start_ns[0] == tl.start_ns[1] == 0.0
    assert result.time_ns == pytest.approx(max(tl.ready_ns))
    assert result.time_ns < tl.end_ns[0] + tl.end_ns[1]


def test_dependent_instruction_waits_for_its_producer(kernel_file):
    result = _run(
        kernel_file,
        """
@nki.jit
def k(a):
    t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.activation(dst=u, op=nl.exp, data=t)
    return a
""",
        {"a": np.zeros((1, 1), np.float32)},
    )
    tl = result.timeline
    arch = result.program.arch
    # The producer's output commits (static + access overhead), then the semaphore fires.
    commit_ns = (
        arch.cost_static_overhead_cycles + arch.cost_access_overhead_cycles
    ) / arch.clock_ghz("vector")
    assert tl.ready_ns[0] == pytest.approx(tl.end_ns[0] + commit_ns)
    assert tl.start_ns[1] == pytest.approx(tl.ready_ns[0] + arch.cost_semaphore_ns)


def test_values_do_not_depend_on_timing_parameters(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.tanh, data=t, scale=0.5)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    a = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    path = kernel_file(HEADER + body)
    results = [neuronemu.run(path, {"a": a}, target=t) for t in ("trn1", "trn2", "trn3")]
    assert len({r.time_ns for r in results}) == 3
    for r in results[1:]:
        np.testing.assert_array_equal(r.outputs["out"], results[0].outputs["out"])
    np.testing.assert_allclose(results[0].outputs["out"], np.tanh(a * np.float32(0.5)), rtol=1e-6)


def test_timing_only_computes_no_values(kernel_file):
    result = _run(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out
""",
        {"a": np.zeros((128, 64), np.float32)},
    )
    assert result.outputs is None and result.cycles > 0


def test_schedule_of_real_program_matches_with_and_without_jit(kernel_file, monkeypatch):
    monkeypatch.setattr(timing, "JIT_ABOVE", 0)  # the jitted scheduler even for a small one
    path = kernel_file(
        HEADER
        + """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(4):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out
"""
    )
    program = neuronemu.compile_kernel(path, {"a": np.zeros((512, 512), np.float32)})
    a, b = schedule(program, use_jit=True), schedule(program, use_jit=False)
    np.testing.assert_array_equal(a.end_ns, b.end_ns)
    assert a.bound_by() == "dma"


@pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="with the JIT off, no compiled code loads"
)
@pytest.mark.parametrize("linalg", [False, True])
def test_the_command_loads_jitted_code_without_scipy_linalg(tmp_path, linalg):
    # The command's start-up: Numba imports scipy.linalg (~0.4 s) only for jitted BLAS,
    # which neuronemu never uses. A stand-in SciPy, first on the path, notes whether its
    # linalg was imported (True: Numba as it is, to show that the check can see it); a fresh
    # interpreter, so that nothing loaded Numba's code before.
    fake = tmp_path / "scipy"
    (fake / "linalg").mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "1.17.0"\n')
    mark = tmp_path / "imported"
    (fake / "linalg" / "__init__.py").write_text(
        f"open({str(mark)!r}, 'w').close()\nraise ImportError('stand-in SciPy')\n"
    )
    code = (
        "import numpy as np\n"
        "from neuronemu.jit import compiled as _jit\n"
        f"_jit.LINALG = {linalg}\n"
        "z = np.zeros(0, np.int64)\n"
        "position, clock = _jit.clocks(np.zeros(2, np.int64), np.zeros(3, np.int64), z, 1)\n"
        "assert list(position) == [1, 2], position\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert mark.exists() == linalg
