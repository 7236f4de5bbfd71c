"""Loops whose bodies branch on comparisons of their variables, or take widths that min() and
max() pick or a quotient and remainder (`//`, `%` by a constant) make, are replayed up to
where a condition comes out otherwise than in the recorded iteration, then traced from there
(neuronemu.replay.plans: `Plan.guarded`); nested, the inner loop's conditions at its last
iteration are checked by the outer loop's replay too (`ranged`). Each generated kernel must
trace exactly as its loops unrolled (program text, dependencies, cycles, values), and the
expected values come from Python evaluating the same conditions."""

from __future__ import annotations

import numpy as np
import pytest
from _iterations import count_interpreted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu.replay import templates

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
OPS = ["<", "<=", ">", ">=", "==", "!="]


@st.composite
def conditions(draw) -> str:
    """`a * i + b * j + c op 0`, or the truth of such a sum."""
    a, b = draw(st.integers(-2, 2)), draw(st.integers(-2, 2))
    c = draw(st.integers(-12, 12))
    term = f"{a} * i + {b} * j + {c}"
    if draw(st.integers(0, 6)) == 0:
        return f"({term})"
    return f"{term} {draw(st.sampled_from(OPS))} 0"


@st.composite
def guarded_kernels(draw) -> tuple[str, int, int, list[str], str]:
    """A kernel adding 1 to out[i, j] (a [128, 1] column each) for each condition that holds
    at (i, j), over a 2-D loop nest; and a width picked by min() or max() of the variables
    for an extra copy."""
    rows, cols = draw(st.integers(4, 9)), draw(st.integers(4, 9))
    conds = draw(st.lists(conditions(), min_size=1, max_size=3))
    width = draw(
        st.sampled_from(
            [
                "min(8, 3 * j + i + 1)",
                "max(1, 8 - 2 * i - j)",
                "min(j + 2, 8, 12 - i)",
                "4",
                "(5 * i + j) % 8 + 1",
                "min(8, (3 * j + i) // 2 + 1)",
                "j // 3 + i % 2 + 1",
            ]
        )
    )
    body = "".join(
        f"            if {c}:\n"
        "                nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)\n"
        for c in conds
    )
    source = (
        HEADER + "@nki.jit\n"
        "def k(a):\n"
        f"    out = nl.ndarray(({rows}, {cols} * 8), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        f"    for i in nl.affine_range({rows}):\n"
        f"        for j in nl.affine_range({cols}):\n"
        "            t = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)\n"
        "            nisa.memset(dst=t, value=0.0)\n" + body + f"            w = {width}\n"
        "            nisa.dma_copy(dst=t[:, 0:w], src=a[i:i + 1, j * 8:j * 8 + w])\n"
        "            nisa.dma_copy(dst=out[i:i + 1, j * 8:j * 8 + 8], src=t)\n"
        "    return out\n"
    )
    return source, rows, cols, conds, width


def _expected(a: np.ndarray, rows: int, cols: int, conds: list[str], width: str) -> np.ndarray:
    want = np.zeros((rows, cols * 8), np.float32)
    for i in range(rows):
        for j in range(cols):
            count = sum(1 for c in conds if eval(c, {"i": i, "j": j}))  # (Python: the oracle)
            want[i, j * 8 : j * 8 + 8] = count
            w = eval(width, {"i": i, "j": j})
            want[i, j * 8 : j * 8 + w] = a[i, j * 8 : j * 8 + w]
    return want


def _run(path, a, replay: bool):
    templates.ENABLED = replay
    try:
        return neuronemu.run(path, {"a": a})
    finally:
        templates.ENABLED = True


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel=guarded_kernels())
def test_branches_on_loop_variables_replay_as_unrolled(tmp_path_factory, kernel):
    source, rows, cols, conds, width = kernel
    path = tmp_path_factory.mktemp("k") / "kernel.py"
    path.write_text(source)
    a = np.random.default_rng(1).standard_normal((rows, cols * 8)).astype(np.float32)
    replayed, unrolled = _run(path, a, True), _run(path, a, False)
    np.testing.assert_array_equal(replayed.outputs["out"], _expected(a, rows, cols, conds, width))
    assert dumps(replayed.program) == dumps(unrolled.program)
    assert [(i.deps, i.waits) for i in replayed.program.instrs] == [
        (i.deps, i.waits) for i in unrolled.program.instrs
    ]
    assert replayed.cycles == unrolled.cycles


