"""LNC2 launches: a grid dimension annotated `nl.nc(2)` spreads its program instances over
two physical NeuronCores, each with its own engines, SBUF and PSUM, sharing HBM; nothing
orders the two cores but what the kernel synchronizes."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import RaceError
from neuronemu.nasm.write import dumps

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
RNG = np.random.default_rng(2)

ADD = """
@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    rows = a.shape[0] // nl.num_programs(0)
    for t in range(rows // 128):
        r0 = i * rows + t * 128
        w0 = %(start)s + t * 128
        x = nl.load(a[r0:r0 + 128, :])
        y = nl.load(b[r0:r0 + 128, :])
        nl.store(out[w0:w0 + 128, :], value=nl.add(x, y))
    return out


def on_two_cores(a, b):
    return add[%(grid)s](a, b)
"""


def launch(kernel_file, grid="nl.nc(2)", start="i * rows", kernel="on_two_cores", **kw):
    a = RNG.standard_normal((1024, 512)).astype(np.float32)
    b = RNG.standard_normal((1024, 512)).astype(np.float32)
    path = kernel_file(HEADER + ADD % dict(grid=grid, start=start))
    return a, b, neuronemu.run(path, {"a": a, "b": b}, kernel=kernel, **kw)


def test_two_cores_compute_the_values_and_run_side_by_side(kernel_file):
    a, b, two = launch(kernel_file)
    np.testing.assert_array_equal(two.outputs["out"], a + b)
    assert two.program.cores == 2
    streams = set(two.program.streams())
    assert {"vector", "nc1.vector"} <= streams
    # The same instances in turn on one core (a two-dimensional grid without nl.nc).
    a2, b2, serial = launch(kernel_file, grid="2, 1")
    assert serial.program.cores == 1
    np.testing.assert_array_equal(serial.outputs["out"], a2 + b2)
    # Each core's time, and the launch's: the slower core's, well under the serial sum.
    cores = two.cores
    assert [c["core"] for c in cores] == [0, 1]
    assert all(c["time_ns"] > 0 and c["instructions"] > 0 for c in cores)
    assert two.time_ns == pytest.approx(max(c["time_ns"] for c in cores))
    assert two.time_ns < 0.75 * serial.time_ns


@pytest.mark.parametrize(("target", "cores"), [("trn2", 2), ("trn3", 2), ("trn1", 1)])
def test_a_launch_of_one_number_is_the_lnc_degree(kernel_file, target, cores):
    # nki/get-started/about/lnc.rst: `kernel[2](...)` runs the kernel on two cores.
    a, b, result = launch(kernel_file, grid="2", target=target)
    assert result.program.cores == cores
    np.testing.assert_array_equal(result.outputs["out"], a + b)


def test_both_cores_writing_the_same_bytes_unordered_is_a_race(kernel_file):
    # Every instance writes its sums to rows [0, rows): the two cores' stores overlap.
    with pytest.raises(RaceError, match="different values") as info:
        launch(kernel_file, start="0", allow_uninit=True)
    assert info.value.span is not None


def test_both_cores_writing_the_same_values_is_a_note_not_an_error(kernel_file):
    # Both cores compute every row and store all of it (nki-library kernels that do not
    # shard a small input): the bytes end the same in either order.
    source = HEADER + ADD % dict(grid="nl.nc(2)", start="i * rows")
    source = (
        source.replace("r0 = i * rows + t * 128", "r0 = t * 128")
        .replace("rows = a.shape[0] // nl.num_programs(0)", "rows = a.shape[0]")
        .replace("w0 = i * rows + t * 128", "w0 = t * 128")
    )
    a = RNG.standard_normal((512, 64)).astype(np.float32)
    b = RNG.standard_normal((512, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(source), {"a": a, "b": b}, kernel="on_two_cores")
    np.testing.assert_array_equal(result.outputs["out"], a + b)
    assert result.program.cores == 2
    assert any("both cores write the same values" in n for n in result.program.notes)


def test_the_same_overlap_on_one_core_is_ordered(kernel_file):
    a, b, result = launch(kernel_file, grid="2, 1", start="0", allow_uninit=True)
    np.testing.assert_array_equal(result.outputs["out"][:512], (a + b)[512:])


@pytest.mark.parametrize(
    ("grid", "cores_of"),
    [
        ("nl.spmd_dim(nl.nc(2), 2)", [0, 0, 1, 1]),  # test_nki_spmd_grid.py, example 2
        ("nl.nc(2) * 2", [0, 0, 1, 1]),
        ("nl.spmd_dim(2, nl.nc(2))", [0, 1, 0, 1]),  # example 3
        ("2 * nl.nc(2)", [0, 1, 0, 1]),
    ],
)
def test_which_core_runs_which_instance_follows_the_factor_order(kernel_file, grid, cores_of):
    _, _, result = launch(kernel_file, grid=grid)
    # Instance x stores rows [256x, 256x + 256): the core of the store that writes them.
    stores = [i for i in result.program.instrs if i.spec.name == "dma_copy"]
    by_row = {}
    for ins in stores:
        dst = ins.operands["dst"]
        if dst.tensor.name == "out":
            by_row[dst.bounds()[0][0] // 256] = ins.core
    assert [by_row[x] for x in range(4)] == cores_of


def test_trn1_has_one_core_per_logical_core(kernel_file):
    a, b, result = launch(kernel_file, target="trn1")
    assert result.program.cores == 1
    np.testing.assert_array_equal(result.outputs["out"], a + b)


def test_the_text_form_keeps_each_cores_streams(kernel_file, tmp_path):
    a, b, result = launch(kernel_file)
    path = tmp_path / "p.nasm"
    path.write_text(dumps(result.program))
    again = neuronemu.run(path, {"a": a, "b": b})
    assert again.cycles == result.cycles and again.cores == result.cores
    np.testing.assert_array_equal(again.outputs["out"], result.outputs["out"])


EXCHANGE = """
@nki.jit
def swap_halves(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    half = a.shape[0] // 2
    mine = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[me * half:(me + 1) * half, :])
    got = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=got)
    # Each core writes its half of scratch, then reads the other core's half.
    nisa.dma_copy(dst=scratch[me * half:(me + 1) * half, :], src=mine)
