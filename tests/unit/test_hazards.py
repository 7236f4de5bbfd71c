"""Hazards found without running: races between unordered instructions, uninitialized reads."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.checks import written
from neuronemu.checks.access_table import Accesses
from neuronemu.checks.hazards import check_initialized, check_races, first_race, uninitialized_reads
from neuronemu.errors import MemoryAccessError, RaceError
from neuronemu.nasm.read import load_program

PROGRAM = """\
.kernel k
.target trn2
.tensor a input hbm float32[128,64]
.tensor out output shared_hbm float32[128,64]
.tensor t tile sbuf float32[128,64]
.tensor u tile sbuf float32[128,64]

vector:
  @1 tensor_scalar dst=u data=t operand0=2.0 op0=multiply wait(dma.q0@0)  ; k.py:7:5
scalar:
  @2 activation dst=t data=u op=exp wait(vector@1)  ; k.py:8:5
dma.q0:
  @0 dma_copy dst=t src=a  ; k.py:6:5
dma.q1:
  @3 dma_copy dst=out src=t wait(scalar@2)  ; k.py:9:5
"""


def load(tmp_path, text):
    path = tmp_path / "k.nasm"
    path.write_text(text)
    return load_program(path, {"a": np.zeros((128, 64), np.float32)})


def test_the_program_as_written_has_no_race(tmp_path):
    assert first_race(load(tmp_path, PROGRAM)) is None


@pytest.mark.parametrize(
    ("deleted", "tile", "first", "second", "where"),
    [
        (
            " wait(dma.q0@0)",
            "t",
            "#0 dma_copy (k.py:6:5) writes",
            "#1 tensor_scalar reads t",
            "k.py:7:5",
        ),
        (
            " wait(vector@1)",
            "u",
            "#1 tensor_scalar (k.py:7:5) writes",
            "#2 activation reads u",
            "k.py:8:5",
        ),
        (
            " wait(scalar@2)",
            "t",
            "#2 activation (k.py:8:5) writes",
            "#3 dma_copy reads t",
            "k.py:9:5",
        ),
    ],
)
def test_deleting_a_wait_is_a_race_naming_both_lines(tmp_path, deleted, tile, first, second, where):
    program = load(tmp_path, PROGRAM.replace(deleted, ""))
    with pytest.raises(RaceError) as info:
        check_races(program)
    message = info.value.render()
    assert second in message and first in message
    assert message.startswith(f"{where}: error: race on {tile}:")


def test_a_race_in_a_text_program_is_hinted_in_its_own_wait_syntax(tmp_path):
    # Its instructions' spans name the kernel lines (k.py) `asm` wrote them from: the hint
    # still speaks the .nasm file that was run, not NKI.
    program = load(tmp_path, PROGRAM.replace(" wait(dma.q0@0)", ""))
    with pytest.raises(RaceError) as info:
        check_races(program)
    assert info.value.span.path == "k.py"
    assert info.value.hint == "make #1 wait for #0 (wait(dma.q0@0)), or use separate tiles"


def test_sequential_kernels_never_race(kernel_file):
    src = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    for i in range(4):
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, engine=nisa.engine.gpsimd)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out
"""
    program = neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((512, 64), np.float32)})
    race = first_race(program)
    assert race is None, race.render()
    assert uninitialized_reads(program) == []


UNINIT = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:100, :], src=a[0:100, :])
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=out[%s, :], src=t[%s, :])
    return out
"""


def test_uninitialized_data_reaching_an_output_names_the_read_and_the_store(kernel_file):
    path = kernel_file(UNINIT % ("0:128", "0:128"))
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    reads = uninitialized_reads(program)
    assert len(reads) == 1 and reads[0].first_index == (100, 0)
    with pytest.raises(MemoryAccessError) as info:
        check_initialized(program)
    err = info.value
    assert err.message == (
        "uninitialized read: activation reads t, but nothing wrote t[100, 0] "
        f"before it; the result reaches out through #2 dma_copy ({path}:12:5)"
    )
    assert (err.span.line, err.span.col) == (11, 5)


STEPPED = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 127), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 127), dtype=a.dtype, buffer=nl.sbuf)
    src = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=a)
    nisa.tensor_copy(dst=t[:, 0:127:2], src=src)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def test_a_stepped_write_spanning_a_tile_leaves_the_elements_between_unwritten(kernel_file):
    # Its bounds are the whole tile, but it writes every other column: reading the tile
    # reads the odd columns unwritten (the fast path took such a write for a whole one).
    path = kernel_file(STEPPED)
    a = np.zeros((128, 64), np.float32)
    program = neuronemu.compile_kernel(path, {"a": a})
    reads = uninitialized_reads(program, accesses=Accesses(program))
    assert len(reads) == 1 and reads[0].first_index == (0, 1)
    with pytest.raises(MemoryAccessError) as info:
        neuronemu.run(path, {"a": a}, print_fn=lambda _line: None)
    assert (info.value.span.line, info.value.span.col) == (13, 5)


def test_padding_that_is_never_stored_is_not_an_error(kernel_file):
    path = kernel_file(UNINIT % ("0:100", "0:100"))
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    assert uninitialized_reads(program) == []


def test_accumulating_onto_unwritten_psum_is_an_uninitialized_read(kernel_file):
    src = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=x, moving=x, accumulate=True)
    y = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=acc)
    nisa.dma_copy(dst=out, src=y)
    return out
"""
    program = neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    with pytest.raises(MemoryAccessError, match="nc_matmul reads acc"):
        check_initialized(program)