ROWS_8 = "    for i in nl.affine_range(8):"


def _nest(cond: str, rows: int = 16, cols: int = 16, top: str = "") -> str:
    return (
        HEADER + top + "@nki.jit\n"
        "def k(a):\n"
        f"    out = nl.ndarray(({rows}, {cols}), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        f"    for i in nl.affine_range({rows}):\n"
        f"        for j in nl.affine_range({cols}):\n"
        "            t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
        "            nisa.dma_copy(dst=t, src=a[i:i + 1, j:j + 1])\n"
        f"            if {cond}:\n"
        "                nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)\n"
        "            nisa.dma_copy(dst=out[i:i + 1, j:j + 1], src=t)\n"
        "    return out\n"
    )


@pytest.mark.parametrize(
    "cond, outer, inner",
    [
        # The first column only: rows 0-2 traced, columns 0-2 in each; the rest replayed.
        ("j == 0", 3, 3 * 3),
        # Each row's branch changes between its recorded columns 1 and 2: three columns more
        # are traced before the replay; the outer loop replays rows 3-15 (the condition at a
        # row's last column, 15, comes out as in the recorded rows).
        ("j < 2", 3, 3 * 6),
        # Rows 3 and 4 replayed, row 5 changes: rows 5-7 traced, 8-15 replayed.
        ("i < 5", 6, 6 * 3),
        # Rows 0-4 take the branch at every column (at the last, 15, too: what the outer
        # loop's replay checks), rows 3-4 replayed; from row 5 on each row's branch changes
        # at a column that moves with it, so the rows differ: all traced.
        ("i + j < 20", 3 + 11, None),
        # The diagonal moves with the row: the outer loop cannot check its inner loop's
        # replayed columns at their ends (an equality of both variables): every row traced.
        ("i == j", 16, None),
        # No column of rows 0-2, nor their first three or last, meets the line; rows 3 and
        # 4 meet it inside (columns 3 and 10), which the rows' ends cannot tell: all traced.
        ("j == 7 * i - 18", 16, None),
    ],
)
def test_how_much_of_a_guarded_nest_is_traced(kernel_file, monkeypatch, cond, outer, inner):
    source = _nest(cond)
    path = kernel_file(source)
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    unrolled = _run(path, a, False)
    seen = count_interpreted(monkeypatch)
    replayed = _run(path, a, True)
    want = a + np.fromfunction(lambda i, j: eval(cond, {"i": i, "j": j}), (16, 16))
    np.testing.assert_array_equal(replayed.outputs["out"], want)
    assert dumps(replayed.program) == dumps(unrolled.program)
    lines = source.splitlines()
    rows = seen.count(lines.index("    for i in nl.affine_range(16):") + 1)
    columns = seen.count(lines.index("        for j in nl.affine_range(16):") + 1)
    assert rows == outer
    assert columns == inner if inner is not None else columns < 16 * 16


@pytest.mark.parametrize(
    "cond, rows",
    [
        # each row's own list: the rows differ, all traced
        ("ROWS[i][j] > 0", 8),
        # rows 3-4 replayed; row 5 differs from the recorded rows only past its first three
        # columns, which its inner replay noted for the outer one: traced, and 6-7 after it
        ("FLAT[i * 8 + j] > 0", 6),
        # an item of a row taken at a fixed index: not replayed
        ("FLAT[j] + ROWS[i][3] > 0", 8),
        # rows 3-6 replayed, row 7 takes a 0: traced
        ("FLAT[6 * i + 5] > 0", 4),
    ],
)
def test_items_taken_in_a_loop_nest_replay_as_unrolled(kernel_file, monkeypatch, cond, rows):
    # Items of lists taken at the loop variables (neuronemu.replay.journal.lookup): an inner
    # loop replayed within an outer one's recorded iteration notes the items its replayed
    # iterations take, for the outer replay to check in each of its iterations.
    top = (
        "FLAT = [1] * 43 + [0] * 5 + [1] * 16\nROWS = [FLAT[r * 8 : r * 8 + 8] for r in range(8)]\n"
    )
    path = kernel_file(_nest(cond, 8, 8, top))
    scope: dict = {}
    exec(top, scope)  # (our test text; Python the oracle)
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    held = [[bool(eval(cond, {**scope, "i": i, "j": j})) for j in range(8)] for i in range(8)]
    unrolled = _run(path, a, False)
    seen = count_interpreted(monkeypatch)
    replayed = _run(path, a, True)
    np.testing.assert_array_equal(replayed.outputs["out"], a + np.array(held))
    assert dumps(replayed.program) == dumps(unrolled.program)
    assert seen.count(_nest(cond, 8, 8, top).splitlines().index(ROWS_8) + 1) == rows


