"""The older `neuronxcc.nki` dialect: nl.arange/nl.mgrid indices, mask=, tile operators,
value-returning nisa calls and output arrays passed as arguments, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import ConstraintError, KernelTypeError

HEADER = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n"
)


def run(kernel_file, body, **inputs):
    return neuronemu.run(kernel_file(HEADER + body), inputs)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_arange_indices_with_offsets_and_a_masked_ragged_tile(kernel_file):
    x = rand(200, 40)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(40)[None, :]
    for t in nl.affine_range(2):
        t_in = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        nl.store(out[t * 128 + i_p, i_f], value=t_in * 3.0, mask=(t * 128 + i_p < 200))
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x * np.float32(3.0))
    last = [i for i in result.program.instrs if i.spec.name == "dma_copy"][-1]
    assert last.operands["dst"].shape == (72, 40)  # only the rows the mask keeps


def test_strided_and_offset_free_indices(kernel_file):
    x = rand(16, 64)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((16, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:16, 0:16]
    odd = nl.load(x[i_p, 2 * i_f + 1])
    nl.store(out[i_p, i_f], value=odd)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 1:33:2])


def test_mgrid_p_and_x_attributes(kernel_file):
    x = rand(8, 12)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((8, 6), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.mgrid[0:8, 0:6]
    nl.store(out[g.p, g.x], value=nl.load(x[g.p, g.x + 6]))
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 6:])


def test_free_dim_mask_and_column_broadcast(kernel_file):
    x, col = rand(4, 10), rand(4, 1, seed=1)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x, col, out):
    i_p = nl.arange(4)[:, None]
    i_f = nl.arange(16)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 10))
    c = nl.load(col)
    s = nl.subtract(t, c, mask=(i_f < 10))
    nl.store(out[i_p, i_f], value=s, mask=(i_f < 10))
""",
        x=x,
        col=col,
        out=np.zeros((4, 10), np.float32),
    )
    np.testing.assert_array_equal(result.outputs["out"], x - col)


def test_unmasked_index_past_the_tensor_is_located(kernel_file):
    with pytest.raises(ConstraintError, match=r"index of x reaches 255 in dim 0 \(size 200\)"):
        run(
            kernel_file,
            """
@nki.jit
def k(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(4)[None, :]
    for t in nl.affine_range(2):
        nl.load(x[t * 128 + i_p, i_f])
    return x
""",
            x=rand(200, 4),
        )


def test_index_expression_in_a_condition_is_rejected(kernel_file):
    with pytest.raises(KernelTypeError, match="pass it as mask= instead"):
        run(
            kernel_file,
            """
@nki.jit
def k(x):
    i_p = nl.arange(4)[:, None]
    if i_p < 3:
        pass
    return x
""",
            x=rand(4, 4),
        )


def test_tile_operators_and_value_returning_isa(kernel_file):
    a, b = rand(32, 16), rand(32, 16, seed=2)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    z = 1.0 - (x * y) / 2.0
    m = nisa.tensor_tensor(z, -y, op=np.maximum)
    e = nisa.activation(op=nl.tanh, data=m, scale=0.5)
    nl.store(out, value=e)
    return out
""",
        a=a,
        b=b,
    )
    f = np.float32
    z = f(1.0) - (a * b) / f(2.0)
    expected = np.tanh(np.maximum(z, -b) * f(0.5))
    np.testing.assert_allclose(result.outputs["out"], expected, rtol=2e-6)
    assert [i.spec.name for i in result.program.instrs].count("tensor_scalar") == 3


def test_value_returning_matmul_lands_in_psum(kernel_file):
    lhsT, rhs = rand(64, 32), rand(64, 48, seed=3)
    result = run(
        kernel_file,
        """
@nki.jit
def k(lhsT, rhs):
    out = nl.ndarray((32, 48), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))
    nl.store(out, value=ps)
    return out
