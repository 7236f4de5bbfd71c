"""Older-dialect tile idioms: block dims before nl.par_dim, assignment into a tile slice,
`psum += matmul` accumulation, the tiles value-returning nisa calls give back (shape, dtype,
buffer), nl.matmul on PSUM or fp32 operands, and the old engine names, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import ConstraintError, KernelTypeError

HEADER = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n"
)
RNG = np.random.default_rng(5)


def run(kernel_file, body, **inputs):
    return neuronemu.run(kernel_file(HEADER + body), inputs)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_block_dims_give_one_tile_per_block_each_with_its_own_lifetime(kernel_file):
    x = rand(4 * 128, 64)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(4):
        buf[b] = nl.load(x[b * 128:(b + 1) * 128, :])
    for b in nl.affine_range(4):
        nl.store(out[b * 128:(b + 1) * 128, :], value=buf[b, :, :] * 2.0)
    assert buf.shape == (4, 128, 64)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x * np.float32(2.0))
    tiles = {p.tensor.name for p in result.program.placements.values()}
    assert {"buf_b0", "buf_b1", "buf_b2", "buf_b3"} <= tiles


def test_zeros_with_block_dims_zeroes_every_block(kernel_file):
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((3, 128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    z = nl.zeros((3, nl.par_dim(128), 8), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(3):
        nl.store(out[b], value=z[b])
    return out
""",
        x=rand(1, 1),
    )
    np.testing.assert_array_equal(result.outputs["out"], np.zeros((3, 128, 8), np.float32))


@pytest.mark.parametrize(
    "index, error, message",
    [
        ("buf[0:2]", KernelTypeError, r"index each with an int \(dim 0 got 0:2\)"),
        ("buf[4]", ConstraintError, "block index 4 is out of bounds"),
    ],
)
def test_block_indices_must_be_ints_in_range(kernel_file, index, error, message):
    with pytest.raises(error, match=message) as info:
        run(
            kernel_file,
            f"""
@nki.jit
def k(x):
    buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    t = {index}
    return x
""",
            x=rand(1, 1),
        )
    assert info.value.span.line == 10


def test_assigning_numbers_tiles_and_hbm_into_slices(kernel_file):
    x = rand(128, 32)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 48), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 48), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:32] = x                       # HBM -> SBUF: a DMA
    t[:, 32:40] = 1.5                    # a number: memset
    t[:, 40:48] = nl.exp(t[:, 0:8])      # a tile: a copy
    out[...] = t                         # SBUF -> HBM: a DMA
    return out
""",
        x=x,
    )
    got = result.outputs["out"]
    np.testing.assert_array_equal(got[:, :32], x)
    np.testing.assert_array_equal(got[:, 32:40], 1.5)
    np.testing.assert_allclose(got[:, 40:48], np.exp(x[:, :8]), rtol=1e-6)
    # The exp writes the slice itself: no temporary tile copied in.
    assert [i.spec.name for i in result.program.instrs] == [
        "dma_copy",
        "memset",
        "activation",
        "dma_copy",
    ]


@pytest.mark.parametrize("zeroed", [True, False])
def test_psum_plus_equals_matmul_accumulates_in_place(kernel_file, zeroed):
    a, b = rand(256, 128), rand(256, 64)
    alloc = (
        "nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)"
        if zeroed
        else "nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)"
    )
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(a, b):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = {alloc}
    for kk in nl.affine_range(2):
        at = nl.load(a[kk * 128:(kk + 1) * 128, :])
        bt = nl.load(b[kk * 128:(kk + 1) * 128, :])
        if kk == 0:
            acc += nisa.nc_matmul(at, bt)
        else:
            acc += nl.matmul(at, bt, transpose_x=True)
    nl.store(out, value=acc)
    return out
""",
        a=a,
        b=b,
    )
    want = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(result.outputs["out"], want, rtol=1e-4, atol=1e-4)
    matmuls = [i for i in result.program.instrs if i.spec.name == "nc_matmul"]
    assert len(matmuls) == 2 and all(m.operands["dst"].tensor.name == "acc" for m in matmuls)
    # (zeroed: the group's first matmul overwrites instead of adding to a memset's zeros,
    # as the arch guide's PSUM accumulation section says: neuronemu/psum_init.py)
    assert [m.attrs["accumulate"] for m in matmuls] == [False, True]
    assert not any(i.spec.name == "memset" for i in result.program.instrs)
    assert not any(i.spec.name == "tensor_tensor" for i in result.program.instrs)


