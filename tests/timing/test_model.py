"""The timing model's rules: the TensorE throttle ramp, NC-v2 port conflicts, DMA engines by
partition group, dependent-instruction overheads."""

from __future__ import annotations

import numpy as np
import pytest

MATMULS = """
@nki.jit
def k(a):
    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for i in range({n}):
        nisa.nc_matmul(dst=acc, stationary=s, moving=v, accumulate=(i > 0))
{tail}
    return a
"""


def _matmul_durations(timed, target: str, n: int = 40):
    r = timed(MATMULS.format(n=n, tail=""), target=target)
    mm = [i.index for i in r.program.instrs if i.spec.name == "nc_matmul"]
    # The multiplies themselves (the first's LoadStationary before it is not throttled).
    return r.timeline.end_ns[mm] - r.timeline.xfer_ns[mm], r, mm


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_tensor_engine_starts_at_half_rate_and_ramps_to_full_over_3_us(timed, target):
    # overview-summary-page.rst: on Trn2/Trn3 TensorE starts at ~50% of its maximum
    # utilization and ramps to full over ~3 us.
    durations, r, mm = _matmul_durations(timed, target)
    cost = r.program.instrs[mm[0]].ns
    assert durations[0] == pytest.approx(2 * cost)
    assert np.all(np.diff(durations) <= 1e-9)
    ramp_end = r.timeline.xfer_ns[mm[0]] + r.program.arch.cost_tensor_throttle_ramp_ns
    after = r.timeline.xfer_ns[mm] >= ramp_end
    assert after.any() and np.allclose(durations[after], cost)


def test_tensor_engine_is_not_throttled_on_trn1(timed):
    durations, r, mm = _matmul_durations(timed, "trn1", n=4)
    assert np.allclose(durations, r.program.instrs[mm[0]].ns)


def test_load_stationary_is_paid_once_per_stationary_and_hides_behind_a_busy_engine(timed):
    # nki_perf_guide.rst: nc_matmul is LoadStationary + MultiplyMoving; the load runs in the
    # background, ~4x faster than a multiply of the same free size.
    r = timed(
        """
@nki.jit
def k(a):
    w = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=a)
    s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    v = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=w, moving=v)
    nisa.nc_matmul(dst=acc, stationary=w, moving=v, accumulate=True)
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, accumulate=True)
    return a
""",
        {"a": np.zeros((128, 128), np.float32)},
        target="trn1",
    )
    tl, arch = r.timeline, r.program.arch
    mm = [i.index for i in r.program.instrs if i.spec.name == "nc_matmul"]
    load_ns = 128 * 4 / 4 / arch.clock_ghz("tensor")  # fp32 [128, 128]: 128 cycles
    assert tl.arrays["pre_ns"][mm] == pytest.approx([load_ns, 0.0, load_ns])
    # The first waited for its stationary's DMA, then for its load; the second reuses the
    # loaded stationary; the third's load overlapped the second's multiply.
    dma = next(i.index for i in r.program.instrs if i.spec.name == "dma_copy")
    arrival = tl.end_ns[dma] + arch.cost_semaphore_ns
    assert tl.start_ns[mm[0]] == pytest.approx(arrival)
    assert tl.xfer_ns[mm[0]] == pytest.approx(arrival + load_ns)
    assert tl.xfer_ns[mm[1]] == pytest.approx(tl.end_ns[mm[0]])
    assert tl.xfer_ns[mm[2]] == pytest.approx(tl.end_ns[mm[1]])
    # The profiler counts the exposed load as Tensor-engine activity, not as busy work.
    engines = r.engines["tensor"]
    assert engines["active_ns"] >= engines["busy_ns"] + load_ns


