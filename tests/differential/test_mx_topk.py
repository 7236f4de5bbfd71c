"""topk, the MX formats (quantize_mx, nc_matmul_mx) and the x4 dtypes through whole kernels,
against NumPy references written here from the docs (not from neuronemu_isa):

- nki.isa.topk (docs 2.32/2.33): per group of 16 partitions, snake element s is
  src[16g + s % 16, s // 16] for s < n; result j goes to partition 16g + j % 16, column j // 16,
  its value to val_dst and its snake position to idx_dst; only the first ceil(k / 16) columns
  are written.
- nki.isa.quantize_mx (docs 2.32): a scaling group is 8 partitions x the 4 values of one x4
  element; its scale X = 2**(floor(log2(max|V|)) - (E_max - 1)) (2**-127 for zeros), stored as
  the E8M0 code log2(X) + 127 in the first 4 rows of the group's 32-partition quadrant
  (nki/deep-dives/mxfp-matmul.rst "Scale Tensor"); each value V / X rounded to the element type.
- nki.isa.nc_matmul_mx: dst[m, n] = sum over partitions p and values j of
  stationary[p, m][j] * moving[p, n][j], each value times its group's scale, accumulated in fp32.
- The x4 words: value j in bits [j*w, (j+1)*w), w = 8 (fp8 x4, 32-bit words) or 4 (fp4 x4,
  16-bit words), as the MXFP tutorial's host code packs them.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import ConstraintError, MemoryAccessError

BF16 = np.dtype(ml_dtypes.bfloat16)

TOPK_KERNEL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x):
    p, cols = x.shape
    vals = nl.ndarray((p, {width}), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    idxs = nl.ndarray((p, {width}), dtype=nl.uint32, buffer=nl.shared_hbm)
    src = nl.ndarray((p, cols), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    v = nl.ndarray((p, {k}), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((p, {k}), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=v, idx_dst=i, src=src, n={n}, sorted={sort})
    nisa.dma_copy(dst=vals, src=v[:, 0:{width}])
    nisa.dma_copy(dst=idxs, src=i[:, 0:{width}])
    return vals, idxs
"""


def _kernel(factory, source: str) -> str:
    """`source` written to a fresh file (Hypothesis examples share no fixture state)."""
    path = factory.mktemp("kernel") / "kernel.py"
    path.write_text(source)
    return str(path)


