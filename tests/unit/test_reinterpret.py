"""Reinterpreting views (`t.view(dtype)`, `t.ap(..., dtype=)`): the same bytes read as another
dtype, checked against NumPy's own `ndarray.view`, through dependencies, races, the
uninitialized-read check, the text form and widened runs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.checks.hazards import first_race
from neuronemu.errors import KernelTypeError, MemoryAccessError
from neuronemu.nasm.write import dumps
from neuronemu.sim import functional

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
RNG = np.random.default_rng(7)


def run(kernel_file, body, **inputs):
    return neuronemu.run(kernel_file(HEADER + body), inputs)


def test_float_bits_as_int32_through_the_alu(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t.view(nl.int32), op0=nl.bitwise_and, operand0=0x7fffff)
    nisa.dma_copy(dst=out, src=u)
    return out
"""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    got = run(kernel_file, body, a=a).outputs["out"]
    np.testing.assert_array_equal(got, a.view(np.int32) & 0x7FFFFF)  # the mantissas


def test_expanding_and_contracting_views_move_the_same_bytes(kernel_file):
    body = """
@nki.jit
def k(a, raw):
    as_bytes = nl.ndarray((128, 256), dtype=nl.uint8, buffer=nl.shared_hbm)
    as_floats = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=as_bytes, src=t.view(nl.uint8))
    r = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=raw)
    nisa.dma_copy(dst=as_floats, src=r.view(nl.float32))
    return as_bytes, as_floats
"""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    raw = RNG.standard_normal((128, 16)).astype(np.float32).view(np.uint8)
    out = run(kernel_file, body, a=a, raw=raw).outputs
    np.testing.assert_array_equal(out["as_bytes"], a.view(np.uint8))
    np.testing.assert_array_equal(out["as_floats"], raw.view(np.float32))


def test_a_slice_viewed_as_bytes_and_an_hbm_input_viewed_as_ints(kernel_file):
    body = """
@nki.jit
def k(a):
    part = nl.ndarray((128, 32), dtype=nl.uint8, buffer=nl.shared_hbm)
    ints = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=part, src=t[:, 8:16].view(nl.uint8))
    nisa.dma_copy(dst=ints, src=a.view(nl.int32))
    return part, ints
"""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    out = run(kernel_file, body, a=a).outputs
    np.testing.assert_array_equal(out["part"], a[:, 8:16].copy().view(np.uint8))
    np.testing.assert_array_equal(out["ints"], a.view(np.int32))


def test_ap_with_a_dtype_reads_the_high_halves_of_floats_as_bfloat16(kernel_file):
    # Little-endian: the odd bfloat16 of each float32 holds its top 16 bits (a truncation).
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t.ap(pattern=[[128, 128], [2, 64]], offset=1, dtype=nl.bfloat16))
    return out
"""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    got = run(kernel_file, body, a=a).outputs["out"]
    want = (a.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize(
    "expr, message",
    [
        ("t[:, ::2].view(nl.uint8)", "needs a contiguous last dim"),
        ("r[:, 1:9].view(nl.float32)", "multiples of 4"),
        ("odd.view(nl.float32)", "not a whole number of 4-byte items"),
        ("t.view(nl.bogus)", "no attribute 'bogus'"),
    ],
)
def test_views_that_do_not_fit_are_located_errors(kernel_file, expr, message):
    body = f"""
@nki.jit
def k(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    odd = nl.ndarray((128, 3), dtype=nl.uint8, buffer=nl.sbuf)
    x = {expr}
    return a
"""
    with pytest.raises(KernelTypeError, match=message) as info:
        run(kernel_file, body, a=np.zeros((128, 64), np.float32))
    assert info.value.span.line == 11


VIA_ALIAS = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t.view(nl.int32), value=0)
    nisa.dma_copy(dst=t[:, 0:%d].view(nl.uint8), src=a.view(nl.uint8)[:, 0:%d])
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=u)
    return out
"""


def test_writes_through_an_alias_order_reads_of_the_root(kernel_file):
    path = kernel_file(HEADER + VIA_ALIAS % (64, 256))
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    program = neuronemu.compile_kernel(path, {"a": a})
    memset, load, scale = program.instrs[0], program.instrs[1], program.instrs[2]
    assert memset.index in load.deps  # WAW through two different aliases of t
    assert load.index in scale.deps  # RAW: the root read after the byte-view write
    assert first_race(program) is None
    for seed in (None, 3, 4):
        out = functional.execute(program, {"a": a}, shuffle_seed=seed)["out"]
        np.testing.assert_array_equal(out, a * 2)


def test_the_text_form_keeps_aliases(kernel_file, tmp_path):
    path = kernel_file(HEADER + VIA_ALIAS % (64, 256))
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    result = neuronemu.run(path, {"a": a})
    text = dumps(result.program)
    assert ".alias t.as_uint8 t uint8" in text and ".alias t.as_int32 t int32" in text
    (tmp_path / "k.nasm").write_text(text)
    again = neuronemu.run(tmp_path / "k.nasm", {"a": a})
    np.testing.assert_array_equal(again.outputs["out"], result.outputs["out"])


def test_a_partial_write_through_bytes_leaves_the_rest_uninitialized(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:32].view(nl.uint8), src=a.view(nl.uint8)[:, 0:128])
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    with pytest.raises(
        MemoryAccessError,
        match=r"uninitialized read: dma_copy reads t, but "
        r"nothing wrote t\[0, 32\]",
    ):
        run(kernel_file, body, a=np.ones((128, 64), np.float32))


def test_widened_runs_keep_aliased_tiles_in_their_own_dtype(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.uint16, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t.view(nl.uint16))
    return out
"""
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    path = kernel_file(HEADER + body)
    bits = a.astype(ml_dtypes.bfloat16).view(np.uint16)
    for precise in (True, False):
        got = neuronemu.run(path, {"a": a}, precise=precise).outputs["out"]
        np.testing.assert_array_equal(got, bits)


def test_an_alias_element_per_partition_writes_the_right_bytes(kernel_file):
    # t.view(int32)[:, 0] is one int32 per partition: the whole (128, 4) uint8 tile.
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=t.view(nl.int32)[:, 0], value=0x01020304)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    got = run(kernel_file, body, a=np.zeros((1, 1), np.float32)).outputs["out"]
    want = np.full((128, 1), 0x01020304, np.int32).view(np.uint8)
    np.testing.assert_array_equal(got, want)


def test_half_an_element_written_is_not_the_element_written(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t.view(nl.bfloat16)[:, 0:1], value=1.0)
    %s
    nisa.dma_copy(dst=out, src=t[:, 0:1])
    return out
"""
    with pytest.raises(MemoryAccessError, match=r"nothing wrote t\[0, 0\]"):
        run(kernel_file, body % "", a=np.zeros((1, 1), np.float32))
    # Both halves written, each through the bfloat16 view: the float32 is whole.
    out = run(
        kernel_file,
        body % "nisa.memset(dst=t.view(nl.bfloat16)[:, 1:2], value=2.0)",
        a=np.zeros((1, 1), np.float32),
    ).outputs["out"]
    halves = np.array([1.0, 2.0], ml_dtypes.bfloat16).view(np.float32)[0]
    np.testing.assert_array_equal(out, np.full((128, 1), halves, np.float32))
