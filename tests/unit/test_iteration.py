"""Iterating at trace time as CPython does: an Enum class yields its members (aliases once)
in a `for` and in every comprehension, and a value that is not iterable is the kernel's
located TypeError, catchable as one. (`[i for i in n]` over an int, or over an Enum, was an
internal error in comprehensions.)"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import neuronemu

PROGRAM = """
import enum


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    CRIMSON = 1  # an alias of RED


def run(n):
    print([c.name for c in Color], {c.name: c.value for c in Color})
    print(tuple(c.value for c in Color), sorted({c.name for c in Color}))
    for c in Color:
        print(c.name)
    for value in (n, 2.5, None, Color.RED):
        try:
            print([i for i in value])
        except TypeError as e:
            print("TypeError", e.args)
        try:
            for i in value:
                pass
        except TypeError as e:
            print("TypeError", e.args)
"""


def test_iteration_prints_what_cpython_prints(kernel_file):
    expected = io.StringIO()
    scope: dict = {}
    exec(PROGRAM, scope)  # the test's own program, run by CPython as the oracle
    with contextlib.redirect_stdout(expected):
        scope["run"](3)
    src = "import nki\n" + PROGRAM + "\n\n@nki.jit\ndef k(a):\n    run(3)\n    return a\n"
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == expected.getvalue().splitlines()


@pytest.mark.parametrize("iterable", ["n", "Plain", "Plain()"])
@pytest.mark.parametrize("form", ["[i for i in {}]", "{{i for i in {}}}", "list(i for i in {})"])
def test_iterating_what_is_not_iterable_is_a_located_error(kernel_file, iterable, form):
    src = (
        "import nki\n\n\nclass Plain:\n    pass\n\n\n@nki.jit\ndef k(a):\n    n = 3\n"
        f"    x = {form.format(iterable)}\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="is not iterable") as info:
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span.line == 11
