"""Run-time offsets through views: `.ap(scalar_offset= | vector_offset=)`, `select` with a
run-time index and `vector_select`, taken on reshaped, flattened, permuted, stepped and
integer-indexed views of an HBM tensor; each result against NumPy on the input.

Ref (nki deep-dives/nki-aps): a scalar offset moves the start by value *
prod(shape[indirect_dim + 1:]) of the tensor `.ap()` is taken on; `.ap()` ignores the
strides and offset of the view it is called on, so a reshape (the whole storage in a new
shape) steps by its own rows and any other view is a located error; `select` and
`vector_select` compose with views and step by the view's own stride.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelTypeError
from neuronemu.nasm.write import dumps

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
DATA = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8) * 0.5 - 7.0
FLAT = DATA.reshape(-1)

# The kernel reads `src` (a view of data addressed at run time) into an SBUF tile of
# `shape` and stores it. `idx` holds s (a 1x1 SBUF tile), `i` is s in a register
# (an NkiScalar), `vidx` holds the row offsets v, one per partition.
READ = """
@nki.jit
def k(data, s, v):
    out = nl.ndarray({shape}, dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=s)
    vidx = nl.ndarray((v.shape[0], 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vidx, src=v)
    i = nisa.scalar_load(idx)
    t = nl.ndarray({shape}, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src={src})
    nisa.dma_copy(dst=out, src=t)
    return out
"""
V = np.array([5, 0, 3, 1, 2], np.int32)  # in bounds of every view's dim below (>= 6 rows)
R24 = DATA.reshape(24, 8)
R12 = DATA.reshape(12, 2, 8)

# (source, shape of the result, s, expected): expected computed from DATA by NumPy alone.
READS = {
    # reshape: the indirect dim is the reshaped tensor's
    "reshape-ap-scalar-tile": (
        "data.reshape((24, 8)).ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, indirect_dim=0)",
        (3, 8),
        3,
        R24[3:6],
    ),
    "reshape-ap-scalar-register": (
        "data.reshape((24, 8)).ap(pattern=[[8, 3], [1, 8]], scalar_offset=i, indirect_dim=0)",
        (3, 8),
        3,
        R24[3:6],
    ),
    "reshape-ap-scalar-dim1": (
        "data.reshape((4, 3, 16)).ap(pattern=[[16, 2], [1, 16]], offset=48, "
        "scalar_offset=idx, indirect_dim=1)",
        (2, 16),
        1,
        FLAT[48 + 16 : 48 + 48].reshape(2, 16),
    ),
    "reshape-ap-vector": (
        "data.reshape((24, 8)).ap(pattern=[[8, 5], [1, 8]], vector_offset=vidx, indirect_dim=0)",
        (5, 8),
        0,
        R24[V],
    ),
    "reshape-select-tile": ("data.reshape((12, 2, 8)).select(0, idx)", (2, 8), 10, R12[10]),
    "reshape-select-register": ("data.reshape((12, 2, 8)).select(0, i)", (2, 8), 7, R12[7]),
    "reshape-vector_select": ("data.reshape((24, 8)).vector_select(0, vidx)", (5, 8), 0, R24[V]),
    # flatten_dims: the same storage in a new shape, like a reshape
    "flatten-ap-scalar-tile": (
        "data.flatten_dims(0, 1).ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, indirect_dim=0)",
        (3, 8),
        20,
        R24[20:23],
    ),
    "flatten-ap-scalar-register": (
        "data.flatten_dims(1, 2).ap(pattern=[[1, 4], [1, 8]], scalar_offset=i, indirect_dim=0)",
        (4, 8),
        2,
        np.lib.stride_tricks.sliding_window_view(FLAT[96:], 8)[:4],
    ),
    "flatten-ap-vector": (
        "data.flatten_dims(0, 1).ap(pattern=[[8, 5], [1, 8]], vector_offset=vidx, indirect_dim=0)",
        (5, 8),
        0,
        R24[V],
    ),
    "flatten-select": ("data.flatten_dims(1, 2).select(0, idx)", (48,), 3, DATA[3].reshape(48)),
    # permute: select and vector_select step by the permuted dim's stride
    "permute-select-tile": ("data.permute((1, 0, 2)).select(0, idx)", (4, 8), 4, DATA[:, 4]),
    "permute-select-register": ("data.permute((1, 0, 2)).select(0, i)", (4, 8), 5, DATA[:, 5]),
    "permute-vector_select": (
        "data.permute((1, 0, 2)).vector_select(0, vidx)",
        (5, 4, 8),
        0,
        DATA.transpose(1, 0, 2)[V],
    ),
    # a slice with a step: row k of the view is row 1 + 2k of the reshape
    "step-select-tile": ("data.reshape((12, 2, 8))[1::2].select(0, idx)", (2, 8), 4, R12[9]),
    "step-select-register": ("data.reshape((12, 2, 8))[1::2].select(0, i)", (2, 8), 5, R12[11]),
    "step-vector_select": (
        "data.reshape((24, 8))[1::4].vector_select(0, vidx)",
        (5, 8),
        0,
        R24[1 + 4 * V],
    ),
    # an integer index (and a static select): row s of the chosen block
    "index-select-tile": ("data[2].reshape((3, 2, 8)).select(0, idx)", (2, 8), 2, DATA[2, 4:6]),
    "index-select-register": ("data.select(0, 3).select(0, i)", (8,), 5, DATA[3, 5]),
    "index-vector_select": ("data[2].vector_select(0, vidx)", (5, 8), 0, DATA[2][V]),
    "middle-index-select": ("data[:, 2].select(0, idx)", (8,), 3, DATA[3, 2]),
}


def _read(kernel_file, src, shape, s, v=V):
    path = kernel_file(HEADER + READ.format(src=src, shape=shape))
    inputs = {"data": DATA, "s": np.array([[s]], np.int32), "v": v.reshape(-1, 1)}
    return neuronemu.run(path, inputs).outputs["out"]


@pytest.mark.parametrize("case", sorted(READS))
def test_a_run_time_offset_through_a_view_uses_the_views_geometry(kernel_file, case):
    src, shape, s, want = READS[case]
    np.testing.assert_array_equal(_read(kernel_file, src, shape, s), want)


# `.ap()` with a run-time offset on a view that is not the whole storage in row-major order
# has no documented step (the docs define it from the tensor's shape, and `.ap()` ignores the
# view's strides and offset): each is an error at the line of the `.ap()`.
AMBIGUOUS = {
    "permute": "data.permute((1, 0, 2)).ap(pattern=[[8, 2], [1, 8]], scalar_offset=idx, "
    "indirect_dim=0)",
    "step": "data.reshape((24, 8))[1::3].ap(pattern=[[8, 5], [1, 8]], vector_offset=vidx, "
    "indirect_dim=0)",
    "index": "data[2].ap(pattern=[[8, 3], [1, 8]], scalar_offset=i, indirect_dim=0)",
    "select": "data.select(0, 1).ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, indirect_dim=0)",
    "slice": "data.reshape((24, 8))[4:12].ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, "
    "indirect_dim=0)",
    "middle-index": "data[:, 2].ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, indirect_dim=0)",
}


@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
def test_ap_with_a_run_time_offset_on_a_partial_view_is_a_located_error(kernel_file, case):
    with pytest.raises(KernelTypeError, match="ambiguous") as info:
        _read(kernel_file, AMBIGUOUS[case], (5 if "vector" in AMBIGUOUS[case] else 3, 8), 0)
    assert info.value.span.line == 15  # the dma_copy taking the .ap()
    assert "select" in info.value.render()  # the hint names the view primitive to use


@pytest.mark.parametrize(
    ("src", "message"),
    [
        # dims of the reshaped view (2), not of data (3)
        (
            "data.reshape((24, 8)).ap(pattern=[[8, 3], [1, 8]], scalar_offset=idx, indirect_dim=2)",
            r"indirect_dim must be a dim of the view \(0..1\), got 2",
        ),
        # nki: "Currently, only indirect_dim=0 is supported" for vector_offset
        (
            "data.ap(pattern=[[8, 5], [1, 8]], vector_offset=vidx, indirect_dim=1)",
            "vector_offset supports only indirect_dim=0",
        ),
        ("data.reshape((24, 8)).vector_select(0, i)", "not an NkiScalar"),
        ("data.reshape((24, 8)).ap(pattern=[[8, 1], [1, 8]], vector_offset=i)", "not an NkiScalar"),
        ("data.reshape((6, 1, 32)).broadcast(1, 3).select(1, idx)", "stride 0"),
    ],
)
def test_meaningless_run_time_offsets_are_located_errors(kernel_file, src, message):
    with pytest.raises(KernelTypeError, match=message) as info:
        _read(kernel_file, src, (5, 8), 0)
    assert info.value.span.line == 15


KV_WRITE = """
@nki.jit
def k(cache, new, p, rows):
    B, S, D = cache.shape
    n = new.shape[0]
    out = nl.ndarray(cache.shape, dtype=cache.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=cache)
    t = nl.ndarray((n, D), dtype=new.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=new)
    pos = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=pos, src=p)
    vpos = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=vpos, src=rows)
    i = nisa.scalar_load(pos)
    flat = out.reshape((B * S, D))
    nisa.dma_copy(dst={dst}, src=t, oob_mode=nisa.oob_mode.skip)
    return out
