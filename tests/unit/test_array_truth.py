"""Trace-time NumPy arrays in comparisons and conditions, as CPython gives them: `m[m > 5]`
selects, a chain or an `if` on an array of many elements is NumPy's ValueError, located and
catchable (all three were internal errors)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import neuronemu

PROGRAM = """
import numpy as np


def run():
    m = np.arange(10)
    print(m[m > 5], m[(m > 2) & (m < 5)], bool(m[3] > 2), 1 < m[4] < 7)
    for attempt in ("if", "chain", "and"):
        try:
            if attempt == "if":
                if m > 5:
                    pass
            elif attempt == "chain":
                y = 1 < m < 7
            else:
                y = (m > 5) and (m < 7)
        except ValueError as e:
            print(attempt, "ValueError", e.args)
"""


def test_array_comparisons_print_what_cpython_prints(kernel_file):
    expected = io.StringIO()
    scope: dict = {}
    exec(PROGRAM, scope)  # the test's own program, run by CPython as the oracle
    with contextlib.redirect_stdout(expected):
        scope["run"]()
    src = "import nki\n" + PROGRAM + "\n\n@nki.jit\ndef k(a):\n    run()\n    return a\n"
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    got = printed
    assert got[0] == expected.getvalue().splitlines()[0]
    assert [line.split(" ValueError")[0] for line in got[1:]] == ["if", "chain", "and"]


@pytest.mark.parametrize(
    "condition", ["if m > 5:\n        pass", "y = 1 < m < 7", "while m:\n        pass"]
)
def test_an_uncaught_array_truth_is_a_located_value_error(kernel_file, condition):
    src = (
        "import nki\nimport numpy as np\n\n\n@nki.jit\ndef k(a):\n    m = np.arange(10)\n"
        f"    {condition}\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="truth value of an array") as info:
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span.line == 8
