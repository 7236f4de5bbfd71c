"""Indirect DMA: rows addressed at run time from an SBUF offset tile (`.ap(vector_offset=)`,
`.ap(scalar_offset=)`, `vector_select`, `select` with a tensor index), gather and scatter,
oob_mode, and what the static analyses make of an address they cannot know."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.checks.hazards import first_race
from neuronemu.errors import ConstraintError, KernelTypeError, MemoryAccessError
from neuronemu.nasm.write import dumps
from neuronemu.sim import functional

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
RNG = np.random.default_rng(11)

GATHER = """
@nki.jit
def k(data, indices):
    P, F = indices.shape[0], data.shape[1]
    output = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    rows = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=-1.0)
    nisa.dma_copy(dst=rows, src=%s, oob_mode=nisa.oob_mode.%s)
    nisa.dma_copy(dst=output, src=rows)
    return output
"""
AP = "data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)"


def gather(kernel_file, indices, src=AP, oob="error", data=None):
    data = RNG.standard_normal((300, 48)).astype(np.float32) if data is None else data
    path = kernel_file(HEADER + GATHER % (src, oob))
    return data, neuronemu.run(path, {"data": data, "indices": indices})


@pytest.mark.parametrize("src", [AP, "data.vector_select(0, idx)"])
def test_a_gather_reads_the_row_each_partition_names(kernel_file, src):
    indices = RNG.integers(0, 300, (128, 1)).astype(np.uint32)
    data, result = gather(kernel_file, indices, src)
    np.testing.assert_array_equal(result.outputs["output"], data[indices[:, 0]])


def test_an_offset_out_of_bounds_is_an_error_naming_it(kernel_file):
    indices = np.arange(128, dtype=np.uint32).reshape(128, 1)
    indices[5] = 300
    indices[9] = 1000
    with pytest.raises(
        MemoryAccessError,
        match=r"reads out of bounds of data at offsets 300, "
        r"1000 \(offsets in \[0, 300\)",
    ) as info:
        gather(kernel_file, indices)
    assert info.value.span.line == 14
    assert "oob_mode=nisa.oob_mode.skip" in info.value.render()


def test_oob_skip_leaves_the_rows_it_skips_untouched(kernel_file):
    indices = np.arange(128, dtype=np.uint32).reshape(128, 1)[::-1].copy()
    indices[[3, 7]] = 301
    data, result = gather(kernel_file, indices, oob="skip")
    out = result.outputs["output"]
    kept = np.ones(128, bool)
    kept[[3, 7]] = False
    np.testing.assert_array_equal(out[kept], data[indices[kept, 0]])
    np.testing.assert_array_equal(out[~kept], -1.0)  # the memset value


def test_a_scatter_writes_each_partition_to_its_row(kernel_file):
    body = """
@nki.jit
def k(src_data, indices, base):
    P, F = src_data.shape
    output = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=output, src=base)
    src = nl.ndarray((P, F), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    nisa.dma_copy(dst=output.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0),
                  src=src)
    return output
"""
    src = RNG.standard_normal((128, 16)).astype(np.float32)
    base = RNG.standard_normal((400, 16)).astype(np.float32)
    indices = RNG.permutation(400)[:128].astype(np.int32).reshape(128, 1)
    path = kernel_file(HEADER + body)
    inputs = {"src_data": src, "indices": indices, "base": base}
    result = neuronemu.run(path, inputs)
    want = base.copy()
    want[indices[:, 0]] = src
    np.testing.assert_array_equal(result.outputs["output"], want)
    # The scatter may touch any row of output: it follows the copy of base in every order.
    program = result.program
    assert first_race(program) is None
    scatter = program.instrs[-1]
    assert program.instrs[0].index in scatter.deps
    for seed in (1, 2, 3):
        np.testing.assert_array_equal(
            functional.execute(program, inputs, shuffle_seed=seed)["output"], want
        )


@pytest.mark.parametrize("how", ["ap", "select"])
def test_a_scalar_offset_moves_the_start(kernel_file, how):
    src = (
        "data.ap(pattern=[[64, 8], [1, 64]], scalar_offset=start, indirect_dim=0)"
        if how == "ap"
        else "data.select(0, start)"
    )
    body = f"""