def test_allow_uninit_turns_the_error_into_a_note(kernel_file):
    path = kernel_file(UNINIT % ("0:128", "0:128"))
    a = np.ones((128, 64), np.float32)
    with pytest.raises(MemoryAccessError):
        neuronemu.run(path, {"a": a})
    result = neuronemu.run(path, {"a": a}, allow_uninit=True)
    assert any("uninitialized read (allowed)" in n for n in result.program.notes)
    assert np.isnan(result.outputs["out"][100:]).all()
    np.testing.assert_allclose(result.outputs["out"][:100], np.e, rtol=1e-6)


MOVED = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((8, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    src = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=a)
    wide = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    for c in range(8):  # only columns 0, 16, ..., 112 are written
        nisa.tensor_copy(dst=wide[:, c * 16], src=src[:, c])
    ident = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ident, value=1.0)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    HOW
    rows = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=rows, src=t)
    for c in range(8):
        nisa.dma_copy(dst=out[c], src=rows[c * 16 + SHIFT])
    return out
"""


@pytest.mark.parametrize(
    "how",
    [
        "nisa.nc_matmul(dst=t, stationary=wide, moving=ident, is_transpose=True)",
        "nisa.nc_transpose(dst=t, data=wide)",
        # a matmul's row m sums stationary[:, m]: sound where that column was written
        "nisa.nc_matmul(dst=t, stationary=wide, moving=ident)",
    ],
)
def test_data_moved_across_partitions_is_sound_where_its_sources_were_written(kernel_file, how):
    # Rows 0, 16, ... of the moved tile come from the written columns: storing them is
    # fine, storing row 1 reads what nothing wrote.
    inputs = {"a": np.zeros((128, 8), np.float32)}
    sound = MOVED.replace("HOW", how).replace("SHIFT", "0")
    assert uninitialized_reads(neuronemu.compile_kernel(kernel_file(sound), inputs)) == []
    unsound = MOVED.replace("HOW", how).replace("SHIFT", "1")
    reads = uninitialized_reads(neuronemu.compile_kernel(kernel_file(unsound), inputs))
    assert reads and reads[0].view.tensor.name == "wide"


def test_a_merge_output_read_only_to_keep_its_other_elements_is_not_an_uninitialized_read(
    kernel_file,
):
    # nonzero_with_count reads dst only to leave the non-core partitions as they were.
    src = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((1, 65), dtype=nl.int32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    idx = nl.ndarray((128, 65), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=idx, src=x)
    nisa.dma_copy(dst=out, src=idx[0:1, :])
    return out
"""
    a = np.zeros((128, 64), np.float32)
    a[0, [3, 9]] = 1.0
    r = neuronemu.run(kernel_file(src), {"a": a}, target="trn2")
    expected = np.full((1, 65), -1, np.int32)
    expected[0, :2], expected[0, 64] = [3, 9], 2
    np.testing.assert_array_equal(r.outputs["out"], expected)


OVERWRITTEN = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=a)
    junk = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=acc[:, 0:16], src=junk[:, 0:16])
    for c in range(0, 64, 16):
        nisa.dma_copy(dst=out[:, c : c + 16], src=acc[:, c : c + 16])
    return out
