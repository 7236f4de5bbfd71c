"""NKI features kernels outside the samples use (issue 41, point 3, part A), each against
NumPy computed here: a mask over two nl.arange indices (a flat add, a padded max-pool),
`nl.dropout`, `nl.broadcast_to` of an N-d tile across partitions, `.broadcast(0, n)` of an
HBM tensor, a dead `nl.zeros` PSUM tile in a device loop, an HBM tensor indexed by a tile
(a gather or scatter by indirect DMA)."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import ConstraintError, KernelTypeError, MemoryAccessError

LEGACY = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n"
)
CURRENT = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
RNG = np.random.default_rng(41)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# A 1-d vector added in [128, 512] tiles of its flat index, the tail masked by one
# condition over both indices (nki-samples' own reference add kernel writes it so).
FLAT_ADD = """
@nki.jit
def k(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for t in nl.affine_range((n + 65535) // 65536):
        flat = t * 65536 + i_p * 512 + i_f
        x = nl.load(a[flat], mask=(flat < n))
        y = nl.load(b[flat], mask=(flat < n))
        nl.store(out[flat], value=nl.add(x, y), mask=(flat < n))
    return out
"""


@pytest.mark.parametrize("n", [65536 + 4096, 65536 * 2 + 1000, 700, 512])
def test_a_mask_over_partition_and_free_index_keeps_exactly_the_flat_prefix(kernel_file, n):
    a, b = rand(n), rand(n)
    result = neuronemu.run(kernel_file(LEGACY + FLAT_ADD), {"a": a, "b": b})
    np.testing.assert_array_equal(result.outputs["out"], a + b)


def test_a_ragged_row_is_its_own_instruction_after_the_full_rows(kernel_file):
    n = 3 * 512 + 100  # three whole rows, then 100 elements of the fourth
    a, b = rand(n), rand(n)
    result = neuronemu.run(kernel_file(LEGACY + FLAT_ADD), {"a": a, "b": b})
    stores = [i for i in result.program.instrs if i.spec.name == "dma_copy"][-2:]
    assert [i.operands["dst"].shape for i in stores] == [(3, 512), (1, 100)]


POOL = """
@nki.jit
def pool(x, k, pad, stride):
    C, H, W = x.shape
    ho = (H + 2 * pad - k) // stride + 1
    wo = (W + 2 * pad - k) // stride + 1
    out = nl.ndarray((C, ho, wo), dtype=x.dtype, buffer=nl.shared_hbm)
    i_c = nl.arange(C)[:, None, None, None, None]
    i_h = nl.arange(ho)[None, :, None, None, None]
    i_w = nl.arange(wo)[None, None, :, None, None]
    i_kh = nl.arange(k)[None, None, None, :, None]
    i_kw = nl.arange(k)[None, None, None, None, :]
    t = nl.load(x)
    rows = stride * i_h - pad + i_kh
    cols = stride * i_w - pad + i_kw
    r = nl.max(t[i_c, rows, cols], axis=[3, 4],
               mask=(rows >= 0) & (cols >= 0) & (rows < H) & (cols < W))
    nl.store(out, value=r)
    return out
"""


def max_pool(x: np.ndarray, k: int, pad: int, stride: int) -> np.ndarray:
    c, h, w = x.shape
    padded = np.full((c, h + 2 * pad, w + 2 * pad), -np.inf, np.float32)
    padded[:, pad : pad + h, pad : pad + w] = x
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.empty((c, ho, wo), np.float32)
    for i in range(ho):
        for j in range(wo):
            window = padded[:, i * stride : i * stride + k, j * stride : j * stride + k]
            out[:, i, j] = window.max(axis=(1, 2))
    return out


@pytest.mark.parametrize(
    ("shape", "k", "pad", "stride"), [((16, 10, 9), 3, 1, 2), ((8, 7, 7), 4, 1, 2)]
)
def test_a_padded_max_pool_masks_each_window_to_the_image(kernel_file, shape, k, pad, stride):
    x = rand(*shape)
    path = kernel_file(LEGACY + POOL)
    result = neuronemu.run(path, {"x": x, "k": k, "pad": pad, "stride": stride})
    np.testing.assert_array_equal(result.outputs["out"], max_pool(x, k, pad, stride))


def test_a_row_sum_under_a_triangular_mask_reduces_each_row_to_its_own_length(kernel_file):
    x = rand(16, 16)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((16, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(16)[:, None]
    i_f = nl.arange(16)[None, :]
    t = nl.load(x)
    s = nl.zeros((16, 1), dtype=x.dtype, buffer=nl.sbuf)
    s[...] = nl.sum(t, axis=1, mask=(i_f - i_p <= 0))
    nl.store(out, value=s)
    return out
"""
    result = neuronemu.run(kernel_file(LEGACY + body), {"x": x})
    np.testing.assert_allclose(
        result.outputs["out"][:, 0], np.tril(x).sum(axis=1), rtol=1e-6, atol=1e-6
    )


def test_a_two_index_mask_that_would_write_one_element_twice_is_refused(kernel_file):
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i_a = nl.arange(4)[None, :, None]
    i_b = nl.arange(8)[None, None, :]
    t = nl.load(x)
    s = nl.sum(t, axis=[1, 2], mask=(i_a * 8 + i_b < 20))
    nl.store(out, value=s)
    return out
"""
    with pytest.raises(KernelTypeError, match=r"does not vary along that axis") as info:
        neuronemu.run(kernel_file(LEGACY + body), {"x": rand(128, 4, 8)})
    assert (info.value.span.line, info.value.span.col) == (13, 9)


def test_a_two_index_mask_on_a_matmul_is_refused_with_why(kernel_file):
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    t = nl.load(x)
    r = nl.transpose(t, mask=(i_p + i_f < 128))
    nl.store(out, value=r)
    return out
"""
    with pytest.raises(KernelTypeError, match=r"nc_transpose cannot be split") as info:
        neuronemu.run(kernel_file(LEGACY + body), {"x": rand(128, 128)})
    assert info.value.span.line == 13


# nl.dropout(x, rate, dtype=None): each element zeroed with probability `rate`, the rest
# unchanged (nki.language.dropout); the Vector engine's generator seeded first.
DROPOUT = """
@nki.jit
def k(x, seed=%(seed)s):
    out = nl.ndarray(x.shape, dtype=%(dtype)s, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    %(seeding)s
    %(rate_tile)s
    d = nl.dropout(t, %(rate)s%(cast)s)
    nisa.dma_copy(dst=out, src=d)
    return out
"""
SEEDING = """s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=seed)
    nisa.set_rng_seed(s)"""


def dropout(kernel_file, x, rate="0.5", rate_tile="", cast="", seed=7, seeding=SEEDING, **inputs):
    dtype = "x.dtype" if not cast else cast.split("=")[1]
    fields = dict(seed=seed, seeding=seeding, rate=rate, rate_tile=rate_tile, cast=cast)
    source = CURRENT + DROPOUT % (fields | {"dtype": dtype})
    return neuronemu.run(kernel_file(source), {"x": x, **inputs}).outputs["out"]


def test_dropout_at_rate_zero_keeps_x_and_at_rate_one_zeroes_it(kernel_file):
    x = rand(128, 64)
    np.testing.assert_array_equal(dropout(kernel_file, x, "0.0"), x)
    np.testing.assert_array_equal(dropout(kernel_file, x, "1.0"), np.zeros_like(x))


def test_dropout_zeroes_about_rate_of_the_elements_and_keeps_the_rest_unscaled(kernel_file):
    x = rand(128, 512) + 10.0  # (no element is zero of itself)
    out = dropout(kernel_file, x, "0.3")
    kept = out != 0
    np.testing.assert_array_equal(out[kept], x[kept])  # not rescaled by 1 / (1 - rate)
    assert abs((~kept).mean() - 0.3) < 0.01
    again = dropout(kernel_file, x, "rate=0.3")
    np.testing.assert_array_equal(out, again)  # the same seed, the same elements
    other = dropout(kernel_file, x, "0.3", seed=8)
    assert not np.array_equal(out, other)


def test_dropout_takes_a_rate_per_partition(kernel_file):
    x = rand(128, 32) + 10.0
    rates = np.where(np.arange(128) % 2 == 0, 0.0, 1.0).astype(np.float32).reshape(128, 1)
    tile = """r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=rates)"""
    source = CURRENT + DROPOUT.replace("def k(x,", "def k(x, rates,") % dict(
        seed=7, seeding=SEEDING, rate="r", rate_tile=tile, cast="", dtype="x.dtype"
    )
    out = neuronemu.run(kernel_file(source), {"x": x, "rates": rates}).outputs["out"]
    np.testing.assert_array_equal(out[0::2], x[0::2])
    np.testing.assert_array_equal(out[1::2], 0.0)


def test_dropout_with_a_one_element_rate_tile_applies_it_to_every_partition(kernel_file):
    x = rand(128, 16) + 10.0
    tile = """r = nl.full((1, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)"""
    np.testing.assert_array_equal(dropout(kernel_file, x, "r", rate_tile=tile), 0.0)


def test_dropout_casts_to_the_dtype_it_is_given(kernel_file):
    import ml_dtypes

    x = rand(128, 64) + 10.0
    out = dropout(kernel_file, x, "0.5", cast=", dtype=nl.bfloat16")
    assert out.dtype == ml_dtypes.bfloat16
    kept = out != 0
    np.testing.assert_array_equal(out[kept], x[kept].astype(ml_dtypes.bfloat16))
    assert 0.4 < (~kept).mean() < 0.6


def test_dropout_refuses_a_rate_that_is_not_a_probability(kernel_file):
    with pytest.raises(KernelTypeError, match=r"rate 1.5 is not a probability") as info:
        dropout(kernel_file, rand(128, 8), "1.5")
    assert info.value.span.line == 15


def test_dropout_before_the_generator_is_seeded_is_an_uninitialized_read(kernel_file):
    # The docs do not say what the generator holds before a seed: a located error.
    with pytest.raises(MemoryAccessError, match=r"dropout reads rng_state") as info:
        dropout(kernel_file, rand(128, 8), "0.5", seeding="pass")
    assert info.value.span.line == 13


BROADCAST = """
@nki.jit
def k(x):
    out = nl.ndarray(%(shape)s, dtype=%(dtype)s, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    b = nl.broadcast_to(t%(view)s, shape=%(shape)s%(cast)s)
    nisa.dma_copy(dst=out, src=b)
    return out
"""


@pytest.mark.parametrize(
    ("src", "shape"),
    [
        ((1, 4, 8), (128, 4, 8)),  # across partitions only
        ((1, 1, 8), (64, 3, 8)),  # and along a free dim (a stride-0 row, copied first)
        ((1, 2, 3, 130), (96, 2, 3, 130)),  # a row of 780: two PSUM banks
    ],
)
def test_broadcast_to_spreads_an_nd_row_across_partitions(kernel_file, src, shape):
    x = rand(*src)
    fields = dict(shape=shape, dtype="x.dtype", view="", cast="")
    out = neuronemu.run(kernel_file(CURRENT + BROADCAST % fields), {"x": x}).outputs["out"]
    np.testing.assert_array_equal(out, np.broadcast_to(x, shape))


def test_broadcast_to_of_a_strided_3d_view_casts_to_the_dtype_given(kernel_file):
    import ml_dtypes

    x = rand(1, 4, 10)
    fields = dict(shape=(32, 4, 5), dtype="nl.bfloat16", view="[:, :, 0:10:2]")
    source = CURRENT + BROADCAST % (fields | {"cast": ", dtype=nl.bfloat16"})
    out = neuronemu.run(kernel_file(source), {"x": x}).outputs["out"]
    want = np.broadcast_to(x[:, :, ::2], (32, 4, 5)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out, want)


# An RMSNorm's weight: gamma [F] read as P identical rows straight from HBM (stride 0).
RMS_WEIGHT = """
@nki.jit
def k(x, gamma):
    P, F = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.load(%s)
    t = nl.load(x)
    nl.store(out, value=nl.multiply(t, g))
    return out
"""


@pytest.mark.parametrize(
    "view",
    ["gamma.reshape((1, F)).broadcast(0, P)", "gamma.expand_dim(0).broadcast(dim=0, size=P)"],
)
def test_an_hbm_tensor_broadcasts_its_dim_0(kernel_file, view):
    x, gamma = rand(128, 64), rand(64)
    path = kernel_file(LEGACY + RMS_WEIGHT % view)
    out = neuronemu.run(path, {"x": x, "gamma": gamma}).outputs["out"]
    np.testing.assert_array_equal(out, x * gamma[None, :])


def test_an_hbm_broadcast_is_a_dma_of_the_row_repeated(kernel_file):
    x, gamma = rand(16, 8), rand(8)
    path = kernel_file(LEGACY + RMS_WEIGHT % "gamma.reshape((1, F)).broadcast(0, P)")
    load = neuronemu.run(path, {"x": x, "gamma": gamma}).program.instrs[0]
    assert load.spec.name == "dma_copy"
    assert load.operands["src"].as_pattern()[1][0] == (0, 16)  # dim 0 steps by 0


def test_an_on_chip_tensor_still_cannot_broadcast_its_partition_dim(kernel_file):
    body = """
@nki.jit
def k(x):
    t = nl.load(x)
    u = nl.copy(t.broadcast(0, 4))
    return x
"""
    with pytest.raises(KernelTypeError, match=r"on chip, the partition dim cannot be broadcast"):
        neuronemu.run(kernel_file(LEGACY + body), {"x": rand(1, 8)})


# Eight PSUM banks accumulate each iteration of a device loop; a ninth tile is zeroed with
# nl.zeros and never used (a leftover): it is dead, and must not take a bank of its own.
DEAD_ZEROS = """
@nki.jit
def k(a, b, n):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.load(a)
    bt = nl.load(b)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    s = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    kept = []

    def body(i):
        dead = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        kept.append(dead)
        accs = []
        for j in range(8):
            acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
            acc += nl.matmul(at, bt, transpose_x=True)
            accs.append(acc)
        for j in range(8):
            s[...] = nl.add(s, accs[j])

    nl.fori_loop(0, nisa.scalar_load(n_sb), body)
    nl.store(out, value=%s)
    return out
"""


@pytest.mark.parametrize("n", [1, 3])
def test_a_dead_psum_zeros_in_a_device_loop_takes_no_bank(kernel_file, n):
    a, b = rand(128, 128), rand(128, 512)
    count = np.array([[n]], dtype=np.int32)
    result = neuronemu.run(kernel_file(CURRENT + DEAD_ZEROS % "s"), {"a": a, "b": b, "n": count})
    want = n * 8 * (a.T.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(result.outputs["out"], want, rtol=1e-4, atol=1e-2)
    fills = [i for i in result.program.instrs if i.spec.name == "memset"]
    assert all(i.operands["dst"].buffer.name != "PSUM" for i in fills)  # no fill of `dead`


def test_a_zeros_tile_of_a_loop_body_used_after_the_loop_is_still_refused(kernel_file):
    a, b, count = rand(128, 128), rand(128, 512), np.array([[1]], dtype=np.int32)
    path = kernel_file(CURRENT + DEAD_ZEROS % "kept[0]")
    with pytest.raises(ConstraintError, match=r"allocated inside the device loop") as info:
        neuronemu.run(path, {"a": a, "b": b, "n": count})
    assert info.value.span.line == 28


# nki.language.load / store: "Also supports indirect DMA access with dynamic index values";
# the row indices in an SBUF tile, [K, 1] (or a column of one, idx_tile[i_p, 0]).
GATHERS = """
@nki.jit
def by_column(data, indices):
    out = nl.ndarray([64, data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(data.shape[1])[None, :]
    idx = nl.load(indices[i_p])
    nl.store(out, value=nl.load(data[idx[i_p, 0], i_f]))
    return out


@nki.jit
def by_iota(data):
    out = nl.ndarray([64, data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(data.shape[1])[None, :]
    idx = nisa.iota(3 * nl.arange(64)[:, None] + 1, dtype=np.int32)
    nl.store(out, value=nl.load(data[idx, i_f]))
    return out


@nki.jit
def whole_rows(data, indices):
    out = nl.ndarray([indices.shape[0], data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.load(indices)
    nl.store(out, value=nl.load(data[idx]))
    return out


@nki.jit
def scatter(data, indices):
    out = nl.ndarray([200, data.shape[1]], dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((100, data.shape[1]), dtype=data.dtype)
    nl.store(out[0:100, :], value=zero)
    nl.store(out[100:200, :], value=zero)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(data.shape[1])[None, :]
    idx = nl.load(indices[i_p])
    nl.store(out[idx[i_p, 0], i_f], value=nl.load(data))
    return out
"""


def test_a_load_indexed_by_a_column_of_an_index_tile_gathers_those_rows(kernel_file):
    data, indices = rand(300, 96), RNG.permutation(300)[:64].astype(np.int32)
    path = kernel_file(LEGACY + GATHERS)
    result = neuronemu.run(path, {"data": data, "indices": indices}, kernel="by_column")
    np.testing.assert_array_equal(result.outputs["out"], data[indices])


def test_a_load_indexed_by_an_iota_tile_gathers_every_third_row(kernel_file):
    data = rand(200, 40)
    result = neuronemu.run(kernel_file(LEGACY + GATHERS), {"data": data}, kernel="by_iota")
    np.testing.assert_array_equal(result.outputs["out"], data[3 * np.arange(64) + 1])


def test_a_load_indexed_by_a_tile_alone_gathers_whole_rows(kernel_file):
    data, indices = rand(50, 24), RNG.integers(0, 50, (128, 1)).astype(np.uint32)
    path = kernel_file(LEGACY + GATHERS)
    result = neuronemu.run(path, {"data": data, "indices": indices}, kernel="whole_rows")
    np.testing.assert_array_equal(result.outputs["out"], data[indices[:, 0]])


def test_a_store_indexed_by_a_tile_scatters_to_those_rows(kernel_file):
    data, indices = rand(64, 32), RNG.permutation(200)[:64].astype(np.int32)
    path = kernel_file(LEGACY + GATHERS)
    result = neuronemu.run(path, {"data": data, "indices": indices}, kernel="scatter")
    want = np.zeros((200, 32), np.float32)
    want[indices] = data
    np.testing.assert_array_equal(result.outputs["out"], want)


def test_a_masked_gather_from_a_reshaped_tensor_past_an_int_index(kernel_file):
    # Nearest-neighbour resizing's form: flat source rows per output row, in tiles of
    # 128 rows, the last one ragged (the mask narrows the gather and its index tile).
    body = """
@nki.jit
def k(data, rows):
    B, H, W, C = data.shape
    N = rows.shape[0]
    out = nl.ndarray((B, N, C), dtype=data.dtype, buffer=nl.shared_hbm)
    flat = data.reshape((B, H * W, C))
    for b in nl.affine_range(B):
        for t in nl.affine_range((N + 127) // 128):
            i_p = nl.arange(128)[:, None]
            i_c = nl.arange(C)[None, :]
            pos = t * 128 + i_p
            idx = nl.load(rows[pos], mask=(pos < N))
            g = nl.load(flat[b, idx, i_c], mask=(pos < N))
            nl.store(out[b, pos, i_c], value=g, mask=(pos < N))
    return out
"""
    data, rows = rand(2, 6, 5, 16), RNG.integers(0, 30, 200).astype(np.int32)
    result = neuronemu.run(kernel_file(LEGACY + body), {"data": data, "rows": rows})
    np.testing.assert_array_equal(result.outputs["out"], data.reshape(2, 30, 16)[:, rows])


def test_an_index_out_of_bounds_is_a_located_error_at_run_time(kernel_file):
    data, indices = rand(300, 96), np.arange(64, dtype=np.int32)
    indices[10] = 300
    with pytest.raises(MemoryAccessError, match=r"out of bounds of data at offsets 300") as info:
        neuronemu.run(
            kernel_file(LEGACY + GATHERS), {"data": data, "indices": indices}, kernel="by_column"
        )
    assert info.value.span.line == 13


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nl.load(t[idx, i_f])", r"indexing t \(SBUF\) with a tile is an indirect DMA"),
        ("nl.load(x[f, i_f])", r"an index tile must be an SBUF tile of integers"),
        ("nl.load(x[idx2, i_f])", r"one row index per partition, \[K, 1\]"),
        ("nl.load(x[idx, idx])", r"indexed by 2 tiles"),
        ("nl.load(x[idx, i_f + 60])", r"index of x reaches 123 in a dim of size 64"),
    ],
)
def test_indexing_with_a_tile_refuses_what_an_indirect_dma_cannot_do(kernel_file, line, message):
    body = f"""
@nki.jit
def k(x, ix):
    i_f = nl.arange(64)[None, :]
    t = nl.load(x)
    idx = nl.load(ix)
    idx2 = nl.ndarray((128, 2), dtype=nl.int32)
    f = nl.load(x[:, 0:1])
    u = {line}
    return x
"""
    inputs = {"x": rand(128, 64), "ix": np.zeros((128, 1), np.int32)}
    with pytest.raises((KernelTypeError, ConstraintError), match=message) as info:
        neuronemu.run(kernel_file(LEGACY + body), inputs)
    assert info.value.span.line == 14
