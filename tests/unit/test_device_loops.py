"""Device loops and scalars: `nl.fori_loop`, `nl.while_loop`, `nl.if_else`, NkiScalar
arithmetic and offsets, the older register API; run by the machine from its registers, and
timed as the run the values decided."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import BudgetError, ConstraintError, KernelTypeError
from neuronemu.nasm.write import dumps
from neuronemu.program import Instr, Loop, Program
from neuronemu.sim.loops import executed_program

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
RNG = np.random.default_rng(5)

# Every kernel below starts so: `out` zeroed, the run-time count `n` in SBUF.
PROLOGUE = """
@nki.jit
def k(data, n):
    R, F = data.shape
    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
"""

ROWS = (
    PROLOGUE
    + """    count = nisa.scalar_load(n_sb)

    def body(i):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=%(src)s, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0), src=t)

    nl.fori_loop(%(lower)s, %(upper)s, body%(step)s)
    return out
"""
)


def rows(kernel_file, n, src="i", lower="0", upper="count", step="", data=None):
    data = RNG.standard_normal((8, 16)).astype(np.float32) if data is None else data
    path = kernel_file(HEADER + ROWS % dict(src=src, lower=lower, upper=upper, step=step))
    return data, neuronemu.run(path, {"data": data, "n": np.array([[n]], dtype=np.int32)})


@pytest.mark.parametrize("n", [0, 1, 5, 8])
def test_a_fori_loop_runs_as_many_times_as_its_run_time_bound_says(kernel_file, n):
    data, result = rows(kernel_file, n)
    expected = np.zeros_like(data)
    expected[:n] = data[:n] + 1
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_the_time_grows_with_the_run_time_trip_count(kernel_file):
    times = [rows(kernel_file, n)[1].timeline.total_ns for n in (0, 1, 2, 6)]
    assert times == sorted(times) and len(set(times)) == 4
    executed = [len(rows(kernel_file, n)[1].timeline.program.instrs) for n in (0, 3)]
    _, one = rows(kernel_file, 1)
    body = one.program.loops[0].end - one.program.loops[0].begin
    assert executed[1] - executed[0] == 3 * body


def test_the_text_form_shows_the_loop_and_each_engines_branch(kernel_file):
    _, result = rows(kernel_file, 3)
    text = dumps(result.program)
    loop = result.program.loops[0]
    assert f".loop 0 for @{loop.begin} @{loop.end - 1}" in text
    branches = [i for i in result.program.instrs if i.spec.name == "branch"]
    # The body has a Vector instruction and DMAs (issued by the Sync sequencer).
    assert sorted(i.stream for i in branches) == ["sync", "vector"]
    assert all(loop.begin <= i.index < loop.end for i in branches)


def test_the_text_form_runs_back_with_the_same_values_and_time(kernel_file, tmp_path):
    data, result = rows(kernel_file, 5)
    path = tmp_path / "p.nasm"
    path.write_text(dumps(result.program))
    again = neuronemu.run(path, {"data": data, "n": np.array([[5]], dtype=np.int32)})
    assert again.cycles == result.cycles
    np.testing.assert_array_equal(again.outputs["out"], result.outputs["out"])
    assert dumps(again.program).split("\n")[3:] == dumps(result.program).split("\n")[3:]


def test_scalar_arithmetic_in_an_offset_and_a_step(kernel_file):
    # Rows 7, 5, 3, 1 land in out rows 0, 2, 4, 6 (i = 0, 2, 4, 6; offset 7 - i).
    data, result = rows(kernel_file, 8, src="7 - i", step=", step=2")
    expected = np.zeros_like(data)
    for i in range(0, 8, 2):
        expected[i] = data[7 - i] + 1
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_an_offset_out_of_bounds_at_run_time_is_a_located_error(kernel_file):
    from neuronemu.errors import MemoryAccessError

    with pytest.raises(MemoryAccessError) as info:
        rows(kernel_file, 8, src="i + 1")
    assert info.value.span.line > 0


SCALARS = """
@nki.jit
def k(a, b):
    out = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    sa = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a)
    nisa.dma_copy(dst=sb, src=b)
    x = nisa.scalar_load(sa)
    y = nisa.scalar_load(sb)
    values = [x * y, x + 5, 3 - y, nisa.scalar_alu(x, y, op=nl.divide),
              nisa.scalar_alu(x, y, op=nl.fmod), x < y, -x, nisa.scalar_alu(x, y, nl.maximum)]
    for j, v in enumerate(values):
        cell = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.scalar_store(cell, v)
        nisa.dma_copy(dst=out[0:1, j:j + 1], src=cell)
    return out