def test_tensor_throttle_re_arms_after_an_idle_gap(timed):
    # A matmul waiting on a round trip through HBM leaves TensorE idle for over 1.5 us: it
    # starts at half rate again.
    tail = """
    x = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=x, src=acc)
    out = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    w = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=out)
    nisa.nc_matmul(dst=acc, stationary=s, moving=w, accumulate=True)"""
    r = timed(MATMULS.format(n=30, tail=tail), target="trn2")
    mm = [i.index for i in r.program.instrs if i.spec.name == "nc_matmul"]
    tl = r.timeline
    cost = r.program.instrs[mm[-1]].ns
    idle = tl.xfer_ns[mm[-1]] - tl.end_ns[mm[-2]]
    assert idle > r.program.arch.cost_tensor_throttle_rearm_idle_ns
    assert tl.end_ns[mm[-2]] - tl.xfer_ns[mm[-2]] == pytest.approx(cost)
    assert tl.end_ns[mm[-1]] - tl.xfer_ns[mm[-1]] == pytest.approx(2 * cost)


TWO_ENGINES = """
@nki.jit
def k(a):
    t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0, engine=nisa.engine.vector)
    nisa.memset(dst=u, value=2.0, engine=nisa.engine.gpsimd)
    return a
"""


def test_vector_and_gpsimd_take_turns_on_sbuf_on_nc_v2_only(timed):
    # trainium_inferentia2_arch.rst: on NC-v2 VectorE and GpSimdE cannot access SBUF in
    # parallel; NC-v3+ lifts this.
    r1, r2 = timed(TWO_ENGINES, target="trn1"), timed(TWO_ENGINES, target="trn2")
    assert r1.timeline.start_ns[1] == pytest.approx(r1.timeline.end_ns[0])
    assert r2.timeline.start_ns[1] == r2.timeline.start_ns[0] == 0.0


def test_vector_and_scalar_take_turns_on_psum_on_nc_v2(timed):
    body = """
@nki.jit
def k(a):
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    q = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=p, value=1.0)
    nisa.memset(dst=q, value=1.0)
    x = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=x, src=p, engine=nisa.engine.vector)
    nisa.activation(dst=y, op=nl.copy, data=q)
    return a
"""
    for target, serial in (("trn1", True), ("trn2", False)):
        r = timed(body, target=target)
        tl = r.timeline
        copy, act = 2, 3
        overlap = min(tl.end_ns[copy], tl.end_ns[act]) - max(tl.start_ns[copy], tl.start_ns[act])
        assert (overlap <= 1e-9) == serial, target


def test_dma_transfers_on_disjoint_partition_groups_run_on_different_engines(timed):
    # nki-dma-overview.rst: engine e moves partitions [8e, 8e + 8); transfers to partitions
    # 0-7 share engine 0 and wait for each other, one to partitions 8-15 does not.
    r = timed(
        """
@nki.jit
def k(a):
    t = nl.ndarray((16, 4096), dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((16, 4096), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:8, :], src=a[0:8, :])
    nisa.dma_copy(dst=u[0:8, :], src=a[8:16, :])
    nisa.dma_copy(dst=t[8:16, :], src=a[8:16, :])
    return a
""",
        {"a": np.zeros((16, 4096), np.float32)},
        target="trn1",
    )
    tl = r.timeline
    # The second waits for the first and its packets' overhead (its 8 rows are one run of
    # 128 KiB: packets of 4 KiB or more pay none beyond the engine's rate).
    assert tl.arrays["gap_ns"][0] == 0.0
    assert tl.xfer_ns[1] == pytest.approx(tl.end_ns[0])
    assert tl.xfer_ns[2] == pytest.approx(tl.xfer_ns[0])


