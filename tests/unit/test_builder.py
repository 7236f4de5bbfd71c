"""Builder: dependencies and semaphore waits from data hazards, PSUM accumulation flags, peaks."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import AllocationError, ConstraintError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def compile_src(kernel_file, body: str, inputs=None, target="trn2"):
    path = kernel_file(HEADER + body)
    inputs = {"a": np.zeros((128, 512), np.float32)} if inputs is None else inputs
    return neuronemu.compile_kernel(path, inputs, target=target)


def test_raw_war_waw_hazards_become_dependencies(kernel_file):
    p = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)                                       # 0
    nisa.tensor_copy(dst=u, src=t)                                    # 1 RAW on t
    nisa.memset(dst=t, value=0.0)                                     # 2 WAR on t
    nisa.tensor_scalar(dst=u, data=t, op0=nl.add, operand0=1.0)       # 3 RAW t, WAW u
    nisa.dma_copy(dst=out, src=u)                                     # 4 RAW u
    return out
""",
    )
    deps = [i.deps for i in p.instrs]
    assert deps == [(), (0,), (0, 1), (1, 2), (3,)]


def test_disjoint_regions_do_not_depend(kernel_file):
    p = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:256], src=a[:, 0:256])
    nisa.dma_copy(dst=t[:, 256:512], src=a[:, 256:512])
    nisa.memset(dst=t[:, 0:256], value=1.0)
    return a
""",
    )
    assert [i.deps for i in p.instrs] == [(), (), (0,)]


def test_waits_are_the_latest_dependency_on_each_other_stream(kernel_file):
    p = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t[:, 0:256], value=1.0)
    nisa.memset(dst=t[:, 256:512], value=2.0)
    nisa.tensor_copy(dst=u, src=t, engine=nisa.engine.scalar)
    return a
""",
    )
    copy = p.instrs[2]
    assert copy.stream == "scalar"
    assert copy.deps == (0, 1)
    assert copy.waits == (1,)  # the vector stream is in order: waiting on #1 covers #0


def test_each_dma_line_has_a_queue_the_lines_taking_them_in_turn(kernel_file):
    # The iterations of a loop are one DMA instruction of the program: one queue.
    lines = "\n".join(f"        nisa.dma_copy(dst=t{j}, src=a[:, 0:16])" for j in range(18))
    allocs = "\n".join(
        f"        t{j} = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)" for j in range(18)
    )
    p = compile_src(
        kernel_file,
        f"""
@nki.jit
def k(a):
    for i in range(3):
{allocs}
{lines}
    return a
""",
    )
    queues = [i.queue for i in p.instrs]
    # 18 lines over the 15 queues the spills leave (the last is theirs), 3 times
    assert queues == [j % 15 for j in range(18)] * 3


def test_a_dma_helper_has_a_queue_per_hbm_tensor_it_moves(kernel_file):
    p = compile_src(
        kernel_file,
        """
def load(src, i):
    t = nl.ndarray((128, 16), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[:, i * 16 : (i + 1) * 16])
    return t


@nki.jit
def k(a, b):
    for i in range(3):
        load(a, i)
        load(b, i)
    return a
""",
        inputs={"a": np.zeros((128, 48), np.float32), "b": np.zeros((128, 48), np.float32)},
    )
    queues = {n: {i.queue for i in p.instrs if i.operands["src"].tensor.name == n} for n in "ab"}
    assert len(queues["a"]) == len(queues["b"]) == 1 and queues["a"] != queues["b"]


def test_accumulate_none_overwrites_first_then_accumulates(kernel_file):
    p = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    for i in range(3):
        nisa.nc_matmul(dst=acc, stationary=x, moving=x)
    nisa.nc_matmul(dst=acc, stationary=x, moving=x, accumulate=False)
    return a