"""


@pytest.mark.parametrize(("a", "b"), [(100000, 100000), (-17, 4), (17, -4), (2**31 - 1, 2)])
def test_nkiscalar_arithmetic_is_32_bit_with_truncating_division(kernel_file, a, b):
    path = kernel_file(HEADER + SCALARS)
    result = neuronemu.run(path, {"a": np.array([[a]], np.int32), "b": np.array([[b]], np.int32)})

    def wrap(v):
        return (v + 2**31) % 2**32 - 2**31

    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    remainder = abs(a) % abs(b) * (1 if a >= 0 else -1)
    expected = [wrap(a * b), wrap(a + 5), 3 - b, quotient, remainder, int(a < b), -a, max(a, b)]
    assert result.outputs["out"].reshape(-1).tolist() == expected


WHILE_IF = """
@nki.jit
def k(x, count, flag):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    acc = nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    f = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=f, src=flag)

    def again(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)
        return r - 1

    nl.while_loop(nisa.scalar_load(c), again)

    def plus():
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=100.0)

    def minus():
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.subtract, operand0=100.0)

    nl.if_else(nisa.scalar_load(f) > 0, plus, minus)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""


@pytest.mark.parametrize(("count", "flag"), [(0, 1), (3, 1), (4, 0), (1, -2)])
def test_while_loop_and_if_else_follow_the_registers(kernel_file, count, flag):
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    path = kernel_file(HEADER + WHILE_IF)
    result = neuronemu.run(
        path,
        {"x": x, "count": np.array([[count]], np.int32), "flag": np.array([[flag]], np.int32)},
    )
    acc = np.zeros_like(x)
    for _ in range(count):
        acc = acc + x
    acc = acc + np.float32(100.0) if flag > 0 else acc - np.float32(100.0)
    np.testing.assert_array_equal(result.outputs["out"], acc)


NESTED = (
    PROLOGUE
    + """    acc = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)

    def outer(i):
        nisa.memset(dst=acc, value=0.0)

        def inner(j):
            t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=j, indirect_dim=0))
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

        nl.fori_loop(0, i + 1, inner)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0), src=acc)

    nl.fori_loop(0, nisa.scalar_load(n_sb), outer)
    return out
"""
)


def test_nested_loops_with_an_inner_bound_from_the_outer_variable(kernel_file):
    data = RNG.integers(-8, 8, (6, 16)).astype(np.float32)
    path = kernel_file(HEADER + NESTED)
    result = neuronemu.run(path, {"data": data, "n": np.array([[5]], np.int32)})
    expected = np.zeros_like(data)
    expected[:5] = np.cumsum(data, axis=0)[:5]
    np.testing.assert_array_equal(result.outputs["out"], expected)


OLDER = (
    PROLOGUE
    + """    reg = nisa.register_alloc()
    nisa.register_load(reg, n_sb)
    start = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=start, value=0)

    def body(i):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=start, indirect_dim=0))
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=start, indirect_dim=0), src=t)
        nisa.tensor_scalar(dst=start, data=start, op0=nl.add, operand0=2)

    nl.fori_loop(0, reg, body)
    return out
"""
)


def test_the_older_register_api_bounds_a_loop_carrying_state_in_sbuf(kernel_file):
    data = RNG.standard_normal((8, 16)).astype(np.float32)
    path = kernel_file(HEADER + OLDER)
    result = neuronemu.run(path, {"data": data, "n": np.array([[3]], np.int32)})
    expected = np.zeros_like(data)
    expected[[0, 2, 4]] = data[[0, 2, 4]]
    np.testing.assert_array_equal(result.outputs["out"], expected)


