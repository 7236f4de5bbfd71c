"""Spills: live tiles that outgrow SBUF are given up (furthest next use first), stored to HBM
and reloaded, or loaded again from the kernel's inputs, and the results stay exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuronemu
from neuronemu.build import allocator, spill
from neuronemu.errors import AllocationError
from neuronemu.nasm.read import load_program
from neuronemu.nasm.write import dumps

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# 14 tiles of 16 KiB per partition computed on the Vector engine, all live until the sum: on
# trn1 (176 KiB usable) three or four must go to HBM and come back.
COMPUTED = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    tiles = []
    for i in range(14):
        u = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=x, op0=nl.multiply, operand0=float(i + 1))
        tiles.append(u)
    acc = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for j in ORDER:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=tiles[j], op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""


def _computed(order) -> str:
    return COMPUTED.replace("ORDER", repr(list(order)))


def _expected(a: np.ndarray, order) -> np.ndarray:
    acc = np.zeros_like(a)
    for j in order:
        acc = acc + (a * np.float32(j + 1)).astype(np.float32)
    return acc


def _spill_copies(program):
    """(stores, reloads from scratch, reloads from elsewhere) among the added copies."""
    stores = [i for i in program.instrs if i.operands["dst"].tensor.name.endswith(".spill")]
    from_scratch = [
        i
        for i in program.instrs
        if isinstance(i.operands.get("src"), neuronemu.ir.View)
        and i.operands["src"].tensor.name.endswith(".spill")
    ]
    return stores, from_scratch


SHUFFLED = [3, 9, 0, 13, 5, 1, 12, 2, 4, 6, 7, 8, 10, 11]


@pytest.mark.parametrize("order", [range(14), range(13, -1, -1), SHUFFLED])
def test_computed_tiles_are_stored_and_reloaded_and_the_result_is_exact(kernel_file, order):
    path = kernel_file(HEADER + _computed(order))
    a = np.random.default_rng(0).standard_normal((128, 4096)).astype(np.float32)
    r = neuronemu.run(path, {"a": a}, target="trn1", ref=lambda a: _expected(a, order))
    assert r.check.passed
    np.testing.assert_array_equal(r.outputs["out"], _expected(a, order))
    stores, reloads = _spill_copies(r.program)
    assert stores and len(reloads) >= len(stores)
    assert r.program.sbuf_peak_bytes <= r.program.arch.sbuf_usable_bytes_per_partition
    # Each store writes 2 MiB to HBM, besides the output's 2 MiB.
    assert r.hbm_bytes["write"] == (len(stores) + 1) * 128 * 4096 * 4
    notes = [n for n in r.program.notes if "SBUF full" in n]
    assert len(notes) == 1
    assert f"{len(stores)} store(s) to HBM, {len(reloads)} load(s) back" in notes[0]
    assert notes[0].startswith(f"{path}:13:")  # the line that allocates the tiles
    with pytest.raises(AllocationError, match="SBUF over capacity"):
        neuronemu.compile_kernel(path, {"a": a}, target="trn1", spill=False)


def test_spill_copies_are_ordered_by_semaphores(kernel_file):
    # Any order the semaphores allow gives the same bits: no copy races its tile.
    order = SHUFFLED
    path = kernel_file(HEADER + _computed(order))
    a = np.random.default_rng(1).standard_normal((128, 4096)).astype(np.float32)
    for seed in range(3):
        r = neuronemu.run(path, {"a": a}, target="trn1", shuffle_seed=seed)
        np.testing.assert_array_equal(r.outputs["out"], _expected(a, order))


def test_the_tile_given_up_is_the_one_needed_furthest_ahead(kernel_file, monkeypatch):
    # Consumed in the order made, on trn1 (11 tiles of 16 KiB fit): when u10 needs room, x
    # and u0..u9 are live and x is in use, so u9 (read last) goes; for u11, u10 goes (read
    # after u0..u8), and so on; acc finds x dead. So u9, u10, u11, u12 are stored, in order
    # (with reloads just in time: an early reload would take x's bytes before acc).
    monkeypatch.setattr(spill, "RELOAD_LEAD", 0)
    path = kernel_file(HEADER + _computed(range(14)))
    program = neuronemu.compile_kernel(path, {"a": np.ones((128, 4096), np.float32)}, "k", "trn1")
    stores, reloads = _spill_copies(program)
    assert [i.operands["src"].tensor.name for i in stores] == ["u.9", "u.10", "u.11", "u.12"]
    assert [i.operands["dst"].tensor.name for i in reloads] == [
        "u.9.r1",
        "u.10.r1",
        "u.11.r1",
        "u.12.r1",
    ]


def test_reloads_are_issued_ahead_of_the_access_they_serve(kernel_file):
    path = kernel_file(HEADER + _computed(range(14)))
    program = neuronemu.compile_kernel(path, {"a": np.ones((128, 4096), np.float32)}, "k", "trn1")
    _, reloads = _spill_copies(program)
    for copy in reloads:
        tile = copy.operands["dst"].tensor
        use = next(i for i in program.instrs[copy.index + 1 :] if _reads(i, tile))
        assert use.index - copy.index > 1  # other work between: its latency can hide
        assert use.index - copy.index <= spill.RELOAD_LEAD + 1 + len(reloads)


def _reads(ins, tile) -> bool:
    return any(v.as_root().tensor is tile for _, v in ins.views("in"))


def test_tiles_loaded_from_inputs_are_loaded_again_not_stored(kernel_file):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(14):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i])
        tiles.append(t)
    acc = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""
    path = kernel_file(HEADER + body)
    a = np.random.default_rng(2).standard_normal((14, 128, 4096)).astype(np.float32)
    r = neuronemu.run(path, {"a": a}, target="trn1")
    expected = np.zeros((128, 4096), np.float32)
    for i in range(14):
        expected = expected + a[i]
    np.testing.assert_array_equal(r.outputs["out"], expected)
    stores, from_scratch = _spill_copies(r.program)
    assert not stores and not from_scratch
    # The loads that found no room are issued later, before their use (sunk), once each.
    loads = [i for i in r.program.instrs if i.spec.name == "dma_copy" and i.span.line == 12]
    assert len(loads) == 14
    assert r.hbm_bytes["read"] == 14 * 128 * 4096 * 4
    assert r.hbm_bytes["write"] == 128 * 4096 * 4  # the output only
    note = next(n for n in r.program.notes if "SBUF full" in n)
    assert "0 store(s)" in note and "issued later" in note


def test_a_loaded_tile_read_then_given_up_is_loaded_again(kernel_file):
    # Each tile is read once right after its load and again at the end: by then the
    # early ones were given up, and come back by loading again (no store).
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.shared_hbm)
    tiles = []
    acc = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in range(14):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        tiles.append(t)
    for t in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""
    a = np.random.default_rng(4).standard_normal((14, 128, 4096)).astype(np.float32)
    r = neuronemu.run(kernel_file(HEADER + body), {"a": a}, target="trn1")
    expected = np.zeros((128, 4096), np.float32)
    for i in range(14):
        expected = expected + a[i]
    for i in range(14):
        expected = expected + a[i]
    np.testing.assert_array_equal(r.outputs["out"], expected)
    stores, _ = _spill_copies(r.program)
    assert not stores
    assert r.hbm_bytes["read"] > 14 * 128 * 4096 * 4  # some tiles loaded twice
    assert any("again from the kernel's inputs" in n for n in r.program.notes)


# Twelve tiles of 16 KiB, each only half written: none can go to HBM (trn1 holds 11).
PARTLY_WRITTEN = """
@nki.jit
def k(a):
    tiles = []
    for i in range(12):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t[:, 0:2048], value=0.0)
        tiles.append(t)
    for t in tiles:
        nisa.tensor_copy(dst=t[:, 0:2048], src=t[:, 0:2048])
    return a
