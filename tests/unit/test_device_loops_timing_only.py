"""A timing-only run of a kernel with device loops executes only what decides its run: the
instructions that write registers (bounds, conditions) or print, and what they depend on
(`neuronemu.sim.loops.deciding`). Its run, checks and time are those of the run with values."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.sim.loops import deciding

from .test_device_loops import HEADER, NESTED, OLDER, PROLOGUE, ROWS, WHILE_IF

RNG = np.random.default_rng(11)

# The trip count is computed on the device from the input (n + 2, then a max with 1): the
# loop's bound depends on instructions that write no register themselves.
COMPUTED = (
    PROLOGUE
    + """    m_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=m_sb, data=n_sb, op0=nl.add, operand0=2)
    nisa.tensor_scalar(dst=m_sb, data=m_sb, op0=nl.maximum, operand0=1)
    count = nisa.scalar_load(m_sb)

    def body(i):
        t = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out, src=t)

    nl.fori_loop(0, count, body)
    return out
"""
)


# A print in the body, of a value the body computes: what prints is decided by values too.
PRINTS = (
    PROLOGUE
    + """    count = nisa.scalar_load(n_sb)
    acc = nl.zeros((1, F), dtype=data.dtype, buffer=nl.sbuf)

    def body(i):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0))
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nl.device_print("acc=", acc[0:1, 0:3])

    nl.fori_loop(0, count, body)
    nisa.dma_copy(dst=out[0:1, 0:F], src=acc)
    return out
"""
)

# An outer loop whose body is only an inner one: the inner body's passes run back to back
# across the outer trips, and the inner loop is reached again between them.
INNER_ONLY = (
    PROLOGUE
    + """    acc = nl.zeros((1, F), dtype=data.dtype, buffer=nl.sbuf)

    def outer(i):
        def inner(j):
            t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=j, indirect_dim=0))
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

        nl.fori_loop(0, i, inner)

    nl.fori_loop(0, nisa.scalar_load(n_sb), outer)
    nisa.dma_copy(dst=out[0:1, 0:F], src=acc)
    return out
"""
)


# The count's tile is written before a body that may run zero times (or a branch that may
# not be taken) and written over inside it: the reader depends on the covering write, and
# on the first only through it. `m` decides whether the covering write runs.
COVERED = """
@nki.jit
def k(data, n, m):
    R, F = data.shape
    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=n)
    m_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=m_sb, src=m)

    def cover(*_):
        nisa.memset(dst=c, value=1)

    def other():
        nisa.memset(dst=m_sb, value=2)

%(cover)s
    xs = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=data)

    def body(i):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)

    nl.fori_loop(0, nisa.scalar_load(c), body)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""
IN_A_LOOP = "    nl.fori_loop(0, nisa.scalar_load(m_sb), cover)"
IN_A_BRANCH = "    nl.if_else(nisa.scalar_load(m_sb) > 0, cover, other)"


def _rows_kernel() -> str:
    return ROWS % dict(src="i", lower="0", upper="count", step="")