%(barrier)s
    back = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=scratch[(1 - me) * half:(2 - me) * half, :])
    nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=back)
    return out, scratch
"""


def exchange(kernel_file, barrier="    nisa.core_barrier(scratch, (0, 1))", **kw):
    a = RNG.standard_normal((256, 64)).astype(np.float32)
    path = kernel_file(HEADER + EXCHANGE % dict(barrier=barrier))
    return a, neuronemu.run(path, {"a": a}, grid=(2,), **kw)


def test_sendrecv_swaps_tiles_and_core_barrier_orders_the_cores(kernel_file, tmp_path):
    a, result = exchange(kernel_file)
    halves = np.concatenate([a[128:], a[:128]])
    # Both ways back to the other core's half: sendrecv, then scratch after the barrier.
    np.testing.assert_array_equal(result.outputs["out"], halves)
    np.testing.assert_array_equal(result.outputs["scratch"], a)
    names = [i.spec.name for i in result.program.instrs]
    assert names.count("sendrecv") == 2 and names.count("core_barrier") == 4
    path = tmp_path / "p.nasm"
    path.write_text(dumps(result.program))
    again = neuronemu.run(path, {"a": a})
    assert again.cycles == result.cycles
    np.testing.assert_array_equal(again.outputs["out"], halves)


def test_reading_the_other_cores_writes_without_a_barrier_is_a_race(kernel_file):
    with pytest.raises(RaceError, match="race on scratch"):
        exchange(kernel_file, barrier="    pass")


def test_the_cores_must_meet_as_often(kernel_file):
    from neuronemu.errors import ConstraintError

    once = "    if me == 0:\n        nisa.core_barrier(scratch, (0, 1))"
    with pytest.raises(ConstraintError, match="do not meet"):
        exchange(kernel_file, barrier=once)


def test_sendrecv_needs_two_cores(kernel_file):
    from neuronemu.errors import ConstraintError

    a = RNG.standard_normal((256, 64)).astype(np.float32)
    path = kernel_file(HEADER + EXCHANGE % dict(barrier="    pass"))
    with pytest.raises(ConstraintError, match="two physical cores"):
        neuronemu.run(path, {"a": a}, grid=(1,))


def test_an_lnc_degree_set_in_the_file_launches_on_two_cores(kernel_file):
    source = (
        "import os\n" + HEADER + 'os.environ["NEURON_LOGICAL_NC_CONFIG"] = "2"\n' + ADD
    ) % dict(grid="1", start="i * rows")
    source = source.replace("add[1](a, b)", "add(a, b)")  # no launch grid in the file
    a = RNG.standard_normal((1024, 512)).astype(np.float32)
    b = RNG.standard_normal((1024, 512)).astype(np.float32)
    result = neuronemu.run(kernel_file(source), {"a": a, "b": b}, kernel="add")
    assert result.program.cores == 2 and result.program.grid == (2,)
    np.testing.assert_array_equal(result.outputs["out"], a + b)
    assert any("NEURON_LOGICAL_NC_CONFIG=2" in n for n in result.program.notes)


LOOPED = """
@nki.jit
def k(a, b, n):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)

    def body(i):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        src = a if me == 0 else b
        row = [[a.shape[1], 1], [1, a.shape[1]]]
        nisa.dma_copy(dst=t, src=src.ap(row, scalar_offset=i, indirect_dim=0))
        nisa.dma_copy(dst=out.ap(row, scalar_offset=i, indirect_dim=0), src=t)

    nl.fori_loop(0, nisa.scalar_load(n_sb), body)
    return out
"""


@pytest.mark.parametrize("timing_only", [False, True])
def test_a_race_in_any_pass_of_a_device_loop_is_found(kernel_file, timing_only):
    # The cores copy a's and b's rows to the same rows of out: b equals a in row 0 only.
    a = RNG.standard_normal((4, 16)).astype(np.float32)
    b = a.copy()
    b[1:] += 1.0
    path = kernel_file(HEADER + LOOPED)
    args = {"a": a, "b": b}
    one = neuronemu.run(path, args | {"n": np.array([[1]], np.int32)}, grid=(2,))
    assert any("same values" in note for note in one.program.notes)
    with pytest.raises(RaceError, match="different values"):
        neuronemu.run(
            path, args | {"n": np.array([[3]], np.int32)}, grid=(2,), timing_only=timing_only
        )


def test_an_in_place_sendrecv_swaps(kernel_file):
    source = HEADER + EXCHANGE % dict(barrier="    pass")
    source = source.replace("nisa.sendrecv(src=mine, dst=got,", "nisa.sendrecv(src=mine, dst=mine,")
    source = source.replace(
        "nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=got)",
        "nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=mine)",
    )
    source = source.split("    # Each core writes")[0] + "    return out, scratch\n"
    a = RNG.standard_normal((256, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(source), {"a": a}, grid=(2,), allow_uninit=True)
    np.testing.assert_array_equal(result.outputs["out"], np.concatenate([a[128:], a[:128]]))
