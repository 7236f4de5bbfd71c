"""nki.language functions lowered to ISA instructions, visible in asm, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import NeuronEmuError

HEADER = "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n\n"
RNG = np.random.default_rng(11)
X = RNG.standard_normal((64, 48)).astype(np.float32)
Y = RNG.standard_normal((48, 32)).astype(np.float32)


def run(kernel_file, expr: str, out_shape: tuple[int, ...], **inputs):
    params = ", ".join(["x", "y", *inputs])
    src = (
        HEADER
        + f"""
@nki.jit
def k({params}):
    out = nl.ndarray({out_shape}, dtype=nl.float32, buffer=nl.shared_hbm)
    tx = nl.load(x)
    ty = nl.load(y)
    nl.store(out, value={expr})
    return out
"""
    )
    result = neuronemu.run(kernel_file(src), {"x": X, "y": Y, **inputs})
    return result.outputs["out"], [i.spec.name for i in result.program.instrs]


def test_matmul_transposes_x_first(kernel_file):
    out, names = run(kernel_file, "nl.matmul(tx, ty)", (64, 32))
    np.testing.assert_allclose(out, X @ Y, rtol=1e-5, atol=1e-5)
    assert names[2:5] == ["nc_transpose", "tensor_copy", "nc_matmul"]


def test_matmul_with_transpose_x_uses_x_as_stationary(kernel_file):
    out, names = run(
        kernel_file, "nl.matmul(nl.load(x[0:48, 0:32]), ty, transpose_x=True)", (32, 32)
    )
    np.testing.assert_allclose(out, X[:48, :32].T @ Y, rtol=1e-5, atol=1e-5)
    assert "nc_transpose" not in names


def test_transpose_lands_in_psum(kernel_file):
    out, names = run(kernel_file, "nl.transpose(tx)", (48, 64))
    np.testing.assert_array_equal(out, X.T)
    assert "nc_transpose" in names


def _sequential_sum(v):
    """The Vector engine adds along the row in order, in fp32."""
    total = np.zeros(v.shape[0], dtype=np.float32)
    for j in range(v.shape[1]):
        total = total + v[:, j]
    return total


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        ("sum", _sequential_sum),
        ("max", lambda v: v.max(1)),
        ("min", lambda v: v.min(1)),
        ("mean", lambda v: _sequential_sum(v) * np.float32(1.0 / v.shape[1])),
    ],
)
def test_reductions_over_the_free_axis(kernel_file, fn, expected):
    out, names = run(kernel_file, f"nl.{fn}(tx, axis=1)", (64, 1))
    np.testing.assert_array_equal(out[:, 0], expected(X))
    assert "tensor_reduce" in names


@pytest.mark.parametrize("axis", ["1", "-1", "[1]", "(1,)"])
def test_softmax(kernel_file, axis):
    # (the axis as an int, or as the one-item list the reductions take)
    out, _ = run(kernel_file, f"nl.softmax(tx, axis={axis})", (64, 48))
    e = np.exp(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("axis", ["0", "[0]", "[1, 1]", "True"])
def test_softmax_along_another_axis_is_a_located_error(kernel_file, axis):
    with pytest.raises(NeuronEmuError, match="nl.softmax supports 2-d tiles along axis 1"):
        run(kernel_file, f"nl.softmax(tx, axis={axis})", (64, 48))


def test_reducing_the_partition_axis_is_a_located_error(kernel_file):
    with pytest.raises(NeuronEmuError, match="axis 0 is the partition axis") as info:
        run(kernel_file, "nl.sum(tx, axis=0)", (1, 48))
    assert (info.value.span.line, info.value.span.col) == (10, 25)


def test_reductions_can_be_passed_as_operators(kernel_file):
    src = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(x, y):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((64, 48), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    m = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.max, data=t, axis=1)
    nisa.dma_copy(dst=out, src=m)
    return out
"""
    result = neuronemu.run(kernel_file(src), {"x": X, "y": Y})
    np.testing.assert_array_equal(result.outputs["out"][:, 0], X.max(1))
    assert result.program.instrs[1].attrs["op"] == "maximum"


def test_var_over_the_free_axis(kernel_file):
    # Shifted data: a one-pass E[x^2] - E[x]^2 would lose most digits here.
    shifted = (X + np.float32(1000.0)).astype(np.float32)
    out, names = run(kernel_file, "nl.var(nl.load(z), axis=1)", (64, 1), z=shifted)
    want = np.var(shifted.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=2e-3)
    assert {"tensor_reduce", "activation"} <= set(names)