def test_a_flattened_loop_replays_each_run_of_its_quotient(kernel_file, monkeypatch):
    # t // 8 stays and t % 8 moves by one within each run of 8 iterations: three traced and
    # five replayed per run (12 of 32 interpreted), as unrolled, values as NumPy's.
    source = (
        HEADER + "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((4, 128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    for t in nl.affine_range(32):\n"
        "        b = t // 8\n"
        "        c = t % 8\n"
        "        x = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=x, src=a[b, :, c * 128 : c * 128 + 128])\n"
        "        nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=float(b))\n"
        "        nisa.dma_copy(dst=out[b, :, c * 128 : c * 128 + 128], src=x)\n"
        "    return out\n"
    )
    path = kernel_file(source)
    a = np.random.default_rng(2).standard_normal((4, 128, 1024)).astype(np.float32)
    unrolled = _run(path, a, False)
    seen = count_interpreted(monkeypatch)
    replayed = _run(path, a, True)
    assert len(seen) == 4 * 3
    assert dumps(replayed.program) == dumps(unrolled.program)
    want = a + np.arange(4, dtype=np.float32)[:, None, None]
    np.testing.assert_array_equal(replayed.outputs["out"], want)


def _both(kernel_file, monkeypatch, source: str, a: np.ndarray) -> tuple:
    """The kernel `source` run on `a` unrolled, then replayed; the replayed run's iterations
    interpreted of its loop over 32 (the program text the same in both)."""
    path = kernel_file(source)
    unrolled = _run(path, a, False)
    seen = count_interpreted(monkeypatch)
    replayed = _run(path, a, True)
    assert dumps(replayed.program) == dumps(unrolled.program)
    count = seen.count(source.splitlines().index("    for i in nl.affine_range(32):") + 1)
    return unrolled, replayed, count


@pytest.mark.parametrize(
    "column, traced",
    [
        # i % 2 is a run of 2: each of the first two pieces' recorded iterations fall in two
        # runs or leave theirs at once (0-6 traced); then two iterations at a time: 7-12
        # traced, 13-30 replayed, 31 (the last, alone) traced
        ("i % 2", 7 + 6 + 1),
        # periods of 4 and 2, four at a time: 0-6 traced, 7-18 traced, 19-30 replayed, 31
        ("i % 4 - i % 2", 7 + 12 + 1),
        # a period of 3 of a step of 2: 0-6 traced, 7-15 traced, 16-30 replayed, 31
        ("(2 * i + 1) % 3", 7 + 9 + 1),
        # periods of 11 and 4 (44: past MAX_BLOCK): runs of i % 4 replay one iteration
        # each in the first two pieces, then two pieces replay none: the rest traced
        ("i % 11 % 4", 32 - 2),
    ],
)
def test_a_loop_whose_branch_changes_every_other_iteration_replays_by_periods(
    kernel_file, monkeypatch, column, traced
):
    # `bufs[i % 2]`-style remainders: after MAX_STALLED pieces that replay nothing, the loop
    # is recorded and replayed a whole period (the remainders' least common multiple) at a
    # time, where the remainders repeat: as unrolled, values as NumPy's.
    assert _columns(kernel_file, monkeypatch, column, 4) == traced


