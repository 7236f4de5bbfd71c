"""More trust-boundary regressions, of the issue's classes, found while writing its tests and
running the fuzz campaign (not in the issue's list). Same rules as test_regressions.py: a
located or usage error, within 10 s and 1 GiB, writing nothing."""

from __future__ import annotations

import pytest
from _guard import Sandbox
from test_regressions import INPUT, add_nasm, kernel, run_kernel, run_nasm  # noqa: F401


@pytest.fixture
def box(tmp_path):
    return Sandbox(tmp_path)


# Budgets reached through str methods, format widths, comprehensions and NumPy methods: each
# took about 1 GB (or 25 s and 1.5 GB) and exited 0.
_BUDGETS = {
    "str-ljust": kernel("s = 'x'.ljust(10**9)"),
    "format-width": kernel("s = '{0:>1000000000}'.format(1)"),
    "percent-width": kernel("s = '%*d' % (10**9, 1)"),
    "dict-comprehension": kernel("s = {i: i for i in range(10**7)}"),
    "2MB-bytes-literal": kernel("b = b'" + "x" * 2_000_000 + "'"),
}
# The standard modules kernels may import: C code that allocates before it yields, refused
# by the budget that bounds it (the sandbox's address-space cap would also stop them, as a
# memory_bytes error, but only after a user's machine has given gigabytes).
_STDLIB_BUDGETS = {
    "itertools-product-repeat": ("p = itertools.product([1], repeat=10**9)", "sequence_items"),
    "itertools-combinations-r": (
        "p = itertools.combinations_with_replacement([1], 10**9)",
        "sequence_items",
    ),
    "itertools-permutations-r": ("p = itertools.permutations([1, 2], r=10**9)", "sequence_items"),
    "deque-repeated": ("d = collections.deque([1] * 1000) * 10**7", "sequence_items"),
    "deque-extended": (
        "d = collections.deque(range(300_000))\nd.extend([0] * 4_000_000)",
        "sequence_items|loop_iterations",
    ),
    "endless-count": ("n = list(itertools.count())", "loop_iterations"),
}


@pytest.mark.parametrize("case", list(_STDLIB_BUDGETS))
def test_standard_modules_are_bounded_by_their_budget(box, case):
    body, budget = _STDLIB_BUDGETS[case]
    out = run_kernel(box, kernel(body, "import collections\nimport itertools"))
    out.assert_refused("k.py")
    assert any(b in out.stderr for b in budget.split("|")), out.describe()


@pytest.mark.parametrize("case", list(_BUDGETS))
def test_more_budgets_end_in_a_located_error(box, case):
    out = run_kernel(box, _BUDGETS[case])
    out.assert_refused("k.py")
    out.assert_budget_message()


def test_an_array_method_that_multiplies_its_size_is_refused(box):
    """`np.arange(4).repeat(10**9)` was an internal MemoryError; repeat is on the allow-list
    of array methods now (for CPython conformance), sized before NumPy makes anything."""
    out = run_kernel(box, kernel("v = np.arange(4).repeat(10**9)"))
    out.assert_located("k.py")
    assert "ndarray.repeat() would hold 4,000,000,000 items" in out.stderr, out.describe()


# Internal errors ("internal error: ...", no location).
_KERNEL_ERRORS = {
    # OSError (file name too long) looking for a helper module of that name (fuzz campaign).
    "5000-char-module-name": kernel("import m" + "9" * 5000 + "\nx = m" + "9" * 5000 + ".y"),
    "10000-term-sum": kernel("n = " + "+".join(["1"] * 10_000)),  # RecursionError
    "par_dim-inf": kernel("x = nl.par_dim(float('inf'))"),  # OverflowError
    "arange-float": kernel("i = nl.arange(2.5)[:, None]"),  # TypeError
    "fstring-named-escape": kernel("print(f'\\N{1}')"),  # SyntaxError from literal_eval
    "fstring-hex-escape": kernel("print(f'\\x{1}')"),  # SyntaxError from literal_eval
}


@pytest.mark.parametrize("case", list(_KERNEL_ERRORS))
def test_more_bad_kernels_give_located_errors(box, case):
    run_kernel(box, _KERNEL_ERRORS[case]).assert_located("k.py")


def test_a_bytes_literal_error_says_what_is_wrong(box):
    """`b'xx'` alone was rejected as 'cannot mix bytes and str literals'."""
    out = run_kernel(box, kernel("b = b'xx'"))
    if out.returncode == 1:
        out.assert_located("k.py")
        assert "mix" not in out.first_line, out.describe()
    else:
        out.assert_confined()
        assert out.returncode == 0, out.describe()


def test_a_kernel_file_that_is_not_utf8_gives_a_located_error(box):
    """An error about the file has a position: the first byte that is not UTF-8 (it was an
    unlocated usage error naming a byte offset)."""
    source = kernel("s = 'caf\udce9'").encode("utf-8", "surrogateescape")
    out = run_kernel(box, source)
    m = out.assert_located("k.py")
    assert int(m["line"]) == source[: source.index(b"\xe9")].count(b"\n") + 1, out.describe()


def test_a_grid_past_the_c_integer_range_is_a_usage_error(box):
    out = run_kernel(box, kernel(), "--grid", "9" * 30)  # OverflowError
    out.assert_usage()


def test_a_negative_instruction_cap_is_a_usage_error(box):
    run_kernel(box, kernel(), "--max-instructions", "-1").assert_usage()


def test_asm_with_a_huge_grid_is_refused(box):
    """`neuronemu asm --grid 1000000` ran past 10 s like `run` did."""
    box.write("k.py", kernel())
    out = box.run("asm", "k.py", *INPUT, "--grid", "1000000")
    out.assert_refused("k.py")
    out.assert_budget_message()


def test_nasm_duplicate_argument_is_located(box, add_nasm):  # noqa: F811
    """`op=add op="add"`: the last one silently won."""
    text = add_nasm.replace("op=add", 'op=add op="multiply"', 1)
    run_nasm(box, text).assert_located("k.nasm")


def test_nasm_wait_on_an_instruction_of_another_stream_is_located(box, add_nasm):  # noqa: F811
    """`wait(vector@0)`: @0 is on dma.q0, not on the vector stream."""
    text = add_nasm.replace("wait(dma.q0@0, dma.q1@1)", "wait(vector@0, dma.q1@1)", 1)
    run_nasm(box, text).assert_located("k.nasm")
