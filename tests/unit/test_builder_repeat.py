"""Builder repeats: a replayed loop's iterations are made from its last traced one
(dependencies through the iteration's own tiles moved on, histories made when touched
again) and give exactly what emitting each instruction gives, values included."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu.replay import templates
from neuronemu.replay.repeats import Repeat

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
# The start of matmul kernels over n: an accumulator per iteration.
MATMUL_OVER_N = HEADER + (
    "@nki.jit\n"
    "def k(lhsT, rhs):\n"
    "    out = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    for n in nl.affine_range(8):\n"
    "        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
)


def _matmul_over_n(k_trips: int) -> str:
    """MATMUL_OVER_N with, per n, `k_trips` loads and matmuls over k into its accumulator,
    then the accumulator through SBUF to `out`."""
    return MATMUL_OVER_N + (
        f"        for k in nl.affine_range({k_trips}):\n"
        "            a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
        "            b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)\n"
        "            nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, :])\n"
        "            col = n * 512\n"
        "            nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, col : col + 512])\n"
        "            nisa.nc_matmul(dst=acc, stationary=a, moving=b)\n"
        "        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.tensor_copy(dst=o, src=acc)\n"
        "        nisa.dma_copy(dst=out[:, n * 512 : n * 512 + 512], src=o)\n"
        "    return out\n"
    )


# The end of the kernels below: `tile` (64 x 64, PSUM) through SBUF to `out`.
STORE = (
    "    o = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.tensor_copy(dst=o, src={tile})\n"
    "    nisa.dma_copy(dst=out, src=o)\n"
    "    return out\n"
)


def _counted(monkeypatch, at_once: list[int] | None = None) -> list[int]:
    """The instructions a Repeat made (an entry each: its position in the iteration), one by
    one (`emit`) or a whole iteration at once (`emit_iteration`, which leaves some to
    `emit`); `at_once` gets how many of them `emit_iteration` made itself."""
    made: list[int] = []
    one_by_one, whole = Repeat.emit, Repeat.emit_iteration

    def emit(self, j, s, tensors):
        made.append(j)
        return one_by_one(self, j, s, tensors)

    def emit_iteration(self, s, tensors):
        before, already = len(self.builder.instrs), len(made)
        whole(self, s, tensors)
        itself = len(self.builder.instrs) - before - (len(made) - already)
        made.extend([-1] * itself)
        if at_once is not None:
            at_once.append(itself)

    monkeypatch.setattr(Repeat, "emit", emit)
    monkeypatch.setattr(Repeat, "emit_iteration", emit_iteration)
    return made


def _both(monkeypatch, path: str, inputs: dict, at_once: list[int] | None = None) -> tuple:
    """The run with repeats off, the run with them on, and how many instructions the
    second made by repeat (`at_once`: see _counted)."""
    monkeypatch.setattr(templates, "REPEAT", False)
    plain = neuronemu.run(path, inputs)
    monkeypatch.setattr(templates, "REPEAT", True)
    made = _counted(monkeypatch, at_once)
    return plain, neuronemu.run(path, inputs), len(made)


def _same(a, b) -> None:
    pa, pb = a.program, b.program
    assert dumps(pb) == dumps(pa)
    assert [(i.deps, i.waits, i.queue, i.attrs) for i in pb.instrs] == [
        (i.deps, i.waits, i.queue, i.attrs) for i in pa.instrs
    ]
    assert pb.memory_map() == pa.memory_map()
    assert b.cycles == a.cycles
    for name in a.outputs:
        np.testing.assert_array_equal(b.outputs[name], a.outputs[name])


def test_matmul_loops_are_made_by_repeat_as_emitted(kernel_file, monkeypatch):
    # Over n: 3 iterations traced (the last two recorded), the other 5 made from the third
    # (each with its own accumulator, loads, copy and store); over k: the same, with the
    # accumulator a tile from outside the loop.
    source = _matmul_over_n(6)
    rng = np.random.default_rng(3)
    lhsT = rng.standard_normal((768, 128)).astype(np.float32)
    rhs = rng.standard_normal((768, 4096)).astype(np.float32)
    at_once: list[int] = []
    plain, made, n = _both(monkeypatch, kernel_file(source), {"lhsT": lhsT, "rhs": rhs}, at_once)
    per_n = 6 * 3 + 2
    # (and the k loops of the three n iterations traced, two of them being recorded, make 3
    # iterations each)
    assert n == 5 * per_n + 3 * 3 * 3
    # Made an iteration at once, but the instructions that access a tensor from before the
    # loop (the history holds those): the first k loop's 3 repeats (outside any iteration
    # being recorded) but their matmul into `acc`, the n loop's 5 but their store to `out`.
    # (The other k loops' repeats, within a recorded iteration, are made one by one.)
    assert at_once == [2, 2, 2] + [per_n - 1] * 5
    _same(plain, made)
    np.testing.assert_allclose(made.outputs["out"], lhsT.T @ rhs, rtol=2e-2, atol=2e-1)


def test_accumulation_decided_per_iteration_on_a_tile_made_before_the_loop(
    kernel_file, monkeypatch
):
    # acc's first 32 columns are written before the loop: the iterations that write there
    # accumulate (accumulate=None), the later ones overwrite. The 4th (a repeat) accumulates;
    # the 5th on must not copy its flag.
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)\n"
        "    nisa.memset(dst=acc[:, 0:32], value=5.0)\n"
        "    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a[0:128, 0:64])\n"
        "    for i in nl.affine_range(8):\n"
        "        nisa.nc_matmul(dst=acc[:, i * 8 : i * 8 + 8], stationary=s,\n"
        "                       moving=s[:, i * 8 : i * 8 + 8])\n" + STORE.format(tile="acc")
    )
    a = np.random.default_rng(4).standard_normal((128, 64)).astype(np.float32)
    plain, made, n = _both(monkeypatch, kernel_file(source), {"a": a})
    assert n == 5
    _same(plain, made)
    flags = [i.attrs["accumulate"] for i in made.program.instrs if i.spec.name == "nc_matmul"]
    assert flags == [True] * 4 + [False] * 4
    want = a.T @ a
    want[:, 0:32] += 5.0
    np.testing.assert_allclose(made.outputs["out"], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("later", ["tiles[-1]", "tiles[2]", "p"])
def test_a_tile_an_iteration_makes_and_that_outlives_it(kernel_file, monkeypatch, later):
    # Each iteration writes half of a PSUM tile of its own and keeps it in a list; after
    # the loop a matmul with accumulate=None writes that half of one of them again (it
    # accumulates: the half was written) and another half (it overwrites), then reads it.
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a[0:128, 0:64])\n"
        "    tiles = []\n"
        "    for i in nl.affine_range(7):\n"
        "        p = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)\n"
        "        nisa.nc_matmul(dst=p[:, 0:32], stationary=s, moving=s[:, 0:32])\n"
        "        tiles.append(p)\n"
        f"    nisa.nc_matmul(dst={later}[:, 0:32], stationary=s, moving=s[:, 0:32])\n"
        f"    nisa.nc_matmul(dst={later}[:, 32:64], stationary=s, moving=s[:, 32:64])\n"
        + STORE.format(tile=later)
    )
    a = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    plain, made, n = _both(monkeypatch, kernel_file(source), {"a": a})
    assert n == 4
    _same(plain, made)
    want = a.T @ a
    want[:, 0:32] *= 2
    np.testing.assert_allclose(made.outputs["out"], want, rtol=1e-4, atol=1e-3)


def test_the_repeats_views_are_made_when_asked_for_and_as_emitted(kernel_file, monkeypatch):
    """A repeat's views of the iteration's tiles are left to be made (program.LateInstr):
    the checks and the scheduler take what they need of them (a tile, where a view starts,
    one operand) without making the others, and what they take, and the schedule they make
    of it, are what the views made in full give."""
    import dataclasses

    from neuronemu.program import Instr
    from neuronemu.replay.late import LateInstr
    from neuronemu.sim import timing

    source = MATMUL_OVER_N + (
        "        p = n * 16  # (views of the iteration's tiles that move with it)\n"
        "        for k in nl.affine_range(2):\n"
        "            a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
        "            b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)\n"
        "            nisa.dma_copy(dst=a[p : p + 16, :], src=lhsT[k * 16 : k * 16 + 16, :])\n"
        "            nisa.dma_copy(dst=b[p : p + 16, :], src=rhs[k * 16 : k * 16 + 16, "
        "n * 512 : n * 512 + 512])\n"
        "            nisa.nc_matmul(dst=acc, stationary=a[p : p + 16], moving=b[p : p + 16])\n"
        "        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.tensor_copy(dst=o, src=acc)\n"
        "        nisa.dma_copy(dst=out[:, n * 512 : n * 512 + 512], src=o)\n"
        "    return out\n"
    )
    path = kernel_file(source)
    inputs = {"lhsT": np.zeros((32, 128), np.float32), "rhs": np.zeros((32, 4096), np.float32)}
    program = neuronemu.compile_kernel(path, inputs)
    late = [i for i in program.instrs if isinstance(i, LateInstr)]
    assert late
    lazy = timing.schedule(program)
    # (the scheduler made the views of each transfer to a start it had not seen: here, all)
    late = [i for i in late if i.__dict__["_late"] is not None]
    assert late
    asked = []
    for ins in late:
        names = [n for n, _, make in ins.__dict__["_late"][0] if make is not None]
        asked.append([(ins.tensor_of(n), ins.start_of(n), ins.operand(n)) for n in names])
    made = timing.schedule(program)  # (the same program, its views made in full now)
    for ins, answers in zip(late, asked):
        for name, (tensor, start, view) in zip(ins.operands, answers):
            full = ins.operands[name]
            assert tensor is full.tensor and start == full.bounds()[0][0]
            assert type(view) is type(full) and view.tensor is full.tensor
            assert (view.box, view.bounds(), view.as_pattern()) == (
                full.box,
                full.bounds(),
                full.as_pattern(),
            )
    assert all(i.__dict__["_late"] is None for i in late)
    for field in ("start_ns", "xfer_ns", "end_ns"):
        np.testing.assert_array_equal(getattr(lazy, field), getattr(made, field))
    fields = {f.name for f in dataclasses.fields(Instr)}
    assert set(late[0].__dict__) - {"_view_cache", "_operands", "_late"} == fields - {"operands"}
    monkeypatch.setattr(templates, "REPEAT", False)
    assert dumps(neuronemu.compile_kernel(path, inputs)) == dumps(program)


def test_a_repeat_whose_views_are_not_made_yet_pickles_with_them_made(kernel_file):
    import pickle

    from neuronemu.replay.late import LateInstr

    path = kernel_file(
        MATMUL_OVER_N
        + (
            "        for k in nl.affine_range(6):\n"
            "            a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
            "            nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, :])\n"
            "            nisa.nc_matmul(dst=acc[:, 0:128], stationary=a, moving=a)\n"
            "        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
            "        nisa.tensor_copy(dst=o[:, 0:128], src=acc[:, 0:128])\n"
            "        nisa.dma_copy(dst=out[:, n * 512 : n * 512 + 128], src=o[:, 0:128])\n"
            "    return out\n"
        )
    )
    inputs = {"lhsT": np.zeros((768, 128), np.float32), "rhs": np.zeros((1, 1), np.float32)}
    program = neuronemu.compile_kernel(path, inputs)
    late = next(i for i in program.instrs if isinstance(i, LateInstr) and i._late is not None)
    copy = pickle.loads(pickle.dumps(late))
    assert late._late is None  # (made, to be pickled)
    assert list(copy.operands) == list(late.operands)
    for name, view in late.operands.items():
        assert (copy.operands[name].box, copy.operands[name].tensor.name) == (
            view.box,
            view.tensor.name,
        )


def test_a_repeats_off_chip_accesses_give_the_dependencies_of_their_views(kernel_file, monkeypatch):
    """A repeat leaves its views of HBM tensors made before the loop unmade and gives the
    dependencies their boxes (accesses.RootBox): each iteration writes rows of `out` that
    the next one writes again (WAW) and that the one after reads back (RAW), and reads `a`,
    which the iteration before wrote (WAR on the way back)."""
    from neuronemu.replay.late import LateInstr

    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((144, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(8):\n"
        "        t = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=t, src=a[i * 16 : i * 16 + 32, :])\n"
        "        nisa.dma_copy(dst=out[i * 16 : i * 16 + 32, :], src=t)\n"
        "        u = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=u, src=out[i * 16 : i * 16 + 16, :])\n"
        "        nisa.dma_copy(dst=a[i * 16 + 32 : i * 16 + 48, :], src=u)\n"
        "    return out\n"
    )
    rng = np.random.default_rng(6)
    a = rng.standard_normal((160, 64)).astype(np.float32)
    path = kernel_file(source)
    plain, made, n = _both(monkeypatch, path, {"a": a})
    assert n == 5 * 4
    _same(plain, made)
    # (the views were left unmade: their accesses went to the history as boxes)
    program = neuronemu.compile_kernel(path, {"a": a})
    unmade = {
        (i.spec.name, name)
        for i in program.instrs
        if isinstance(i, LateInstr) and i._late is not None
        for name in i._late[3]
        if not i.tensor_of(name).on_chip
    }
    assert unmade == {("dma_copy", "src"), ("dma_copy", "dst")}
    # each iteration's store waits for the one before it (WAW on 16 rows)
    stores = [i for i in made.program.instrs if i.spec.name == "dma_copy"][1::4]
    assert len(stores) == 8 and all(a.index in b.deps for a, b in zip(stores, stores[1:]))


def test_a_repeat_writing_across_a_psum_bank_fails_where_the_loop_unrolled_does(
    kernel_file, monkeypatch
):
    # Each iteration's matmul writes 1,536 bytes of each partition of a PSUM tile of its
    # own, 128 bytes further on than the last: the 6th (a repeat, made from the 3rd, its
    # view of its tile left unmade) is the first to cross the 2 KiB bank.
    from neuronemu.errors import ConstraintError
    from neuronemu.replay.late import LateInstr

    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    s = nl.ndarray((128, 384), dtype=nl.bfloat16, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=s, src=a)\n"
        "    for i in nl.affine_range(8):\n"
        "        acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)\n"
        "        nisa.nc_matmul(dst=acc[:, i * 32 : i * 32 + 384], stationary=s[:, 0:128],\n"
        "                       moving=s)\n"
        "        o = nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.tensor_copy(dst=o, src=acc[:, i * 32 : i * 32 + 384])\n"
        "        nisa.dma_copy(dst=out, src=o)\n"
        "    return out\n"
    )
    path = kernel_file(source)
    inputs = {"a": np.zeros((128, 384), np.float32)}
    errors = []
    for repeat in (False, True):
        monkeypatch.setattr(templates, "REPEAT", repeat)
        with pytest.raises(ConstraintError) as caught:
            neuronemu.compile_kernel(path, inputs)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "dst acc.5[:, 160:544]" in errors[1] and "across PSUM banks" in errors[1]
    # (and the check read the repeats' bounds without making their views)
    checked = []
    original = LateInstr.bounds_of

    def bounds_of(self, name):
        checked.append(name in self._late[3])
        return original(self, name)

    monkeypatch.setattr(LateInstr, "bounds_of", bounds_of)
    with pytest.raises(ConstraintError):
        neuronemu.compile_kernel(path, inputs)
    assert checked == [True, True, True]  # the 4th, 5th and 6th matmuls


def test_a_repeats_reads_of_an_unwritten_input_wait_for_nothing_until_it_is_written(
    kernel_file, monkeypatch
):
    """The repeats leave their reads of `a`, which nothing has written, out of the history;
    a write to `a` after the loop records them first: it waits for the loads of every
    iteration that read its rows (WAR), repeats included, as with the loop unrolled."""
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(8):\n"
        "        t = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=t, src=a[i * 16 : i * 16 + 32, :])\n"
        "        nisa.dma_copy(dst=out[i * 16 : i * 16 + 16, :], src=t[0:16, :])\n"
        "    u = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=u, src=out[0:16, :])\n"
        "    nisa.dma_copy(dst=a[72:88, :], src=u)\n"
        "    return out\n"
    )
    left: list[tuple] = []
    original = Repeat._leave_unrecorded

    def leave_unrecorded(self):
        original(self)
        left.extend(shape.unrecorded for shape in self.shapes if shape.unrecorded)

    monkeypatch.setattr(Repeat, "_leave_unrecorded", leave_unrecorded)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((144, 64)).astype(np.float32)
    path = kernel_file(source)
    plain, made, n = _both(monkeypatch, path, {"a": a})
    assert n == 5 * 2 and len(left) == 1  # (the loads of the 5 repeats: of `a`, unrecorded)
    _same(plain, made)
    # the write of rows 72:88 follows the loads of iterations 3, 4 and 5 (repeats)
    instrs = made.program.instrs
    loads = [i.index for i in instrs if i.spec.name == "dma_copy"][0:16:2]
    assert set(instrs[-1].deps) & set(loads) == {loads[3], loads[4], loads[5]}


def test_a_repeated_transfer_whose_partitions_move_takes_each_repeats_dma_engines(
    kernel_file, monkeypatch
):
    """Each iteration loads 16 rows into the next 16 partitions of one tile: its DMA engines
    (those of the partitions it moves, nki-dma-overview.rst) differ from one repeat to the
    next, as with the loop unrolled; the transfers of the tile the iteration makes start on
    partition 0 every time and share one set of engines."""
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    for i in nl.affine_range(8):\n"
        "        u = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=u, src=a[i * 16 : i * 16 + 16, :])\n"
        "        nisa.dma_copy(dst=t[i * 16 : i * 16 + 16, :], src=u)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n"
    )
    a = np.random.default_rng(8).standard_normal((128, 64)).astype(np.float32)
    path = kernel_file(source)
    plain, made, n = _both(monkeypatch, path, {"a": a})
    assert n == 5 * 2
    _same(plain, made)
    lo = made.timeline.arrays["dma_lo"]
    moving = [i.index for i in made.program.instrs if i.spec.name == "dma_copy"][1:16:2]
    staying = [i.index for i in made.program.instrs if i.spec.name == "dma_copy"][0:16:2]
    assert len(set(lo[moving].tolist())) > 1 and len(set(lo[staying].tolist())) == 1
    np.testing.assert_array_equal(made.timeline.arrays["dma_lo"], plain.timeline.arrays["dma_lo"])


@pytest.mark.parametrize("count", [0, 2])
def test_a_replayed_loop_after_a_device_loop_times_as_unrolled(kernel_file, monkeypatch, count):
    """The run of a program with a device loop is a program of its own, whose instruction
    numbers are not the text's: the text's repeated blocks do not carry over to it (they
    named other instructions: a replayed transfer took the DMA engines of another, or
    indexed past the end)."""
    source = HEADER + (
        "@nki.jit\n"
        "def k(a, n):\n"
        "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "    count = nisa.scalar_load(n_sb)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "\n"
        "    def body(i):\n"
        + "        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)\n"
        * 13
        + "\n"
        "    nl.fori_loop(0, count, body)\n"
        "    for i in nl.affine_range(8):\n"
        "        nisa.dma_copy(dst=t[i * 16 : i * 16 + 16, :], src=a[i * 16 : i * 16 + 16, :])\n"
        "        u = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=u, src=a[i * 16 : i * 16 + 16, :])\n"
        "        nisa.dma_copy(dst=out[i * 16 : i * 16 + 16, :], src=u)\n"
        "    return out\n"
    )
    inputs = {
        "a": np.random.default_rng(9).standard_normal((128, 64)).astype(np.float32),
        "n": np.array([[count]], dtype=np.int32),
    }
    path = kernel_file(source)
    plain, made, n = _both(monkeypatch, path, inputs)
    assert n == 5 * 3 and made.program.repeats and made.program.loops
    assert made.cycles == plain.cycles
    for field in ("dma_lo", "dma_hi"):
        np.testing.assert_array_equal(made.timeline.arrays[field], plain.timeline.arrays[field])
    np.testing.assert_array_equal(made.outputs["out"], plain.outputs["out"])


def test_repeats_one_psum_bank_checked_by_their_tiles_offsets_fail_where_one_by_one_does(
    kernel_file,
):
    """The PSUM bank check takes a replayed loop's repeats at once (the same box of each
    iteration's own accumulator, at that tile's offset): with one repeat's accumulator
    moved half a bank on, it fails at the same matmul, with the same message, as the check
    of each instruction; with the placements as allocated, both pass."""
    import dataclasses

    from neuronemu.build.psum_banks import check_psum_banks
    from neuronemu.errors import ConstraintError
    from neuronemu.program.table import Table

    source = _matmul_over_n(2)
    inputs = {"lhsT": np.zeros((256, 128), np.float32), "rhs": np.zeros((256, 4096), np.float32)}
    program = neuronemu.compile_kernel(kernel_file(source), inputs)
    instrs, arch = program.instrs, program.arch
    table, plain = program.table(), Table(dataclasses.replace(program, repeats=[]))
    same = table.base_where(lambda ins: ins.spec.one_psum_bank, whole=True)
    matmuls = [i for i, ins in enumerate(instrs) if ins.spec.one_psum_bank]
    assert sum(same[i] != i for i in matmuls) > len(matmuls) // 2, "repeats taken at once"
    check_psum_banks(table, program.placements, arch)
    check_psum_banks(plain, program.placements, arch)
    rep = program.repeats[-1]
    j = next(j for j in range(rep.period) if instrs[rep.base + j].spec.one_psum_bank)
    tid = int(rep.ids[rep.count - 2, rep.sources[j]["dst"][0]])
    placements = dict(program.placements)
    moved = placements[tid]
    placements[tid] = dataclasses.replace(moved, offset=moved.offset + arch.psum_bank_bytes // 2)
    errors = []
    for each in (table, plain):
        with pytest.raises(ConstraintError) as caught:
            check_psum_banks(each, placements, arch)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "across PSUM banks" in errors[0]
