"""Kernels over Hypothesis-drawn shapes against NumPy written here, independent of the kernels."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
DTYPES = st.sampled_from([np.float32, np.float16, ml_dtypes.bfloat16])


def _data(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


@settings(max_examples=10)
@given(st.integers(1, 3), st.integers(1, 3), DTYPES, st.integers(0, 2**16))
def test_tensor_add_both_styles(row_tiles, col_tiles, dtype, seed):
    rng = np.random.default_rng(seed)
    a = _data(rng, (128 * row_tiles, 512 * col_tiles), dtype)
    b = _data(rng, a.shape, dtype)
    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)
    for name in ("tensor_add", "tensor_add_legacy"):
        out = neuronemu.simulate(KERNELS / f"{name}.py")(a, b)
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


@settings(max_examples=8)
@given(st.integers(1, 40), st.integers(1, 300), st.integers(0, 2**16))
def test_legacy_add_handles_a_ragged_last_row_tile(extra_rows, cols, seed):
    rng = np.random.default_rng(seed)
    a = _data(rng, (128 + extra_rows, cols), np.float32)
    b = _data(rng, a.shape, np.float32)
    out = neuronemu.simulate(KERNELS / "tensor_add_legacy.py")(a, b)
    np.testing.assert_array_equal(out, a + b)


@settings(max_examples=6)
@given(st.integers(1, 4), st.integers(1, 2), st.integers(1, 2), st.integers(0, 2**16))
def test_tiled_matmul(k_tiles, m_tiles, n_tiles, seed):
    rng = np.random.default_rng(seed)
    lhsT = _data(rng, (128 * k_tiles, 128 * m_tiles), ml_dtypes.bfloat16)
    rhs = _data(rng, (128 * k_tiles, 512 * n_tiles), ml_dtypes.bfloat16)
    out = neuronemu.simulate(KERNELS / "matmul_tiled.py")(lhsT, rhs)
    exact = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert out.dtype == np.dtype(ml_dtypes.bfloat16)
    # fp32 accumulation then one bf16 rounding: within one bf16 ulp (2^-8 relative) plus the
    # fp32 accumulation error, which is far smaller at these K.
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= np.abs(exact) * 2.0**-8 + 1e-3 * np.sqrt(k_tiles))
