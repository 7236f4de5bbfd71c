"""The instruction-level published figures of reference/neuroncore.md section D3, within +-15%.

Each test names its row (V1, V2, ...) and the AWS document the figure comes from. Figures the
emulator has no instruction for (a separate LoadStationary) are not tested here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _timing_testing import BLOCKED, within

import neuronemu
from neuronemu_isa import load_arch

BF16 = ml_dtypes.bfloat16


def test_v1_dependent_one_element_activations_issue_every_189_ns_on_nc_v2(timed):
    # V1, nki_perf_guide.rst Opt #5a (fig16): back-to-back ScalarE activations reading one
    # element per partition, each depending on the previous, issue every ~189 ns (264
    # cycles) on NC-v2 and last ~159 ns each.
    r = timed(
        """
@nki.jit
def k(a):
    t = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    for i in range(8):
        nisa.activation(dst=t, op=nl.copy, data=t, scale=0.5)
    return a
""",
        target="trn1",
    )
    tl = r.timeline
    acts = [i.index for i in r.program.instrs if i.spec.name == "activation"]
    intervals = np.diff(tl.start_ns[acts])
    assert np.allclose(intervals, intervals[0])
    assert within(intervals[0], 189.0)
    assert within(tl.ready_ns[acts[0]] - tl.start_ns[acts[0]], 159.0)


def test_v2_fp32_tensor_tensor_of_8192_elements_takes_about_15_us_on_nc_v2(timed):
    # V2, nki_perf_guide.rst figs 17 and 10: TENSOR_TENSOR add, fp32, SBUF + SBUF, 8192
    # elements per partition (64 partitions; the partition count does not matter) lasts
    # 14,968 ns on VectorE.
    r = timed(
        """