def test_var_over_several_free_axes_keeps_dims(kernel_file):
    z = RNG.standard_normal((16, 4, 6)).astype(np.float32)
    out, _ = run(kernel_file, "nl.var(nl.load(z), axis=[1, 2])", (16, 1, 1), z=z)
    np.testing.assert_allclose(
        out, np.var(z.astype(np.float64), axis=(1, 2), keepdims=True), rtol=1e-5, atol=1e-7
    )


def test_var_rejects_a_non_trailing_axis(kernel_file):
    z = RNG.standard_normal((16, 4, 6)).astype(np.float32)
    with pytest.raises(NeuronEmuError, match="nl.var: axis must be the last free dims"):
        run(kernel_file, "nl.var(nl.load(z), axis=1)", (16, 1, 1), z=z)


@pytest.mark.parametrize(
    ("x", "y", "want"),
    [
        ("tx", "nl.load(w)", lambda c, w: np.where(c != 0, X, w)),
        ("tx", "-2.5", lambda c, w: np.where(c != 0, X, np.float32(-2.5))),
        ("7", "tx", lambda c, w: np.where(c != 0, np.float32(7), X)),
    ],
)
def test_where_picks_x_where_the_condition_is_nonzero(kernel_file, x, y, want):
    cond = (RNG.random((64, 48)) < 0.5).astype(np.float32)
    cond[0, :4] = [np.nan, 0.5, -1.0, 0.0]  # any nonzero (NaN too) is true, as in NumPy
    w = RNG.standard_normal((64, 48)).astype(np.float32)
    out, names = run(kernel_file, f"nl.where(nl.load(c), {x}, {y})", (64, 48), c=cond, w=w)
    np.testing.assert_array_equal(out, want(cond, w))
    assert "tensor_copy_predicated" in names


def test_where_with_mismatched_shapes_is_a_located_error(kernel_file):
    with pytest.raises(NeuronEmuError, match="nl.where: y has shape"):
        run(kernel_file, "nl.where(tx, tx, ty)", (64, 48))


@pytest.mark.parametrize(
    ("src", "load", "shape", "engine_op"),
    [
        ("x[0:64, 0:1]", "(64, 1)", (64, 48), "tensor_copy"),  # free dim from 1
        ("x[0:1, 0:48]", "(1, 48)", (64, 48), "nc_matmul"),  # partition dim from 1
        ("x[0:1, 0:1]", "(1, 1)", (32, 48), "nc_matmul"),  # both
    ],
)
def test_broadcast_to(kernel_file, src, load, shape, engine_op):
    out, names = run(kernel_file, f"nl.broadcast_to(nl.load({src}), {shape})", shape)
    rows, cols = (int(n) for n in load.strip("()").split(","))
    np.testing.assert_array_equal(out, np.broadcast_to(X[:rows, :cols], shape))
    assert engine_op in names[2:]


def test_broadcast_to_a_shape_that_does_not_broadcast_is_a_located_error(kernel_file):
    with pytest.raises(NeuronEmuError, match=r"cannot broadcast \[64, 48\] to \(64, 96\)"):
        run(kernel_file, "nl.broadcast_to(tx, (64, 96))", (64, 96))


def test_broadcast_to_across_partitions_is_exact_over_several_psum_banks(kernel_file):
    z = RNG.standard_normal((1, 1100)).astype(np.float32)
    z[0, :3] = [3.0e38, -1.0e-40, 1.0000001]  # fp32 extremes pass through the ones matmul
    out, names = run(kernel_file, "nl.broadcast_to(nl.load(z), (128, 1100))", (128, 1100), z=z)
    np.testing.assert_array_equal(out, np.broadcast_to(z, (128, 1100)))
    assert names.count("nc_matmul") == 3  # 512 + 512 + 76 columns


def test_rms_norm(kernel_file):
    w = RNG.standard_normal((64, 48)).astype(np.float32)
    out, names = run(
        kernel_file, "nl.rms_norm(tx, nl.load(w), axis=1, n=48, epsilon=1e-3)", (64, 48), w=w
    )
    x64 = X.astype(np.float64)
    want = x64 / np.sqrt((x64**2).sum(1, keepdims=True) / 48 + 1e-3) * w
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert "scalar_tensor_tensor" in names


def test_rms_norm_with_a_mismatched_weight_is_a_located_error(kernel_file):
    with pytest.raises(NeuronEmuError, match=r"nl.rms_norm: w has shape \[48, 32\]"):
        run(kernel_file, "nl.rms_norm(tx, ty, axis=1, n=48)", (64, 48))


INT_BROADCAST = (
    HEADER
    + """
@nki.jit
def k(z):
    out = nl.ndarray({shape}, dtype=nl.{dtype}, buffer=nl.shared_hbm)
    nl.store(out, value=nl.broadcast_to(nl.load(z), {shape}{cast}))
    return out
"""
)


