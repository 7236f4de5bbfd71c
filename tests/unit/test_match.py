"""`match` (PEP 634, issue 41): `match` and `case` are keywords only where CPython takes them
for ones, a pattern CPython refuses at compile time is a located syntax error with CPython's
message, and a kernel can dispatch on a tile's shape or dtype with it. (What patterns match
and bind is checked against CPython in tests/conformance/python/statements.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelSyntaxError
from neuronemu.frontend import ast as A
from neuronemu.frontend.parser import parse_source

# Cases CPython refuses when it compiles them (its own message, when it has one of its own).
REFUSED = {
    "capture-not-last": "case x:\n        pass\n    case 1:\n        pass",
    "wildcard-not-last": "case _:\n        pass\n    case 1:\n        pass",
    "capture-alternative-not-last": "case x | 1:\n        pass",
    "as-capture-not-last": "case (x as y):\n        pass\n    case 2:\n        pass",
    "wildcard-in-group": "case (_ | 1):\n        pass",
    "two-stars": "case [a, *b, *c]:\n        pass",
    "name-twice": "case (a, a):\n        pass",
    "alternatives-bind-differently": "case 1 | x:\n        pass",
    "duplicate-key": "case {'a': 1, 'a': 2}:\n        pass",
    "name-as-key": "case {x: 1}:\n        pass",
    "keyword-then-positional": "case P(x=1, 2):\n        pass",
    "keyword-twice": "case P(x=1, x=2):\n        pass",
    "rest-not-last": "case {**rest, 'a': 1}:\n        pass",
    "f-string": "case f'x':\n        pass",
    "as-underscore": "case x as _:\n        pass",
    "rest-underscore": "case {**_}:\n        pass",
    "no-case": "x = 1",
    "real-plus-real": "case 1 + 2:\n        pass",
    "imaginary-plus-imaginary": "case 1j + 2j:\n        pass",
}


# Subjects CPython refuses.
SUBJECTS = ["*a", "yield"]


@pytest.mark.parametrize("subject", SUBJECTS)
def test_a_subject_cpython_refuses_is_a_syntax_error(subject):
    source = f"def f(a):\n    match {subject}:\n        case _:\n            pass\n"
    with pytest.raises(SyntaxError):
        compile(source, "k.py", "exec")
    with pytest.raises(KernelSyntaxError) as ours:
        parse_source(source, "k.py")
    assert ours.value.span is not None and ours.value.span.line == 2


def test_a_form_feed_may_lead_a_match_line():
    source = "v = 1\n\fmatch v:\n    case 1:\n        w = 2\n"
    compile(source, "k.py", "exec")
    assert isinstance(parse_source(source, "k.py").body[1], A.Match)


def _match(body: str) -> str:
    return f"def f(v):\n    match v:\n        {body.replace(chr(10), chr(10) + '    ')}\n"


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_pattern_cpython_refuses_is_a_located_syntax_error(name):
    source = _match(REFUSED[name])
    with pytest.raises(SyntaxError) as cpython:
        compile(source, "k.py", "exec")  # (our own test text)
    with pytest.raises(KernelSyntaxError) as ours:
        parse_source(source, "k.py")
    assert ours.value.span is not None and ours.value.span.line == cpython.value.lineno
    if cpython.value.msg != "invalid syntax":  # CPython's own words, where it has them
        assert ours.value.message == cpython.value.msg


# Lines that use `match` and `case` as names: statements CPython runs, not match statements.
NAMES = [
    "match = 1",
    "match.x = 1",
    "match[0] = 1",
    "match(1)",
    "match: int = 1",
    "match, case = 1, 2",
    "case = match + 1",
    "print(match, case)",
    "match = lambda: 1",
    "case: int",
]


@pytest.mark.parametrize("line", NAMES)
def test_match_and_case_stay_names_where_cpython_keeps_them(line):
    source = f"def f(match, case, print):\n    {line}\n    return match\n"
    compile(source, "k.py", "exec")  # (CPython takes it)
    module = parse_source(source, "k.py")
    (fn,) = module.body
    assert isinstance(fn, A.FunctionDef)
    assert not any(isinstance(s, A.Match) for s in fn.body)


def test_a_case_body_may_use_the_names_and_nest_a_match():
    source = (
        "def f(v, case):\n"
        "    match v:\n"
        "        case [x, *rest]:\n"
        "            case = x\n"
        "            match rest:\n"
        "                case []: return case\n"
        "                case _: return -1\n"
        "        case {'k': 1} | {'j': 1}:\n"
        "            return 2\n"
        "    case = 3\n"
        "    return case\n"
    )
    compile(source, "k.py", "exec")
    (fn,) = parse_source(source, "k.py").body
    assert isinstance(fn, A.FunctionDef)
    outer = fn.body[0]
    assert isinstance(outer, A.Match) and len(outer.cases) == 2
    inner = outer.cases[0].body[1]
    assert isinstance(inner, A.Match) and len(inner.cases) == 2
    assert isinstance(fn.body[1], A.Assign)  # (`case = 3`: after the match, a name again)


KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    match a.shape, a.dtype:
        case ((p, f), nl.float32) if f >= 256:
            nisa.activation(dst=t, op=nl.exp, data=t)
        case ((p, f), nl.float32):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        case _:
            raise ValueError("unsupported input")
    nisa.dma_copy(dst=out, src=t)
    return out
"""


@pytest.mark.parametrize("cols", [128, 256])
def test_a_kernel_dispatches_on_its_inputs_with_match(kernel_file, cols):
    a = np.linspace(-1, 1, 128 * cols, dtype=np.float32).reshape(128, cols)
    result = neuronemu.run(kernel_file(KERNEL), {"a": a})
    expected = np.exp(a) if cols >= 256 else a * 2.0
    np.testing.assert_allclose(result.outputs["out"], expected, rtol=1e-2, atol=1e-3)


def test_no_case_matching_a_kernel_input_is_its_located_error(kernel_file):
    a = np.zeros((128, 64), dtype=np.float16)
    with pytest.raises(neuronemu.NeuronEmuError) as err:
        neuronemu.run(kernel_file(KERNEL), {"a": a})
    assert "unsupported input" in err.value.message
    line = KERNEL.splitlines().index('            raise ValueError("unsupported input")') + 1
    assert err.value.span is not None and err.value.span.line == line
