"""Inputs the semantics take as fp32 (neuronemu_isa's Operand.fp32: nc_matmul's stationary
and moving) are read converted, and a tile's conversion is kept until some write reaches its
bytes (Memory.read_fp32): every read sees what the tile holds then, checked against NumPy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.sim import functional, state

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
BF16 = ml_dtypes.bfloat16


def _bf16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF16)


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def test_a_tile_written_again_between_matmuls_is_read_as_it_is_then(kernel_file):
    # m is read, written by a copy, read; s is read, written through an int16 alias of its
    # bytes, read; both stay live throughout (the same tiles, the same views).
    source = HEADER + (
        "@nki.jit\n"
        "def k(a, b0, b1, c):\n"
        "    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    nisa.dma_copy(dst=m, src=b0)\n"
        "    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
        "    nisa.nc_matmul(dst=acc, stationary=s, moving=m)\n"
        "    nisa.dma_copy(dst=m, src=b1)\n"
        "    nisa.nc_matmul(dst=acc, stationary=s, moving=m)\n"
        "    nisa.dma_copy(dst=s.view(nl.int16), src=c)\n"
        "    nisa.nc_matmul(dst=acc, stationary=s, moving=m)\n"
        "    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.tensor_copy(dst=o, src=acc)\n"
        "    nisa.dma_copy(dst=out, src=o)\n"
        "    return out\n"
    )
    rng = np.random.default_rng(11)
    a, b0, b1 = _bf16(rng, (128, 128)), _bf16(rng, (128, 512)), _bf16(rng, (128, 512))
    c = _bf16(rng, (128, 128))
    got = neuronemu.run(kernel_file(source), {"a": a, "b0": b0, "b1": b1, "c": c.view(np.int16)})
    # (fp32 products added in the order the PSUM accumulates them)
    want = _f32(a).T @ _f32(b0)
    want = want + _f32(a).T @ _f32(b1)
    want = want + _f32(c).T @ _f32(b1)
    np.testing.assert_allclose(got.outputs["out"], want, rtol=1e-5, atol=1e-4)


def test_a_slice_read_in_a_loop_is_converted_once_and_read_right(kernel_file, monkeypatch):
    # Each of 4 stationary column blocks of one tile meets 3 moving tiles, and the tile is
    # loaded again half way: the reads of each block before the load share one conversion,
    # the reads after it another.
    source = HEADER + (
        "@nki.jit\n"
        "def k(a, a2, b):\n"
        "    out = nl.ndarray((512, 1536), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    for n in nl.sequential_range(3):\n"
        "        if n == 2:\n"
        "            nisa.dma_copy(dst=s, src=a2)\n"
        "        m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=m, src=b[:, n * 512 : n * 512 + 512])\n"
        "        for i in nl.sequential_range(4):\n"
        "            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
        "            nisa.nc_matmul(dst=acc, stationary=s[:, i * 128 : i * 128 + 128], moving=m)\n"
        "            o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        "            nisa.tensor_copy(dst=o, src=acc)\n"
        "            r, c = i * 128, n * 512\n"
        "            nisa.dma_copy(dst=out[r : r + 128, c : c + 512], src=o)\n"
        "    return out\n"
    )
    converted: list[tuple[int, ...]] = []
    original = state.Memory.read_fp32

    def read_fp32(self, view):
        if (view.tensor.id, view.box, view.kept) not in self._fp32:
            converted.append(view.shape)
        return original(self, view)

    monkeypatch.setattr(state.Memory, "read_fp32", read_fp32)
    # (the steps run one by one: batched, these single products would be one product,
    # neuronemu.sim.batched, and read no tile)
    monkeypatch.setattr(functional, "BATCH", False)
    rng = np.random.default_rng(12)
    a, a2, b = _bf16(rng, (128, 512)), _bf16(rng, (128, 512)), _bf16(rng, (128, 1536))
    got = neuronemu.run(kernel_file(source), {"a": a, "a2": a2, "b": b}).outputs["out"]
    want = np.concatenate([_f32(a).T @ _f32(b[:, :1024]), _f32(a2).T @ _f32(b[:, 1024:])], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # 4 blocks of s, twice (before and after its second load), and 3 moving tiles
    assert sorted(converted) == [(128, 128)] * 8 + [(128, 512)] * 3


@pytest.mark.parametrize("kept", [0, 2**20])
def test_conversions_kept_or_not_give_the_same_values(kernel_file, monkeypatch, kept):
    # With nothing kept (each read converts afresh) and with room for a few: the values of
    # a loop of matmuls over tiles that stay and tiles that are loaded again.
    monkeypatch.setattr(state, "FP32_KEPT_BYTES", kept)
    source = HEADER + (
        "@nki.jit\n"
        "def k(a, b):\n"
        "    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
        "    for k in nl.affine_range(6):\n"
        "        s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "        m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=s, src=a[k * 128 : k * 128 + 128, :])\n"
        "        nisa.dma_copy(dst=m, src=b[k * 128 : k * 128 + 128, :])\n"
        "        nisa.nc_matmul(dst=acc, stationary=s, moving=m)\n"
        "    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.tensor_copy(dst=o, src=acc)\n"
        "    nisa.dma_copy(dst=out, src=o)\n"
        "    return out\n"
    )
    rng = np.random.default_rng(13)
    a, b = _bf16(rng, (768, 128)), _bf16(rng, (768, 512))
    got = neuronemu.run(kernel_file(source), {"a": a, "b": b}).outputs["out"]
    want = np.zeros((128, 512), np.float32)
    for k in range(6):  # (accumulated tile by tile, as the PSUM does)
        want = want + _f32(a[k * 128 : k * 128 + 128]).T @ _f32(b[k * 128 : k * 128 + 128])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_conversions_handed_to_the_semantics_are_read_only(kernel_file, monkeypatch):
    # (one shared by later reads must not be changed in place by a semantics)
    handed: list[np.ndarray] = []
    original = state.Memory.read_fp32

    def read_fp32(self, view):
        handed.append(original(self, view))
        return handed[-1]

    monkeypatch.setattr(state.Memory, "read_fp32", read_fp32)
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)\n"
        "    nisa.nc_matmul(dst=acc, stationary=s, moving=s)\n"
        "    o = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.tensor_copy(dst=o, src=acc)\n"
        "    nisa.dma_copy(dst=out, src=o)\n"
        "    return out\n"
    )
    a = _bf16(np.random.default_rng(14), (128, 64))
    got = neuronemu.run(kernel_file(source), {"a": a}).outputs["out"]
    np.testing.assert_allclose(got, _f32(a).T @ _f32(a), rtol=1e-5, atol=1e-4)
    assert len(handed) == 2 and not any(x.flags.writeable for x in handed)
    assert all(x.dtype == np.float32 for x in handed)


def test_a_transpose_through_the_pe_array_moves_stationarys_own_bits(kernel_file):
    # (not its fp32 values: a bfloat16 NaN's payload does not survive fp32 and back)
    source = HEADER + (
        "@nki.jit\n"
        "def k(a, ident):\n"
        "    out = nl.ndarray((64, 128), dtype=nl.bfloat16, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    i = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    nisa.dma_copy(dst=i, src=ident)\n"
        "    t = nl.ndarray((64, 128), dtype=nl.bfloat16, buffer=nl.psum)\n"
        "    nisa.nc_matmul(dst=t, stationary=s, moving=i, is_transpose=True)\n"
        "    o = nl.ndarray((64, 128), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.tensor_copy(dst=o, src=t)\n"
        "    nisa.dma_copy(dst=out, src=o)\n"
        "    return out\n"
    )
    bits = np.random.default_rng(15).integers(0, 2**16, (128, 64)).astype(np.uint16)
    bits[::7, ::3] = 0x7F81  # a signalling NaN, with a payload
    a = bits.view(BF16)
    ident = np.identity(128).astype(BF16)
    got = neuronemu.run(kernel_file(source), {"a": a, "ident": ident}).outputs["out"]
    np.testing.assert_array_equal(got.view(np.uint16), np.ascontiguousarray(bits.T))


def test_two_views_of_one_box_are_kept_apart(kernel_file):
    # s[:, 1, :] and s[:, 1:2, :] touch the same box but read as different shapes
    from neuronemu.ir import View

    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 2, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 2, 64), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    nisa.dma_copy(dst=out, src=s)\n"
        "    return out\n"
    )
    a = _bf16(np.random.default_rng(16), (128, 2, 64))
    program = neuronemu.compile_kernel(kernel_file(source), {"a": a})
    s = next(t for t in program.tensors if t.name == "s")
    mem = state.Memory(program.tensors, {"a": a}, None, program.placements, program.arch)
    box = ((0, 128, 1), (0, 2, 1), (0, 64, 1))
    mem.write(View(s, box, (0, 1, 2)), a)
    row = ((0, 128, 1), (1, 2, 1), (0, 64, 1))
    dropped, kept = mem.read_fp32(View(s, row, (0, 2))), mem.read_fp32(View(s, row, (0, 1, 2)))
    assert dropped.shape == (128, 64) and kept.shape == (128, 1, 64)
    np.testing.assert_array_equal(dropped, _f32(a[:, 1, :]))
    np.testing.assert_array_equal(kept, _f32(a[:, 1:2, :]))