@nki.jit
def k(a):
    x = nl.ndarray((64, 8192), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((64, 8192), dtype=nl.float32, buffer=nl.sbuf)
    z = nl.ndarray((64, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    nisa.memset(dst=y, value=2.0)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
    return a
""",
        target="trn1",
    )
    tl = r.timeline
    (i,) = [i.index for i in r.program.instrs if i.spec.name == "tensor_tensor"]
    assert within(tl.ready_ns[i] - tl.start_ns[i], 14968.0)


MATMUL = """
@nki.jit
def k(a):
    s = nl.ndarray((128, {m}), dtype=nl.bfloat16, buffer=nl.sbuf)
    v = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    nisa.memset(dst=v, value=1.0)
    acc = nl.ndarray(({m}, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=v)
    return a
"""


def _matmul_duration_ns(timed, m: int) -> float:
    r = timed(MATMUL.format(m=m), target="trn1")
    (i,) = [i.index for i in r.program.instrs if i.spec.name == "nc_matmul"]
    return float(r.timeline.ready_ns[i] - r.timeline.start_ns[i])


def test_v3_bf16_matmul_of_128_columns_into_96_partitions_lasts_219_ns(timed):
    # V3, nki_perf_guide.rst fig18: MultiplyMoving, bf16, 128 moving columns, 96 output
    # partitions ("128*96"): 219 ns on NC-v2.
    assert within(_matmul_duration_ns(timed, 96), 219.0)


def test_v4_bf16_matrix_vector_matmul_lasts_188_ns(timed):
    # V4, nki_perf_guide.rst fig20-21: MultiplyMoving of 128 moving elements per partition
    # against a 1-column stationary ("128*1"): 188 ns on NC-v2. (Its LoadStationary, 67 ns,
    # is folded into nc_matmul here and has no figure of its own.)
    assert within(_matmul_duration_ns(timed, 1), 188.0)


LOAD = """
@nki.jit
def k(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return a
"""


def _transfer(timed, shape, dtype, target: str):
    r = timed(LOAD, {"a": np.zeros(shape, dtype)}, target=target)
    (i,) = [i.index for i in r.program.instrs if i.spec.name == "dma_copy"]
    return r, i


def test_v5_trn2_32_kib_on_one_dma_engine_takes_1416_ns(timed):
    # V5, nki-dma-overview.rst example 1: A[4, 4096] bf16 HBM -> SBUF on Trn2 uses one DMA
    # engine (4 partitions), which moves the 32 KiB in 1,416 ns.
    r, i = _transfer(timed, (4, 4096), BF16, "trn2")
    tl = r.timeline
    assert within(tl.end_ns[i] - tl.xfer_ns[i], 1416.0)
    # ...and the transfer still pays the fixed trigger-to-start latency first.
    assert tl.xfer_ns[i] - tl.start_ns[i] == r.program.arch.dma_fixed_ns


def test_v6_trn2_128x128_bf16_moves_as_16_transfers_of_2_kib_in_97_ns(timed):
    # V6, nki-dma-overview.rst example 2: A[128, 128] bf16 on Trn2 spreads over all 16 DMA
    # engines, each moving 2 KiB (8 partitions x 128 x 2 B) in ~97 ns.
    from neuronemu.program.verify import operand_info
    from neuronemu_isa.instructions import dma_copy

    r, i = _transfer(timed, (128, 128), BF16, "trn2")
    ins = r.program.instrs[i]
    infos = [operand_info(k, ins.operands[k]) for k in ("src", "dst")]
    engines = dma_copy.engines_used(r.program.arch, *infos)
    assert engines == 16 and infos[0].nbytes // engines == 2048
    assert within(r.timeline.end_ns[i] - r.timeline.xfer_ns[i], 97.0)


STREAM = """
@nki.jit
def k(a):
    for i in range(6):
        t = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    return a
"""


def test_v7_32_kib_per_engine_transfers_take_1810_ns_at_68_percent_utilization(timed):
    # V7, nki_perf_guide.rst Opt #9 (fig30), (I) Trn1: [128, 1024] fp32 loads give every one
    # of the 16 DMA engines a 32 KiB transfer, each lasting ~1,810 ns, back to back at ~68% of
    # the engines' theoretical throughput.
    r = timed(STREAM, {"a": np.zeros((6 * 128, 1024), np.float32)}, target="trn1")
    tl, arch = r.timeline, r.program.arch
    durations = tl.end_ns - tl.xfer_ns
    assert all(within(d, 1810.0) for d in durations)
    theoretical = arch.dma_queues * arch.dma_theoretical_bytes_per_ns_per_engine
    moved = r.hbm_bytes["read"]
    utilization = moved / (tl.busy_ns()["dma"] * theoretical)
    assert within(utilization, 0.68)


def test_v8_a_4_byte_transfer_lasts_about_7_ns(timed):
    # V8, nki_perf_guide.rst fig29: tiny 4 B transfers occupy their DMA engine ~7 ns each.
    r, i = _transfer(timed, (1, 1), np.float32, "trn1")
    assert within(r.timeline.end_ns[i] - r.timeline.xfer_ns[i], 7.0)


# V9, nki-dma-overview.rst (figure nki-dma-intro-1, digitized; reference D2): DMA throughput
# of [128, F] transfers by bytes per partition, relative to 32 KiB per partition.
V9_CURVE = {
    32: 0.017,
    64: 0.028,
    128: 0.052,
    256: 0.10,
    512: 0.21,
    1024: 0.42,
    2048: 0.81,
    4096: 0.96,
    8192: 0.98,
    16384: 0.99,
}
V9_LOOP = """
@nki.jit
def k(a):
    for i in range(24):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
    return a
"""


def test_v9_dma_efficiency_follows_the_published_curve(timed):
    def throughput(nbytes: int) -> float:
        r = timed(V9_LOOP, {"a": np.zeros((128, nbytes // 4), np.float32)})
        return 24 * 128 * nbytes / r.time_ns

    full = throughput(32768)
    for nbytes, published in V9_CURVE.items():
        # Points read off a figure: within 30%; the doc's own words, at the end.
        assert within(throughput(nbytes) / full, published, 0.3), nbytes
    assert throughput(4096) / full > 0.95  # "at 4096 free bytes ... nearly saturate"


def test_v11_roofline_knee_is_222_flops_per_byte_on_nc_v2():
    # V11, nki/guides/tutorials/matrix_multiplication.rst: the arithmetic-intensity threshold
    # to saturate TensorE on NC-v2 is 222 Flops/Byte for bf16 (peak FLOPs over HBM bandwidth).
    arch = load_arch("trn1")
    assert within(arch.peak_bf16_flops_per_ns / arch.dma_hbm_bytes_per_ns, 222.0)


def _intensity(result) -> float:
    """Matmul FLOPs per byte read from HBM."""
    return result.matmul_flops / result.hbm_bytes["read"]


def test_v11_tiled_inner_loop_intensity_is_102(timed):
    # V11: the inner loop of nki_matmul_tiled_ reads a [128, 128] and a [128, 512] bf16 tile
    # (160 KB) for one 16 MFLOP matmul: arithmetic intensity 102.
    r = timed(
        """
@nki.jit
def k(lhsT, rhs):
    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    return lhsT
""",
        {"lhsT": np.zeros((128, 128), BF16), "rhs": np.zeros((128, 512), BF16)},
        target="trn1",
    )
    assert within(_intensity(r), 102.0)


def test_v11_blocked_matmul_intensity_is_683():
    # V11: blocks of 2048 (M) x 1024 (N) x 1024 (K) bf16, each input read once: 683 FLOP/B
    # (the tutorial counts the inputs only).
    inputs = {
        "lhsT": np.zeros((1024, 2048), BF16),
        "rhs": np.zeros((1024, 1024), BF16),
        "block_m": 2048,
        "block_n": 1024,
    }
    r = neuronemu.run(BLOCKED, inputs, target="trn1", timing_only=True)
    assert within(_intensity(r), 683.0)


SCALE_BIAS_EXP = """
@nki.jit
def k(a):
    data = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    scale = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    bias = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=data, value=0.5)
    nisa.memset(dst=scale, value=2.0)
    nisa.memset(dst=bias, value=1.0)
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
{body}
    return a
"""
THREE_OPS = """
    scaled = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=scaled, data=data, op0=nl.multiply, operand0=scale)
    shifted = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=shifted, data=scaled, op0=nl.add, operand0=bias)
    nisa.activation(dst=out, op=nl.exp, data=shifted)"""
FUSED = """
    nisa.activation(dst=out, op=nl.exp, data=data, bias=bias, scale=scale)"""


def _latency(r, names: tuple[str, ...]) -> float:
    """From the first of these instructions' issue to the last one's committed result."""
    tl = r.timeline
    work = [i.index for i in r.program.instrs if i.spec.name in names]
    return float(tl.ready_ns[work[-1]] - tl.start_ns[work[0]])


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_v18_fused_scale_bias_exp_is_about_3x_faster_than_three_instructions(timed, target):
    # V18, nki_perf_guide.rst Opt #6: multiply, add and exp of a [128, 512] tile as one
    # activation(exp, data, bias, scale) is ~3x faster in latency than three instructions.
    names = ("tensor_scalar", "activation")
    three = _latency(timed(SCALE_BIAS_EXP.format(body=THREE_OPS), target=target), names)
    fused = _latency(timed(SCALE_BIAS_EXP.format(body=FUSED), target=target), names)
    assert 2.0 < three / fused < 4.0  # "~3x": the document's own words


def test_v19_one_128_partition_reduce_takes_half_the_time_of_two_64_partition_ones(timed):
    # V19, nki_perf_guide.rst Opt #5b: on trn1 VectorE runs two 64-partition tensor_reduce
    # instructions one after the other, and one 128-partition instruction takes as long as
    # one of them (partition vectorization: 2x).
    tile = """
    t{i} = nl.ndarray(({p}, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=t{i}, value=0.5)
    r{i} = nl.ndarray(({p}, 1), dtype=nl.float32, buffer=nl.sbuf)"""
    reduce = """
    nisa.tensor_reduce(dst=r{i}, op=nl.add, data=t{i}, axis=1)"""

    def engine_time(parts: list[int]) -> float:
        body = "".join(tile.format(i=i, p=p) for i, p in enumerate(parts))
        body += "".join(reduce.format(i=i) for i in range(len(parts)))
        r = timed(f"@nki.jit\ndef k(a):{body}\n    return a\n", target="trn1")
        work = [i.index for i in r.program.instrs if i.spec.name == "tensor_reduce"]
        return float(r.timeline.end_ns[work[-1]] - r.timeline.start_ns[work[0]])

    assert within(engine_time([64, 64]) / engine_time([128]), 2.0)