def _distinct_bf16(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """bfloat16 values that are pairwise different (so the top-k set is one set)."""
    size = math.prod(shape)
    bits = rng.choice(np.arange(0x0100, 0x7F00, dtype=np.uint16), size, replace=False)
    bits |= (rng.integers(0, 2, size) << 15).astype(np.uint16)
    return bits.reshape(shape).view(BF16)


@settings(max_examples=10, deadline=None)
@given(
    groups=st.integers(1, 8),
    n=st.integers(8, 300),
    k_frac=st.floats(0, 1),
    sort=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_topk_kernel_finds_each_groups_k_largest(tmp_path_factory, groups, n, k_frac, sort, seed):
    rng = np.random.default_rng(seed)
    p, cols = 16 * groups, math.ceil(n / 16) + int(rng.integers(0, 3))
    k = max(1, min(n, int(k_frac * n)))
    width = math.ceil(k / 16)
    x = _distinct_bf16(rng, (p, cols))
    path = _kernel(tmp_path_factory, TOPK_KERNEL.format(width=width, k=k, n=n, sort=sort))
    out = neuronemu.run(path, {"x": x}, target="trn2").outputs
    vals, idxs = out["vals"], out["idxs"]
    f = x.astype(np.float32)
    for g in range(groups):
        snake = [float(f[16 * g + s % 16, s // 16]) for s in range(n)]
        want = sorted(range(n), key=lambda s: snake[s], reverse=True)[:k]
        slots = [(16 * g + j % 16, j // 16) for j in range(k)]
        got_idx = [int(idxs[r, c]) for r, c in slots]
        got_val = [float(vals[r, c]) for r, c in slots]
        assert sorted(got_idx) == sorted(want)
        assert got_val == [snake[s] for s in got_idx]
        if sort:  # (inferred) sorted=True: largest first
            assert got_val == sorted(got_val, reverse=True)


UNWRITTEN_TAIL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x):
    vals = nl.ndarray((16, 1), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    src = nl.ndarray((16, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src[:, 0:3], src=x)
    v = nl.ndarray((16, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=v, idx_dst=i, src=src, n={n})
    nisa.dma_copy(dst=vals, src=v[:, 0:1])
    return vals
"""


def test_topk_reads_only_the_first_n_snake_slots(tmp_path_factory):
    """Slots past n are ignored: a never-written fourth column is no uninitialized read for
    n = 48, and is one for n = 64."""
    x = _distinct_bf16(np.random.default_rng(0), (16, 3))
    ok = _kernel(tmp_path_factory, UNWRITTEN_TAIL.format(n=48))
    neuronemu.run(ok, {"x": x}, target="trn2")
    bad = _kernel(tmp_path_factory, UNWRITTEN_TAIL.format(n=64))
    with pytest.raises(MemoryAccessError, match="nothing wrote"):
        neuronemu.run(bad, {"x": x}, target="trn2")


# The MX element types: (E_max for quantize_mx, the ml_dtypes type, bits per value).
MX = {
    "float8_e4m3fn_x4": (8, ml_dtypes.float8_e4m3fn, 8),
    "float8_e5m2_x4": (15, ml_dtypes.float8_e5m2, 8),
    "float4_e2m1fn_x4": (None, ml_dtypes.float4_e2m1fn, 4),
}


def _quantized(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(values [P, F] of the element type, E8M0 codes [P/8, F/4]) of a bf16 tile."""
    e_max, element, _ = MX[fmt]
    p, f = x.shape
    v = x.astype(np.float64).reshape(p // 8, 8, f // 4, 4)
    amax = np.abs(v).max(axis=(1, 3))
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(amax)) - (e_max - 1), -127)
    e = np.maximum(e, -127)
    q = (v / 2.0 ** e[:, None, :, None]).reshape(p, f).astype(element)
    return q, (e + 127).astype(np.int64)


def _words(q: np.ndarray, fmt: str) -> np.ndarray:
    """[P, F] values packed 4 to a word: [P, F/4]."""
    _, _, bits = MX[fmt]
    codes = q.view(np.uint8).astype(np.uint64) & np.uint64((1 << bits) - 1)
    codes = codes.reshape(q.shape[0], -1, 4)
    words = sum(codes[..., j] << np.uint64(bits * j) for j in range(4))
    return words.astype(np.uint32 if bits == 8 else np.uint16)


def _from_words(words: np.ndarray, fmt: str) -> np.ndarray:
    """[K', F] words -> [K', F, 4] float64 values."""
    _, element, bits = MX[fmt]
    w = words.astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    codes = np.stack([(w >> np.uint64(bits * j)) & mask for j in range(4)], axis=-1)
    return codes.astype(np.uint8).view(element).astype(np.float64)


def _matmul_mx(s_words, s_codes, m_words, m_codes, s_fmt, m_fmt) -> tuple:
    """(exact product, sum of |terms|) of nc_matmul_mx, codes [K'/8, F] one row per group."""
    a = _from_words(s_words, s_fmt) * 2.0 ** (np.repeat(s_codes, 8, axis=0) - 127.0)[..., None]
    b = _from_words(m_words, m_fmt) * 2.0 ** (np.repeat(m_codes, 8, axis=0) - 127.0)[..., None]
    return np.einsum("pmj,pnj->mn", a, b), np.einsum("pmj,pnj->mn", np.abs(a), np.abs(b))


QUANTIZE_MATMUL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(a, b):
    K, M4 = a.shape
    N4 = b.shape[1]
    M, N = M4 // 4, N4 // 4
    out = nl.ndarray((M, N), dtype=nl.{dst}, buffer=nl.shared_hbm)
    a_words = nl.ndarray((K, M), dtype=nl.{s_fmt}, buffer=nl.shared_hbm)
    rows = min(K + {offset}, 128) - {offset}
    b_codes = nl.ndarray((rows, N), dtype=nl.{scale}, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((K, M4), dtype=nl.bfloat16, buffer=nl.sbuf)
    b_sb = nl.ndarray((K, N4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a)
    nisa.dma_copy(dst=b_sb, src=b)
    a_q = nl.ndarray((K, M), dtype=nl.{s_fmt}, buffer=nl.sbuf)
    b_q = nl.ndarray((K, N), dtype=nl.{m_fmt}, buffer=nl.sbuf)
    # One scale tile for both (nki/deep-dives/mxfp-matmul.rst "Packing Scale Values"):
    # stationary's at offset 0 of each quadrant, moving's at offset {offset} (4, 8 or 12).
    scales = nl.ndarray((128, max(M, N)), dtype=nl.{scale}, buffer=nl.sbuf)
    nisa.memset(dst=scales, value=0)
    a_s = scales[0:K, 0:M]
    b_s = scales[{offset}:{offset} + rows, 0:N]
    nisa.quantize_mx(dst=a_q, src=a_sb, dst_scale=a_s)
    nisa.quantize_mx(dst=b_q, src=b_sb, dst_scale=b_s)
    ps = nl.ndarray((M, N), dtype=nl.{dst}, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=ps, stationary=a_q, moving=b_q, stationary_scale=a_s, moving_scale=b_s)
    res = nl.ndarray((M, N), dtype=nl.{dst}, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    nisa.dma_copy(dst=a_words, src=a_q)
    nisa.dma_copy(dst=b_codes, src=b_s)
    return out, a_words, b_codes
"""


@settings(max_examples=8, deadline=None)
@given(
    quadrants=st.integers(1, 4),
    m=st.integers(1, 64).map(lambda v: 2 * v),
    n=st.integers(1, 128),
    s_fmt=st.sampled_from(["float8_e4m3fn_x4", "float8_e5m2_x4"]),
    m_fmt=st.sampled_from(["float8_e4m3fn_x4", "float8_e5m2_x4"]),
    scale=st.sampled_from(["uint8", "float8_e8m0fnu"]),
    dst=st.sampled_from(["float32", "bfloat16"]),
    offset=st.sampled_from([4, 8, 12]),
    seed=st.integers(0, 2**32 - 1),
)
def test_quantize_mx_then_nc_matmul_mx_kernel(
    tmp_path_factory, quadrants, m, n, s_fmt, m_fmt, scale, dst, offset, seed
):
    rng = np.random.default_rng(seed)
    k = 32 * quadrants
    a = (rng.standard_normal((k, 4 * m)) * 2.0 ** rng.integers(-6, 6, (k, 4 * m))).astype(BF16)
    b = (rng.standard_normal((k, 4 * n)) * 2.0 ** rng.integers(-6, 6, (k, 4 * n))).astype(BF16)
    a[0:8, 0:4] = 0  # an all-zero group
    source = QUANTIZE_MATMUL.format(dst=dst, s_fmt=s_fmt, m_fmt=m_fmt, scale=scale, offset=offset)
    path = _kernel(tmp_path_factory, source)
    out = neuronemu.run(path, {"a": a, "b": b}, target="trn3").outputs
    a_q, a_codes = _quantized(a, s_fmt)
    b_q, b_codes = _quantized(b, m_fmt)
    np.testing.assert_array_equal(out["a_words"], _words(a_q, s_fmt))
    codes = out["b_codes"].view(np.uint8)
    rows = [(g // 4) * 32 + g % 4 for g in range(k // 8)]  # the first 4 rows of each quadrant
    np.testing.assert_array_equal(codes[rows], b_codes)
    want, size = _matmul_mx(_words(a_q, s_fmt), a_codes, _words(b_q, m_fmt), b_codes, s_fmt, m_fmt)
    bound = 4 * k * 2.0**-23 * size + (2.0**-8 * np.abs(want) if dst == "bfloat16" else 0)
    assert np.all(np.abs(out["out"].astype(np.float64) - want) <= bound + 1e-30)


OFFLINE = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(s_words, s_codes, m_words, m_codes):
    K, M = s_words.shape
    N = m_words.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((K, M), dtype=nl.{s_fmt}, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=s_words.view(nl.{s_fmt}))
    m = nl.ndarray((K, N), dtype=nl.{m_fmt}, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=m_words.ap(pattern=[[N, K], [1, N]], dtype=nl.{m_fmt}))
    ss = nl.ndarray((K, M), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((K, N), dtype=nl.uint8, buffer=nl.sbuf)
    for q in range(K // 32):  # each quadrant's 4 scale rows (the MXFP tutorial's layout)
        nisa.dma_copy(dst=ss[32 * q:32 * q + 4, :], src=s_codes[4 * q:4 * q + 4, :])
        nisa.dma_copy(dst=ms[32 * q:32 * q + 4, :], src=m_codes[4 * q:4 * q + 4, :])
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(ps, s, m, ss, ms, accumulate=False)
    nisa.nc_matmul_mx(ps, s, m, ss, ms, accumulate=True)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out
"""


def _finite_words(rng: np.random.Generator, shape: tuple[int, int], fmt: str) -> np.ndarray:
    """Random words of finite values (NaN codes replaced by zero)."""
    _, element, bits = MX[fmt]
    codes = rng.integers(0, 1 << bits, (*shape, 4)).astype(np.uint8)
    codes = np.where(np.isfinite(codes.view(element).astype(np.float32)), codes, 0)
    q = codes.reshape(shape[0], -1).view(element)
    return _words(q, fmt)


@settings(max_examples=6, deadline=None)
@given(
    quadrants=st.integers(1, 4),
    m=st.integers(1, 64).map(lambda v: 2 * v),
    n=st.integers(1, 96),
    s_fmt=st.sampled_from(sorted(MX)),
    m_fmt=st.sampled_from(sorted(MX)),
    seed=st.integers(0, 2**32 - 1),
)
def test_offline_quantized_nc_matmul_mx_kernel(
    tmp_path_factory, quadrants, m, n, s_fmt, m_fmt, seed
):
    """Words and E8M0 codes from HBM (fp8 and fp4 mixed), the scales scattered to their
    quadrants by DMA, and a second matmul accumulating onto the first."""
    rng = np.random.default_rng(seed)
    k = 32 * quadrants
    s_words, m_words = _finite_words(rng, (k, m), s_fmt), _finite_words(rng, (k, n), m_fmt)
    s_codes = rng.integers(118, 136, (k // 8, m)).astype(np.uint8)
    m_codes = rng.integers(118, 136, (k // 8, n)).astype(np.uint8)
    path = _kernel(tmp_path_factory, OFFLINE.format(s_fmt=s_fmt, m_fmt=m_fmt))
    inputs = {"s_words": s_words, "s_codes": s_codes, "m_words": m_words, "m_codes": m_codes}
    got = neuronemu.run(path, inputs, target="trn3", allow_uninit=True).outputs["out"]
    want, size = _matmul_mx(s_words, s_codes, m_words, m_codes, s_fmt, m_fmt)
    bound = 2 * 4 * k * 2.0**-23 * 2 * size + 1e-30
    assert np.all(np.abs(got.astype(np.float64) - 2 * want) <= bound)


MISUSE = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(w):
    out = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    q = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=q, src=w.view(nl.float8_e4m3fn_x4))
    f = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf)
    {line}
    nisa.dma_copy(dst=out, src=f)
    return out
"""


@pytest.mark.parametrize(
    "line, message",
    [
        (
            "nisa.tensor_copy(dst=f, src=q)",
            "tensor_copy copies it only to and from tiles of the same",
        ),
        ("nisa.tensor_tensor(dst=f, data1=q, data2=q, op=nl.add)", "tensor_tensor cannot compute"),
        ("nisa.memset(dst=q, value=1.0)", "memset fills it with 0 only"),
        ("nisa.activation(dst=f, op=nl.exp, data=q)", "activation cannot compute"),
    ],
)
def test_packed_tiles_are_refused_where_their_words_would_be_taken_for_numbers(
    tmp_path_factory, line, message
):
    """nki.api.shared: the x4 dtypes are for quantize_mx and nc_matmul_mx; copies move their
    bits between tiles of one dtype, memset writes 0 only (nki.isa.memset)."""
    path = _kernel(tmp_path_factory, MISUSE.format(line=line))
    with pytest.raises(ConstraintError, match="packed MX dtype float8_e4m3fn_x4") as info:
        neuronemu.run(path, {"w": np.zeros((32, 8), np.uint32)}, target="trn3")
    assert message in str(info.value)
    assert f"{path}:12:5" in str(info.value)


PACKED_COPIES = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(w):
    out = nl.ndarray((32, 8), dtype=nl.float4_e2m1fn_x4, buffer=nl.shared_hbm)
    q = nl.ndarray((32, 8), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
    nisa.memset(dst=q, value=0)
    nisa.dma_copy(dst=q[0:16, :], src=w.view(nl.float4_e2m1fn_x4))
    r = nl.ndarray((32, 8), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=q)
    nisa.dma_copy(dst=out, src=r)
    return out
"""


def test_packed_tiles_move_bit_for_bit_and_memset_zeroes_them(tmp_path_factory):
    w = np.random.default_rng(3).integers(0, 2**16, (16, 8)).astype(np.uint16)
    path = _kernel(tmp_path_factory, PACKED_COPIES)
    got = neuronemu.run(path, {"w": w}, target="trn3").outputs["out"]
    assert got.dtype == np.uint16  # (a float4_e2m1fn_x4 word is 16 bits)
    np.testing.assert_array_equal(got[:16], w)
    np.testing.assert_array_equal(got[16:], 0)