"""


def test_unwritten_data_over_part_of_a_written_tile_taints_that_part_only(kernel_file):
    # acc is written whole, then its first 16 columns get never-written data: the store of
    # those columns is the uninitialized read, not the others (which stay written).
    path = kernel_file(OVERWRITTEN)
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    reads = uninitialized_reads(program, limit=10)
    assert len(reads) == 1, [r.message() for r in reads]
    assert reads[0].instr.spec.name == "tensor_copy" and reads[0].first_index == (0, 0)
    assert reads[0].output_view is not None
    assert repr(reads[0].output_view) == "out[:, 0:16]"


def test_set_mask_counts_the_flags_it_sets_unless_a_flag_is_reached_twice():
    from neuronemu.ir import ALL_DTYPES, BUFFERS, PatternView, Tensor
    from neuronemu.ir.footprint import mask_shape, set_mask

    t = Tensor("t", (8, 16), ALL_DTYPES["float32"], BUFFERS["sbuf"], None)
    mask = np.zeros(mask_shape(t, 4), np.bool_)
    view = t.full()
    assert set_mask(mask, view.subscript((slice(0, 4), slice(0, 8)), None), True) == 32
    # again over half of it, and wider: only the new flags count
    assert set_mask(mask, view.subscript((slice(0, 8), slice(0, 8)), None), True) == 32
    assert set_mask(mask, view.subscript((slice(0, 2), slice(0, 8)), None), False) == -16
    assert int(mask.sum()) == 48
    # a view that reaches one element from every index (a stride-0 broadcast): not counted
    wide = PatternView.build(t, 0, [(16, 8), (0, 4)], None)
    assert set_mask(mask, wide, True) is None
    assert bool(mask[:, 0].all())


# A tile written in two column blocks, then stored whole (each block covers part of what is
# read: together they cover all of it), or with the second block left out (half of what is
# stored was never written).
BLOCKS = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:32], src=a[:, 0:32])
    %s
    nisa.dma_copy(dst=out[0:64, :], src=t[0:64, :])
    return out
"""


@pytest.mark.parametrize("second", [True, False])
def test_reads_covered_by_earlier_writes_together_are_cleared_and_others_found(kernel_file, second):
    fill = "nisa.dma_copy(dst=t[:, 32:64], src=a[:, 32:64])" if second else "pass"
    path = kernel_file(BLOCKS % fill)
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    accesses = Accesses(program)
    # (no whole write of t: only the covering check can clear the program at once)
    assert not accesses.whole_writes(program.tensors)[accesses.write].all()
    assert written.reads_written(program, accesses) is second
    reads = uninitialized_reads(program, accesses=accesses)
    walked = uninitialized_reads(program)
    assert [r.message() for r in reads] == [r.message() for r in walked]
    assert (reads == []) is second


def test_the_jitted_race_pass_stops_to_poll_after_each_access_it_looked_at_anything():
    """One tensor written a column at a time (gridded), then whole, over and over: each
    whole write is wide, compared with every access not superseded. With `work` = 1 the
    pass must stop after every access (each looks at a list at least), so that its caller
    checks the run-time budget; a wide access that walked the tensor's empty cells uncounted
    ran on without stopping (review of 8597cb1: 20,000 whole writes, 11.8 s, no poll)."""
    from neuronemu.checks import hazards
    from neuronemu.jit import compiled as _jit

    columns, wholes = 200, 20
    n = columns + wholes
    acc = object.__new__(Accesses)  # (a table of these columns, as a program's holds)
    acc.tensor, acc.ids = np.zeros(n, np.int64), np.arange(1)
    acc.instr, acc.write = np.arange(n), np.ones(n, np.bool_)
    acc.lo, acc.hi = np.zeros((n, 2), np.int64), np.zeros((n, 2), np.int64)
    acc.hi[:, 0] = 128
    acc.lo[:columns, 1] = np.arange(columns)
    acc.hi[:columns, 1] = np.arange(columns) + 1
    acc.hi[columns:, 1] = columns
    stream = np.zeros(n, np.int64)  # (one stream, each instruction after the one before)
    position, clock = _jit.clocks(
        stream, np.r_[0, 0, np.arange(1, n)].astype(np.int64), np.arange(n - 1), 1
    )
    grid = acc.grid(hazards.GRID_ABOVE, hazards.MAX_CELLS)
    assert grid.gridded[0] and grid.n_cells == columns
    state = (
        np.zeros((0, 2), np.int64),
        np.full((2, n), -1, np.int32),
        np.full((4, 1), -1, np.int64),
        np.full((4, 1), -1, np.int64),
    )
    cells = (np.full((2, grid.n_cells), -1, np.int64), np.full(len(grid.cell), -1, np.int32))
    mark = np.full(n, -1, np.int32)
    flags = (np.zeros(n, np.int64), np.zeros(n, np.bool_))
    a = stops = 0
    while a < n:
        e, _, _, went_to = _jit.first_race(
            acc.instr, acc.tensor, acc.write, acc.lo, acc.hi, stream, position, clock,
            *flags, *state, grid.gridded, grid.ptr, grid.cell, grid.owner, *cells, mark,
            a, 0, 1,
        )  # fmt: skip
        assert e < 0 and went_to == a + 1 or went_to == n
        a, stops = went_to, stops + 1
    assert stops == n