"""


def test_partly_written_tiles_are_never_given_up(kernel_file):
    with pytest.raises(AllocationError, match="SBUF over capacity") as info:
        neuronemu.compile_kernel(
            kernel_file(HEADER + PARTLY_WRITTEN),
            {"a": np.zeros((128, 4), np.float32)},
            target="trn1",
        )
    assert "none of them can be spilled" in info.value.hint


def test_a_spilled_program_round_trips_through_the_text_form(kernel_file, tmp_path):
    order = SHUFFLED[::-1]
    path = kernel_file(HEADER + _computed(order))
    a = np.random.default_rng(3).standard_normal((128, 4096)).astype(np.float32)
    program = neuronemu.compile_kernel(path, {"a": a}, target="trn1")
    assert _spill_copies(program)[0]
    text = tmp_path / "k.nasm"
    text.write_text(dumps(program))
    again = load_program(text, {"a": a}, "trn1")
    assert len(again.instrs) == len(program.instrs)
    r = neuronemu.run(text, {"a": a}, target="trn1")
    np.testing.assert_array_equal(r.outputs["out"], _expected(a, order))


V12 = Path(__file__).resolve().parents[1] / "timing" / "v12_matmuls.py"


@pytest.mark.parametrize(
    ("kernel", "shapes"),
    [
        ("blocked_free", {"lhsT": (8192, 256), "rhs": (8192, 1024)}),  # early reloads retried
        ("blocked_all", {"lhsT": (2048, 4096), "rhs": (2048, 1024)}),  # stores and reloads
    ],
)
def test_a_tile_tried_again_over_the_bytes_let_go_goes_where_a_full_search_puts_it(
    monkeypatch, kernel, shapes
):
    # A tile that found no room is tried again only at offsets over bytes let go since
    # (allocator.REFIT_WINDOWS); with 0, every offset is searched again: the same program.
    inputs = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    windows = neuronemu.compile_kernel(V12, inputs, kernel=kernel)
    monkeypatch.setattr(allocator, "REFIT_WINDOWS", -1)
    searched = neuronemu.compile_kernel(V12, inputs, kernel=kernel)
    assert windows.notes and "SBUF full" in windows.notes[0]
    assert dumps(windows) == dumps(searched)
    assert windows.notes == searched.notes


@pytest.mark.parametrize(
    ("kernel", "shapes", "fits"),
    [
        ("blocked_free", {"lhsT": (8192, 256), "rhs": (8192, 1024)}, False),
        ("tiled", {"lhsT": (1024, 256), "rhs": (1024, 1024)}, True),
    ],
)
def test_the_jitted_placement_gives_way_to_the_planner_when_tiles_outgrow_sbuf(
    monkeypatch, kernel, shapes, fits
):
    # Past allocator.JIT_ABOVE, tiles are first placed by the jitted pass; a program that
    # needs spills then takes the plain path with its planner: the same program either way.
    inputs = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    plain = neuronemu.compile_kernel(V12, inputs, kernel=kernel)
    answers = []
    arrays = allocator.allocate_columns

    def counted(*args):
        answers.append(arrays(*args))
        return answers[-1]

    plans = []  # (is the plan's planner hoisting?)
    allocate = allocator.allocate

    def planned(*args, **kwargs):
        if kwargs.get("planner") is not None:
            plans.append(kwargs["planner"].hoist)
        return allocate(*args, **kwargs)

    monkeypatch.setattr(allocator, "JIT_ABOVE", 0)
    monkeypatch.setattr(allocator, "allocate_columns", counted)
    monkeypatch.setattr(allocator, "allocate", planned)
    jitted = neuronemu.compile_kernel(V12, inputs, kernel=kernel)
    # (tried first, declined if it spills; the planner's second plan, with hoisted loads, is
    # not; nor is the first plan then, whose only news, that tiles outgrow SBUF, it told)
    assert len(answers) == 1 and (answers[0] is not None) == fits
    assert plans == ([] if fits else [True])
    assert any("SBUF full" in note for note in plain.notes) != fits
    assert dumps(jitted) == dumps(plain)
    assert jitted.notes == plain.notes
    assert (jitted.sbuf_peak_bytes, jitted.psum_peak_bytes) == (
        plain.sbuf_peak_bytes,
        plain.psum_peak_bytes,
    )


def test_making_room_looks_at_the_runs_budget(monkeypatch):
    # Spills can take a while (V12 v4 at full size: most of a 20 s run): the allocator's
    # searches for room and the rebuild look at the run's clock as they go, so that a
    # `run_seconds` budget stops them (compiling calls it nowhere else).
    from neuronemu.limits import Meter

    asked = []

    def over(self, span=None):
        asked.append(span)
        raise RuntimeError("run_seconds")

    monkeypatch.setattr(Meter, "check_run_time", over)
    fits = {"lhsT": np.zeros((1024, 256), np.float32), "rhs": np.zeros((1024, 1024), np.float32)}
    neuronemu.compile_kernel(V12, fits, kernel="tiled")
    assert asked == []
    spills = {"lhsT": np.zeros((8192, 256), np.float32), "rhs": np.zeros((8192, 1024), np.float32)}
    with pytest.raises(RuntimeError, match="run_seconds"):
        neuronemu.compile_kernel(V12, spills, kernel="blocked_free")
    assert asked


# A selective scan over two channel tiles (as the fused Mamba tutorial's v2 kernel is laid
# out): at 6144 steps on trn1 a tile loaded only so far is given up (its loads sunk into the
# reload), then given up again before it is read, its new clone resuming before the first.
SCAN = """
@nki.jit
def scan(dt, x, a, b, c):
    # y[c, t] = sum_n c[n, t] h[c, n, t]; h[c, n, t] = exp(dt a[c, n]) h[c, n, t-1] + dt b[n, t] x
    n_chans, steps = dt.shape
    n_state = a.shape[1]
    chans = 128
    y = nl.ndarray((n_chans, steps), dtype=nl.float32, buffer=nl.shared_hbm)
    for ct in nl.affine_range(n_chans // chans):
        rows = slice(ct * chans, (ct + 1) * chans)
        tile_scan(dt[rows, :], x[rows, :], a[rows, :], b, c, y[rows, :], chans, steps, n_state)
    return y


def tile_scan(dt, x, a, b, c, y, chans, steps, n_state):
    total = nl.zeros((chans, steps), dtype=nl.float32)
    dt_t = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=dt_t, src=dt)
    x_t = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_t, src=x)
    for n in nl.affine_range(n_state):
        a_n = nl.ndarray((chans, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_n, src=a[:, n:n + 1])
        decay = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=decay, op=nl.exp, data=dt_t, scale=a_n)
        b_n = nl.ndarray((1, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_n, src=b[n:n + 1, :])
        drive = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        prod = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=dt_t, data2=x_t, op=nl.multiply)
        nisa.tensor_tensor(dst=drive, data1=prod, data2=nl.broadcast_to(b_n, (chans, steps)),
                           op=nl.multiply)
        h = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=h, data0=decay, data1=drive, initial=0.0,
                                op0=nl.multiply, op1=nl.add)
        c_n = nl.ndarray((1, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c_n, src=c[n:n + 1, :])
        hc = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=hc, data1=h, data2=nl.broadcast_to(c_n, (chans, steps)),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=total, data1=total, data2=hc, op=nl.add)
    nisa.dma_copy(dst=y, src=total)
