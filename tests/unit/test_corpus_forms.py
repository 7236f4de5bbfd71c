"""Forms the public NKI corpus uses that the smaller examples do not: tile methods
(`broadcast_to`, `reshape(shape=)`), masks combined with trace-time booleans, `kernel[grid]`
called from host code, `str(dtype)`, `nl.tile_size.total_available_sbuf_size`,
`nki.language.constants`, 1-d loads and `tensor != None`; each against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu

OLD = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport numpy as np\n\n"
)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run(kernel_file, body, kernel=None, **inputs):
    return neuronemu.run(kernel_file(OLD + body), inputs, kernel=kernel)


def test_tile_broadcast_to_repeats_a_row_over_the_partitions(kernel_file):
    x, g = rand(128, 64), rand(1, 64, seed=1)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x, g):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.load(g)
    t = nl.multiply(nl.load(x), row.broadcast_to((128, 64)))
    nl.store(out, value=t)
    return out
""",
        x=x,
        g=g,
    )
    np.testing.assert_allclose(result.outputs["out"], x * g, rtol=1e-6)


@pytest.mark.parametrize("form", ["t.reshape(shape=(64, 32))", "t.reshape((64, 32))"])
def test_reshape_takes_the_shape_as_keyword_or_tuple(kernel_file, form):
    x = rand(64, 4, 8)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x):
    out = nl.ndarray((64, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value={form})
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x.reshape(64, 32))


def test_reshape_rejects_a_keyword_it_does_not_know(kernel_file):
    with pytest.raises(neuronemu.NeuronEmuError, match="unexpected keyword argument 'size'"):
        run(
            kernel_file,
            """
@nki.jit
def k(x):
    t = nl.load(x)
    u = t.reshape(size=(64, 32))
    return x
""",
            x=rand(64, 32),
        )


@pytest.mark.parametrize("flag", [True, False])
def test_a_mask_anded_with_a_trace_time_bool_keeps_or_drops_everything(kernel_file, flag):
    x = rand(128, 16)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(16)[None, :]
    nl.store(out[i_p, i_f], value=nl.zeros((128, 16), dtype=x.dtype))
    t = nl.load(x[i_p, i_f])
    nl.store(out[i_p, i_f], value=t, mask=(i_p < 100) & {flag})
    return out
""",
        x=x,
    )
    expected = np.zeros_like(x)
    if flag:
        expected[:100] = x[:100]
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_a_host_function_launches_a_kernel_on_a_grid(kernel_file):
    x = rand(4, 128, 32)
    result = run(
        kernel_file,
        """
@nki.jit
def double(x, out):
    i = nl.program_id(0)
    nl.store(out[i], value=nl.load(x[i]) * 2.0)

@nki.jit
def caller(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    double[4](x, out)
    return out
""",
        kernel="caller",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x * np.float32(2.0))


def test_a_launch_grid_must_be_positive_ints(kernel_file):
    with pytest.raises(neuronemu.NeuronEmuError, match="a launch grid is positive ints"):
        run(
            kernel_file,
            """
@nki.jit
def inner(x):
    return x

@nki.jit
def caller(x):
    return inner[0](x)
""",
            kernel="caller",
            x=rand(4, 4),
        )


def test_dtype_names_sizes_and_the_usable_sbuf_size(kernel_file):
    printed: list[str] = []
    source = OLD + (
        "from neuronxcc.nki.language.constants import sizeinbytes\n\n"
        "@nki.jit\ndef k(x):\n"
        "    print(str(nl.bfloat16), str(x.dtype) == 'float32', sizeinbytes(nl.bfloat16),\n"
        "          sizeinbytes(x.dtype), nl.tile_size.total_available_sbuf_size)\n"
        "    return x\n"
    )
    neuronemu.compile_kernel(
        kernel_file(source), {"x": rand(2, 2)}, print_fn=printed.append, target="trn2"
    )
    name, is_f32, bf16_size, f32_size, sbuf = printed[0].split()
    assert (name, is_f32, bf16_size, f32_size) == ("bfloat16", "True", "2", "4")
    # The SBUF bytes of one trn2 partition a kernel may use: the 224 KiB a partition has
    # (trainium2_arch.rst: 28 MiB over 128 partitions) less what the compiler reserves.
    assert 192 * 1024 < int(sbuf) < 224 * 1024, sbuf


def test_a_1d_view_loads_as_a_column(kernel_file):
    x = rand(128, 8)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    col = nl.load(x[0:128, 3])
    nl.store(out, value=col)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 3:4])


def test_a_tensor_compared_with_none_is_a_trace_time_test(kernel_file):
    x = rand(128, 8)
    result = run(
        kernel_file,
        """
def scaled(t, bias=None):
    if bias != None:
        return nl.add(t, bias)
    return t

@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=scaled(scaled(t), bias=t))
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x + x)