ERRORS = """
@nki.jit
def k(a):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    x = nisa.scalar_load(s)
%s
    nisa.dma_copy(dst=out, src=s)
    return out
"""


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        ("    if x > 0:\n        pass", KernelTypeError, "compile-time condition"),
        ("    y = x // 2", KernelTypeError, "not defined on NkiScalars"),
        ("    nl.fori_loop(0, x, lambda i: None, step=0)", KernelTypeError, "positive"),
        ("    nl.fori_loop(0, x, lambda i: i)", KernelTypeError, "cannot return"),
        ("    nl.while_loop(x, lambda r: None)", KernelTypeError, "next condition"),
        (
            "    kept = []\n"
            "    def body(i):\n"
            "        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
            "        nisa.memset(dst=t, value=1)\n"
            "        kept.append(t)\n"
            "    nl.fori_loop(0, x, body)\n"
            "    nisa.tensor_copy(dst=s, src=kept[0])",
            ConstraintError,
            "cannot be used after the loop",
        ),
    ],
)
def test_misuse_is_a_located_error(kernel_file, body, error, words):
    path = kernel_file(HEADER + ERRORS % body)
    with pytest.raises(error) as info:
        neuronemu.run(path, {"a": np.array([[1]], np.int32)})
    assert words in str(info.value)
    assert info.value.span is not None and info.value.span.line > 0


def test_a_loop_that_never_ends_stops_on_the_instruction_budget(kernel_file):
    path = kernel_file(HEADER + ERRORS % "    nl.while_loop(x, lambda r: r)")
    with pytest.raises(BudgetError, match="device loop"):
        neuronemu.run(path, {"a": np.array([[1]], np.int32)}, limits={"instructions": 5000})


def test_an_instruction_after_a_loop_that_never_ran_follows_what_the_body_followed():
    # @0 writes t; the loop body (@1) overwrites it; @2 reads it. With zero iterations the
    # run is @0, @2, and @2 must wait for @0 (the dependency the body would have carried).
    from neuronemu.program.control import BRANCH

    def instr(i, deps):
        return Instr(i, BRANCH, BRANCH.engines[1], {}, {}, None, deps=deps)  # type: ignore[arg-type]

    instrs = [instr(0, ()), instr(1, (0,)), instr(2, (1,))]
    program = Program("k", "k.py", None, instrs, [], {}, [])  # type: ignore[arg-type]
    program.loops = [Loop("for", 1, 2, None, upper=0)]  # type: ignore[arg-type]
    run = executed_program(program, [0, 2])
    assert [i.index for i in run.instrs] == [0, 1]
    assert run.instrs[1].deps == (0,)


DYNAMIC_RANGE = (
    PROLOGUE
    + """    reg = nisa.register_alloc(n_sb)
    row = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=row, value=0)
    for _ in nl.dynamic_range(0, reg, 1):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=row, indirect_dim=0))
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=row, indirect_dim=0), src=t)
        nisa.tensor_scalar(dst=row, data=row, op0=nl.add, operand0=1)
    # `while reg:` counts the register down (the body reloads it).
    left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=left, src=n)
    flag = nisa.register_alloc(left)
    while flag:
        t2 = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t2, src=out.ap([[F, 1], [1, F]], scalar_offset=left, indirect_dim=0))
        nisa.tensor_scalar(dst=t2, data=t2, op0=nl.add, operand0=10.0)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=left, indirect_dim=0), src=t2)
        nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1)
        nisa.register_load(flag, left)
    return out
"""
)


def test_older_dynamic_range_and_while_reg_are_device_loops(kernel_file):
    data = RNG.standard_normal((8, 16)).astype(np.float32)
    path = kernel_file(HEADER + DYNAMIC_RANGE)
    result = neuronemu.run(path, {"data": data, "n": np.array([[4]], np.int32)})
    expected = np.zeros_like(data)
    expected[:4] = data[:4]
    expected[1:5] += np.float32(10.0)  # rows 4, 3, 2, 1
    np.testing.assert_array_equal(result.outputs["out"], expected)
    assert [loop.kind for loop in result.program.loops] == ["for", "while"]


