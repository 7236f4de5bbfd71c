"""The public-corpus manifest and its NumPy references (see `corpus.py`).

Each `Entry` names a kernel in one of AWS's public NKI repositories (by repository key and a
path relative to that checkout, optionally at a pinned older revision whose kernels have since
been removed from the main branch), the `-k` name, the inputs (neuronemu SPECs: random arrays
or compile-time literals; `arrays` makes inputs whose values matter, saved to an .npz), an
optional SPMD grid (LNC2 kernels run with grid 2), and the reference function below.

The references are written from each kernel's documented math (docstrings, tutorial text,
test descriptions); shapes come from the kernels' own tests and examples, shrunk where a
test's shape would take minutes. They compute in float64 and take the inputs by name.
Nothing here is imported from the kernels' repositories.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Revisions that still hold kernels removed from the main branches since.
SAMPLES_LEGACY = "7af4e4d0210b2baf98cfa2bd033b06fc8ac60355"  # nki-samples, before #115 / #116
SDK_LEGACY = "650d126731db0c2f86a75343d8d4c1856fd30bfd"  # aws-neuron-sdk, before 38480a9f
LIB_PREV = "0759719da4e84ad29ddba3621a59e614779929ee"  # nki-library 2026-02-27 (mlp.py parses)
# nki-library 2026-01-23: mlp.py parses and mlp_parameters.py does not yet call the
# unimported `math` of 2026-02-27 (its TKG path misses a dataclass field there instead)
LIB_OLDER = "1edc7bbed0f054451b472b8fe34c96e7d617bdde"

SAMPLES_TUT = "src/nki_samples/tutorials"
SAMPLES_REF = "src/nki_samples/reference"
LIB = "src/nkilib_src/nkilib"
# nki-library's pull request #1 (refs/pull/1/head): linear_scan and selective_scan, kernels
# not in a release (fetch the pull ref into the checkout: `git fetch origin pull/1/head`)
LIB_SCAN_PR = "ebe57b2b3e4d904fd7be64cf39b8918f92a894af"


@dataclass
class Entry:
    """One kernel entry point and how to run it."""

    name: str
    repo: str  # samples | library | sdk | vllm
    path: str  # relative to the checkout
    kernel: str | None
    inputs: dict[str, str] = field(default_factory=dict)  # NAME -> SPEC
    ref: str | None = None  # a function of this module
    grid: tuple[int, ...] | None = None
    target: str | None = None
    rtol: float | None = None
    atol: float | None = None
    rev: str | None = None  # a pinned revision of the repository
    arrays: Callable[[np.random.Generator], dict[str, np.ndarray]] | None = None
    timeout: float | None = None
    extra_args: tuple[str, ...] = ()
    note: str = ""


def f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def causal_mask(sq: int, sk: int, window: int = -1) -> np.ndarray:
    """True where query i may attend key j: j <= i, and j > i - window when window > 0."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    keep = j <= i
    if window > 0:
        keep &= j > i - window
    return keep


# ==== elementwise, layout, pooling ==========================================================


def add(**kw):
    a, b = [f64(v) for k, v in kw.items() if isinstance(v, np.ndarray)][:2]
    return a + b


def tensor_add(a_input, b_input):
    return f64(a_input) + f64(b_input)


def exp_(in_tensor):
    return np.exp(f64(in_tensor))


def transpose2d(in_tensor, shape2D):
    p = in_tensor.shape[0]
    rows, cols = shape2D
    return f64(in_tensor).reshape(p, rows, cols).transpose(0, 2, 1).reshape(p, rows * cols)