def test_fp32_min_and_finfo_give_the_dtypes_limits(kernel_file):
    printed: list[str] = []
    source = OLD + (
        "@nki.jit\ndef k(x):\n"
        "    print(nl.fp32.min, nl.finfo(nl.bfloat16).max, nl.finfo(x.dtype).eps,\n"
        "          nl.finfo(nl.float16).bits)\n"
        "    return x\n"
    )
    neuronemu.compile_kernel(kernel_file(source), {"x": rand(2, 2)}, print_fn=printed.append)
    fp32_min, bf16_max, f32_eps, f16_bits = (float(v) for v in printed[0].split())
    assert fp32_min == -(2 - 2.0**-23) * 2.0**127  # the bit pattern 0xff7fffff
    assert bf16_max == (2 - 2.0**-7) * 2.0**127  # 8 bits of significand
    assert (f32_eps, f16_bits) == (2.0**-23, 16)


def test_finfo_of_an_integer_dtype_is_a_located_error(kernel_file):
    with pytest.raises(neuronemu.NeuronEmuError, match="takes a float dtype"):
        run(kernel_file, "@nki.jit\ndef k(x):\n    m = nl.finfo(nl.int32).max\n    return x\n",
            x=rand(2, 2))  # fmt: skip


CURRENT = "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"


@pytest.mark.parametrize("dtype", ["x.dtype", "nl.bfloat16"])
def test_tensor_copy_dtype_beside_dst_writes_dsts_dtype(kernel_file, dtype):
    """The engine casts to dst's dtype whatever dtype= says: fp32 values stay unrounded."""
    body = f"""
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_copy(dst=u, src=t, dtype={dtype})
    nisa.dma_copy(dst=out, src=u)
    return out
"""
    x = rand(128, 64)
    result = neuronemu.run(kernel_file(CURRENT + body), {"x": x})
    np.testing.assert_array_equal(result.outputs["out"], x)


def test_isa_constants_module_holds_the_isa_enums(kernel_file):
    body = """from nki.isa.constants import dge_mode, oob_mode

@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, dge_mode=dge_mode.hwdge)
    nisa.dma_copy(dst=out, src=t, dge_mode=nisa.constants.dge_mode.swdge)
    return out
"""
    x = rand(128, 64)
    result = neuronemu.run(kernel_file(CURRENT + body), {"x": x})
    np.testing.assert_array_equal(result.outputs["out"], x)


def test_membership_in_an_enum_class(kernel_file):
    printed: list[str] = []
    source = CURRENT + (
        "from enum import Enum\n\nclass Mode(Enum):\n    A = 1\n    B = 2\n\n"
        "@nki.jit\ndef k(x):\n"
        "    print(Mode.A in Mode, 2 in Mode, 3 not in Mode, 'A' in Mode)\n"
        "    return x\n"
    )
    neuronemu.compile_kernel(kernel_file(source), {"x": rand(2, 2)}, print_fn=printed.append)
    # Python 3.12's rules: a member, or a member's value.
    assert printed == ["True True True False"]


