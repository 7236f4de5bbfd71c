"""Trace-time Python inside the allow-list: what kernels use keeps working, with the same
values Python gives, and what is not listed, or over a budget, is a located error."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import BudgetError, KernelTypeError, UsageError
from neuronemu.limits import Limits

HEADER = "import nki\nimport nki.language as nl\nimport numpy as np\nimport math\n"


def printed(kernel_file, lines: str, limits: dict | None = None) -> list[str]:
    """Trace a kernel whose body prints trace-time values; what it printed."""
    body = "".join(f"    {line}\n" for line in lines.strip().splitlines())
    out: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(f"{HEADER}\n@nki.jit\ndef k(a):\n{body}    return a\n"),
        {"a": np.zeros((2, 2), np.float32)},
        print_fn=out.append,
        limits=limits,
    )
    return out


# Each: kernel lines that print one value, and the Python expression giving the same value.
ALLOWED = [
    ("print('{}-{:>4}-{k}'.format(1, 2, k='x'))", "'{}-{:>4}-{k}'.format(1, 2, k='x')"),
    (
        "print('{0[1]} {m[a]}'.format([5, 6], m={'a': 7}))",
        "'{0[1]} {m[a]}'.format([5, 6], m={'a': 7})",
    ),
    ("print('%05.1f|%s' % (3.14159, 'x'))", "'%05.1f|%s' % (3.14159, 'x')"),
    ("print(', '.join(str(i) for i in range(4)))", "', '.join(str(i) for i in range(4))"),
    (
        "print('a_b_c'.split('_'), 'ab'.center(6, '*'), 'x'.zfill(3))",
        "' '.join(map(str, ('a_b_c'.split('_'), 'ab'.center(6, '*'), 'x'.zfill(3))))",
    ),
    (
        "xs = [3, 1, 2]\n xs.append(0)\n xs.sort()\n print(xs, xs.index(2), xs.count(3))",
        "' '.join(map(str, ([0, 1, 2, 3], 2, 1)))",
    ),
    (
        "d = {'a': 1}\n d.setdefault('b', 2)\n print(sorted(d.items()), d.get('z', 9))",
        "' '.join(map(str, ([('a', 1), ('b', 2)], 9)))",
    ),
    (
        "s = set([1, 2])\n s.add(3)\n print(sorted(s.union([9])), (7).bit_length())",
        "' '.join(map(str, ([1, 2, 3, 9], 3)))",
    ),
    (
        "x = np.arange(6).reshape(2, 3)\n"
        " print(x.T.shape, x.sum(), x.max(axis=1).tolist(), x.dtype)",
        "'(3, 2) 15 [2, 5] int64'",
    ),
    (
        "print(np.zeros((2, 2), dtype=np.float32).astype(np.int32).tolist())",
        "str(np.zeros((2, 2), dtype=np.int32).tolist())",
    ),
    (
        "print(sum([[1], [2]], []), pow(3, 4), pow(3, 4, 5), math.prod([2, 3, 4]))",
        "' '.join(map(str, ([1, 2], 81, 1, 24)))",
    ),
    (
        "print(math.comb(10, 3), math.perm(5, 2), 2 ** 100)",
        "' '.join(map(str, (120, 20, 2 ** 100)))",
    ),
    ("print(f'{3.5:08.3f}|{\"s\"!r}|{42:x}')", "f'{3.5:08.3f}|{\"s\"!r}|{42:x}'"),
]


@pytest.mark.parametrize("lines, expected", ALLOWED)
def test_allowed_python_gives_pythons_values(kernel_file, lines, expected):
    lines = lines.replace("\n ", "\n")
    assert printed(kernel_file, lines) == [str(eval(expected))]


def test_a_kernel_function_is_a_sort_key(kernel_file):
    out = printed(
        kernel_file,
        """
def neg(x):
    return -x
print(sorted([1, 3, 2], key=neg), max([1, 3, 2], key=neg))
""",
    )
    assert out == ["[3, 2, 1] 1"]


def test_containers_reading_methods_are_reachable_as_bound_methods(kernel_file):
    # The argsort idiom of AWS's transpose kernels: sorted(range(n), key=seq.__getitem__).
    out = printed(
        kernel_file,
        """
seq = [30, 10, 20]
print(sorted(range(len(seq)), key=seq.__getitem__), (1, 2).__len__(), {"a": 1}.__contains__("a"))
""",
    )
    assert out == ["[1, 2, 0] 2 True"]


REFUSED = [
    ("np.arange(3).dump('x')", KernelTypeError, "ndarray.dump is not available"),
    ("np.zeros(1).tofile('x')", KernelTypeError, "ndarray.tofile is not available"),
    ("x = (1).__class__", KernelTypeError, "int.__class__ is not available"),
    ("x = 'a'.__len__", KernelTypeError, "str.__len__ is not available"),
    ("x = '{0.real}'.format(1)", KernelTypeError, "attribute 'real' in a format field"),
    ("x = '%*d' % (10 ** 9, 1)", BudgetError, "'%\\*' format width"),
    ("x = [].__class__.__subclasses__()", KernelTypeError, "list.__class__"),
    ("x = [].__getitem__.__self__", KernelTypeError, "__self__"),
    ("x = 2 ** 10000", BudgetError, "int_bits budget of 8192"),
    ("x = 1 << 9000", BudgetError, "int_bits budget"),
    ("x = 'ab' * 10 ** 8", BudgetError, "sequence_items budget"),
    ("x = [0] * 3 + [1] * 10 ** 8", BudgetError, "sequence_items budget"),
    ("x = 'x'.ljust(10 ** 9)", BudgetError, "sequence_items budget"),
    ("x = f'{1:>999999999}'", BudgetError, "sequence_items budget"),
    ("x = np.zeros((10 ** 5, 10 ** 5))", BudgetError, "np.zeros\\(\\) would hold"),
    ("x = np.ones(10 ** 4)[:, None] + np.ones(10 ** 4)", BudgetError, "array operator"),
    ("x = math.comb(10 ** 6, 5 * 10 ** 5)", BudgetError, "int_bits budget"),
    ("x = sum(range(10 ** 12))", BudgetError, "loop_iterations budget"),
    ("x = sorted(range(10 ** 9))", BudgetError, "loop_iterations budget"),
]


@pytest.mark.parametrize("line, error, message", REFUSED)
def test_outside_the_allow_list_or_over_budget_is_a_located_error(
    kernel_file, line, error, message
):
    with pytest.raises(error, match=message) as info:
        printed(kernel_file, line)
    assert info.value.span is not None and info.value.span.line == 8  # the body's first line
    if error is BudgetError:
        assert "--limit " in info.value.hint


def test_a_raised_budget_lets_the_kernel_through(kernel_file):
    line = "print(len('ab' * 3_000_000))"
    with pytest.raises(BudgetError):
        printed(kernel_file, line, {"sequence_items": 1_000_000})
    assert printed(kernel_file, line, {"sequence_items": 8_000_000}) == ["6000000"]


def test_limits_parse_names_values_and_units():
    limits = (
        Limits().parse("memory_bytes=8G").parse("trace_seconds=1.5").parse("instructions=2_000")
    )
    assert limits.memory_bytes == 8 << 30 and limits.trace_seconds == 1.5
    assert limits.instructions == 2000
    for bad in (
        "nosuch=1",
        "memory_bytes",
        "memory_bytes=-1",
        "trace_seconds=nan",
        "instructions=3G",
        "trace_seconds=0",
    ):
        with pytest.raises(UsageError):
            Limits().parse(bad)