@pytest.mark.parametrize(
    "src_shape, src_slice, packets, nbytes",
    [
        ((128, 512), "a", 1, 16384),  # contiguous: each engine's 8 rows are one run
        ((128, 2048), "a[:, 0:512]", 8, 16384),  # rows of a wider tensor: a packet per row
        ((128, 2048), "a[:, 0:512:2]", 8 * 256, 8192),  # every other element: a packet each
    ],
)
def test_dma_engines_pay_an_overhead_per_contiguous_run_of_the_hbm_side(
    timed, src_shape, src_slice, packets, nbytes
):
    # nki-dma-bandwidth-guide.rst: every DMA packet has an overhead of its own, so fragmented
    # transfers are bound by the packet rate, and packets of 4 KiB or more run at the table's
    # peak; nki-dma-overview.rst example 2: a contiguous tensor gives each engine one read
    # across its 8 partitions. Each engine moves `nbytes` in `packets` runs; what a packet
    # under 4 KiB lacks costs the difference between the table's and the theoretical rate.
    r = timed(
        f"""
@nki.jit
def k(a):
    t = nl.ndarray((128, {512 if packets < 100 else 256}), dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, {512 if packets < 100 else 256}), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src={src_slice})
    nisa.dma_copy(dst=u, src={src_slice})
    return a
""",
        {"a": np.zeros(src_shape, np.float32)},
        target="trn2",
    )
    tl, arch = r.timeline, r.program.arch
    theoretical = arch.dma_theoretical_bytes_per_ns_per_engine
    per_byte = 1 / arch.dma_bytes_per_ns_per_engine - 1 / theoretical
    overhead = max(0, packets * arch.dma_packet_bytes - nbytes) * per_byte
    assert tl.arrays["gap_ns"][0] == pytest.approx(overhead)
    assert (overhead > 0) == (packets > 1)
    # Both transfers use all 16 engines: the second starts after the first's packets.
    assert tl.xfer_ns[1] == pytest.approx(tl.end_ns[0] + overhead)


def test_independent_instructions_pipeline_but_dependent_ones_pay_the_overheads(timed):
    # trainium_inferentia2_arch.rst: ~100 cycles static overhead and a ~60-cycle access
    # request when each instruction depends on the previous one.
    body = """
@nki.jit
def k(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
{ops}
    return a
"""
    dep = "\n".join(
        "    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)" for _ in range(4)
    )
    indep = "\n".join(
        f"    u{i} = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        f"    nisa.tensor_scalar(dst=u{i}, data=t, op0=nl.add, operand0=1.0)"
        for i in range(4)
    )
    rd, ri = (
        timed(body.format(ops=dep), target="trn1"),
        timed(body.format(ops=indep), target="trn1"),
    )
    arch = rd.program.arch
    cost = rd.program.instrs[1].ns
    overhead = (
        arch.cost_static_overhead_cycles + arch.cost_access_overhead_cycles
    ) / arch.clock_ghz("vector") + arch.cost_semaphore_ns
    assert np.allclose(np.diff(rd.timeline.start_ns[1:]), cost + overhead)
    assert np.allclose(np.diff(ri.timeline.start_ns[1:]), cost)


STRIDED = """
@nki.jit
def k(a):
    t = nl.ndarray((128, 8192), dtype=nl.{dtype}, buffer=nl.sbuf)
    u = nl.ndarray((128, 1024), dtype=nl.{dtype}, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_copy(dst=u, src={src})
    return a
"""


def _copy_cycles(timed, src: str, dtype: str = "float32", target: str = "trn1") -> int:
    r = timed(STRIDED.format(src=src, dtype=dtype), target=target)
    return next(i.cycles for i in r.program.instrs if i.spec.name == "tensor_copy")


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_an_innermost_stride_over_16_bytes_halves_the_streaming_rate(timed, target):
    # trainium_inferentia2_arch.rst: most-minor F stride over 16 bytes -> half bandwidth.
    dense = _copy_cycles(timed, "t[:, 0:1024]", target=target)
    at_16_bytes = _copy_cycles(timed, "t[:, 0:4096:4]", target=target)  # 4 fp32 = 16 bytes
    over = _copy_cycles(timed, "t[:, 0:8192:8]", target=target)  # 32 bytes
    assert at_16_bytes == dense
    assert over == 2 * dense
    # 8 bf16 elements are 16 bytes: no penalty; 16 are 32 bytes: penalty.
    assert _copy_cycles(timed, "t[:, 0:8192:8]", "bfloat16", target) == _copy_cycles(
        timed, "t[:, 0:1024]", "bfloat16", target
    )
    assert (
        _copy_cycles(timed, "t.reshape_dim(1, (1024, 8)).permute((0, 2, 1))[:, 0]", target=target)
        == over
    )


def test_a_broadcast_operand_streams_at_full_rate(timed):
    dense = _copy_cycles(timed, "t[:, 0:1024]")
    assert _copy_cycles(timed, "t[:, 0:1].broadcast(1, 1024)") == dense
