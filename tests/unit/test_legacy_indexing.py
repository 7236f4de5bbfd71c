"""Older-dialect index expressions beyond one nl.arange per dim: N-d nl.mgrid, sliding
windows (two indices in one dim), indices that walk backwards or against the dim order,
reductions over axes that are not the last ones, nl.loop_reduce, a reshaped output, and an
undecorated kernel named with -k; each against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.nasm.write import dumps

HEADER = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n"
)
RNG = np.random.default_rng(9)


def run(kernel_file, body, kernel=None, **inputs):
    return neuronemu.run(kernel_file(HEADER + body), inputs, kernel=kernel)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_a_sliding_window_max_over_a_3d_mgrid(kernel_file):
    x = rand(130, 40)
    body = """
@nki.jit
def k(x):
    h, w = x.shape
    out = nl.ndarray((h - 2, w - 2), dtype=x.dtype, buffer=nl.shared_hbm)
    i_h, i_kh, i_w = nl.mgrid[0:128, 0:3, 0:w]
    win = nl.load(x[i_h + i_kh, i_w])                         # [128, 3, w]: rows overlap
    i_p, i_a, i_c, i_b = nl.mgrid[0:128, 0:3, 0:w - 2, 0:3]
    m = nl.max(win[i_p, i_a, i_c + i_b], axis=[1, 3])          # reduce a and b, keep c
    nl.store(out[0:128, :], value=m)
    return out
"""
    got = run(kernel_file, body, x=x).outputs["out"]
    want = np.max([x[a : a + 128, b : b + 38] for a in range(3) for b in range(3)], axis=0)
    np.testing.assert_array_equal(got[:128], want)


def test_indices_walking_backwards_and_transposed(kernel_file):
    x = rand(16, 8)
    body = """
@nki.jit
def k(x):
    rev = nl.ndarray((16, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:16, 0:8]
    t = nl.load(x)
    nl.store(rev, value=t[i_p, 7 - i_f])                     # each row reversed
    return rev
"""
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["rev"], x[:, ::-1])


def test_a_mask_on_a_3d_index_space(kernel_file):
    x = rand(200, 4, 6)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_a, i_b = nl.mgrid[0:128, 0:4, 0:6]
    for t in nl.affine_range(2):
        v = nl.load(x[t * 128 + i_p, i_a, i_b], mask=(t * 128 + i_p < 200))
        nl.store(out[t * 128 + i_p, i_a, i_b], value=v * 2.0, mask=(t * 128 + i_p < 200))
    return out
"""
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["out"], x * np.float32(2.0))


@pytest.mark.parametrize("form", ["acc[...] = ", "acc = "])
def test_loop_reduce_combines_into_its_destination(kernel_file, form):
    # nki.language.loop_reduce: the destination is also an input; starting from zeros, a
    # max over negative values stays 0, and a sum adds every term onto the start.
    x = -np.abs(rand(4, 128, 32)) - 0.5
    body = """
@nki.jit
def k(x):
    mx = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    sm = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    tot = nl.full((128, 32), 1.5, dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        t = nl.load(x[i])
        FORMnl.loop_reduce(t, op=np.max, loop_indices=[i])
        tot[...] = nl.loop_reduce(t, op=np.add, loop_indices=[i])
    nl.store(mx, value=acc)
    nl.store(sm, value=tot)
    return mx, sm
""".replace("FORM", form)
    out = run(kernel_file, body, x=x).outputs
    np.testing.assert_array_equal(out["mx"], np.zeros((128, 32), np.float32))
    want = np.float32(1.5)
    for i in range(4):
        want = (want + x[i]).astype(np.float32)
    np.testing.assert_array_equal(out["sm"], want)


def test_a_kernel_returns_a_reshape_of_its_output(kernel_file):
    x = rand(128, 64)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out.reshape((2, 64, 64))
"""
    result = run(kernel_file, body, x=x)
    np.testing.assert_array_equal(result.outputs["out"], x.reshape(2, 64, 64))
    assert result.to_json()["outputs"]["out"]["shape"] == [2, 64, 64]


def test_an_undecorated_kernel_runs_when_named(kernel_file):
    body = """