def test_value_returning_calls_get_the_documented_result_tiles(kernel_file):
    x = rand(128, 96)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out_t = nl.ndarray((96, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    out_m = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nisa.nc_transpose(t)                      # [96, 128] in PSUM (Tensor engine)
    nl.store(out_t, value=tt)
    m = nisa.tensor_reduce(op=nl.max, data=t, axis=1, engine=nisa.vector_engine)
    nl.store(out_m, value=m)
    assert tt.shape == (96, 128) and m.shape == (128, 1)
    return out_t, out_m
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out_t"], x.T)
    np.testing.assert_array_equal(result.outputs["out_m"], x.max(axis=1, keepdims=True))
    transpose = next(i for i in result.program.instrs if i.spec.name == "nc_transpose")
    assert transpose.operands["dst"].buffer.value == "psum"


def test_nl_matmul_takes_no_accumulator_by_position(kernel_file):
    # (`psum += nl.matmul(...)` hands the accumulator over by keyword; a fifth positional
    # argument is not one)
    with pytest.raises(KernelTypeError, match="too many positional arguments"):
        run(
            kernel_file,
            """
@nki.jit
def k(x, y):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
    nl.store(out, value=nl.matmul(nl.load(x), nl.load(y), True, None, acc))
    return out
""",
            x=rand(128, 128),
            y=rand(128, 128),
        )


def test_nl_matmul_copies_psum_operands_and_widens_mixed_fp32(kernel_file):
    x, y = rand(128, 128), rand(128, 64).astype(np.float32)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    xt = nl.transpose(nl.load(x, dtype=nl.bfloat16))   # bfloat16, in PSUM
    yt = nl.load(y)                                     # float32
    nl.store(out, value=nl.matmul(xt, yt, transpose_x=True))
    return out
""",
        x=x,
        y=y,
    )
    import ml_dtypes

    xb = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(
        result.outputs["out"], xb @ y.astype(np.float64), rtol=1e-4, atol=1e-4
    )


def test_assigning_a_value_returning_call_writes_into_the_slice(kernel_file):
    a, b = rand(128, 128), rand(128, 512)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a, b):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    at, bt = nl.load(a), nl.load(b)
    qk = nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    for j in nl.affine_range(2):
        qk[j, :, :] = nisa.nc_matmul(at, bt)        # straight into the PSUM block
    wide = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(2):
        wide[:, j * 512:(j + 1) * 512] = nisa.tensor_copy(qk[j])
    nl.store(out, value=wide)
    return out
""",
        a=a,
        b=b,
    )
    want = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(result.outputs["out"], np.hstack([want, want]), rtol=1e-4, atol=1e-4)
    names = [i.spec.name for i in result.program.instrs]
    assert names.count("tensor_copy") == 2  # no copies of temporary PSUM tiles
    matmuls = [i for i in result.program.instrs if i.spec.name == "nc_matmul"]
    assert [m.operands["dst"].tensor.name for m in matmuls] == ["qk_b0", "qk_b1"]
    assert all(m.attrs["accumulate"] is False for m in matmuls)


def test_a_call_whose_tile_differs_from_the_slice_is_copied_in(kernel_file):
    # The bfloat16 result must round to bfloat16 before landing in the float32 slice.
    x = rand(128, 16)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    wide = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
    wide[...] = nisa.tensor_copy(t, dtype=nl.bfloat16)
    nl.store(out, value=wide)
    return out
""",
        x=x,
    )
    import ml_dtypes

    np.testing.assert_array_equal(
        result.outputs["out"], x.astype(ml_dtypes.bfloat16).astype(np.float32)
    )


def test_numpy_reductions_name_operators_and_positional_old_calls_bind(kernel_file):
    x = rand(128, 32)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nisa.tensor_reduce(np.max, t, 1, negate=True)              # op=np.max: maximum
    s = nisa.tensor_scalar(m[:, 0], np.multiply, 2.0, op1=nl.add, operand1=1.0)
    c = nisa.activation(np.copy, s)
    nl.store(out, value=c)
    return out
""",
        x=x,
    )
    want = (-x.max(axis=1, keepdims=True)) * np.float32(2.0) + np.float32(1.0)
    np.testing.assert_array_equal(result.outputs["out"], want)


def test_an_unknown_keyword_on_an_old_style_call_is_located(kernel_file):
    with pytest.raises(KernelTypeError, match="unexpected keyword argument 'bogus'") as info:
        run(
            kernel_file,
            """
@nki.jit
def k(x):
    t = nl.load(x)
    u = nisa.activation(op=nl.exp, data=t, bogus=1)
    return x
""",
            x=rand(4, 4),
        )
    assert info.value.span.line == 10


def test_loading_into_a_block_is_one_dma(kernel_file):
    x = rand(2, 128, 64)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((2, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(2):
        buf[b] = nl.load(x[b])
        nl.store(out[b], value=buf[b])
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x)
    assert [i.spec.name for i in result.program.instrs] == ["dma_copy"] * 4


def test_a_masked_nl_call_assigned_to_a_slice_writes_only_the_masked_part(kernel_file):
    x = rand(16, 8)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((16, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:16, 0:8]
    t = nl.zeros((16, 8), dtype=nl.float32, buffer=nl.sbuf)
    t[i_p, i_f] = nl.multiply(nl.load(x), 3.0, mask=(i_f < 4))
    nl.store(out, value=t)
    return out
""",
        x=x,
    )
    want = np.zeros((16, 8), np.float32)
    want[:, :4] = x[:, :4] * np.float32(3.0)
    np.testing.assert_array_equal(result.outputs["out"], want)