"""


@pytest.mark.parametrize(
    "dst",
    [
        "flat.ap(pattern=[[D, n], [1, D]], offset=0, scalar_offset=pos, indirect_dim=0)",
        "flat.ap(pattern=[[D, n], [1, D]], offset=0, scalar_offset=i, indirect_dim=0)",
        "flat.ap(pattern=[[D, n], [1, D]], offset=0, vector_offset=vpos, indirect_dim=0)",
        "flat.vector_select(0, vpos)",
    ],
)
def test_a_rolling_kv_cache_write_lands_on_the_rows_named_at_run_time(kernel_file, dst):
    # A cache of 4 sequences of 16 positions; 8 new rows for sequence 2 at position 5. With
    # oob_mode=skip a wrong step drops rows silently; the cache must hold exactly them.
    rng = np.random.default_rng(37)
    cache = rng.standard_normal((4, 16, 32)).astype(np.float32)
    new = rng.standard_normal((8, 32)).astype(np.float32)
    start = 2 * 16 + 5
    inputs = {
        "cache": cache,
        "new": new,
        "p": np.array([[start]], np.int32),
        "rows": np.arange(start, start + 8, dtype=np.int32).reshape(8, 1),
    }
    out = neuronemu.run(kernel_file(HEADER + KV_WRITE.format(dst=dst)), inputs).outputs["out"]
    want = cache.copy()
    want[2, 5:13] = new
    np.testing.assert_array_equal(out, want)


SPLIT = """
@nki.jit
def k(x, h):
    P, F = x.shape
    out = nl.ndarray((P // 2, F), dtype=x.dtype, buffer=nl.shared_hbm)
    half = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=half, src=h)
    i = nisa.scalar_load(half)
    t = nl.ndarray((P // 2, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src={src})
    nisa.dma_copy(dst=out, src=t)
    return out
"""


@pytest.mark.parametrize(
    "src",
    [
        "x.reshape((2, P // 2 * F)).ap(pattern=[[F, P // 2], [1, F]], scalar_offset=half, "
        "indirect_dim=0)",
        "x.reshape((2, P // 2 * F)).ap(pattern=[[F, P // 2], [1, F]], scalar_offset=i, "
        "indirect_dim=0)",
        "x.reshape((2, P // 2, F)).select(0, half)",
        "x.reshape((2, P // 2, F)).select(0, i)",
    ],
)
@pytest.mark.parametrize("h", [0, 1])
def test_a_split_along_dim_0_reads_the_half_named_at_run_time(kernel_file, src, h):
    x = np.random.default_rng(3).standard_normal((128, 24)).astype(np.float32)
    path = kernel_file(HEADER + SPLIT.format(src=src))
    out = neuronemu.run(path, {"x": x, "h": np.array([[h]], np.int32)}).outputs["out"]
    np.testing.assert_array_equal(out, x[64 * h : 64 * (h + 1)])


def test_the_text_form_keeps_the_reshapes_step(kernel_file, tmp_path):
    dst = "flat.ap(pattern=[[D, n], [1, D]], offset=0, scalar_offset=pos, indirect_dim=0)"
    cache = np.zeros((4, 16, 32), np.float32)
    new = np.ones((8, 32), np.float32)
    inputs = {
        "cache": cache,
        "new": new,
        "p": np.array([[37]], np.int32),
        "rows": np.zeros((8, 1), np.int32),
    }
    result = neuronemu.run(kernel_file(HEADER + KV_WRITE.format(dst=dst)), inputs)
    text = dumps(result.program)
    assert "scalar, pos, 32, 64)" in text  # a row of the (64, 32) reshape, 64 rows in bounds
    (tmp_path / "k.nasm").write_text(text)
    again = neuronemu.run(tmp_path / "k.nasm", inputs).outputs["out"]
    want = cache.copy()
    want[2, 5:13] = new
    np.testing.assert_array_equal(again, want)