def test_numpy_integer_slice_bounds_are_ints(kernel_file):
    x = rand(128, 16)
    result = neuronemu.run(
        kernel_file(
            CURRENT
            + """import numpy as np

@nki.jit
def k(x):
    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    lo = np.int32(3)
    t = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, lo:lo + np.int32(4)])
    nisa.dma_copy(dst=out, src=t)
    return out
"""
        ),
        {"x": x},
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 3:7])


def test_iota_of_an_index_expression_gives_its_values(kernel_file):
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    nl.store(out, value=nisa.iota(3 + i_p * 8 - 2 * i_f, dtype=nl.int32))
    return out
""",
        x=rand(2, 2),
    )
    p, f = np.arange(128)[:, None], np.arange(8)[None, :]
    np.testing.assert_array_equal(result.outputs["out"], 3 + p * 8 - 2 * f)


def test_an_indexed_tile_broadcasts_its_column(kernel_file):
    x = rand(128, 1)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(32)[None, :]
    col = nl.load(x)
    wide = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.sbuf)
    wide[i_p, i_f] = col[i_p, 0].broadcast_to((128, 32))
    nl.store(out, value=wide)
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], np.repeat(x, 32, axis=1))


def test_value_returning_dma_transpose_makes_the_transposed_tile(kernel_file):
    x = rand(64, 128)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a):
    b_sb = nisa.dma_transpose(a[:, :])
    b = nl.ndarray(shape=b_sb.shape, dtype=b_sb.dtype, buffer=nl.shared_hbm)
    nl.store(dst=b, value=b_sb)
    return b
""",
        a=x,
    )
    np.testing.assert_array_equal(result.outputs["b"], x.T)


def test_value_returning_local_gather_makes_the_documented_shape(kernel_file):
    rng = np.random.default_rng(3)
    src = rng.standard_normal((128, 64)).astype(np.float32)
    index = rng.integers(0, 60, (128, 2)).astype(np.uint16)
    result = run(
        kernel_file,
        """
@nki.jit
def k(src, index):
    out = nl.ndarray((128, 2, 16, 4), dtype=src.dtype, buffer=nl.shared_hbm)
    g = nisa.local_gather(nl.load(src), nl.load(index), 4)
    nl.store(out, g)
    return out
""",
        src=src,
        index=index,
    )
    expected = np.empty((128, 2, 16, 4), np.float32)
    for p in range(128):
        core = p // 16 * 16
        for f in range(2):
            for q in range(16):
                start = index[core + q, f]
                expected[p, f, q] = src[p, start : start + 4]
    np.testing.assert_array_equal(result.outputs["out"], expected)


@pytest.mark.parametrize("cond, keep", [("iy < ix", np.less), ("ix + 2 >= iy", np.greater_equal)])
def test_affine_select_with_an_older_pred_keeps_where_it_holds(kernel_file, cond, keep):
    x = rand(128, 96)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(a):
    out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:96]
    t = nl.load(a[ix, iy])
    b = nisa.affine_select(pred=({cond}), on_true_tile=t[ix, iy], on_false_value=nl.fp32.min)
    nl.store(out[ix, iy], b)
    return out
""",
        a=x,
    )
    ix, iy = np.mgrid[0:128, 0:96]
    lhs, rhs = (iy, ix) if cond == "iy < ix" else (ix + 2, iy)
    expected = np.where(keep(lhs, rhs), x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_a_mask_beside_dst_narrows_the_copy(kernel_file):
    x = rand(128, 64)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=t[i_p, i_f], src=a[i_p, i_f], mask=(i_p < 100) & (i_f < 40))
    nl.store(out, t)
    return out
""",
        a=x,
    )
    expected = np.zeros_like(x)
    expected[:100, :40] = x[:100, :40]
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_mgrid_names_its_axes_p_x_y_z(kernel_file):
    x = rand(16, 6, 8)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray((16, 3, 2, 2), dtype=a.dtype, buffer=nl.shared_hbm)
    src = nl.load(a)
    w = nl.mgrid[0:16, 0:3, 0:2, 0:2]
    win = nl.copy(src[w.p, 2 + w.y, 2 * w.x + w.z])
    nl.store(out, win)
    return out
