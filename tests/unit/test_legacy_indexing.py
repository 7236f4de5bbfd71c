"""Older-dialect index expressions beyond one nl.arange per dim: N-d nl.mgrid, sliding
windows (two indices in one dim), indices that walk backwards or against the dim order,
reductions over axes that are not the last ones, nl.loop_reduce, a reshaped output, and an
undecorated kernel named with -k; each against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu

HEADER = ("from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
          "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n")
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
    want = np.max([x[a:a + 128, b:b + 38] for a in range(3) for b in range(3)], axis=0)
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
    np.testing.assert_array_equal(run(kernel_file, body, x=x).outputs["out"],
                                  x * np.float32(2.0))


def test_loop_reduce_sums_over_the_loop(kernel_file):
    x = rand(4, 128, 32)
    body = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        acc[...] = nl.loop_reduce(nl.load(x[i]), op=np.add, loop_indices=[i])
    nl.store(out, value=acc)
    return out
"""
    got = run(kernel_file, body, x=x).outputs["out"]
    want = ((x[0] + x[1]).astype(np.float32) + x[2]).astype(np.float32) + x[3]
    np.testing.assert_array_equal(got, want)


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
