"""The older dialect's value-returning `nisa.iota(expr, dtype)` and `nisa.memset(shape, value,
dtype)` (neuronxcc.nki, Neuron 2.26 docs of nki.isa.iota and nki.isa.memset): each returns a
new SBUF tile; values against NumPy written from those docs' examples."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelTypeError

OLDER = (
    "import neuronxcc.nki as nki\nimport neuronxcc.nki.isa as nisa\n"
    "import neuronxcc.nki.language as nl\n"
)
CURRENT = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n"


def _run(kernel_file, source: str) -> dict[str, np.ndarray]:
    return neuronemu.run(kernel_file(source), {"x": np.zeros((2, 2), np.float32)}).outputs


def test_iota_of_an_index_expression_takes_its_dtype_by_position_or_keyword(kernel_file):
    out = _run(
        kernel_file,
        OLDER
        + """

@nki.jit
def k(x):
    a_out = nl.ndarray([1, 512], dtype=nl.float32, buffer=nl.shared_hbm)
    d_out = nl.ndarray([128, 1], dtype=nl.float32, buffer=nl.shared_hbm)
    e_out = nl.ndarray([128, 512], dtype=nl.int32, buffer=nl.shared_hbm)
    expr_a = nl.arange(0, 512)[None, :]
    expr_b = nl.arange(0, 128)[:, None]
    a = nisa.iota(expr_a * -1, nl.int32)
    d = nisa.iota(expr=5 + expr_b * 2, dtype=nl.bfloat16)
    e = nisa.iota(expr_a + expr_b, dtype=nl.int32)
    assert a.dtype == nl.int32 and d.dtype == nl.bfloat16 and tuple(d.shape) == (128, 1)
    nl.store(a_out, a)
    nl.store(d_out, d)
    nl.store(e_out, e)
    return a_out, d_out, e_out
""",
    )
    np.testing.assert_array_equal(out["a_out"], -np.arange(512)[None, :])
    want_d = (5 + 2 * np.arange(128)).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out["d_out"][:, 0], want_d.astype(np.float32))
    np.testing.assert_array_equal(out["e_out"], np.arange(128)[:, None] + np.arange(512))


def test_iota_of_a_plain_int_is_a_one_element_tile(kernel_file):
    # (vLLM's paged attention: `nisa.iota(head_id, dtype=nl.int32).reshape((1, 1))`, the
    # program id, an expression without an index)
    out = _run(
        kernel_file,
        OLDER
        + """

@nki.jit
def k(x):
    out = nl.ndarray([1, 1], dtype=nl.int32, buffer=nl.shared_hbm)
    t = nisa.iota(7 * 3 + 2**20, dtype=nl.int32)
    assert tuple(t.shape) == (1, 1)
    nl.store(out, t.reshape((1, 1)))
    return out
""",
    )
    np.testing.assert_array_equal(out["out"], [[21 + 2**20]])


def test_memset_of_a_shape_returns_a_filled_tile(kernel_file):
    out = _run(
        kernel_file,
        OLDER
        + """

@nki.jit
def k(x):
    a_out = nl.ndarray([128, 128], dtype=nl.float32, buffer=nl.shared_hbm)
    b_out = nl.ndarray([64, 32], dtype=nl.bfloat16, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(32)[None, :]
    a = nisa.memset(shape=(128, 128), value=0.2, dtype=nl.float32)
    b = nisa.memset((nl.par_dim(64), 32), -1.5, nl.bfloat16, engine=nisa.gpsimd_engine)
    c = nisa.memset((64, 32), 7.0, nl.bfloat16, mask=(i_p < 16))
    assert b.dtype == nl.bfloat16 and tuple(b.shape) == (64, 32)
    nl.store(a_out, a)
    nl.store(b_out[i_p, i_f], b, mask=(i_p >= 16))
    nl.store(b_out[i_p, i_f], c, mask=(i_p < 16))
    return a_out, b_out
""",
    )
    np.testing.assert_array_equal(out["a_out"], np.full((128, 128), 0.2, np.float32))
    want = np.full((64, 32), -1.5, np.float32)
    want[:16] = 7.0
    np.testing.assert_array_equal(out["b_out"].astype(np.float32), want)


def test_the_shape_form_in_a_current_nki_file_is_a_located_error_with_the_new_form(
    kernel_file,
):
    path = kernel_file(
        CURRENT
        + """

@nki.jit
def k(x):
    a = nisa.memset(shape=(128, 128), value=0.0, dtype=nl.float32)
    return x
"""
    )
    with pytest.raises(KernelTypeError, match="unexpected keyword argument 'shape'") as info:
        neuronemu.run(path, {"x": np.zeros((2, 2), np.float32)})
    assert f"{path}:8:9" in str(info.value)
    assert "pass it as dst=" in str(info.value)


@pytest.mark.parametrize(
    "call, message",
    [
        ("nisa.memset(shape=(128, 0), value=0.0, dtype=nl.float32)", "shape must be a tuple"),
        ("nisa.memset(shape=(128, 4), value=0.0)", "needs a dtype"),
        ("nisa.memset((128, 4), 0.0, nl.float32, dtype=nl.int32)", "multiple values for 'dtype'"),
    ],
)
def test_older_memset_arguments_are_checked(kernel_file, call, message):
    path = kernel_file(
        OLDER
        + f"""

@nki.jit
def k(x):
    a = {call}
    return x
"""
    )
    with pytest.raises(KernelTypeError, match=message) as info:
        neuronemu.run(path, {"x": np.zeros((2, 2), np.float32)})
    assert f"{path}:8:9" in str(info.value)