def _cases():
    data = RNG.standard_normal((8, 16)).astype(np.float32)
    small = RNG.integers(-8, 8, (6, 16)).astype(np.float32)
    x = RNG.standard_normal((4, 8)).astype(np.float32)

    def n(v):
        return np.array([[v]], np.int32)

    def three(count, m):
        return {"data": data, "n": n(count), "m": n(m)}

    return {
        "rows-0": (_rows_kernel(), {"data": data, "n": n(0)}),
        "rows-5": (_rows_kernel(), {"data": data, "n": n(5)}),
        "computed-count": (COMPUTED, {"data": data, "n": n(3)}),
        "computed-at-least-one": (COMPUTED, {"data": data, "n": n(-9)}),
        "while-if": (WHILE_IF, {"x": x, "count": n(3), "flag": n(0)}),
        "nested": (NESTED, {"data": small, "n": n(4)}),
        "older-registers": (OLDER, {"data": data, "n": n(3)}),
        "prints": (PRINTS, {"data": data, "n": n(4)}),
        "inner-only": (INNER_ONLY, {"data": small, "n": n(5)}),
        "covered-in-a-zero-trip-body": (COVERED % dict(cover=IN_A_LOOP), three(6, 0)),
        "covered-in-a-body-that-ran": (COVERED % dict(cover=IN_A_LOOP), three(6, 2)),
        "covered-in-a-branch-not-taken": (COVERED % dict(cover=IN_A_BRANCH), three(6, 0)),
        "covered-in-a-branch-taken": (COVERED % dict(cover=IN_A_BRANCH), three(6, 1)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_a_timing_only_run_is_timed_as_the_run_with_values(kernel_file, name):
    source, inputs = CASES[name]
    path = kernel_file(HEADER + source)
    printed: tuple[list[str], list[str]] = ([], [])
    full = neuronemu.run(path, inputs, print_fn=printed[0].append)
    fast = neuronemu.run(path, inputs, timing_only=True, print_fn=printed[1].append)
    assert fast.outputs is None and full.outputs is not None
    assert printed[1] == printed[0]
    ran, ran_fast = full.timeline.program, fast.timeline.program
    assert [i.spec.name for i in ran_fast.instrs] == [i.spec.name for i in ran.instrs]
    assert [i.deps for i in ran_fast.instrs] == [i.deps for i in ran.instrs]
    np.testing.assert_array_equal(fast.timeline.start_ns, full.timeline.start_ns)
    np.testing.assert_array_equal(fast.timeline.end_ns, full.timeline.end_ns)
    assert fast.program.notes == full.program.notes


def test_the_loops_body_is_not_what_decides_the_run(kernel_file):
    source, inputs = CASES["computed-count"]
    program = neuronemu.compile_kernel(kernel_file(HEADER + source), inputs)
    (loop,) = program.loops
    found = deciding(program)
    names = {program.instrs[i].spec.name for i in found}
    # The count's chain: its input copied in, the two sums, the load into a register.
    assert {"dma_copy", "tensor_scalar", "scalar_load"} <= names
    assert not found & set(range(loop.begin, loop.end))
    # (what writes registers: the chain ends there)
    last = max(found)
    assert program.instrs[last].spec.name == "scalar_load"


def test_a_timing_only_run_finds_no_error_only_values_show(kernel_file):
    # Row i + 1 is read for i up to n - 1: past the input's 8 rows at n = 8. The run with
    # values stops there; a timing-only run computes no values (as one without device loops
    # runs none), so the offset is never worked out.
    from neuronemu.errors import MemoryAccessError

    source = ROWS % dict(src="i + 1", lower="0", upper="count", step="")
    inputs = {"data": RNG.standard_normal((8, 16)).astype(np.float32), "n": np.array([[8]])}
    inputs["n"] = inputs["n"].astype(np.int32)
    path = kernel_file(HEADER + source)
    with pytest.raises(MemoryAccessError):
        neuronemu.run(path, inputs)
    assert neuronemu.run(path, inputs, timing_only=True).time_ns > 0


def test_the_runs_of_one_instruction_share_its_form(kernel_file):
    # What depends on an instruction's form alone (costs, checks, HBM bytes) is worked out
    # once for all its runs: the executed program's copies of one instruction share it.
    source, inputs = CASES["rows-5"]
    result = neuronemu.run(kernel_file(HEADER + source), inputs, timing_only=True)
    by_origin: dict[tuple, set[int]] = {}
    for ins in result.timeline.program.instrs:
        assert ins.form is not None
        by_origin.setdefault((ins.spec.name, ins.span, ins.engine), set()).add(id(ins.form))
    assert all(len(forms) == 1 for forms in by_origin.values())
    assert len({f for forms in by_origin.values() for f in forms}) == len(by_origin)
    assert len(result.timeline.program.instrs) > len(by_origin)  # (the body ran 5 times)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("timing_only", [True, False])
def test_passes_as_repeated_blocks_change_no_figure(kernel_file, monkeypatch, name, timing_only):
    # The executed run's passes over a body are recorded as repeated blocks (the table
    # works out the first pass's and moves them on): every figure and access row is the
    # one worked out instruction by instruction.
    from neuronemu.checks.access_table import Accesses
    from neuronemu.sim import loops

    source, inputs = CASES[name]
    path = kernel_file(HEADER + source)
    got = neuronemu.run(path, inputs, timing_only=timing_only)
    monkeypatch.setattr(loops, "_repeated_passes", lambda *_: [])
    want = neuronemu.run(path, inputs, timing_only=timing_only)
    np.testing.assert_array_equal(got.timeline.start_ns, want.timeline.start_ns)
    np.testing.assert_array_equal(got.timeline.end_ns, want.timeline.end_ns)
    assert got.hbm_bytes == want.hbm_bytes
    assert got.engines == want.engines
    assert got.critical_path.summary() == want.critical_path.summary()
    assert got.stalls.lines() == want.stalls.lines()
    assert got.program.notes == want.program.notes
    ran = [r.timeline.program.instrs for r in (got, want)]
    assert [(i.deps, i.waits) for i in ran[0]] == [(i.deps, i.waits) for i in ran[1]]
    rows = [Accesses(r.timeline.program) for r in (got, want)]
    for column in ("instr", "tensor", "lo", "hi", "write"):
        np.testing.assert_array_equal(getattr(rows[0], column), getattr(rows[1], column))


def test_a_long_runs_passes_are_repeated_blocks(kernel_file):
    source, inputs = CASES["computed-count"]  # (5 passes over a body of 3)
    result = neuronemu.run(kernel_file(HEADER + source), inputs, timing_only=True)
    table = result.timeline.program.table()
    body = [i for i, ins in enumerate(table.instrs) if ins.spec.name == "tensor_scalar"][-5:]
    # Every pass after the first stands for the first's instructions.
    assert [int(table.base[i]) for i in body] == [body[0]] * 5


@pytest.mark.parametrize("name", ["rows-5", "computed-count", "prints"])
def test_a_timing_only_run_makes_only_the_inputs_that_decide_it(kernel_file, name):
    # `--timing-only` passes inputs whose values are made when read (neuronemu.inputs):
    # with device loops, only those the deciding instructions read are made (here the
    # count; "prints" also prints values of `data`).
    from neuronemu.inputs import Unmade

    source, inputs = CASES[name]
    asked: list[str] = []

    def maker(key: str):
        def make() -> np.ndarray:
            asked.append(key)
            return inputs[key]

        return make

    lazy = {k: Unmade.of(str(v.dtype), v.shape, maker(k)) for k, v in inputs.items()}
    path = kernel_file(HEADER + source)
    got = neuronemu.run(path, lazy, timing_only=True)
    want = neuronemu.run(path, inputs, timing_only=True)
    assert sorted(asked) == (["data", "n"] if name == "prints" else ["n"])
    np.testing.assert_array_equal(got.timeline.end_ns, want.timeline.end_ns)


# Each core's count is the other's: written to shared HBM, read after a barrier (the cores'
# dependencies on each other are not kept: the bytes pass through HBM).
ACROSS_CORES = """
@nki.jit
def k(a, n):
    R, F = a.shape
    out = nl.ndarray((2, F), dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    mine = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=n[me:me + 1, 0:1])
    nisa.dma_copy(dst=scratch[me:me + 1, 0:1], src=mine)
    nisa.core_barrier(scratch, (0, 1))
    theirs = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=theirs, src=scratch[1 - me:2 - me, 0:1])
    acc = nl.zeros((1, F), dtype=a.dtype, buffer=nl.sbuf)
    xs = nl.ndarray((1, F), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=a[0:1, 0:F])

    def body(i):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)

    nl.fori_loop(0, nisa.scalar_load(theirs), body)
    nisa.dma_copy(dst=out[me:me + 1, 0:F], src=acc)
    return out
"""


def test_a_count_the_other_core_wrote_decides_a_timing_only_run(kernel_file):
    inputs = {"a": np.ones((4, 16), np.float32), "n": np.array([[2], [9]], np.int32)}
    path = kernel_file(HEADER + ACROSS_CORES)
    full = neuronemu.run(path, inputs, grid=(2,))
    fast = neuronemu.run(path, inputs, grid=(2,), timing_only=True)
    # (core 0 adds 9 times, core 1 twice)
    np.testing.assert_array_equal(full.outputs["out"][:, 0], [9.0, 2.0])
    assert [c["instructions"] for c in fast.cores] == [c["instructions"] for c in full.cores]
    np.testing.assert_array_equal(fast.timeline.end_ns, full.timeline.end_ns)