"""


def _scan_reference(dt, x, a, b, c):
    dt, x, a, b, c = (np.asarray(v, np.float64) for v in (dt, x, a, b, c))
    y = np.zeros(dt.shape)
    for n in range(a.shape[1]):
        decay, drive = np.exp(dt * a[:, n : n + 1]), dt * x * b[n]
        h = np.zeros(dt.shape[0])
        for t in range(dt.shape[1]):
            h = decay[:, t] * h + drive[:, t]
            y[:, t] += h * c[n, t]
    return y


def test_a_sunk_tile_given_up_again_is_held_by_its_last_clone(kernel_file):
    # Was "internal error: KeyError" in the uninitialized-read check: the accesses from the
    # first clone's resume on still named that clone, cancelled and in no tensor list.
    rng = np.random.default_rng(6)
    chans, steps, n_state = 256, 6144, 4
    inputs = {
        "dt": rng.uniform(0.01, 0.2, (chans, steps)).astype(np.float32),
        "x": rng.standard_normal((chans, steps)).astype(np.float32),
        "a": -rng.uniform(0.5, 2.0, (chans, n_state)).astype(np.float32),
        "b": rng.standard_normal((n_state, steps)).astype(np.float32),
        "c": rng.standard_normal((n_state, steps)).astype(np.float32),
    }
    r = neuronemu.run(kernel_file(HEADER + SCAN), inputs, target="trn1")
    assert any(i.operands["dst"].tensor.name.endswith(".r2") for i in r.program.instrs)
    expected = _scan_reference(**inputs)
    np.testing.assert_allclose(r.outputs["y"], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("jit_above", [0, 10**9])
def test_a_kernel_neither_plan_fits_gets_the_first_plans_error(kernel_file, monkeypatch, jit_above):
    # Past JIT_ABOVE the first plan (no hoisted loads) is made only to tell its error: the
    # same error either way.
    path = kernel_file(HEADER + PARTLY_WRITTEN)
    failed: dict[bool, AllocationError] = {}  # each failed plan's error, by its hoisting
    allocate = allocator.allocate

    def planned(*args, **kwargs):
        try:
            return allocate(*args, **kwargs)
        except AllocationError as e:
            failed[kwargs["planner"].hoist] = e
            raise

    monkeypatch.setattr(allocator, "JIT_ABOVE", jit_above)
    monkeypatch.setattr(allocator, "allocate", planned)
    with pytest.raises(AllocationError, match="SBUF over capacity") as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((128, 4), np.float32)}, target="trn1")
    assert "none of them can be spilled" in info.value.hint
    assert sorted(failed) == [False, True]  # both plans made, both failed
    assert info.value is failed[False]
    assert info.value.__context__ is None  # (--debug shows its traceback alone)


def test_a_kernel_the_hoisted_plan_fits_runs_though_the_first_plan_does_not(
    kernel_file, monkeypatch
):
    # The first plan failing (made to fail here) is no error where the plan that places the
    # program, with first loads hoisted, fits: the program is that plan's.
    path = kernel_file(HEADER + _computed(SHUFFLED))
    a = np.random.default_rng(2).standard_normal((128, 4096)).astype(np.float32)
    both = neuronemu.compile_kernel(path, {"a": a}, target="trn1")
    allocate = allocator.allocate

    def first_fails(*args, **kwargs):
        if kwargs.get("planner") is not None and not kwargs["planner"].hoist:
            raise AllocationError("SBUF over capacity: made up", None)
        return allocate(*args, **kwargs)

    monkeypatch.setattr(allocator, "allocate", first_fails)
    hoisted = neuronemu.compile_kernel(path, {"a": a}, target="trn1")
    assert dumps(hoisted) == dumps(both)
    assert hoisted.notes == both.notes and any("SBUF full" in n for n in hoisted.notes)