def _columns(kernel_file, monkeypatch, column: str, width: int) -> int:
    """A loop of 32 copying column block `column` (an expression of i) of `a`, `width`
    blocks of 32 wide, to block i of the output: run unrolled and replayed, the same program
    and the values Python's evaluation of `column` says; the iterations interpreted."""
    source = (
        HEADER + "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 32 * 32), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(32):\n"
        f"        c = {column}\n"
        "        t = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=t, src=a[:, c * 32 : c * 32 + 32])\n"
        "        nisa.dma_copy(dst=out[:, i * 32 : i * 32 + 32], src=t)\n"
        "    return out\n"
    )
    a = np.random.default_rng(3).standard_normal((128, 32 * width)).astype(np.float32)
    _, replayed, count = _both(kernel_file, monkeypatch, source, a)
    columns = [eval(column, {"i": i}) for i in range(32)]  # (Python: the oracle)
    want = np.concatenate([a[:, c * 32 : c * 32 + 32] for c in columns], axis=1)
    np.testing.assert_array_equal(replayed.outputs["out"], want)
    return count


@pytest.mark.parametrize("n", [2, 8, 16])
def test_divmod_of_the_loop_variable_replays_as_its_two_operators_do(kernel_file, monkeypatch, n):
    # divmod(i, n) is (i // n, i % n): the same program and values as unrolled, and as many
    # iterations interpreted as the operators spelled out (was: every one, refused)
    counts = [
        _columns(kernel_file, monkeypatch, column, 20)
        for column in (f"divmod(i, {n})[0] + divmod(i, {n})[1]", f"i // {n} + i % {n}")
    ]
    assert counts[0] == counts[1]
    if n == 16:  # (two runs of 16 of the quotient: each replays but its first iterations)
        assert counts[0] < 32


@pytest.mark.parametrize(
    "call, python",
    [
        ("divmod(i, b=3)", "divmod() takes no keyword arguments"),
        ("divmod(i)", "divmod expected 2 arguments, got 1"),
        # (neuronemu's own words here, "divmod(): division by zero", as before divmod replayed)
        ("divmod(i, 0 if i == 20 else 3)", "division by zero"),
    ],
)
def test_a_bad_divmod_fails_as_unrolled_and_as_python_says(kernel_file, call, python):
    # (what the kernel catches says what Python's divmod says, the loop replayed or not)
    source = (
        HEADER + "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(32):\n"
        "        try:\n"
        f"            {call}\n"
        "        except (TypeError, ZeroDivisionError) as e:\n"
        "            assert False, str(e)\n"
        "        nisa.dma_copy(dst=out[:, i : i + 1], src=a[:, i : i + 1])\n"
        "    return out\n"
    )
    path = kernel_file(source)
    a = np.zeros((128, 32), np.float32)
    said = []
    for replay in (True, False):
        with pytest.raises(neuronemu.NeuronEmuError) as raised:
            _run(path, a, replay)
        said.append(str(raised.value))
    assert said[0] == said[1]
    assert python in said[0]


def test_a_double_buffered_loop_replays_two_iterations_at_a_time(kernel_file, monkeypatch):
    # Two tiles taken in turn (`bufs[i % 2]`, software pipelining's multi-buffering): the
    # same dependencies, cycles and values as unrolled; 14 of 32 iterations interpreted.
    source = (
        HEADER + "@nki.jit\n"
        "def k(a):\n"
        "    out = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        "    bufs = [nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]\n"
        "    for i in nl.affine_range(32):\n"
        "        b = bufs[i % 2]\n"
        "        nisa.dma_copy(dst=b, src=a[:, i * 128 : i * 128 + 128])\n"
        "        nisa.tensor_scalar(dst=b, data=b, op0=nl.multiply, operand0=2.0)\n"
        "        nisa.dma_copy(dst=out[:, i * 128 : i * 128 + 128], src=b)\n"
        "    return out\n"
    )
    a = np.random.default_rng(4).standard_normal((128, 4096)).astype(np.float32)
    unrolled, replayed, count = _both(kernel_file, monkeypatch, source, a)
    assert [(i.deps, i.waits) for i in replayed.program.instrs] == [
        (i.deps, i.waits) for i in unrolled.program.instrs
    ]
    assert replayed.cycles == unrolled.cycles
    np.testing.assert_array_equal(replayed.outputs["out"], a * 2)
    assert count == 14