def test_the_nki_07_kernel_of_the_repo_times_its_run_time_trip_counts():
    import importlib.util
    from pathlib import Path

    kernels = Path(__file__).resolve().parents[2] / "kernels"
    spec = importlib.util.spec_from_file_location("ref", kernels / "scaled_rows_v07_ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reference = module.reference
    path = kernels / "scaled_rows_v07.py"
    data = RNG.standard_normal((16, 64)).astype(np.float32)
    times = []
    for n, repeats in ((2, 1), (9, 1), (9, 4)):
        inputs = {
            "data": data,
            "n": np.array([[n]], np.int32),
            "repeats": np.array([[repeats]], np.int32),
        }
        result = neuronemu.run(path, inputs, ref=reference)
        assert result.check is not None and result.check.passed
        times.append(result.timeline.total_ns)
    assert times[0] < times[1] < times[2]
    text = dumps(result.program)
    assert ".loop 0 for" in text and ".loop 1 while" in text
    assert sum(i.spec.name == "branch" for i in result.program.instrs) >= 2


REVIEW = """
@nki.jit
def k(data, n):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(data.shape, dtype=data.dtype, buffer=nl.sbuf)
%s
    nisa.dma_copy(dst=out, src=acc)
    return out
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # The then branch clears the flag: the else branch must not run too.
        (
            "    flag = nisa.register_alloc(1)\n"
            "    def then():\n"
            "        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)\n"
            "        nisa.register_move(flag, 0)\n"
            "    def other():\n"
            "        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=100.0)\n"
            "    nl.if_else(flag, then, other)",
            1.0,
        ),
        # `while reg < 3:` (older dialect): the test is read again after each pass.
        (
            "    reg = nisa.register_alloc(0)\n"
            "    while reg < 3:\n"
            "        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)\n"
            "        nisa.register_move(reg, reg + 1)",
            3.0,
        ),
    ],
)
def test_conditions_are_read_when_the_machine_decides(kernel_file, body, expected):
    path = kernel_file(HEADER + REVIEW % body)
    data = np.zeros((4, 8), np.float32)
    result = neuronemu.run(path, {"data": data, "n": np.array([[1]], np.int32)})
    np.testing.assert_array_equal(result.outputs["out"], np.full_like(data, expected))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            "    reg = nisa.register_alloc(2)\n"
            "    for i in nl.dynamic_range(reg):\n"
            "        return out",
            "cannot leave a device loop",
        ),
        ("    nl.fori_loop(-2**40, 4, lambda i: None)", "does not fit 32 bits"),
        ("    nl.fori_loop(0, 4, lambda i: None, step=2**32)", "32-bit"),
    ],
)
def test_more_misuse_is_located(kernel_file, body, words):
    path = kernel_file(HEADER + REVIEW % body)
    with pytest.raises(KernelTypeError, match=words) as info:
        neuronemu.run(path, {"data": np.zeros((4, 8), np.float32), "n": np.array([[1]], np.int32)})
    assert info.value.span is not None


def test_a_tile_only_a_zero_trip_body_writes_is_an_uninitialized_read(kernel_file):
    from neuronemu.errors import MemoryAccessError

    body = (
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "    t = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)\n"
        "    def fill(i):\n"
        "        nisa.memset(dst=t, value=2.0)\n"
        "    nl.fori_loop(0, nisa.scalar_load(n_sb), fill)\n"
        "    nisa.tensor_copy(dst=acc, src=t)"
    )
    path = kernel_file(HEADER + REVIEW % body)
    data = np.zeros((4, 8), np.float32)
    ok = neuronemu.run(path, {"data": data, "n": np.array([[1]], np.int32)})
    np.testing.assert_array_equal(ok.outputs["out"], np.full_like(data, 2.0))
    with pytest.raises(MemoryAccessError, match="uninitialized read"):
        neuronemu.run(path, {"data": data, "n": np.array([[0]], np.int32)})


def test_an_output_only_a_zero_trip_body_writes_is_noted_when_allowed(kernel_file):
    # With --allow-uninit, what the read checks would stop on is a note: the output a body
    # run zero times was to write reads NaN, and the run says so (once).
    source = (
        PROLOGUE.replace("    nisa.dma_copy(dst=out, src=zero)\n", "")
        + """
    def body(i):
        t = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data)
        nisa.dma_copy(dst=out, src=t)

    nl.fori_loop(0, nisa.scalar_load(n_sb), body)
    return out