@nki.jit
def k(data, s):
    out = nl.ndarray((8, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    start = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=start, src=s)
    t = nl.ndarray((8, 64), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src={src})
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    data = RNG.standard_normal((20, 8, 64) if how == "select" else (20, 64)).astype(np.float32)
    result = neuronemu.run(
        kernel_file(HEADER + body), {"data": data, "s": np.array([[5]], np.int32)}
    )
    want = data[5] if how == "select" else data[5:13]
    np.testing.assert_array_equal(result.outputs["out"], want)


def test_the_text_form_keeps_indirect_views(kernel_file, tmp_path):
    indices = RNG.integers(0, 300, (128, 1)).astype(np.uint32)
    data, result = gather(kernel_file, indices)
    text = dumps(result.program)
    assert "iap(data, [[48, 128], [1, 48]], 0, vector, idx, 48, 300)" in text
    (tmp_path / "k.nasm").write_text(text)
    again = neuronemu.run(tmp_path / "k.nasm", {"data": data, "indices": indices})
    np.testing.assert_array_equal(again.outputs["output"], result.outputs["output"])


def test_each_gathered_row_costs_a_descriptor(kernel_file):
    indices = np.zeros((128, 1), np.uint32)
    _, result = gather(kernel_file, indices)
    costs = {i.index: i.ns for i in result.program.instrs if i.spec.name == "dma_copy"}
    ins = result.program.instrs
    gather_ns = next(costs[i.index] for i in ins if i.indirect)
    plain_ns = costs[ins[-1].index]  # the same bytes, SBUF -> HBM, one descriptor
    arch = result.program.arch
    assert gather_ns - plain_ns == pytest.approx(7 * arch.dma_descriptor_ns, abs=1)


@pytest.mark.parametrize(
    "src, error, message",
    [
        (
            "rows.ap(pattern=[[48, 128], [1, 48]], vector_offset=idx)",
            KernelTypeError,
            "must be in HBM",
        ),
        (
            "data.ap(pattern=[[48, 64], [1, 48]], vector_offset=idx)",
            ConstraintError,
            "holds 128 indices but the pattern's first level takes 64",
        ),
        (
            "data.ap(pattern=[[48, 128], [1, 48]], vector_offset=rows)",
            KernelTypeError,
            "must hold integers",
        ),
        (
            "data.ap(pattern=[[48, 128], [1, 48]], vector_offset=idx, scalar_offset=idx)",
            KernelTypeError,
            "mutually exclusive",
        ),
    ],
)
def test_bad_indirect_views_are_located_errors(kernel_file, src, error, message):
    with pytest.raises(error, match=message) as info:
        gather(kernel_file, np.zeros((128, 1), np.uint32), src)
    assert info.value.span.line == 14


def test_indirect_views_feed_dma_copy_only(kernel_file):
    body = """
@nki.jit
def k(data, indices):
    idx = nl.ndarray((128, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    t = nl.ndarray((128, 48), dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=data.vector_select(0, idx))
    return data
"""
    with pytest.raises(ConstraintError, match="indirect views as dma_copy operands only"):
        neuronemu.run(
            kernel_file(HEADER + body),
            {"data": np.zeros((300, 48), np.float32), "indices": np.zeros((128, 1), np.uint32)},
        )


@pytest.mark.parametrize(
    "method", ["reshape((128, 48))", "expand_dim(2)", "ap(pattern=[[48, 128], [1, 48]])"]
)
def test_an_indirect_view_cannot_be_re_viewed(kernel_file, method):
    with pytest.raises(KernelTypeError, match="cannot be re-viewed"):
        gather(kernel_file, np.zeros((128, 1), np.uint32), f"data.vector_select(0, idx).{method}")


def test_rows_reaching_past_the_tensor_are_out_of_bounds_too(kernel_file):
    # Offset 299 is a valid row index, but its 96 elements run past the end of data.
    indices = np.zeros((128, 1), np.uint32)
    indices[2] = 299
    src = "data.ap(pattern=[[48, 128], [1, 96]], vector_offset=idx, indirect_dim=0)"
    body = GATHER.replace("(P, F), dtype=data.dtype", "(P, 2 * F), dtype=data.dtype")
    path = kernel_file(HEADER + body % (src, "error"))
    with pytest.raises(MemoryAccessError, match="at offsets 299 "):
        neuronemu.run(path, {"data": np.zeros((300, 48), np.float32), "indices": indices})


def test_oob_mode_takes_only_its_two_values(kernel_file):
    body = GATHER.replace("oob_mode=nisa.oob_mode.%s", "oob_mode=3")
    path = kernel_file(HEADER + body % AP)
    with pytest.raises(ConstraintError, match="oob_mode=3 is not supported"):
        neuronemu.run(
            path,
            {"data": np.zeros((300, 48), np.float32), "indices": np.zeros((128, 1), np.uint32)},
        )