""",
    )
    flags = [i.attrs["accumulate"] for i in p.instrs if i.spec.name == "nc_matmul"]
    assert flags == [False, True, True, False]


def test_accumulate_none_rejects_a_partly_written_region(kernel_file):
    with pytest.raises(ConstraintError, match="part of the region was written before"):
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    acc = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc[:, 0:128], stationary=x, moving=x)
    nisa.nc_matmul(dst=acc[:, 64:192], stationary=x, moving=x[:, 0:128])
    return a
""",
        )


def test_peak_counts_only_tiles_live_at_once(kernel_file):
    p = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    for i in range(4):
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t)
    return a
""",
    )
    # t (2 KiB/partition) and u (2 KiB) overlap at the copy; earlier iterations are dead.
    assert p.sbuf_peak_bytes == 4096


def test_live_tiles_over_sbuf_capacity_are_refused_without_spills_and_fit_on_trn3(kernel_file):
    body = """
@nki.jit
def k(a):
    tiles = []
    for i in range(12):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        tiles.append(t)
    for t in tiles:
        nisa.tensor_copy(dst=t, src=t)
    return a
"""
    # 12 x 16 KiB = 192 KiB per partition: over trn1's 176 KiB usable, under trn3's 240 KiB.
    path = kernel_file(HEADER + body)
    a = {"a": np.zeros((128, 512), np.float32)}
    with pytest.raises(
        AllocationError,
        match=r"SBUF over capacity: tile 't.11' needs 16384 "
        r"bytes per partition but live tiles take 180224 "
        r"of the 180224 usable on trn1",
    ) as info:
        neuronemu.compile_kernel(path, a, target="trn1", spill=False)
    assert info.value.span.line == 10  # the allocation of the tile that does not fit
    assert "without --no-spill" in info.value.hint
    assert compile_src(kernel_file, body, target="trn3").sbuf_peak_bytes == 196608
    spilled = neuronemu.compile_kernel(path, a, target="trn1")  # spills instead (test_spill)
    assert spilled.sbuf_peak_bytes <= 180224
    assert any("SBUF full" in n for n in spilled.notes)


def test_tile_larger_than_psum_partition_is_rejected(kernel_file):
    with pytest.raises(AllocationError, match="needs 32768 bytes per partition"):
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    t = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.psum)
    return a
""",
        )


def test_psum_tiles_take_whole_banks_and_eight_at_most(kernel_file):
    body = """
@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    accs = []
    for i in range(%d):
        acc = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=x, moving=x[:, 0:4])
        accs.append(acc)
    for acc in accs:
        nisa.tensor_copy(dst=x[:, 0:4], src=acc)
    return a
"""
    p = compile_src(kernel_file, body % 8)
    assert sorted(
        pl.offset for pl in p.placements.values() if pl.tensor.buffer.value == "psum"
    ) == [2048 * b for b in range(8)]
    with pytest.raises(AllocationError, match="PSUM over capacity: tile 'acc.8'"):
        compile_src(kernel_file, body % 9)


def test_matmul_result_crossing_a_psum_bank_is_rejected(kernel_file):
    with pytest.raises(ConstraintError, match=r"across PSUM banks 0 and 1") as info:
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.nc_matmul(dst=acc[:, 0:512], stationary=x, moving=m)
    nisa.nc_matmul(dst=acc[:, 448:576], stationary=x, moving=x, accumulate=False)
    return a
""",
        )
    assert "448:576" in info.value.span.source_line()


def test_explicit_address_is_honoured_and_overlap_reported(kernel_file):
    body = """
@nki.jit
def k(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, %d))
    nisa.memset(dst=t, value=0.0)
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
    nisa.tensor_copy(dst=u, src=t)
    return a
"""
    p = compile_src(kernel_file, body % 8192)
    assert sorted(pl.offset for pl in p.placements.values()) == [4096, 8192]
    with pytest.raises(AllocationError, match="'u' at offset 4096 overlaps 't'"):
        compile_src(kernel_file, body % 4000)