"""
    )
    path = kernel_file(HEADER + source)
    data = np.ones((4, 8), np.float32)
    for trips, noted in ((0, 1), (1, 0)):
        inputs = {"data": data, "n": np.array([[trips]], np.int32)}
        result = neuronemu.run(path, inputs, allow_uninit=True)
        notes = [line for line in result.program.notes if "'out' is never written" in line]
        assert len(notes) == noted
        assert np.isnan(result.outputs["out"]).all() == bool(noted)


def test_a_text_program_missing_its_carried_waits_races(kernel_file, tmp_path):
    from neuronemu.errors import RaceError

    data, result = rows(kernel_file, 5)
    text = dumps(result.program)
    assert " carry(" in text
    stripped = "\n".join(
        line.split(" carry(")[0] + "  ;" + line.split(";", 1)[1] if " carry(" in line else line
        for line in text.split("\n")
    )
    path = tmp_path / "p.nasm"
    path.write_text(stripped)
    with pytest.raises(RaceError):
        neuronemu.run(path, {"data": data, "n": np.array([[5]], dtype=np.int32)})


ACCUMULATE = """
@nki.jit
def k(data):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(data.shape, dtype=data.dtype, buffer=nl.sbuf)

    def body(i):
        t = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.activation(dst=acc, op=nl.copy, data=acc, scale=0.5)

    nl.fori_loop(0, 4, body)
    nisa.dma_copy(dst=out, src=acc)
    return out
"""


@pytest.mark.parametrize("dropped", ["carry", "wait"])
def test_a_race_in_a_device_loop_names_the_programs_instructions_and_its_fix(
    kernel_file, tmp_path, dropped
):
    """A text program missing an order: the race found in the loop's run names the two
    instructions by their numbers in the program (the .nasm's @N, not the run's copies),
    says when the earlier one ran in an earlier pass, and hints the order that was dropped,
    in the text's own syntax."""
    from neuronemu.errors import RaceError

    data = RNG.standard_normal((128, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(HEADER + ACCUMULATE), {"data": data})
    kinds = [ins.spec.name for ins in result.program.instrs]
    add, scale = kinds.index("tensor_tensor"), kinds.index("activation")
    text = dumps(result.program)
    order = f" carry(@{scale})" if dropped == "carry" else f" wait(vector@{add})"
    assert text.count(order) == 1
    path = tmp_path / "p.nasm"
    path.write_text(text.replace(order, ""))
    with pytest.raises(RaceError) as info:
        neuronemu.run(path, {"data": data})
    message, hint = info.value.render(), info.value.hint
    if dropped == "carry":
        assert f"#{add} tensor_tensor reads acc" in message
        assert f"#{scale} activation" in message and "in an earlier pass" in message
        assert hint is not None and f"(carry(@{scale}))" in hint
    else:
        assert f"#{scale} activation reads acc" in message and f"#{add} tensor_tensor" in message
        assert "earlier pass" not in message
        assert hint is not None and f"(wait(vector@{add}))" in hint
    fix = hint.split("(", 1)[1].rsplit(")", 1)[0]  # (the order the hint names, as written)
    assert fix == order.strip()


def test_after_an_inner_loop_that_ran_zero_times_this_pass_the_old_pass_is_not_followed(
    kernel_file,
):
    # Outer pass 0 runs the inner loop once, pass 1 zero times: pass 1's store must follow
    # pass 1's memset (what the skipped body would have followed), not pass 0's activation.
    body = (
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "    F = data.shape[1]\n"
        "    row = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)\n"
        "    def outer(i):\n"
        "        nisa.memset(dst=row, value=1.0)\n"
        "        def inner(j):\n"
        "            nisa.activation(dst=row, data=row, op=nl.exp)\n"
        "        nl.fori_loop(0, 1 - i, inner)\n"
        "        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0),"
        " src=row)\n"
        "    nl.fori_loop(0, nisa.scalar_load(n_sb), outer)"
    )
    path = kernel_file(HEADER + REVIEW % body)
    data = np.zeros((2, 8), np.float32)
    result = neuronemu.run(path, {"data": data, "n": np.array([[2]], np.int32)}, allow_uninit=True)
    run = result.timeline.program.instrs
    names = [i.spec.name for i in run]
    stores = [i for i in run if i.spec.name == "dma_copy" and i.indirect]
    memsets = [
        k
        for k, n in enumerate(names)
        if n == "memset" and run[k].operands["dst"].tensor.name == "row"
    ]
    assert len(stores) == 2 and len(memsets) == 2
    second = stores[1]
    assert memsets[1] in second.deps  # this pass's write of row
    assert not any(run[d].spec.name == "activation" for d in second.deps)