""",
        a=x,
    )
    p, i, j, m = np.meshgrid(*(np.arange(n) for n in (16, 3, 2, 2)), indexing="ij")
    np.testing.assert_array_equal(result.outputs["out"], x[p, 2 + j, 2 * i + m])


def test_a_missing_mgrid_axis_is_a_located_error(kernel_file):
    with pytest.raises(neuronemu.NeuronEmuError, match="2-d nl.mgrid has no .z"):
        run(kernel_file, "@nki.jit\ndef k(a):\n    z = nl.mgrid[0:4, 0:4].z\n    return a\n",
            a=rand(2, 2))  # fmt: skip


def test_an_spmd_dim_over_two_cores_is_one_grid_axis(kernel_file):
    x = rand(512, 64)
    result = neuronemu.run(
        kernel_file(
            CURRENT
            + """
@nki.jit
def add_one(a, out):
    i = nl.program_id(0)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(i))
    nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)

@nki.jit
def caller(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    add_one[nl.spmd_dim(2, nl.nc(2))](a, out)
    return out
"""
        ),
        {"a": x},
        kernel="caller",
    )
    expected = x + np.repeat(np.arange(4, dtype=np.float32), 128)[:, None]
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_affine_select_with_pred_writes_a_slice_in_place(kernel_file):
    x = rand(128, 128)
    result = run(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:128]
    buf = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    buf[:, 0:128] = nisa.affine_select(pred=(iy <= ix), on_true_tile=nl.load(a),
                                       on_false_value=-1.0, dtype=nl.float32)
    nl.store(out, buf)
    return out
""",
        a=x,
    )
    ix, iy = np.mgrid[0:128, 0:128]
    np.testing.assert_array_equal(result.outputs["out"], np.where(iy <= ix, x, -1.0))


@pytest.mark.parametrize(
    "xs, ys", [((128, 512), (1, 512)), ((128, 6, 3, 3), (128, 6, 1, 1)), ((64, 1, 8), (64, 4, 1))]
)
def test_elementwise_tiles_broadcast_like_numpy(kernel_file, xs, ys):
    x, y = rand(*xs), rand(*ys, seed=1)
    shape = np.broadcast_shapes(xs, ys)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x, y):
    out = nl.ndarray({shape}, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(y)))
    return out
""",
        x=x,
        y=y,
    )
    np.testing.assert_allclose(result.outputs["out"], x + y, rtol=1e-6)


def test_a_numpy_scalar_is_a_number_to_nl(kernel_file):
    x = rand(128, 8)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.divide(nl.load(x), np.int32(4)))
    return out
""",
        x=x,
    )
    np.testing.assert_allclose(result.outputs["out"], x / 4, rtol=1e-6)


def test_a_dtypes_scalar_type_makes_constants_as_numpy_does(kernel_file):
    """`np.dtype(np.float32).type(c)`: a scalar of the dtype (a KDA AdamW kernel folds its
    constants so); `.name` and `.itemsize` as NumPy gives them."""
    x = rand(128, 8)
    printed: list[str] = []
    source = OLD + (
        "@nki.jit\ndef k(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    f32 = np.dtype(np.float32)\n"
        "    print(f32.name, f32.itemsize, np.dtype(x.dtype).name)\n"
        "    c = f32.type(0.75)\n"
        "    nl.store(out, nl.multiply(nl.load(x), c))\n"
        "    return out\n"
    )
    result = neuronemu.run(kernel_file(source), {"x": x}, print_fn=printed.append)
    np.testing.assert_allclose(result.outputs["out"], x * np.float32(0.75), rtol=1e-6)
    dt = np.dtype(np.float32)
    assert printed[0].split() == [dt.name, str(dt.itemsize), dt.name]