@pytest.mark.parametrize(
    "src_shape, shape, cast",
    [
        ((1, 8), (100, 8), None),  # (four quadrants, the last one partial)
        ((1, 4, 2), (128, 4, 2), None),  # (vLLM's paged attention: iota offsets per block)
        ((1, 8), (64, 8), "float32"),
    ],
)
def test_an_int_tile_broadcast_across_partitions_keeps_every_bit(
    kernel_file, src_shape, shape, cast
):
    # Values past 2**24, which a matmul through fp32 would round.
    z = (np.arange(np.prod(src_shape), dtype=np.int64) * 7919 + 2**30 + 1).astype(np.int32)
    z = z.reshape(src_shape)
    src = INT_BROADCAST.format(
        shape=shape, dtype=cast or "int32", cast=f", dtype=nl.{cast}" if cast else ""
    )
    result = neuronemu.run(kernel_file(src), {"z": z})
    want = np.broadcast_to(z, shape).astype(cast or np.int32)
    np.testing.assert_array_equal(result.outputs["out"], want)
    names = [i.spec.name for i in result.program.instrs]
    assert names.count("nc_stream_shuffle") == -(-shape[0] // 32) and "nc_matmul" not in names


@pytest.mark.parametrize(
    "fn, expected",
    [
        ("nl.floor(tx)", lambda x: np.floor(x)),
        ("nl.ceil(tx)", lambda x: np.ceil(x)),
        # mod takes the divisor's sign (Python's %), fmod the dividend's (C's fmod)
        ("nl.mod(tx, -0.75)", lambda x: np.mod(x, np.float32(-0.75))),
        ("nl.fmod(tx, -0.75)", lambda x: np.fmod(x, np.float32(-0.75))),
    ],
)
def test_rounding_and_remainders_match_numpy_signs_included(kernel_file, fn, expected):
    out, names = run(kernel_file, fn.replace("tx", "nl.multiply(tx, 3.0)"), (64, 48))
    np.testing.assert_array_equal(out, expected(X * np.float32(3.0)))
    assert "activation" not in names  # Vector ALU work, not a ScalarE table


def test_a_named_matmul_result_added_into_a_psum_accumulator(kernel_file):
    # `r = nisa.nc_matmul(...); acc += r`: both tiles in PSUM, which one tensor_tensor may
    # not both read (nki.isa.tensor_tensor): the result goes through SBUF first. The sum
    # is NumPy's (a CS149 course kernel accumulates its convolution so).
    src = (
        HEADER
        + """import neuronxcc.nki.isa as nisa

@nki.jit
def k(a, b):
    out = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((32, 64), dtype=nl.float32, buffer=nl.psum)
    for t in nl.affine_range(2):
        at = nl.load(a[t * 48:(t + 1) * 48, :])
        bt = nl.load(b[t * 48:(t + 1) * 48, :])
        r = nisa.nc_matmul(at, bt)
        acc += r
    nl.store(out, value=nl.copy(acc))
    return out
"""
    )
    a = RNG.standard_normal((96, 32)).astype(np.float32)
    b = RNG.standard_normal((96, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(src), {"a": a, "b": b})
    np.testing.assert_allclose(result.outputs["out"], a.T @ b, rtol=1e-4, atol=1e-4)
    adds = [i for i in result.program.instrs if i.spec.name == "tensor_tensor"]
    assert adds and all(
        [v.tensor.buffer.name for _, v in i.views("in")].count("PSUM") <= 1 for i in adds
    )


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("nl.negative(tx)", lambda x: -x),
        ("nl.trunc(tx * 3.0)", lambda x: np.trunc(x * np.float32(3.0))),
        ("nl.cos(tx)", np.cos),
        ("nl.tan(tx)", np.tan),
    ],
)
def test_documented_elementwise_functions(kernel_file, expr, expected):
    out, _ = run(kernel_file, expr, (64, 48))
    np.testing.assert_allclose(out, expected(X), rtol=1e-6, atol=1e-6)


def test_negative_keeps_an_integer_tile_integer(kernel_file):
    src = (
        HEADER
        + """
@nki.jit
def k(x):
    out = nl.ndarray((4, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.negative(nl.load(x)))
    return out
"""
    )
    x = np.arange(-16, 16, dtype=np.int32).reshape(4, 8)
    result = neuronemu.run(kernel_file(src), {"x": x})
    np.testing.assert_array_equal(result.outputs["out"], -x)
    (neg,) = [i for i in result.program.instrs if i.spec.name == "tensor_scalar"]
    assert neg.view("dst").dtype.name == "int32"