""",
        lhsT=lhsT,
        rhs=rhs,
    )
    psum = [t for t in result.program.tensors if t.buffer.value == "psum"]
    assert psum and psum[0].shape == (32, 48)
    np.testing.assert_allclose(result.outputs["out"], lhsT.T @ rhs, rtol=1e-5, atol=1e-5)


def test_output_argument_is_reported_and_inputs_are_not_modified(kernel_file):
    a = rand(8, 8)
    out_in = np.zeros((8, 8), np.float32)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a, out):
    nl.store(out, value=nl.exp(nl.load(a)))
""",
        a=a,
        out=out_in,
    )
    assert [t.name for t in result.program.outputs] == ["out"]
    np.testing.assert_allclose(result.outputs["out"], np.exp(a), rtol=1e-6)
    assert not out_in.any()


def test_a_psum_tile_given_to_an_sbuf_only_input_is_copied_to_sbuf_first(kernel_file):
    # As AWS's legacy flash attention does: affine_select (GpSimd, SBUF only) of a matmul
    # result still in PSUM, assigned into a slice; the causal mask keeps the lower triangle.
    x = rand(128, 128)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    t = nl.load(x)
    ident = nl.shared_identity_matrix(n=128, dtype=nl.float32)
    qk = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    qk[...] = nisa.nc_matmul(nl.load(ident), t)
    res = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    res[:, :] = nisa.affine_select(pred=(i_f <= i_p), on_true_tile=qk, on_false_value=-1.0)
    nl.store(out, res)
    return out
""",
        x=x,
    )
    expected = np.where(np.tril(np.ones((128, 128), bool)), x, np.float32(-1.0))
    np.testing.assert_array_equal(result.outputs["out"], expected)
    names = [i.spec.name for i in result.program.instrs]
    assert names.index("tensor_copy") < names.index("affine_select")


def test_a_tile_indexed_down_to_its_partition_dim_keeps_a_size_one_free_dim(kernel_file):
    x = rand(128, 4)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    col = nl.copy(t[:, 2])          # [128, 1], not [128]
    acc = nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf)  # one element a partition
    acc[:, 0] = nl.add(col, t[:, 3])
    nl.store(out, acc)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 2:3] + x[:, 3:4])


@pytest.mark.parametrize("flag", [True, False])
def test_a_constant_mask_runs_all_or_nothing(kernel_file, flag):
    x = rand(128, 8)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    res = nl.zeros((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    res[...] = nl.multiply(t, 2.0, mask={flag} and 0 < 1)
    nl.store(out, res)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x * 2 if flag else np.zeros_like(x))


def test_an_accumulated_matmul_of_a_psum_transpose_copies_it_to_sbuf_first(kernel_file):
    # `psum += nisa.nc_matmul(nisa.nc_transpose(t), ...)`: the transpose lands in PSUM and
    # the matmul reads SBUF only (AWS's legacy flash-attention backward does this).
    a, b = rand(128, 128, seed=1), rand(128, 64, seed=2)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a, b):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    at = nisa.nc_transpose(nl.load(a))
    acc += nisa.nc_matmul(at, nl.load(b))
    nl.store(out, value=nl.copy(acc))
    return out
""",
        a=a,
        b=b,
    )
    np.testing.assert_allclose(result.outputs["out"], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", ["t = ", "t[...] = "])
def test_value_returning_tensor_tensor_broadcasts_a_column(kernel_file, form):
    # The older compiler took a [P, 1] operand of tensor_tensor along the free dims (as a
    # tensor_scalar): AWS's legacy double_row_matmul scales its result tiles so.
    x, col = rand(128, 64, seed=5), rand(128, 1, seed=6)
    alloc = (
        "t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n    " if "[" in form else ""
    )
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x, col):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    {alloc}{form}nisa.tensor_tensor(nl.load(x), nl.load(col), nl.multiply)
    nl.store(out, t)
    return out
""",
        x=x,
        col=col,
    )
    np.testing.assert_array_equal(result.outputs["out"], x * col)
    assert "tensor_scalar" in [i.spec.name for i in result.program.instrs]


# Older NKI traces the body of an affine_range / sequential_range loop once (only
# static_range "will fully unroll the loop during NKI kernel tracing"): a number the body
# advances advances once, as the allocation offsets of nki-samples' allocated kernels do.
ONE_PASS = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    col = 0
    scale = 1.0
    for i in nl.RANGE(4):
        t = nl.load(x[:, nl.ds(col, 128)])
        nl.store(out[:, nl.ds(i * 128, 128)], value=t * scale)
        col += 128
        scale = scale * 2.0
    print("col", col, "scale", scale, "i", i)
    return out
"""