def plain(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out
"""
    x = rand(8, 8)
    result = run(kernel_file, body, kernel="plain", x=x)
    np.testing.assert_array_equal(result.outputs["out"], x)
    assert any("has no @nki.jit" in n for n in result.program.notes)
    with pytest.raises(neuronemu.errors.UsageError, match="no @nki.jit kernel found"):
        run(kernel_file, body, x=x)


def test_a_mask_narrows_a_reversed_pattern_not_its_bounding_box(kernel_file):
    x = rand(16, 8)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((16, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:16, 0:8]
    t = nl.zeros((16, 8), dtype=nl.float32, buffer=nl.sbuf)
    t[i_p, 7 - i_f] = nisa.activation(op=nl.exp, data=nl.load(x), mask=(i_f < 5))
    nl.store(out, value=t)
    return out
"""
    want = np.zeros((16, 8), np.float32)
    want[:, 7:2:-1] = np.exp(x[:, :5])
    np.testing.assert_allclose(run(kernel_file, body, x=x).outputs["out"], want, rtol=1e-6)


def test_a_masked_reduction_over_a_middle_axis_keeps_its_full_result_tile(kernel_file):
    x = rand(16, 4, 6)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((16, 6), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.zeros((16, 6), dtype=x.dtype))
    i_p, i_a, i_b = nl.mgrid[0:16, 0:4, 0:6]
    r = nl.max(nl.load(x), axis=1, mask=(i_b >= 2) & (i_b < 4))
    j_p, j_f = nl.mgrid[0:16, 0:6]
    nl.store(out[j_p, j_f], value=r, mask=(j_f >= 2) & (j_f < 4))
    return out
"""
    want = np.zeros((16, 6), np.float32)
    want[:, 2:4] = x[:, :, 2:4].max(axis=1)
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["out"], want)


def test_reversed_patterns_and_reshaped_outputs_survive_the_text_form(kernel_file, tmp_path):
    x = rand(16, 8)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((16, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:16, 0:8]
    t = nl.load(x)
    nl.store(out, value=t[i_p, 7 - i_f])
    return out.reshape((2, 8, 8))
"""
    result = run(kernel_file, body, x=x)
    text = dumps(result.program)
    assert "as[2,8,8]" in text and "[-1, 8]" in text
    (tmp_path / "k.nasm").write_text(text)
    again = neuronemu.run(tmp_path / "k.nasm", {"x": x})
    np.testing.assert_array_equal(again.outputs["out"], x[:, ::-1].reshape(2, 8, 8))


def test_simulate_runs_an_undecorated_kernel_by_name(kernel_file):
    body = """
def plain(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out
"""
    x = rand(8, 8)
    np.testing.assert_array_equal(
        neuronemu.simulate(kernel_file(HEADER + body), kernel="plain")(x), x
    )


def test_mgrid_indices_are_dense_so_iota_of_free_indices_spans_the_whole_grid(kernel_file):
    # As NumPy's mgrid: each index has the grid's shape, so 3 * g.y + g.z is [128, 4, 3, 3]
    # (nki-samples' select_and_scatter selects over it with a full-shape condition).
    x = rand(128, 4, 3, 3)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 4, 3, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nl.mgrid[0:128, 0:4, 0:3, 0:3]
    idx = nisa.iota(3 * g.y + g.z, dtype=nl.float32)
    t = nl.load(x)
    nl.store(out, nl.where(nl.greater(t, 0.0), idx, -1.0))
    return out
"""
    result = run(kernel_file, body, x=x)
    grid = np.mgrid[0:128, 0:4, 0:3, 0:3]
    expected = np.where(x > 0, 3 * grid[2] + grid[3], -1).astype(np.float32)
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_loop_reduce_takes_a_mask_a_constant_one_too(kernel_file):
    # As AWS's legacy flash-attention backward: mask= a trace-time condition (a bool) or
    # an index predicate; the rows it leaves out keep what the destination held.
    x = rand(3, 128, 16)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    acc = nl.zeros((128, 16), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        t = nl.load(x[i])
        acc[...] = nl.loop_reduce(t, op=np.add, loop_indices=[i], mask=(i != 1))
        acc[...] = nl.loop_reduce(t, op=np.add, loop_indices=[i], mask=(i_p < 64))
    nl.store(out, value=acc)
    return out
"""
    want = np.zeros((128, 16), np.float32)
    for i in range(3):
        if i != 1:
            want = (want + x[i]).astype(np.float32)
        want[:64] = (want[:64] + x[i][:64]).astype(np.float32)
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["out"], want)


def test_indexing_some_block_dims_names_the_blocks_under_them(kernel_file):
    # `t[i]` of a tensor with two block dims is a block tensor of the rest, sharing its
    # tiles: a helper can fill `sub[j]` and the caller read `t[i, j]`.
    x = rand(2, 3, 128, 8)
    body = """
def fill(sub, src):
    for j in nl.affine_range(3):
        sub[j] = nl.load(src[j])

@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, 3, nl.par_dim(128), 8), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        fill(t[i], x[i])
    for i in nl.affine_range(2):
        for j in nl.affine_range(3):
            nl.store(out[i, j], value=nl.multiply(t[i, j], 2.0))
    return out
"""
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["out"], x * np.float32(2.0))