def test_an_ellipsis_indexes_an_access_pattern_whole(kernel_file):
    x = rand(128, 4, 8)
    result = neuronemu.run(
        kernel_file(
            CURRENT
            + """
@nki.jit
def k(x):
    out = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t.ap([[32, 128], [8, 4], [1, 8]])[...])
    nisa.tensor_copy(dst=u[:, 1], src=t.ap([[32, 128], [8, 4], [1, 8]])[..., 0, :])
    nisa.dma_copy(dst=out, src=u)
    return out
"""
        ),
        {"x": x},
    )
    expected = x.copy()
    expected[:, 1] = x[:, 0]
    np.testing.assert_array_equal(result.outputs["out"], expected)


@pytest.mark.parametrize("dtype", ["None", "nl.bfloat16"])
def test_load_transpose2d_loads_the_transpose(kernel_file, dtype):
    import ml_dtypes

    x = rand(96, 128)
    result = run(
        kernel_file,
        f"""
@nki.jit
def k(x):
    out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load_transpose2d(x[0:96, 0:128], dtype={dtype})
    nl.store(out, nl.copy(t, dtype=nl.float32))
    return out
""",
        x=x,
    )
    expected = x.T if dtype == "None" else x.T.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_a_masked_index_past_a_tiles_end_shapes_the_result_by_the_whole_index(kernel_file):
    """`nisa.bn_stats(t[i_p, j * 512 + i_f], mask=(j * 512 + i_f < 1000))`: the last chunk
    reaches past the tile, and the mask keeps it in bounds (nki-samples layernorm)."""
    x = rand(128, 1000)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    i_s = nl.arange(6)[None, :]
    t = nl.load(x)
    stats = nl.ndarray((128, 12), dtype=nl.float32)
    for j in nl.affine_range(2):
        stats[i_p, j * 6 + i_s] = nisa.bn_stats(t[i_p, j * 512 + i_f],
                                                mask=(j * 512 + i_f < 1000), dtype=nl.float32)
    nl.store(out, stats)
    return out
""",
        x=x,
    )
    got = result.outputs["out"]
    # Each 6-wide group is (count, mean, variance * count) of the chunk's even and of its
    # odd elements (nki.isa.bn_stats); the second chunk is the 488 columns the mask keeps.
    for j, chunk in enumerate((x[:, :512], x[:, 512:])):
        group = got[:, 6 * j : 6 * j + 6]
        for half, cols in enumerate((chunk[:, 0::2], chunk[:, 1::2])):
            c = cols.astype(np.float64)
            np.testing.assert_array_equal(group[:, 3 * half], c.shape[1])
            np.testing.assert_allclose(group[:, 3 * half + 1], c.mean(axis=1), atol=1e-5)
            m2 = ((c - c.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
            np.testing.assert_allclose(group[:, 3 * half + 2], m2, rtol=1e-4)


def test_an_int_beside_an_index_expression_keeps_a_size_1_dim(kernel_file):
    """`t[i_p, 0]` with i_p = nl.arange(P)[:, None] is [P, 1], as NumPy broadcasts index
    arrays (nki-samples layernorm: `var = mean_var[i_p, 1]; nl.rsqrt(var + eps)`)."""
    x = rand(128, 6)
    result = run(
        kernel_file,
        """
@nki.jit
def k(x):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    t = nl.load(x)
    col = t[i_p, 1]
    assert col.shape == (128, 1), col.shape
    nl.store(out, nl.add(col, 1.0))
    return out
""",
        x=x,
    )
    np.testing.assert_array_equal(result.outputs["out"], x[:, 1:2] + np.float32(1.0))