@pytest.mark.parametrize("loop", ["affine_range", "sequential_range"])
def test_a_number_the_loop_body_advances_advances_once(kernel_file, loop):
    x = rand(128, 512)
    printed: list[str] = []
    r = neuronemu.run(
        kernel_file(HEADER + ONE_PASS.replace("RANGE", loop)), {"x": x}, print_fn=printed.append
    )
    # Every iteration starts from col = 0 and scale = 1.0, as the one traced pass did; the
    # loop variable still takes each value.
    np.testing.assert_array_equal(r.outputs["out"], np.tile(x[:, :128], (1, 4)))
    assert printed == ["col 128 scale 2.0 i 3"]


@pytest.mark.parametrize(
    "header, loop",
    [
        (HEADER, "static_range"),  # unrolled while tracing, in older NKI too
        ("import nki\nimport nki.language as nl\nimport numpy as np\n\n", "affine_range"),
    ],
)
def test_static_range_and_current_nki_run_every_pass_of_the_python(kernel_file, header, loop):
    # NKI 0.7 made affine_range / sequential_range Python's range, unrolled.
    x = rand(128, 512)
    printed: list[str] = []
    source = ONE_PASS.replace("RANGE", loop)
    if "neuronxcc" not in header:
        source = source.replace("t * scale", "nl.multiply(t, scale)")
    r = neuronemu.run(kernel_file(header + source), {"x": x}, print_fn=printed.append)
    want = np.concatenate([x[:, k * 128 : (k + 1) * 128] * 2.0**k for k in range(4)], axis=1)
    np.testing.assert_allclose(r.outputs["out"], want)
    assert printed == ["col 512 scale 16.0 i 3"]


def test_nested_one_pass_loops_keep_their_own_starting_numbers(kernel_file):
    # The inner loop's body advances `off` from where the outer iteration began it; the
    # outer loop's passes each begin from `base` = 0 (a program the device repeats).
    x = rand(128, 1024)
    printed: list[str] = []
    source = """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1024), dtype=x.dtype, buffer=nl.shared_hbm)
    base = 0
    for i in nl.affine_range(2):
        off = base
        for j in nl.affine_range(4):
            t = nl.load(x[:, nl.ds(off, 128)])
            nl.store(out[:, nl.ds(i * 512 + j * 128, 128)], value=t)
            off += 128
        base += 512
        print("off", off, "base", base)
    return out
"""
    r = neuronemu.run(kernel_file(HEADER + source), {"x": x}, print_fn=printed.append)
    np.testing.assert_array_equal(r.outputs["out"], np.tile(x[:, :128], (1, 8)))
    assert printed == ["off 128 base 512"] * 2


@pytest.mark.parametrize(
    "loops",
    [
        # the same range iterated twice
        "r = nl.affine_range(4)\n    for i in r:\n        col += 128\n"
        "    print(col)\n    col = 0\n    for i in r:\n        col += 128\n    print(col)",
        # another loop run between making the range and iterating it
        "r = nl.sequential_range(4)\n    for j in range(1):\n        pass\n"
        "    for i in r:\n        col += 128\n    print(col)\n    print(col)",
        # a generator suspended inside a one-pass loop of its own, resumed by the loop
        "g = steps()\n    for j in nl.affine_range(4):\n        i = next(g)\n"
        "        col += 128\n    print(col)\n    print(col)",
    ],
    ids=["reused", "made-before-another-loop", "generator"],
)
def test_one_pass_loops_are_found_however_their_range_is_kept(kernel_file, loops):
    source = (
        "def steps():\n    for i in nl.affine_range(4):\n        yield i\n\n\n"
        "@nki.jit\ndef k(x):\n"
        "    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.load(x))\n"
        "    col = 0\n"
        f"    {loops}\n"
        "    return out\n"
    )
    printed: list[str] = []
    neuronemu.run(kernel_file(HEADER + source), {"x": rand(128, 512)}, print_fn=printed.append)
    assert printed == ["128", "128"]