def avgpool2d(in_tensor, pool_size):
    c, h, w = in_tensor.shape
    k = pool_size
    return f64(in_tensor).reshape(c, h // k, k, w // k, k).mean(axis=(2, 4))


def maxpool2d(in_tensor, sz_pool):
    c, h, w = in_tensor.shape
    k = sz_pool
    return f64(in_tensor).reshape(c, h // k, k, w // k, k).max(axis=(2, 4))


def split_even_odd(in_tensor):
    x = f64(in_tensor)
    return x[:, 0::2], x[:, 1::2]


def maxpool2d_stride1(in_tensor, pool_size):
    x = f64(in_tensor)
    k = pool_size
    h, w = x.shape[0] - k + 1, x.shape[1] - k + 1
    out = np.full((h, w), -np.inf)
    for di in range(k):
        for dj in range(k):
            out = np.maximum(out, x[di : di + h, dj : dj + w])
    return out


def _linear_2x_weights(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices and weights of a 2x linear upsampling, align_corners=False."""
    src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0.0)
    i0 = np.floor(src).astype(int)
    i1 = np.minimum(i0 + 1, n - 1)
    return i0, i1, src - i0


def _upsample_axis(x: np.ndarray, axis: int) -> np.ndarray:
    i0, i1, lam = _linear_2x_weights(x.shape[axis])
    shape = [1] * x.ndim
    shape[axis] = -1
    lam = lam.reshape(shape)
    return np.take(x, i0, axis=axis) * (1 - lam) + np.take(x, i1, axis=axis) * lam


def bilinear_2x(src_arr):
    x = f64(src_arr)
    return _upsample_axis(_upsample_axis(x, 2), 3)


def trilinear_2x(src_arr):
    x = f64(src_arr)
    return _upsample_axis(_upsample_axis(_upsample_axis(x, 2), 3), 4)


def resize_nearest(data_tensor, out_shape):
    x = f64(data_tensor)
    _, in_h, in_w, _ = x.shape
    _, out_h, out_w, _ = out_shape
    hi = np.floor(np.arange(out_h) * (in_h / out_h)).astype(int)
    wi = np.floor(np.arange(out_w) * (in_w / out_w)).astype(int)
    return x[:, hi][:, :, wi]


def adaptive_avg_pool2d(in_tensor, output_size):
    x = f64(in_tensor)
    n, c, h, w = x.shape
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out


def select_and_scatter(operand_tensor, source_tensor):
    """3x3 windows, stride 2, padding 1 (padding never selected), first maximum wins,
    source values added at the selected positions."""
    x = f64(operand_tensor)
    s = f64(source_tensor)
    n, c, h, w = x.shape
    padded = np.full((n, c, h + 2, w + 2), -np.inf)
    padded[:, :, 1:-1, 1:-1] = x
    out = np.zeros((n, c, h + 2, w + 2))
    sh, sw = s.shape[2:]
    for i in range(sh):
        for j in range(sw):
            win = padded[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].reshape(n, c, 9)
            k = win.argmax(axis=-1)
            ni, ci = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
            out[ni, ci, 2 * i + k // 3, 2 * j + k % 3] += s[:, :, i, j]
    return out[:, :, 1:-1, 1:-1]


# ==== matrix multiplication =================================================================


def matmul_lhsT(lhsT, rhs):
    return f64(lhsT).T @ f64(rhs)


def matmul_A_T(A_T, B):
    return f64(A_T).T @ f64(B)


def matmul_A(A, B):
    return f64(A) @ f64(B)


def matmul_contrib(A_DRAM, B_DRAM):
    return f64(A_DRAM).T @ f64(B_DRAM)


def _fp8_e4m3(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(np.float32).astype(ml_dtypes.float8_e4m3).astype(np.float64)


def _bf16(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return np.asarray(x).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def double_row_matmul(lhs, rhs_quantized, rhs_scale, TILES_IN_BLOCK_K):
    """lhs @ (rhs_q * scale), with lhs quantized as the kernel's docstring says it is: to
    fp8_e4m3, per row of each K block, by max|row| / 240 (the scale and the quotient held in
    lhs's bf16 first).
    rhs_q arrives as [K/2, 2N]: each [128, 512] tile of row-tile 2t is followed, in the same
    rows, by the matching tile of row-tile 2t+1."""
    rq = f64(rhs_quantized)
    half_k, two_n = rq.shape
    n = two_n // 2
    rhs = np.empty((2 * half_k, n))
    for t in range(half_k // 128):
        rows = rq[t * 128 : (t + 1) * 128]
        for j in range(n // 512):
            cols = slice(j * 512, (j + 1) * 512)
            rhs[(2 * t) * 128 : (2 * t + 1) * 128, cols] = rows[:, j * 1024 : j * 1024 + 512]
            rhs[(2 * t + 1) * 128 : (2 * t + 2) * 128, cols] = rows[
                :, j * 1024 + 512 : (j + 1) * 1024
            ]
    a, block = f64(lhs), int(TILES_IN_BLOCK_K) * 128
    out = np.zeros((a.shape[0], n))
    for k in range(0, a.shape[1], block):
        part = a[:, k : k + block]
        scale = _bf16(_bf16(np.abs(part).max(axis=1, keepdims=True)) / 240)
        # (nl.divide's tile is bf16, by type promotion; assigning it to the fp8 tile casts)
        product = _fp8_e4m3(_bf16(part / scale)) @ rhs[k : k + block]
        # Each K block's product, its dequantized value and the running sum are bf16 tiles.
        out = _bf16(out + _bf16(_bf16(product) * scale))
    return _bf16(out * f64(rhs_scale)[0])


# ==== normalization =========================================================================


def layernorm_rows(input_tensor, epsilon, gamma_vector, beta_vector):
    x = f64(input_tensor)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * f64(gamma_vector) + f64(beta_vector)


def rmsnorm_rows(a_tensor, g_tensor):
    x = f64(a_tensor)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True)) * f64(g_tensor)


def softmax_rows(a_tensor):
    return softmax(f64(a_tensor), axis=1)


def rmsnorm_qkv(hidden, weights):
    """RMSNorm (eps added to the rms, gamma folded into the weights) then @ weights."""
    x = f64(hidden)
    rms = np.sqrt((x * x).mean(axis=-1, keepdims=True))
    return (x / (rms + 1e-6)) @ f64(weights)


# ==== attention =============================================================================


def attn_tutorial(q, k, v):
    """q, k, v: [d_head, seq]; out [seq, d_head] = softmax(q.T k) v.T."""
    return softmax(f64(q).T @ f64(k)) @ f64(v).T


def sd_attention_tutorial(q_ref, k_ref, v_ref):
    """[seq, d] each; softmax(0.125 q k^T) v."""
    return softmax(0.125 * f64(q_ref) @ f64(k_ref).T) @ f64(v_ref)


def sd_attention_reference(q_ref, k_ref, v_ref):
    """q [bs, d, seq], k, v [bs, seq, d] -> [bs, seq, d]."""
    q, k, v = f64(q_ref), f64(k_ref), f64(v_ref)
    return np.stack([softmax(0.125 * q[b].T @ k[b].T) @ v[b] for b in range(q.shape[0])])


def sd_attention_allocated(q_ref, k_ref, v_ref):
    """q, k [bs, d, seq], v [bs, seq, d] -> [bs, d, seq]."""
    q, k, v = f64(q_ref), f64(k_ref), f64(v_ref)
    return np.stack([(softmax(0.125 * q[b].T @ k[b]) @ v[b]).T for b in range(q.shape[0])])


def pipelined_flash_fwd(q, k, v, softmax_scale):
    """q, k [b, d, s], v [b, s, d] -> [b, s, d], no mask."""
    q, k, v = f64(q), f64(k), f64(v)
    return np.stack([softmax(softmax_scale * q[b].T @ k[b]) @ v[b] for b in range(q.shape[0])])


def _flash_scores(q, k, causal, window, scale):
    s = scale * q.T @ k
    if causal or window > 0:
        s = np.where(causal_mask(*s.shape, window), s, -np.inf)
    return s


def flash_fwd(q, k, v, use_causal_mask=True, sliding_window=-1, softmax_scale=None, **_):
    """q [b, h, d, sq], k [b, kvh, d, sk], v [b, kvh, sk, d] -> o [b, h, sq, d] and, for
    training (the default config), lse [b, h, 128, sq/128] with lse[.., p, t] the
    log-sum-exp of query row t*128+p."""
    q, k, v = f64(q), f64(k), f64(v)
    b, h, d, sq = q.shape
    group = h // k.shape[1]
    scale = softmax_scale or 1.0 / np.sqrt(d)
    o = np.empty((b, h, sq, d))
    lse = np.empty((b, h, 128, sq // 128))
    for bi in range(b):
        for hi in range(h):
            s = _flash_scores(q[bi, hi], k[bi, hi // group], use_causal_mask, sliding_window, scale)
            m = s.max(axis=1, keepdims=True)
            log_sum = np.log(np.exp(s - m).sum(axis=1)) + m[:, 0]
            o[bi, hi] = softmax(s) @ v[bi, hi // group]
            lse[bi, hi] = log_sum.reshape(sq // 128, 128).T
    return o, lse


def flash_bwd_inputs(bs, heads, kv_heads, seq, d, causal=True):
    """q, k, v, dy ~ U(-1, 1), with o and lse from the forward pass (as the test builds them)."""

    def make(rng):
        def u(*s):
            return rng.uniform(-1, 1, s).astype(np.float32)

        q, k, v, dy = (
            u(bs, heads, d, seq),
            u(bs, kv_heads, d, seq),
            u(bs, kv_heads, d, seq),
            u(bs, heads, d, seq),
        )
        o, lse = flash_fwd(q, k, v.transpose(0, 1, 3, 2), use_causal_mask=causal)
        return {
            "q_ref": q,
            "k_ref": k,
            "v_ref": v,
            "o_ref": o.transpose(0, 1, 3, 2).astype(np.float32),
            "dy_ref": dy,
            "lse_ref": lse.astype(np.float32),
        }

    return make


def flash_attn_bwd(
    q_ref, k_ref, v_ref, dy_ref, use_causal_mask=False, sliding_window=-1, softmax_scale=None, **_
):
    """All [b, h, d, s] (k, v with kv heads); returns dq, dk, dv in the same layout."""
    q, k, v, dy = f64(q_ref), f64(k_ref), f64(v_ref), f64(dy_ref)
    b, h, d, _ = q.shape
    kvh = k.shape[1]
    group = h // kvh
    scale = softmax_scale or 1.0 / np.sqrt(d)
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for bi in range(b):
        for hi in range(h):
            kj, vj = k[bi, hi // group], v[bi, hi // group]
            p = softmax(_flash_scores(q[bi, hi], kj, use_causal_mask, sliding_window, scale))
            dp = dy[bi, hi].T @ vj  # [sq, sk]
            ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
            dq[bi, hi] = scale * kj @ ds.T
            dk[bi, hi // group] += scale * q[bi, hi] @ ds
            dv[bi, hi // group] += dy[bi, hi] @ p
    return dq, dk, dv


# ==== recurrences and embeddings ============================================================


def mamba(delta, u, A, B, C):
    """Selective scan: h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t; y_t = sum_n C_t h_t."""
    delta, u, A, B, C = f64(delta), f64(u), f64(A), f64(B), f64(C)
    dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])  # [b, c, n, s]
    dBu = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = np.zeros(dA.shape[:-1])
    y = np.empty(delta.shape)
    for t in range(delta.shape[-1]):
        h = dA[..., t] * h + dBu[..., t]
        y[..., t] = (C[:, None, :, t] * h).sum(axis=-1)
    return y


def mamba_inputs(batch, channels, seq, state):
    """delta > 0 and A < 0, as in a trained Mamba layer, so the scan neither explodes nor dies."""

    def make(rng):
        return {
            "delta": rng.uniform(0.01, 0.2, (batch, channels, seq)).astype(np.float32),
            "u": rng.standard_normal((batch, channels, seq)).astype(np.float32),
            "A": -rng.uniform(0.5, 2.0, (channels, state)).astype(np.float32),
            "B": rng.standard_normal((batch, state, seq)).astype(np.float32),
            "C": rng.standard_normal((batch, state, seq)).astype(np.float32),
        }

    return make


def rotate_half_hf(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotary_tutorial(q, k, cos, sin):
    """q, k [b, h, s, d]; cos, sin [b, s, d] -> [2, b, h, s, d] (HF rotate-half)."""
    c, s = f64(cos)[:, None], f64(sin)[:, None]
    q, k = f64(q), f64(k)
    return np.stack([q * c + rotate_half_hf(q) * s, k * c + rotate_half_hf(k) * s])


def cumsum_last(x):
    return np.cumsum(f64(x), axis=-1)


# ==== nki-library kernels ===================================================================


def cascaded_max(input_tensor):
    x = f64(input_tensor)
    return x.max(axis=-1, keepdims=True), x.argmax(axis=-1)[..., None]


def topk(inp, k, **_):
    x = f64(inp)
    order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, axis=-1), order


def find_nonzero_indices(input_tensor, col_start_id=None, n_cols=None, **_):
    """indices [C, T]: the row numbers of each column's nonzeros, then -1; counts [C]."""
    x = np.asarray(input_tensor)
    if col_start_id is not None and n_cols is not None:
        start = int(np.asarray(col_start_id).ravel()[0])
        x = x[:, start : start + n_cols]
    t, c = x.shape
    indices = np.full((c, t), -1, dtype=np.int64)
    counts = np.zeros(c, dtype=np.int64)
    for j in range(c):
        nz = np.flatnonzero(x[:, j])
        indices[j, : nz.size] = nz
        counts[j] = nz.size
    return indices, counts


def find_nonzero_with_count(input_tensor):
    """[1, T] -> [1, T+1]: nonzero positions, -1 padding, then the count."""
    x = np.asarray(input_tensor)[0]
    nz = np.flatnonzero(x)
    out = np.full(x.size + 1, -1, dtype=np.int64)
    out[: nz.size] = nz
    out[-1] = nz.size
    return out[None]


def sparse_columns(t, e, top_k, dtype, offset=None, n_cols=None):
    """[T, E] with T*top_k//E ones per column at random rows (the tests' generator, in words)."""

    def make(rng):
        k = t * top_k // e
        x = np.zeros((e, t), dtype=dtype)
        for j in range(e):
            x[j, rng.choice(t, k, replace=False)] = 1
        out = {"input_tensor": np.ascontiguousarray(x.T)}
        if offset is not None:
            out["col_start_id"] = np.array([offset], dtype=np.int32)
        return out

    return make


def indexed_flatten(input_tensor, f_len, output_len, row_offsets, padding_val=-1, **_):
    """Row e of [E, T] goes, in blocks of f_len, to output blocks row_offsets[e], +1, ...;
    blocks past the end are skipped; the rest of the output is padding_val."""
    x = np.asarray(input_tensor).astype(np.int64)
    e, t = x.shape
    out = np.full(output_len, padding_val, dtype=np.int64)
    blocks = out.reshape(-1, f_len)
    for r in range(e):
        for p in range(t // f_len):
            b = int(row_offsets[r]) + p
            if 0 <= b < blocks.shape[0]:
                blocks[b] = x[r, p * f_len : (p + 1) * f_len]
    return out


def _rmsnorm(x, gamma, eps, hidden_actual=None):
    n = x.shape[-1] if hidden_actual is None else hidden_actual
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) / n + eps) * gamma


def _layernorm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    out = (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma
    return out if beta is None else out + beta


def _tkg_layout(y, lnc):
    """[B, S, H] -> [128, B*S, H/128]: each LNC shard's H slice as [BxS, 128, H1] moved to
    [128, BxS, H1], the shards side by side on the last axis."""
    bxs = y.shape[0] * y.shape[1]
    y = y.reshape(bxs, -1)
    parts = np.split(y, lnc, axis=1)
    return np.concatenate([p.reshape(bxs, 128, -1).transpose(1, 0, 2) for p in parts], axis=2)


def rmsnorm_tkg_lnc1(input, gamma, eps=1e-6, hidden_actual=None, **_):
    return _tkg_layout(_rmsnorm(f64(input), f64(gamma), eps, hidden_actual), 1)


def rmsnorm_tkg_lnc2(input, gamma, eps=1e-6, hidden_actual=None, **_):
    return _tkg_layout(_rmsnorm(f64(input), f64(gamma), eps, hidden_actual), 2)


def _layernorm_in_steps(x, gamma, beta, eps):
    """LayerNorm as nki-library's layernorm_tkg computes it (its docstring's steps): the
    statistics in fp32, then x - mean, * gamma, * rsqrt(var + eps) and + beta, each written
    to the output tile, in the input's dtype."""
    dtype = np.asarray(x).dtype

    def tile(v):
        return np.asarray(v).astype(np.float32).astype(dtype).astype(np.float64)

    x = f64(x)
    mean = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mean * mean
    out = tile(tile(tile(x - mean) * f64(gamma)) / np.sqrt(var + eps))
    return out if beta is None else tile(out + f64(beta))


def layernorm_tkg_lnc1(input, gamma, beta=None, eps=1e-6, **_):
    return _tkg_layout(_layernorm_in_steps(input, gamma, beta, eps), 1)


def layernorm_tkg_lnc2(input, gamma, beta=None, eps=1e-6, **_):
    return _tkg_layout(_layernorm_in_steps(input, gamma, beta, eps), 2)


def linear_scan(decay, data, initial=None, **_):
    """result[t] = decay[t] * result[t-1] + data[t] along the last axis, from `initial` (or
    0); and the last state, [..., P, 1]."""
    a, x = f64(decay), f64(data)
    state = np.zeros(a.shape[:-1]) if initial is None else f64(initial)[..., 0]
    out = np.empty_like(x)
    for t in range(x.shape[-1]):
        state = a[..., t] * state + x[..., t]
        out[..., t] = state
    return out, state[..., None]


def selective_scan(x, dt, A, B, C, D=None, initial_state=None, **_):
    """Mamba's selective scan as the kernel's docstring states it: per state n, state[t] =
    exp(dt[t] A[:, n]) state[t-1] + dt[t] x[t] B[n, t]; y[t] = sum_n C[n, t] state[t], plus
    D x. x, dt: [b, ch, L]; A: [ch, N]; B, C: [b, N, L]; states [b, ch, N]."""
    x, dt, A, B, C = f64(x), f64(dt), f64(A), f64(B), f64(C)
    state = np.zeros((x.shape[0], x.shape[1], A.shape[1]))
    if initial_state is not None:
        state = f64(initial_state).copy()
    y = np.zeros_like(x)
    for t in range(x.shape[2]):
        decay = np.exp(dt[:, :, t, None] * A[None])
        state = decay * state + (dt[:, :, t] * x[:, :, t])[:, :, None] * B[:, None, :, t]
        y[:, :, t] = (state * C[:, None, :, t]).sum(axis=2)
    if D is not None:
        y += f64(D)[None, :, None] * x
    return y, state


def rope_lib(x_in, cos, sin, contiguous_layout=True, **_):
    """x [d, B, n, S], cos/sin [d/2, B, S]: rotate (first half, second half) pairs, or
    (even, odd) pairs when the layout is interleaved."""
    x = f64(x_in)
    c, s = f64(cos)[:, :, None, :], f64(sin)[:, :, None, :]
    half = x.shape[0] // 2
    a, b = (x[:half], x[half:]) if contiguous_layout else (x[0::2], x[1::2])
    ra, rb = a * c - b * s, a * s + b * c
    out = np.empty_like(x)
    if contiguous_layout:
        out[:half], out[half:] = ra, rb
    else:
        out[0::2], out[1::2] = ra, rb
    return out


def rope_hf(q, k, cos=None, sin=None, rope_cache=None, backward=False, **_):
    """HF layout [B, heads, S, D]; forward x*cos + rotate_half(x)*sin, backward
    x*cos + rotate_half^T(x*sin) (rotate_half^T(y) = [y2, -y1])."""
    if rope_cache is not None:
        cache = f64(rope_cache)
        d = cache.shape[-1] // 2
        cos, sin = cache[..., :d], cache[..., d:]
    c, s = f64(cos), f64(sin)
    if c.ndim == 2:
        c, s = c[None], s[None]
    c, s = c[:, None], s[:, None]

    def apply(x):
        x = f64(x)
        if not backward:
            return x * c + rotate_half_hf(x) * s
        y = x * s
        half = y.shape[-1] // 2
        return x * c + np.concatenate([y[..., half:], -y[..., :half]], axis=-1)

    return apply(q), apply(k)


def gen_mask_tkg_hbm(pos_ids_hbm, bs, q_head, s_active, s_prior, **_):
    """mask[r, b, h, s] = 1 where prior position k(r) < pos_ids[b * s_active + s], in the
    strided MM1 layout (block_len 0): position k sits at partition p = k // n, column
    f = k % n of the [128, n = s_prior / 128] tile (gen_mask_tkg_torch.py's mapping), and the
    HBM rows run over (f, p), so row r holds k = (r % 128) * n + r // 128."""
    pos = f64(pos_ids_hbm).reshape(bs, s_active)
    n = s_prior // 128
    r = np.arange(s_prior)
    k = ((r % 128) * n + r // 128)[:, None, None, None]
    return (k < pos[None, :, None, :]).astype(np.float64) * np.ones((1, 1, q_head, 1))


def output_projection_cte(attention, weight, bias=None, **_):
    """attention [B, N, D, S], weight [N*D, H] -> [B, S, H]."""
    a = f64(attention)
    b, n, d, s = a.shape
    out = a.transpose(0, 3, 1, 2).reshape(b, s, n * d) @ f64(weight)
    return out if bias is None else out + f64(bias)


def output_projection_tkg(attention, weight, bias=None, **_):
    """attention [D, B, N, S], weight [N*D, H] -> [B*S, H]."""
    a = f64(attention)
    d, b, n, s = a.shape
    out = a.transpose(1, 3, 2, 0).reshape(b * s, n * d) @ f64(weight)
    return out if bias is None else out + f64(bias)


def qkv_bsd(input, fused_qkv_weights, bias=None, **_):
    out = f64(input) @ f64(fused_qkv_weights)
    return out if bias is None else out + f64(bias)


def silu(x):
    return x / (1 + np.exp(-x))


def mlp_silu(
    hidden_tensor, gate_proj_weights_tensor, up_proj_weights_tensor, down_proj_weights_tensor, **_
):
    h = f64(hidden_tensor)
    act = silu(h @ f64(gate_proj_weights_tensor)) * (h @ f64(up_proj_weights_tensor))
    return act @ f64(down_proj_weights_tensor)


def attention_cte(q, k, v, scale=1.0, causal_mask=True, tp_q=True, tp_k=False, tp_out=False, **_):
    """q [B, S, d] (tp_q) or [B, d, S]; k [B, d, S] or [B, S, d] (tp_k); v [B, S, d]."""
    q, k, v = f64(q), f64(k), f64(v)
    if not tp_q:
        q = q.transpose(0, 2, 1)
    if tp_k:
        k = k.transpose(0, 2, 1)
    group = q.shape[0] // k.shape[0]
    out = []
    for b in range(q.shape[0]):
        s = scale * q[b] @ k[b // group]
        if causal_mask:
            s = np.where(causal_mask_fn(*s.shape), s, -np.inf)
        out.append(softmax(s) @ v[b // group])
    out = np.stack(out)
    return out.transpose(0, 2, 1) if tp_out else out


causal_mask_fn = causal_mask


def attention_bwd(q_ref, k_ref, v_ref, dy_ref, use_causal_mask=False, softmax_scale=None, **_):
    return flash_attn_bwd(
        q_ref, k_ref, v_ref, dy_ref, use_causal_mask=use_causal_mask, softmax_scale=softmax_scale
    )


def conv1d(x_in, filters, bias=None, stride=1, padding=(0, 0), dilation=1, **_):
    """x [B, Cin, L], filters [K, Cin, Cout] -> [B, Cout, Lout] (cross-correlation)."""
    x = np.pad(f64(x_in), ((0, 0), (0, 0), tuple(padding)))
    w = f64(filters)
    k = w.shape[0]
    l_out = (x.shape[2] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], w.shape[2], l_out))
    for t in range(k):
        xs = x[:, :, t * dilation : t * dilation + stride * (l_out - 1) + 1 : stride]
        out += np.einsum("bcl,co->bol", xs, w[t])
    return out if bias is None else out + f64(bias)[None, :, None]


def depthwise_conv1d(img_ref, filter_ref, padding=((0, 0), (0, 0)), stride=(1, 1), **_):
    """img [N, C, 1, W], filter [C, 1, 1, S] -> [N, C, 1, Q]; channel c uses its own filter."""
    x = np.pad(f64(img_ref)[:, :, 0, :], ((0, 0), (0, 0), tuple(padding[1])))
    w = f64(filter_ref)[:, 0, 0, :]
    s, sw = w.shape[1], stride[1]
    q = (x.shape[2] - s) // sw + 1
    out = np.zeros((x.shape[0], x.shape[1], q))
    for t in range(s):
        out += x[:, :, t : t + sw * (q - 1) + 1 : sw] * w[None, :, t, None]
    return out[:, :, None, :]


def _lse(x):
    m = x.max(axis=-1, keepdims=True)
    return (np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m)[..., 0]


def cross_entropy_forward(logits_hbm, targets_hbm, **_):
    x = f64(logits_hbm)
    lse = _lse(x)
    return lse - x[np.arange(x.shape[0]), np.asarray(targets_hbm)], lse


def cross_entropy_backward(logits_hbm, targets_hbm, reduction="mean", **_):
    x = f64(logits_hbm)
    g = softmax(x)
    g[np.arange(x.shape[0]), np.asarray(targets_hbm)] -= 1
    return g / x.shape[0] if reduction == "mean" else g


def ce_targets(n, v):
    return lambda rng: {"targets_hbm": rng.integers(0, v, n).astype(np.int32)}


def ce_backward_inputs(n, v):
    def make(rng):
        x = rng.standard_normal((n, v)).astype(np.float32)
        t = rng.integers(0, v, n).astype(np.int32)
        return {"logits_hbm": x, "targets_hbm": t, "lse_state_hbm": _lse(f64(x)).astype(np.float32)}

    return make


def dynamic_add(input_a, input_b, num_m_tiles):
    rows = int(np.asarray(num_m_tiles).ravel()[0]) * 128
    out = f64(input_a) + f64(input_b)
    assert rows == out.shape[0], "the reference covers the all-tiles case only"
    return out


def mx_matmul(stationary_hbm, moving_hbm, **_):
    """The unquantized product (the kernel quantizes both operands to MXFP8)."""
    return f64(stationary_hbm).T @ f64(moving_hbm)


def ntk_rope(x_in, cos, sin, first_second_half_impl=True, **_):
    """x [d, S], cos/sin [d/2, S]: first/second halves (or even/odd positions) rotated."""
    x = f64(x_in)
    c, s = f64(cos), f64(sin)
    half = x.shape[0] // 2
    a, b = (x[:half], x[half:]) if first_second_half_impl else (x[0::2], x[1::2])
    out = np.empty_like(x)
    if first_second_half_impl:
        out[:half], out[half:] = a * c - b * s, b * c + a * s
    else:
        out[0::2], out[1::2] = a * c - b * s, b * c + a * s
    return out


def transpose_210(img_ref):
    return np.swapaxes(f64(img_ref), -1, -3)


def transpose_perm(img_ref, permutation):
    return np.transpose(f64(img_ref), permutation)


# ==== aws-neuron-sdk nki/test ISA examples ==================================================

FP32_MIN = float(np.finfo(np.float32).min)


def isa_activation(a_tensor, b_tensor, c_tensor):
    return np.exp(f64(a_tensor)), (2 * f64(b_tensor) + f64(c_tensor)) ** 2


def isa_affine_select(a_tensor):
    a = f64(a_tensor)
    i, j = np.indices(a.shape)
    return np.where(j < i, a, FP32_MIN)


def row_mean_var(**kw):
    x = f64(next(v for v in kw.values() if isinstance(v, np.ndarray)))
    return x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)


def copy_predicated(predicate, on_true_tensor, on_false_tensor):
    return np.where(np.asarray(predicate) != 0, f64(on_true_tensor), f64(on_false_tensor))


def two_transposes(a_tensor, b_tensor):
    return f64(a_tensor).T, f64(b_tensor).T


def three_matmuls(a_tensor, b_tensor, d_tensor, e_tensor, g_tensor, h_tensor):
    return (
        f64(a_tensor).T @ f64(b_tensor),
        f64(d_tensor).T @ f64(e_tensor),
        f64(g_tensor).transpose(0, 2, 1) @ f64(h_tensor),
    )


def local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, output_shape):
    """Each GpSimd core (16 partitions) gathers, for all its partitions, the elements named by
    its indices (index values count elements; taken column-major over the core's [16, k]
    index block, the first num_valid_indices of them)."""
    src = f64(src_buffer)
    idx = np.asarray(index).astype(np.int64) // num_elem_per_idx
    out = np.empty((128, num_valid_indices) + src.shape[2:])
    for core in range(8):
        rows = slice(16 * core, 16 * core + 16)
        picks = idx[rows].flatten(order="F")[:num_valid_indices]
        out[rows] = src[rows][:, picks]
    return out.reshape(output_shape)


def select_reduce_max(predicate_data, on_true_data, on_false_data):
    sel = np.where(np.asarray(predicate_data) != 0, f64(on_true_data), f64(on_false_data))
    return sel, sel.max(axis=1, keepdims=True)


def row_sum(a_tensor):
    return f64(a_tensor).sum(axis=1, keepdims=True)


def three_tensor_scalars(a_tensor, c_tensor, e_tensor, f_tensor):
    return f64(a_tensor) - 1, 1 - f64(c_tensor), f64(e_tensor) * f64(f_tensor) + 2.5


def scan_mul_add(a_tensor, b_tensor):
    a, b = f64(a_tensor), f64(b_tensor)
    out = np.empty_like(a)
    acc = np.zeros(a.shape[0])
    for i in range(a.shape[1]):
        acc = a[:, i] * acc + b[:, i]
        out[:, i] = acc
    return out


def reciprocal(in_tensor):
    return 1 / f64(in_tensor)


def add_scalar_2_2(a_tensor):
    return f64(a_tensor) + 2.2


def transpose_2d(a):
    return f64(a).T


def identity(**kw):
    return f64(next(v for v in kw.values() if isinstance(v, np.ndarray)))


def rotate_partitions_by_one(in_tensor):
    """Within each group of 32 partitions, partition i takes partition (i - 1) mod 32."""
    x = f64(in_tensor)
    p = np.arange(x.shape[0])
    return x[(p // 32) * 32 + (p % 32 - 1) % 32]


def transpose_into(a_ptr, tp_ptr):
    return f64(a_ptr).T


def uniform_inputs(shapes: dict[str, tuple[int, ...]], low=0.0, high=1.0, dtype=np.float32):
    return lambda rng: {n: rng.uniform(low, high, s).astype(dtype) for n, s in shapes.items()}


# ==== the manifest ==========================================================================


def _attn_inputs(seq: int):
    """q, k, v [128, seq] ~ U(-1, 1) in float32, as test_attention.py makes them."""
    return lambda rng: {n: rng.uniform(-1, 1, (128, seq)).astype(np.float32) for n in "qkv"}


def _mamba_entries(repo: str, path: str, prefix: str) -> list[Entry]:
    # mamba_torch.py's toy example: batch 1, 256 channels, seq 512, state 16, float32
    return [
        Entry(
            f"{prefix}/fused_mamba/mamba_{v}",
            repo,
            path,
            f"mamba_{v}",
            ref="mamba",
            arrays=mamba_inputs(1, 256, 512, 16),
            rtol=1e-3,
            atol=1e-3,
        )
        for v in ("v1", "v2", "v3")
    ]


def _matmul_entries(repo: str, path: str, prefix: str) -> list[Entry]:
    # matrix_multiplication_torch.py: basic on [64,128]x[128,512]; the others on
    # lhs [4096,1024] x rhs [1024,2048] in bf16 (here M=1024 except the fully optimized
    # kernel, whose default blocks need M a multiple of 2048)
    basic = {"lhsT": "bfloat16[128,64]", "rhs": "bfloat16[128,512]"}
    big = {"lhsT": "bfloat16[1024,1024]", "rhs": "bfloat16[1024,2048]"}
    full = {"lhsT": "bfloat16[1024,2048]", "rhs": "bfloat16[1024,1024]"}
    return [
        Entry(f"{prefix}/matmul/{k}", repo, path, f"nki_matmul_{k}_", ins, ref="matmul_lhsT")
        for k, ins in (
            ("basic", basic),
            ("tiled", big),
            ("hoist_load", big),
            ("block_free_dimension", big),
            ("fully_optimized", full),
        )
    ]


BF16_ATTN = ("v7", "v8", "v8a", "v9", "v10", "v11")
MM = f"{SAMPLES_TUT}/matrix_multiplication/matrix_multiplication_nki_kernels.py"
ATTN = f"{SAMPLES_TUT}/attention_fwd_performance/attention_kernels.py"
TADD = f"{SAMPLES_TUT}/tensor_addition"
ADD_IN = {"a_input": "float16[256,1024]", "b_input": "float16[256,1024]"}  # the tutorial's

SAMPLES = [
    Entry(
        "samples/tutorials/tensor_add/kernel",
        "samples",
        f"{TADD}/tensor_addition_nki_kernels.py",
        "nki_tensor_add_kernel_",
        ADD_IN,
        ref="tensor_add",
        grid=(2, 2),
    ),
    Entry(
        "samples/tutorials/tensor_add/caller",
        "samples",
        f"{TADD}/tensor_addition_nki_kernels.py",
        "nki_tensor_add",
        ADD_IN,
        ref="tensor_add",
        note="host caller launching kernel[grid_x, grid_y]",
    ),
    Entry(
        "samples/tutorials/spmd_tensor_add/kernel",
        "samples",
        f"{TADD}/spmd_tensor_addition_nki_kernels.py",
        "nki_tensor_add_kernel_",
        ADD_IN,
        ref="tensor_add",
        grid=(2, 2),
    ),
    Entry(
        "samples/tutorials/spmd_multiple_nc/caller",
        "samples",
        f"{TADD}/spmd_multiple_nc_tensor_addition_nki_kernels.py",
        "nki_tensor_add_nc2",
        {"a_input": "float16[512,2048]", "b_input": "float16[512,2048]"},
        ref="tensor_add",
        note="kernel[nl.spmd_dim(grid_x, nl.nc(2)), grid_y]",
    ),
    Entry(
        "samples/tutorials/transpose2d/example",
        "samples",
        f"{SAMPLES_TUT}/transpose2d/transpose2d_nki_kernels.py",
        "tensor_transpose2D_kernel_",
        {"in_tensor": "int8[5,12]", "shape2D": "(3, 4)"},
        ref="transpose2d",
    ),
    Entry(
        "samples/tutorials/transpose2d/large",
        "samples",
        f"{SAMPLES_TUT}/transpose2d/transpose2d_nki_kernels.py",
        "tensor_transpose2D_kernel_",
        {"in_tensor": "bfloat16[128,768]", "shape2D": "(24, 32)"},
        ref="transpose2d",
    ),
    Entry(
        "samples/tutorials/average_pool2d/example",
        "samples",
        f"{SAMPLES_TUT}/average_pool2d/average_pool2d_nki_kernels.py",
        "tensor_avgpool_kernel",
        {"in_tensor": "float16[2,6,6]", "pool_size": "2"},
        ref="avgpool2d",
    ),
    Entry(
        "samples/tutorials/average_pool2d/large",
        "samples",
        f"{SAMPLES_TUT}/average_pool2d/average_pool2d_nki_kernels.py",
        "tensor_avgpool_kernel",
        {"in_tensor": "float32[128,64,64]", "pool_size": "4"},
        ref="avgpool2d",
    ),
    *_mamba_entries(
        "samples", f"{SAMPLES_TUT}/fused_mamba/mamba_nki_kernels.py", "samples/tutorials"
    ),
    *_matmul_entries("samples", MM, "samples/tutorials"),
    # test_attention.py: d_head 128; seqlen 128 for v1/v2, 4096 (here 2048) for the rest; fp32
    # inputs. v1-v6 compute in fp32; v7 on keep v and the scores in bf16 (checked with
    # --no-precise: then they match to 3e-5), so they get the test's atol 1e-2 and a bf16 rtol.
    *[
        Entry(
            f"samples/tutorials/attention/attn_fwd_{v}",
            "samples",
            ATTN,
            f"attn_fwd_{v}",
            arrays=_attn_inputs(128 if v in ("v1", "v2") else 2048),
            ref="attn_tutorial",
            rtol=1e-2 if v in BF16_ATTN else 1e-3,
            atol=1e-2 if v in BF16_ATTN else 1e-3,
        )
        for v in ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v8a", "v9", "v10", "v11")
    ],
    # contributed/: shapes from each file's check_correct()
    Entry(
        "samples/contributed/interpolate_bilinear_2x",
        "samples",
        "contributed/interpolate_bilinear_fwd.py",
        "interpolate_bilinear_2x_fwd",
        {"src_arr": "float32[2,64,128,128]"},
        ref="bilinear_2x",
    ),
    Entry(
        "samples/contributed/interpolate_trilinear_2x",
        "samples",
        "contributed/interpolate_trilinear_fwd.py",
        "interpolate_trilinear_2x_fwd",
        {"src_arr": "float32[2,64,23,23,23]"},
        ref="trilinear_2x",
    ),
    Entry(
        "samples/contributed/matmul",
        "samples",
        "contributed/matmul.py",
        "matmul",
        {"A_DRAM": "float16[1024,512]", "B_DRAM": "float16[1024,2048]"},
        ref="matmul_contrib",
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples/contributed/maxpooling",
        "samples",
        "contributed/maxpooling.py",
        "max_pooling_2d_stride_1",
        {"in_tensor": "float32[448,448]", "pool_size": "3"},
        ref="maxpool2d_stride1",
    ),
    Entry(
        "samples/contributed/pipelined_attention",
        "samples",
        "contributed/pipelined_attention.py",
        "flash_fwd",
        {
            "q": "bfloat16[1,128,16384]",
            "k": "bfloat16[1,128,16384]",
            "v": "bfloat16[1,16384,128]",
            "softmax_scale": "0.125",
            "use_causal_mask": "False",
        },
        ref="pipelined_flash_fwd",
        grid=(1,),
        timeout=300,  # 51k instructions with values: about 30 s alone, more beside others
    ),
]

LEGACY_TUT = SAMPLES_TUT
NTK = "contributed/neuron-team-kernels"

SAMPLES_LEGACY_ENTRIES = [
    Entry(
        "samples@legacy/tutorials/layernorm_v1",
        "samples",
        f"{LEGACY_TUT}/layernorm/layernorm_nki_kernel.py",
        "nki_layernorm_kernel_v1",
        {
            "input_tensor": "float32[250,512]",
            "epsilon": "1e-5",
            "gamma_vector": "float32[512]",
            "beta_vector": "float32[512]",
        },
        ref="layernorm_rows",
        rev=SAMPLES_LEGACY,
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "samples@legacy/tutorials/layernorm_v2",
        "samples",
        f"{LEGACY_TUT}/layernorm/layernorm_nki_kernel.py",
        "nki_layernorm_kernel_v2",
        {
            "input_tensor": "float32[250,1000]",
            "epsilon": "1e-5",
            "gamma_vector": "float32[1000]",
            "beta_vector": "float32[1000]",
        },
        ref="layernorm_rows",
        rev=SAMPLES_LEGACY,
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "samples@legacy/tutorials/rmsnorm",
        "samples",
        f"{LEGACY_TUT}/rmsnorm/rmsnorm_nki_kernels.py",
        "nki_rmsnorm_kernel",
        {"a_tensor": "float32[250,512]", "g_tensor": "float32[512]"},
        ref="rmsnorm_rows",
        rev=SAMPLES_LEGACY,
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "samples@legacy/tutorials/softmax",
        "samples",
        f"{LEGACY_TUT}/softmax/softmax_nki_kernels.py",
        "nki_softmax_kernel",
        {"a_tensor": "float32[250,1024]"},
        ref="softmax_rows",
        rev=SAMPLES_LEGACY,
        rtol=1e-3,
        atol=1e-5,
    ),
    Entry(
        "samples@legacy/tutorials/sd_attention",
        "samples",
        f"{LEGACY_TUT}/sd_attention/sd_attention_nki_kernels.py",
        "fused_self_attn_for_SD_small_head_size",
        {"q_ref": "float32[4096,64]", "k_ref": "float32[4096,64]", "v_ref": "float32[4096,64]"},
        ref="sd_attention_tutorial",
        rev=SAMPLES_LEGACY,
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/tutorials/rotary",
        "samples",
        f"{LEGACY_TUT}/rotary/rotary_nki_kernels.py",
        "nki_apply_rotary_embedding",
        {
            "q": "float32[2,4,256,128]",
            "k": "float32[2,4,256,128]",
            "cos": "float32[2,256,128]",
            "sin": "float32[2,256,128]",
        },
        ref="rotary_tutorial",
        rev=SAMPLES_LEGACY,
        grid=(2, 4),
        rtol=1e-5,
        atol=1e-5,
    ),
    # reference/: shapes from test/unit at that revision
    Entry(
        "samples@legacy/reference/flash_fwd",
        "samples",
        f"{SAMPLES_REF}/attention.py",
        "flash_fwd",
        {
            "q": "float32[1,1,128,4096]",
            "k": "float32[1,1,128,4096]",
            "v": "float32[1,1,4096,128]",
            "seed": "None",
            "use_causal_mask": "True",
        },
        ref="flash_fwd",
        rev=SAMPLES_LEGACY,
        grid=(1, 1),
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/reference/flash_fwd_gqa_window",
        "samples",
        f"{SAMPLES_REF}/attention.py",
        "flash_fwd",
        {
            "q": "float32[1,2,128,4096]",
            "k": "float32[1,1,128,4096]",
            "v": "float32[1,1,4096,128]",
            "seed": "None",
            "use_causal_mask": "True",
            "sliding_window": "1024",
        },
        ref="flash_fwd",
        rev=SAMPLES_LEGACY,
        grid=(1, 1),
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/reference/flash_attn_bwd",
        "samples",
        f"{SAMPLES_REF}/attention.py",
        "flash_attn_bwd",
        {"seed_ref": "None", "use_causal_mask": "True", "mixed_precision": "True"},
        arrays=flash_bwd_inputs(1, 1, 1, 4096, 128),
        ref="flash_attn_bwd",
        rev=SAMPLES_LEGACY,
        grid=(1, 1),
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/reference/sd_attention_small_head",
        "samples",
        f"{SAMPLES_REF}/attention.py",
        "fused_self_attn_for_SD_small_head_size",
        {
            "q_ref": "float32[1,128,4096]",
            "k_ref": "float32[1,4096,128]",
            "v_ref": "float32[1,4096,128]",
        },
        ref="sd_attention_reference",
        rev=SAMPLES_LEGACY,
        grid=(1,),
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/reference/allocated_sd_attention",
        "samples",
        f"{SAMPLES_REF}/allocated_attention.py",
        "allocated_fused_self_attn_for_SD_small_head_size",
        {
            "q_ref": "bfloat16[1,128,4096]",
            "k_ref": "bfloat16[1,128,4096]",
            "v_ref": "bfloat16[1,4096,128]",
        },
        ref="sd_attention_allocated",
        rev=SAMPLES_LEGACY,
        grid=(1,),
    ),
    Entry(
        "samples@legacy/reference/allocated_fused_rms_norm_qkv",
        "samples",
        f"{SAMPLES_REF}/allocated_fused_linear.py",
        "allocated_fused_rms_norm_qkv",
        {"hidden": "bfloat16[1,512,1024]", "weights": "bfloat16[1024,384]"},
        ref="rmsnorm_qkv",
        rev=SAMPLES_LEGACY,
        # bf16 output of a 1024-long dot product of N(0,1) values: |out| reaches ~128, where
        # one bf16 ulp is 0.5 (and the kernel transposes its normalized rows in bf16 PSUM
        # on NC-v3), so the tolerance is absolute at the output's scale.
        rtol=2e-2,
        atol=0.5,
    ),
    Entry(
        "samples@legacy/reference/double_row_matmul",
        "samples",
        f"{SAMPLES_REF}/double_row_matmul.py",
        "quantized_double_row_matmul",
        {
            "lhs": "bfloat16[512,4096]",
            "rhs_quantized": "float8_e4m3[2048,2048]",
            "TILES_IN_BLOCK_M": "2",
            "TILES_IN_BLOCK_N": "2",
            "TILES_IN_BLOCK_K": "16",
        },
        arrays=lambda rng: {
            "rhs_scale": np.broadcast_to(rng.uniform(0.5, 2.0, (1, 1024)), (128, 1024)).astype(
                np.float32
            )
        },
        ref="double_row_matmul",
        rev=SAMPLES_LEGACY,
        rtol=1e-2,
        atol=0.05,
        note="lhs quantized to fp8 and partial sums rounded to bf16, as the kernel does",
    ),
    Entry(
        "samples@legacy/reference/select_and_scatter",
        "samples",
        f"{SAMPLES_REF}/vision.py",
        "select_and_scatter_kernel",
        {},
        arrays=lambda rng: {
            "operand_tensor": rng.random((2, 64, 56, 56)).astype(np.float32),
            "source_tensor": rng.random((2, 64, 28, 28)).astype(np.float32),
        },
        ref="select_and_scatter",
        rev=SAMPLES_LEGACY,
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "samples@legacy/reference/resize_nearest",
        "samples",
        f"{SAMPLES_REF}/vision.py",
        "resize_nearest_fixed_dma_kernel",
        {"data_tensor": "float32[2,30,20,1280]", "out_shape": "(2, 59, 38, 1280)"},
        ref="resize_nearest",
        rev=SAMPLES_LEGACY,
        grid=(2,),
    ),
    Entry(
        "samples@legacy/reference/adaptive_avg_pool2d",
        "samples",
        f"{SAMPLES_REF}/vision.py",
        "adaptive_avg_pool2d_kernel",
        {"in_tensor": "float32[1,256,13,13]", "output_size": "6"},
        ref="adaptive_avg_pool2d",
        rev=SAMPLES_LEGACY,
    ),
    Entry(
        "samples@legacy/reference/adaptive_avg_pool2d_tuple",
        "samples",
        f"{SAMPLES_REF}/vision.py",
        "adaptive_avg_pool2d_kernel",
        {"in_tensor": "float32[2,192,16,16]", "output_size": "(4, 2)"},
        ref="adaptive_avg_pool2d",
        rev=SAMPLES_LEGACY,
    ),
]

SDK_EX = "nki/examples"
SDK = [
    Entry(
        "sdk/examples/getting_started",
        "sdk",
        f"{SDK_EX}/getting_started_baremetal.py",
        "nki_tensor_add_kernel",
        {"a_input": "float32[128,512]", "b_input": "float32[128,512]"},
        ref="tensor_add",
    ),
    Entry(
        "sdk/examples/simulate_add",
        "sdk",
        f"{SDK_EX}/simulate/nki_simulate_example.py",
        "add_kernel",
        {"a_ptr": "float32[128,512]", "b_ptr": "float32[128,512]"},
        ref="add",
    ),
    Entry(
        "sdk/examples/index_case_1_split",
        "sdk",
        f"{SDK_EX}/index-case-1.py",
        "tensor_split_kernel_",
        {"in_tensor": "bfloat16[4,5]"},
        ref="split_even_odd",
    ),
    Entry(
        "sdk/examples/index_case_3_maxpool",
        "sdk",
        f"{SDK_EX}/index-case-3.py",
        "tensor_maxpool_kernel_",
        {"in_tensor": "float32[2,6,6]", "sz_pool": "2"},
        ref="maxpool2d",
    ),
    Entry(
        "sdk/examples/layout_pass_exp",
        "sdk",
        f"{SDK_EX}/layout-pass.py",
        "tensor_exp_kernel_",
        {"in_tensor": "bfloat16[128,512]"},
        ref="exp_",
    ),
    Entry(
        "sdk/examples/tensor_add",
        "sdk",
        f"{SDK_EX}/tensor_addition/tensor_addition_nki_kernels.py",
        "nki_tensor_add",
        ADD_IN,
        ref="tensor_add",
    ),
    Entry(
        "sdk/examples/transpose2d",
        "sdk",
        f"{SDK_EX}/transpose2d/transpose2d_nki_kernels.py",
        "tensor_transpose2D_kernel_",
        {"in_tensor": "int8[5,12]", "shape2D": "(3, 4)"},
        ref="transpose2d",
    ),
    Entry(
        "sdk/examples/average_pool2d",
        "sdk",
        f"{SDK_EX}/average_pool2d/average_pool2d_nki_kernels.py",
        "tensor_avgpool_kernel",
        {"in_tensor": "float16[2,6,6]", "pool_size": "2"},
        ref="avgpool2d",
    ),
    *_mamba_entries("sdk", f"{SDK_EX}/fused_mamba/mamba_nki_kernels.py", "sdk/examples"),
    *_matmul_entries(
        "sdk",
        f"{SDK_EX}/matrix_multiplication/matrix_multiplication_nki_kernels.py",
        "sdk/examples",
    ),
    # removed from the SDK docs in 38480a9f
    Entry(
        "sdk@legacy/examples/mm_nisa_spmd",
        "sdk",
        f"{SDK_EX}/mm-nisa-spmd.py",
        "matmul_128x128x512_spmd",
        {"A_T": "bfloat16[128,512]", "B": "bfloat16[128,1024]"},
        ref="matmul_A_T",
        grid=(4, 2),
        rev=SDK_LEGACY,
    ),
    Entry(
        "sdk@legacy/examples/mm_nl_spmd",
        "sdk",
        f"{SDK_EX}/mm-nl-spmd.py",
        "matmul_128x128x512_spmd",
        {"A": "bfloat16[512,128]", "B": "bfloat16[128,1024]"},
        ref="matmul_A",
        grid=(4, 2),
        rev=SDK_LEGACY,
    ),
    Entry(
        "sdk@legacy/examples/spmd_multiple_nc",
        "sdk",
        f"{SDK_EX}/tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py",
        "nki_tensor_add_nc2",
        {"a_input": "float16[512,2048]", "b_input": "float16[512,2048]"},
        ref="tensor_add",
        rev=SDK_LEGACY,
    ),
]

LIB_ENTRIES = [
    # core/cumsum: test_cumsum.py (atol 1e-3; rtol 1e-3 fp32, 1e-2 bf16); 4096 spans two free tiles
    Entry(
        "library/core/cumsum/fp32_two_tiles",
        "library",
        f"{LIB}/core/cumsum/cumsum.py",
        "cumsum",
        {"x": "float32[128,4096]"},
        ref="cumsum_last",
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "library/core/cumsum/bf16_3d",
        "library",
        f"{LIB}/core/cumsum/cumsum.py",
        "cumsum",
        {"x": "bfloat16[64,4,1024]"},
        ref="cumsum_last",
        rtol=1e-2,
        atol=1e-3,
    ),
    # core/embeddings: test_rope.py / test_rope_hf.py
    Entry(
        "library/core/rope/contiguous",
        "library",
        f"{LIB}/core/embeddings/rope.py",
        "RoPE",
        {"x_in": "bfloat16[128,8,8,128]", "cos": "bfloat16[64,8,128]", "sin": "bfloat16[64,8,128]"},
        ref="rope_lib",
        rtol=2e-2,
        atol=6e-2,
        note="products rounded to bf16 before the subtraction (exact with --no-precise)",
    ),
    Entry(
        "library/core/rope/interleaved",
        "library",
        f"{LIB}/core/embeddings/rope.py",
        "RoPE",
        {
            "x_in": "bfloat16[64,32,4,64]",
            "cos": "bfloat16[32,32,64]",
            "sin": "bfloat16[32,32,64]",
            "contiguous_layout": "False",
        },
        ref="rope_lib",
        rtol=2e-2,
        atol=6e-2,
    ),
    Entry(
        "library/core/rope/test_shape_512_heads",
        "library",
        f"{LIB}/core/embeddings/rope.py",
        "RoPE",
        {
            "x_in": "bfloat16[128,1,512,128]",
            "cos": "bfloat16[64,1,128]",
            "sin": "bfloat16[64,1,128]",
        },
        ref="rope_lib",
        rtol=2e-2,
        atol=6e-2,
        note="B*n_heads*S = 65536, inside the documented 72K limit",
    ),
    Entry(
        "library/core/rope_hf/forward",
        "library",
        f"{LIB}/core/embeddings/rope_hf.py",
        "rope_hf",
        {
            "q": "float32[1,32,256,128]",
            "k": "float32[1,8,256,128]",
            "q_out": "float32[1,32,256,128]",
            "k_out": "float32[1,8,256,128]",
            "cos": "float32[1,256,128]",
            "sin": "float32[1,256,128]",
        },
        ref="rope_hf",
    ),
    Entry(
        "library/core/rope_hf/backward",
        "library",
        f"{LIB}/core/embeddings/rope_hf.py",
        "rope_hf",
        {
            "q": "float32[1,32,256,128]",
            "k": "float32[1,8,256,128]",
            "q_out": "float32[1,32,256,128]",
            "k_out": "float32[1,8,256,128]",
            "cos": "float32[1,256,128]",
            "sin": "float32[1,256,128]",
            "backward": "True",
        },
        ref="rope_hf",
    ),
    Entry(
        "library/core/rope_hf/packed_cache_lnc2",
        "library",
        f"{LIB}/core/embeddings/rope_hf.py",
        "rope_hf",
        {
            "q": "bfloat16[2,16,512,128]",
            "k": "bfloat16[2,4,512,128]",
            "q_out": "bfloat16[2,16,512,128]",
            "k_out": "bfloat16[2,4,512,128]",
            "rope_cache": "bfloat16[512,256]",
        },
        ref="rope_hf",
        grid=(2,),
    ),
    # core/max, core/topk: test_cascaded_max.py, test_topk.py
    Entry(
        "library/core/cascaded_max/lnc1",
        "library",
        f"{LIB}/core/max/cascaded_max.py",
        "cascaded_max",
        {"input_tensor": "float32[8,5,4058]"},
        ref="cascaded_max",
    ),
    Entry(
        "library/core/cascaded_max/lnc2",
        "library",
        f"{LIB}/core/max/cascaded_max.py",
        "cascaded_max",
        {"input_tensor": "float32[2,1,16000]"},
        ref="cascaded_max",
        grid=(2,),
    ),
    Entry(
        "library/core/topk/topk_entry",
        "library",
        f"{LIB}/core/topk/rotational_topk.py",
        "topk",
        {"inp": "float32[4,5,8192]", "k": "256", "lnc": "1"},
        ref="topk",
        rtol=1e-3,
        atol=1e-5,
        note="the documented entry point; rotational_topk itself takes a config object",
    ),
    # core/subkernels: test_find_nonzero_indices.py (LNC2, exact), test_indexed_flatten.py
    Entry(
        "library/core/find_nonzero_indices/full",
        "library",
        f"{LIB}/core/subkernels/find_nonzero_indices.py",
        "find_nonzero_indices",
        {"chunk_size": "4096"},
        arrays=sparse_columns(4096, 128, 8, np.int32),
        ref="find_nonzero_indices",
        grid=(2,),
    ),
    Entry(
        "library/core/find_nonzero_indices/column_subset",
        "library",
        f"{LIB}/core/subkernels/find_nonzero_indices.py",
        "find_nonzero_indices",
        {"chunk_size": "4096", "n_cols": "16"},
        arrays=sparse_columns(4096, 128, 8, np.float32, offset=16),
        ref="find_nonzero_indices",
        grid=(2,),
    ),
    Entry(
        "library/core/indexed_flatten",
        "library",
        f"{LIB}/core/subkernels/indexed_flatten.py",
        "indexed_flatten",
        {"f_len": "128", "output_len": "9216", "padding_val": "-1"},
        arrays=lambda rng: {
            "input_tensor": np.arange(2 * 4096, dtype=np.int32).reshape(2, 4096),
            "row_offsets": np.array([0, 32], dtype=np.int32),
        },
        ref="indexed_flatten",
        grid=(2,),
    ),
    # core/subkernels: test_rmsnorm_tkg.py / test_layernorm_tkg.py (rtol 2e-2, atol 1e-5)
    Entry(
        "library/core/rmsnorm_tkg/lnc1",
        "library",
        f"{LIB}/core/subkernels/rmsnorm_tkg.py",
        "rmsnorm_tkg",
        {"input": "float16[1,8,8192]", "gamma": "float16[1,8192]", "output": "float16[128,8,64]"},
        ref="rmsnorm_tkg_lnc1",
        rtol=2e-2,
        atol=1e-5,
    ),
    Entry(
        "library/core/rmsnorm_tkg/lnc2",
        "library",
        f"{LIB}/core/subkernels/rmsnorm_tkg.py",
        "rmsnorm_tkg",
        {"input": "float16[2,8,8192]", "gamma": "float16[1,8192]", "output": "float16[128,16,64]"},
        ref="rmsnorm_tkg_lnc2",
        grid=(2,),
        rtol=2e-2,
        atol=1e-5,
    ),
    Entry(
        "library/core/rmsnorm_tkg/hidden_actual",
        "library",
        f"{LIB}/core/subkernels/rmsnorm_tkg.py",
        "rmsnorm_tkg",
        {
            "input": "float16[1,4,2048]",
            "gamma": "float16[1,2048]",
            "output": "float16[128,4,16]",
            "hidden_actual": "1920",
        },
        ref="rmsnorm_tkg_lnc1",
        rtol=2e-2,
        atol=1e-5,
    ),
    Entry(
        "library/core/layernorm_tkg/lnc1",
        "library",
        f"{LIB}/core/subkernels/layernorm_tkg.py",
        "layernorm_tkg",
        {
            "input": "float16[1,8,8192]",
            "gamma": "float16[1,8192]",
            "beta": "float16[1,8192]",
            "output": "float16[128,8,64]",
        },
        ref="layernorm_tkg_lnc1",
        rtol=2e-2,
        atol=1e-5,
    ),
    Entry(
        "library/core/layernorm_tkg/lnc2",
        "library",
        f"{LIB}/core/subkernels/layernorm_tkg.py",
        "layernorm_tkg",
        {
            "input": "float16[2,8,8192]",
            "gamma": "float16[1,8192]",
            "beta": "float16[1,8192]",
            "output": "float16[128,16,64]",
        },
        ref="layernorm_tkg_lnc2",
        grid=(2,),
        rtol=2e-2,
        atol=1e-5,
    ),
    # core/attention
    Entry(
        "library/core/gen_mask_tkg_hbm",
        "library",
        f"{LIB}/core/attention/gen_mask_tkg.py",
        "gen_mask_tkg_hbm",
        {"bs": "4", "q_head": "8", "s_active": "1", "s_prior": "512"},
        arrays=lambda rng: {"pos_ids_hbm": rng.integers(1, 513, (1, 4)).astype(np.float32)},
        ref="gen_mask_tkg_hbm",
    ),
    Entry(
        "library/core/attention_cte/causal",
        "library",
        f"{LIB}/core/attention/attention_cte.py",
        "attention_cte",
        {
            "q": "bfloat16[2,512,128]",
            "k": "bfloat16[2,128,512]",
            "v": "bfloat16[2,512,128]",
            "scale": "0.08838834764831845",
        },
        ref="attention_cte",
    ),
    Entry(
        "library/core/attention_cte/gqa_lnc2",
        "library",
        f"{LIB}/core/attention/attention_cte.py",
        "attention_cte",
        {
            "q": "bfloat16[4,1024,64]",
            "k": "bfloat16[2,64,1024]",
            "v": "bfloat16[2,1024,64]",
            "scale": "0.125",
        },
        ref="attention_cte",
        grid=(2,),
    ),
    Entry(
        "library/core/attention_bwd/causal_gqa",
        "library",
        f"{LIB}/core/attention/attention_bwd.py",
        "attention_bwd",
        {"use_causal_mask": "True"},
        arrays=flash_bwd_inputs(1, 2, 1, 1024, 128),
        ref="attention_bwd",
        rtol=1e-2,
        atol=1e-2,
    ),
    # core/output_projection, core/qkv, core/mlp: the tests' manual cases (bf16, rtol 2e-2)
    Entry(
        "library/core/output_projection_cte",
        "library",
        f"{LIB}/core/output_projection/output_projection_cte/output_projection_cte.py",
        "output_projection_cte",
        {
            "attention": "bfloat16[1,16,64,128]",
            "weight": "bfloat16[1024,3072]",
            "bias": "bfloat16[1,3072]",
        },
        ref="output_projection_cte",
    ),
    Entry(
        "library/core/output_projection_tkg",
        "library",
        f"{LIB}/core/output_projection/output_projection_tkg.py",
        "output_projection_tkg",
        {"attention": "bfloat16[64,4,8,4]", "weight": "bfloat16[512,3072]"},
        ref="output_projection_tkg",
    ),
    Entry(
        "library/core/qkv/cte_lnc2",
        "library",
        f"{LIB}/core/qkv/qkv.py",
        "qkv",
        {"input": "bfloat16[1,128,8192]", "fused_qkv_weights": "bfloat16[8192,384]"},
        ref="qkv_bsd",
        grid=(2,),
    ),
    Entry(
        "library/core/qkv/tkg",
        "library",
        f"{LIB}/core/qkv/qkv.py",
        "qkv",
        {"input": "bfloat16[1,4,4096]", "fused_qkv_weights": "bfloat16[4096,512]"},
        ref="qkv_bsd",
    ),
    Entry(
        "library/core/mlp/cte_lnc2",
        "library",
        f"{LIB}/core/mlp/mlp.py",
        "mlp",
        {
            "hidden_tensor": "bfloat16[2,1024,1024]",
            "gate_proj_weights_tensor": "bfloat16[1024,448]",
            "up_proj_weights_tensor": "bfloat16[1024,448]",
            "down_proj_weights_tensor": "bfloat16[448,1024]",
        },
        ref="mlp_silu",
        grid=(2,),
    ),
    Entry(
        "library@1edc7bb/core/mlp/cte_lnc2",
        "library",
        f"{LIB}/core/mlp/mlp.py",
        "mlp",
        {
            "hidden_tensor": "bfloat16[2,1024,1024]",
            "gate_proj_weights_tensor": "bfloat16[1024,448]",
            "up_proj_weights_tensor": "bfloat16[1024,448]",
            "down_proj_weights_tensor": "bfloat16[448,1024]",
        },
        ref="mlp_silu",
        grid=(2,),
        rev=LIB_OLDER,
        note="mlp.py at HEAD does not parse",
    ),
    Entry(
        "library@0759719/core/mlp/tkg_lnc2",
        "library",
        f"{LIB}/core/mlp/mlp.py",
        "mlp",
        {
            "hidden_tensor": "bfloat16[1,4,4096]",
            "gate_proj_weights_tensor": "bfloat16[4096,1024]",
            "up_proj_weights_tensor": "bfloat16[4096,1024]",
            "down_proj_weights_tensor": "bfloat16[1024,4096]",
        },
        ref="mlp_silu",
        grid=(2,),
        rev=LIB_PREV,
    ),
    # experimental/: nki-library pull request #1's scans; inputs as its tests draw them
    Entry(
        "library@pr1/experimental/scan/linear_scan",
        "library",
        f"{LIB}/experimental/scan/linear_scan.py",
        "linear_scan",
        {
            "decay": "float32[2,256,4096]~uniform(0,1)",
            "data": "float32[2,256,4096]",
            "initial": "float32[2,256,1]",
        },
        ref="linear_scan",
        rev=LIB_SCAN_PR,
    ),
    Entry(
        "library@pr1/experimental/scan/linear_scan_bf16",
        "library",
        f"{LIB}/experimental/scan/linear_scan.py",
        "linear_scan",
        {"decay": "bfloat16[3,2,200,3000]~uniform(0,1)", "data": "bfloat16[3,2,200,3000]"},
        ref="linear_scan",
        rev=LIB_SCAN_PR,
        # its test's tolerance: the state is carried between free tiles in the inputs' dtype
        rtol=1e-2,
        atol=1e-2,
    ),
    Entry(
        "library@pr1/experimental/scan/selective_scan",
        "library",
        f"{LIB}/experimental/scan/selective_scan.py",
        "selective_scan",
        {
            "x": "float32[2,256,1024]",
            "dt": "float32[2,256,1024]~uniform(0,0.2)",
            "A": "float32[256,16]~uniform(-1,0)",
            "B": "float32[2,16,1024]",
            "C": "float32[2,16,1024]",
            "D": "float32[256]",
            "initial_state": "float32[2,256,16]~normal(0,0.1)",
        },
        ref="selective_scan",
        rev=LIB_SCAN_PR,
    ),
    Entry(
        "library@pr1/experimental/scan/selective_scan_ragged",
        "library",
        f"{LIB}/experimental/scan/selective_scan.py",
        "selective_scan",
        {
            "x": "float32[1,200,700]",
            "dt": "float32[1,200,700]~uniform(0,0.2)",
            "A": "float32[200,8]~uniform(-1,0)",
            "B": "float32[1,8,700]",
            "C": "float32[1,8,700]",
        },
        ref="selective_scan",
        rev=LIB_SCAN_PR,
    ),
    Entry(
        "library/experimental/conv1d/pad",
        "library",
        f"{LIB}/experimental/conv/conv1d.py",
        "conv1d",
        {"x_in": "float32[1,48,64]", "filters": "float32[3,48,96]", "padding": "(1, 1)"},
        ref="conv1d",
    ),
    Entry(
        "library/experimental/conv1d/bias_stride_dilation",
        "library",
        f"{LIB}/experimental/conv/conv1d.py",
        "conv1d",
        {
            "x_in": "float32[2,64,40]",
            "filters": "float32[5,64,128]",
            "bias": "float32[128]",
            "stride": "2",
            "padding": "(2, 2)",
            "dilation": "2",
        },
        ref="conv1d",
    ),
    Entry(
        "library/experimental/depthwise_conv1d/k7",
        "library",
        f"{LIB}/experimental/conv/depthwise_conv1d.py",
        "depthwise_conv1d_implicit_gemm",
        {
            "img_ref": "bfloat16[1,16,1,512]",
            "filter_ref": "bfloat16[16,1,1,7]",
            "feature_group_count": "16",
        },
        ref="depthwise_conv1d",
        grid=(2,),
    ),
    Entry(
        "library/experimental/depthwise_conv1d/stride2_pad5",
        "library",
        f"{LIB}/experimental/conv/depthwise_conv1d.py",
        "depthwise_conv1d_implicit_gemm",
        {
            "img_ref": "bfloat16[1,256,1,512]",
            "filter_ref": "bfloat16[256,1,1,64]",
            "stride": "(1, 2)",
            "padding": "((0, 0), (5, 5))",
            "feature_group_count": "256",
        },
        ref="depthwise_conv1d",
        grid=(2,),
    ),
    Entry(
        "library/experimental/dynamic_elementwise_add",
        "library",
        f"{LIB}/experimental/dynamic_shapes/dynamic_elementwise_add.py",
        "dynamic_elementwise_add",
        {"input_a": "bfloat16[512,1024]", "input_b": "bfloat16[512,1024]"},
        arrays=lambda rng: {"num_m_tiles": np.array([[4]], dtype=np.int32)},
        ref="dynamic_add",
    ),
    Entry(
        "library/experimental/cross_entropy_forward",
        "library",
        f"{LIB}/experimental/loss/cross_entropy.py",
        "cross_entropy_forward",
        {"logits_hbm": "bfloat16[64,8192]", "positions_per_batch": "16", "chunk_size": "8192"},
        arrays=ce_targets(64, 8192),
        ref="cross_entropy_forward",
        grid=(2,),
        rtol=2e-2,
        atol=5e-2,
    ),
    Entry(
        "library/experimental/cross_entropy_backward",
        "library",
        f"{LIB}/experimental/loss/cross_entropy.py",
        "cross_entropy_backward",
        {"positions_per_batch": "16", "chunk_size": "8192"},
        arrays=ce_backward_inputs(64, 8192),
        ref="cross_entropy_backward",
        grid=(2,),
        rtol=2e-2,
        atol=1e-5,
    ),
    Entry(
        "library/experimental/find_nonzero_indices_with_count",
        "library",
        f"{LIB}/experimental/benchmark/find_nonzero_indices_with_count.py",
        "find_nonzero_indices_with_count",
        {},
        arrays=lambda rng: {"input_tensor": (rng.random((1, 4096)) < 0.05).astype(np.int32)},
        ref="find_nonzero_with_count",
    ),
]

NTK_ENTRIES = [
    Entry(
        "samples@legacy/neuron-team-kernels/RoPE",
        "samples",
        f"{NTK}/RoPE.py",
        "RoPE",
        {
            "x_in": "float32[128,512]",
            "cos": "float32[64,512]",
            "sin": "float32[64,512]",
            "x_out": "float32[128,512]",
        },
        ref="ntk_rope",
        rev=SAMPLES_LEGACY,
    ),
    Entry(
        "samples@legacy/neuron-team-kernels/cumsum",
        "samples",
        f"{NTK}/cumsum.py",
        "cumsum",
        {"x": "float32[256,3000]", "y": "float32[256,3000]", "axis": "-1"},
        ref="cumsum_last",
        rev=SAMPLES_LEGACY,
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "samples@legacy/neuron-team-kernels/transpose_210",
        "samples",
        f"{NTK}/transpose.py",
        "tiled_dve_transpose_210",
        {"img_ref": "float32[128,8,16,32]"},
        ref="transpose_210",
        rev=SAMPLES_LEGACY,
    ),
    Entry(
        "samples@legacy/neuron-team-kernels/transpose_10",
        "samples",
        f"{NTK}/transpose.py",
        "tiled_dve_transpose_10",
        {"img_ref": "bfloat16[128,64,96]", "permutation": "(0, 2, 1)"},
        ref="transpose_perm",
        rev=SAMPLES_LEGACY,
    ),
]

MX_ENTRIES = [
    Entry(
        "samples/tutorials/mxfp_matmul/copy_strided",
        "samples",
        f"{SAMPLES_TUT}/mxfp-matmul/mx_kernels.py",
        "kernel_copy_strided_quantize_matmul_mx",
        {
            "stationary_hbm": "bfloat16[512,128]",
            "moving_hbm": "bfloat16[512,512]",
            "mx_dtype": "'float8_e4m3fn_x4'",
        },
        ref="mx_matmul",
        target="trn3",
        # The reference is the unquantized product; both operands are quantized to MXFP8
        # (e4m3: 3 mantissa bits, a relative rounding error up to 2^-4 per element). Over
        # K = 512 products of unit-normal inputs that error has a std of about
        # 2^-4 * sqrt(2 * 512 / 3) ~ 1.2, so 1.0 failed ~3% of elements by rounding alone
        # (measured: std 0.85, max 3.95); 6.0 is ~5 of those stds, and a wrong layout
        # (errors of the result's own size, std ~23) still fails.
        rtol=0.1,
        atol=6.0,
        note="mx_dtype is an nl dtype in the tutorial; a SPEC can only pass its name",
    ),
]

ISA = "nki/test"
SDK_ISA = [
    Entry(
        "sdk/isa/activation",
        "sdk",
        f"{ISA}/test_nki_isa_activation.py",
        "nki_activation",
        {
            "a_tensor": "float32[128,1024]",
            "b_tensor": "float32[128,512]",
            "c_tensor": "float32[128,1]",
        },
        ref="isa_activation",
        rtol=1e-2,
        atol=1e-2,
        note="the second output is computed in bf16",
    ),
    Entry(
        "sdk/isa/affine_select",
        "sdk",
        f"{ISA}/test_nki_isa_affine_select.py",
        "nki_affine_select",
        {"a_tensor": "float32[128,128]"},
        ref="isa_affine_select",
    ),
    Entry(
        "sdk/isa/bn_stats_aggr",
        "sdk",
        f"{ISA}/test_nki_isa_bn_stats.py",
        "nki_bn_stats_bn_aggr_1",
        {"a_tensor": "float32[128,128]"},
        ref="row_mean_var",
    ),
    Entry(
        "sdk/isa/bn_stats_aggr_tiled",
        "sdk",
        f"{ISA}/test_nki_isa_bn_stats.py",
        "nki_bn_stats_bn_aggr_2",
        {"b_tensor": "float32[128,1024]"},
        ref="row_mean_var",
    ),
    Entry(
        "sdk/isa/copy_predicated",
        "sdk",
        f"{ISA}/test_nki_isa_copypredicated.py",
        "nki_copy_predicated",
        {"on_true_tensor": "float32[128,512]", "on_false_tensor": "float32[128,512]"},
        arrays=lambda rng: {"predicate": (rng.random((128, 512)) < 0.5).astype(np.uint8)},
        ref="copy_predicated",
    ),
    Entry(
        "sdk/isa/nc_transpose",
        "sdk",
        f"{ISA}/test_nki_isa_nc_transpose.py",
        "nki_nc_transpose",
        {"a_tensor": "float32[128,64]", "b_tensor": "float32[32,2]"},
        ref="two_transposes",
    ),
    Entry(
        "sdk/isa/nc_matmul",
        "sdk",
        f"{ISA}/test_nki_isa_nc_matmul.py",
        "nki_nc_matmul",
        {
            "a_tensor": "float32[128,128]",
            "b_tensor": "float32[128,512]",
            "d_tensor": "float32[256,128]",
            "e_tensor": "float32[256,512]",
            "g_tensor": "float32[16,64,64]",
            "h_tensor": "float32[16,64,512]",
        },
        ref="three_matmuls",
        rtol=1e-3,
        atol=1e-3,
    ),
    Entry(
        "sdk/isa/local_gather",
        "sdk",
        f"{ISA}/test_nki_isa_local_gather.py",
        "nki_local_gather",
        {
            "src_buffer": "float32[128,512,4]",
            "num_elem_per_idx": "4",
            "num_valid_indices": "64",
            "output_shape": "(128, 4, 16, 4)",
        },
        arrays=lambda rng: {
            "index": np.tile(rng.integers(0, 512, (16, 4)), (8, 1)).astype(np.uint16) * 4
        },
        ref="local_gather",
    ),
    Entry(
        "sdk/isa/select_reduce",
        "sdk",
        f"{ISA}/test_nki_isa_select_reduce.py",
        "nki_select_reduce_with_reduction",
        {"on_true_data": "float32[128,512]", "on_false_data": "float32[128,1]"},
        arrays=lambda rng: {"predicate_data": (rng.random((128, 512)) < 0.5).astype(np.uint8)},
        ref="select_reduce_max",
    ),
    Entry(
        "sdk/isa/tensor_reduce",
        "sdk",
        f"{ISA}/test_nki_isa_reduce.py",
        "nki_reduce",
        {"a_tensor": "float32[128,512]"},
        ref="row_sum",
    ),
    Entry(
        "sdk/isa/tensor_scalar",
        "sdk",
        f"{ISA}/test_nki_isa_tensor_scalar.py",
        "nki_tensor_scalar",
        {
            "a_tensor": "float32[128,512]",
            "c_tensor": "float32[128,512]",
            "e_tensor": "float32[64,1024]",
            "f_tensor": "float32[64,1]",
        },
        ref="three_tensor_scalars",
    ),
    Entry(
        "sdk/isa/tensor_tensor",
        "sdk",
        f"{ISA}/test_nki_isa_tensor_tensor.py",
        "nki_tensor_tensor",
        {"a_tensor": "float32[128,512]", "b_tensor": "float32[128,512]"},
        ref="add",
    ),
    Entry(
        "sdk/isa/tensor_tensor_scan",
        "sdk",
        f"{ISA}/test_nki_isa_tensor_tensor_scan.py",
        "nki_tensor_tensor_scan",
        {},
        arrays=uniform_inputs({"a_tensor": (128, 1024), "b_tensor": (128, 1024)}),
        ref="scan_mul_add",
        rtol=1e-4,
        atol=1e-4,
    ),
    Entry(
        "sdk/isa/reciprocal",
        "sdk",
        f"{ISA}/test_nki_isa_reciprocal.py",
        "reciprocal_kernel",
        {},
        arrays=uniform_inputs({"in_tensor": (128, 512)}, 1.0, 100.0),
        ref="reciprocal",
    ),
    Entry(
        "sdk/isa/dma_transpose_hbm2sb",
        "sdk",
        f"{ISA}/test_nki_isa_dma_transpose.py",
        "nki_dma_transpose_2d_hbm2sb",
        {"a": "float32[64,128]"},
        ref="transpose_2d",
    ),
    Entry(
        "sdk/isa/nc_stream_shuffle",
        "sdk",
        f"{ISA}/test_nki_isa_nc_stream_shuffle.py",
        "nki_nc_stream_shuffle_broadcast_mask",
        {"in_tensor": "float32[128,128]"},
        ref="rotate_partitions_by_one",
    ),
    Entry(
        "sdk/nl/add_broadcast_free_dim",
        "sdk",
        f"{ISA}/test_nki_nl_add.py",
        "add_broadcast_free_dim",
        {"a_tensor": "float32[128,512]", "b_tensor": "float32[128,1]"},
        ref="add",
    ),
    Entry(
        "sdk/nl/add_broadcast_par_dim",
        "sdk",
        f"{ISA}/test_nki_nl_add.py",
        "add_broadcast_par_dim",
        {"a_tensor": "float32[128,512]", "b_tensor": "float32[1,512]"},
        ref="add",
    ),
    Entry(
        "sdk/nl/add_tensor_scalar",
        "sdk",
        f"{ISA}/test_nki_nl_add.py",
        "add_tensor_scalar",
        {"a_tensor": "float32[128,512]"},
        ref="add_scalar_2_2",
    ),
    Entry(
        "sdk/spmd_grid",
        "sdk",
        f"{ISA}/test_nki_spmd_grid.py",
        "nki_spmd_kernel",
        {"a": "float32[4,2,1,1]"},
        ref="identity",
        grid=(4, 2),
    ),
    Entry(
        "sdk/sbuf_modulo_alloc",
        "sdk",
        f"{ISA}/test_sbuf_modulo_alloc.py",
        "allocated_loop_transpose",
        {"a_ptr": "float32[512,256]", "tp_ptr": "float32[256,512]"},
        ref="transpose_into",
        note="shape shrunk from the test's [2048, 1024]",
    ),
    Entry(
        "sdk/psum_modulo_alloc",
        "sdk",
        f"{ISA}/test_psum_modulo_alloc.py",
        "allocated_loop_transpose",
        {"a_ptr": "float32[512,256]", "tp_ptr": "float32[256,512]"},
        ref="transpose_into",
    ),
]

# ==== kernels of other repositories ==========================================================

# vLLM's NKI paged attention (aws-neuron/upstreaming-to-vllm), as its docstring and its
# wrapper `flash_attn_varlen_nkifunc` describe it: query [1, h, d, sq], the new tokens' key
# [1, kvh, d, sq] and value [1, kvh, sq, d], a paged cache [2, blocks, kvh, block, d] read
# through `block_tables`, and an int mask [sq, context + sq] (nonzero: attend) whose context
# columns come reordered per large tile (`reorder_context_mask`).
VLLM_D, VLLM_SQ = 128, 256
VLLM_BLOCKS, VLLM_BLOCK, VLLM_ACTIVE, VLLM_LARGE_TILE = 48, 32, 128, 2048


def _vllm_tiling() -> tuple[int, int]:
    """(tokens a DMA row gathers, rows a large tile is read in): the kernel reads each large
    tile as 128 rows of `LARGE_TILE / 128` tokens and takes the tokens column by column."""
    rows = max(128, VLLM_LARGE_TILE // VLLM_BLOCK)
    return VLLM_LARGE_TILE // rows, rows


def vllm_paged_inputs(heads: int, kv_heads: int) -> Callable[[np.random.Generator], dict]:
    def make(rng: np.random.Generator) -> dict[str, np.ndarray]:
        sq, context = VLLM_SQ, VLLM_ACTIVE * VLLM_BLOCK
        logical = np.ones((sq, context + sq), dtype=np.int32)
        logical[:, context:] = causal_mask(sq, sq)  # the new tokens: causal
        logical[sq // 2 :, : context // 3] = 0  # half the queries see only the later context
        per_row, rows = _vllm_tiling()
        reordered = logical.copy()
        tiles = logical[:, :context].reshape(
            sq, context // VLLM_LARGE_TILE, rows // 128, 128, per_row
        )
        reordered[:, :context] = tiles.transpose(0, 1, 2, 4, 3).reshape(sq, context)
        cache = (2, VLLM_BLOCKS, kv_heads, VLLM_BLOCK, VLLM_D)
        return {
            "query": rng.uniform(-1, 1, (1, heads, VLLM_D, sq)).astype(np.float32),
            "key": rng.uniform(-1, 1, (1, kv_heads, VLLM_D, sq)).astype(np.float32),
            "value": rng.uniform(-1, 1, (1, kv_heads, sq, VLLM_D)).astype(np.float32),
            "kv_cache": rng.uniform(-1, 1, cache).astype(np.float32),
            "block_tables": rng.integers(0, VLLM_BLOCKS, VLLM_ACTIVE).astype(np.int32),
            "mask": reordered,
        }

    return make


def vllm_paged_attention(query, key, value, kv_cache, block_tables, mask, **_):
    """o [1, h, sq, d]: softmax(q k^T / sqrt(d)) v over the context tokens (from the cache,
    token t in block block_tables[t // block] at t % block) then the new tokens, where the
    mask (its context columns put back in token order) allows; GQA: head h reads kv head
    h // (heads / kv heads)."""
    q, k_new, v_new, cache = f64(query)[0], f64(key)[0], f64(value)[0], f64(kv_cache)
    heads, d, sq = q.shape
    context = len(block_tables) * cache.shape[3]
    per_row, rows = _vllm_tiling()
    logical = np.array(mask)
    tiles = logical[:, :context].reshape(sq, context // VLLM_LARGE_TILE, rows // 128, per_row, 128)
    logical[:, :context] = tiles.transpose(0, 1, 2, 4, 3).reshape(sq, context)
    token = np.arange(context)
    blocks = np.asarray(block_tables)[token // cache.shape[3]]
    out = np.zeros((1, heads, sq, d))
    for h in range(heads):
        kv = h // (heads // cache.shape[2])
        keys = np.concatenate([cache[0, blocks, kv, token % cache.shape[3]], k_new[kv].T])
        values = np.concatenate([cache[1, blocks, kv, token % cache.shape[3]], v_new[kv]])
        scores = np.where(logical != 0, q[h].T @ keys.T / np.sqrt(d), -np.inf)
        out[0, h] = softmax(scores) @ values
    return out


VLLM_KERNEL = "vllm/attention/ops/nki_flash_attn.py"
OTHER_ENTRIES = [
    Entry(
        "vllm/paged_attention_gqa",
        "vllm",
        VLLM_KERNEL,
        "flash_paged_attention",
        {},
        arrays=vllm_paged_inputs(4, 2),
        ref="vllm_paged_attention",
        grid=(1, 2),  # (one instance per kv head, as its wrapper launches it)
        # bf16 keeps 8 significant bits: p and v each off by at most 2**-9 of themselves,
        # so an output (a p-weighted mean of |v| ~ 0.5) by about 2 * 2**-9 * 0.5 = 2e-3
        rtol=2e-2,
        atol=2e-3,
        note="mixed precision: q, k, p and v rounded to bf16 for the Tensor engine",
    ),
    Entry(
        "vllm/paged_attention_mha_fp32",
        "vllm",
        VLLM_KERNEL,
        "flash_paged_attention",
        {"mixed_precision": "False"},
        arrays=vllm_paged_inputs(2, 2),
        ref="vllm_paged_attention",
        grid=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
]

ENTRIES: list[Entry] = [
    *SAMPLES,
    *MX_ENTRIES,
    *SAMPLES_LEGACY_ENTRIES,
    *NTK_ENTRIES,
    *SDK,
    *SDK_ISA,
    *LIB_ENTRIES,
    *OTHER_ENTRIES,
]
