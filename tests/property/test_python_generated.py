"""Generated trace-time Python against CPython (issue 41): Hypothesis writes expressions and
short statement sequences over ints, floats, strings, tuples, lists and dicts; CPython runs
each program (our own generated text: exec is fine) and a kernel runs it through neuronemu,
and both must print the same. A failing operation prints its exception's class, so errors
must agree too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_PATH = Path(__file__).resolve().parents[1] / "conformance" / "python" / "_harness.py"
if "conformance_harness" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("conformance_harness", _PATH)
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["conformance_harness"] = _module
    _spec.loader.exec_module(_module)
harness = sys.modules["conformance_harness"]

INTS = st.integers(-20, 20).map(repr)
FLOATS = st.sampled_from(["0.5", "-1.25", "3.0", "1e-3", "2.5", "-0.0", "7.75"])
STRS = st.sampled_from(["''", "'a'", "'bc'", "'xyz'", "'A b'", "'10'"])
NAMES = st.sampled_from(["x", "y", "s", "xs", "t", "d"])  # bound by every program's prelude
PRELUDE = "x, y, s, xs, t, d = 7, -3.5, 'abc', [3, 1, 2], (4, 'q'), {'k': 1, 'j': 2}\n"


def _atoms() -> st.SearchStrategy[str]:
    return st.one_of(INTS, FLOATS, STRS, NAMES, st.sampled_from(["True", "False", "None"]))


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(["+", "-", "*", "/", "//", "%", "<", "<=", "==", "!=", "and", "or"])
    ints = st.integers(-6, 6).map(repr)
    return st.one_of(
        st.tuples(inner, binary, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(INTS, st.integers(0, 4)).map(lambda t: f"({t[0]} ** {t[1]})"),
        inner.map(lambda a: f"(not {a})"),
        inner.map(lambda a: f"(-{a})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
        st.lists(inner, max_size=3).map(lambda xs: f"({''.join(x + ', ' for x in xs)})"),
        st.tuples(STRS, inner).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        st.tuples(inner, ints).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, ints, ints).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}]"),
        st.tuples(
            st.sampled_from(["len", "str", "repr", "abs", "bool", "sorted", "list", "tuple"]),
            inner,
        ).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["min", "max", "round", "divmod"]), inner, inner).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]})"
        ),
        # (an atom inside double quotes: f-strings do not nest before Python 3.12)
        st.tuples(_atoms(), st.sampled_from(["", ">6", "<4", "^7", "+", ".2f", "08.3f", "x"])).map(
            lambda t: f'f"{{{t[0]}:{t[1]}}}"'
        ),
        inner.map(lambda a: f"[v for v in {a} if v]"),
        inner.map(lambda a: f"{{k: v for k, v in enumerate({a})}}"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} in {t[1]})"),
        # (chained; no `is`: the identity of equal constants is CPython's own choice)
        st.tuples(inner, st.sampled_from(["<", "<=", "==", "!=", ">"]), inner, inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]} < {t[3]})"
        ),
        st.tuples(INTS, st.sampled_from(["&", "|", "^", "<<", ">>"]), st.integers(0, 5)).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, ints, ints, st.integers(-3, 3).filter(bool)).map(
            lambda t: f"{t[0]}[{t[1]}:{t[2]}:{t[3]}]"
        ),
        st.tuples(
            st.sampled_from(["sum", "any", "all", "set", "reversed", "enumerate", "zip"]), inner
        ).map(lambda t: f"list({t[0]}({t[1]}))" if t[0] != "sum" else f"sum({t[1]})"),
        st.tuples(
            inner,
            st.sampled_from(
                [
                    "upper()",
                    "split()",
                    "strip('a')",
                    "count('a')",
                    "find('b')",
                    "keys()",
                    "values()",
                    "items()",
                    "get('k')",
                    "index(3)",
                    "copy()",
                    "isdigit()",
                    "replace('a', 'zz')",
                    "startswith('a')",
                    "join(['x', 'y'])",
                ]
            ),
        ).map(lambda t: f"({t[0]}).{t[1]}"),  # fmt: skip
        _atoms().map(lambda a: f'f"{{{a}!r:>8}}"'),
    )


EXPRESSIONS = st.recursive(_atoms(), _extend, max_leaves=6)


def _guarded(line: str) -> str:
    """`line` run so that a failing operation prints its class instead of ending the run."""
    body = "".join(f"        {part}\n" for part in line.split("\n"))
    return f"    try:\n{body}    except Exception as e:\n        print(type(e).__name__)\n"


STATEMENTS = st.one_of(
    st.tuples(NAMES, EXPRESSIONS).map(lambda t: f"{t[0]} = {t[1]}"),
    st.tuples(NAMES, st.sampled_from(["+", "-", "*", "//", "%"]), EXPRESSIONS).map(
        lambda t: f"{t[0]} {t[1]}= {t[2]}"
    ),
    EXPRESSIONS.map(lambda e: f"xs.append({e})"),
    st.tuples(EXPRESSIONS, NAMES).map(lambda t: f"{t[1]} = {t[0]} if {t[1]} else {t[1]}"),
    st.tuples(st.integers(0, 4), NAMES).map(
        lambda t: f"for i in range({t[0]}): {t[1]} = [{t[1]}, i]"
    ),
    st.tuples(NAMES, NAMES).map(lambda t: f"{t[0]}, {t[1]} = {t[1]}, {t[0]}"),
    NAMES.map(lambda n: f"d[repr({n})] = {n}"),
    st.tuples(EXPRESSIONS, NAMES, EXPRESSIONS, EXPRESSIONS).map(
        lambda t: f"if {t[0]}:\n    {t[1]} = {t[2]}\nelse:\n    {t[1]} = {t[3]}"
    ),
    st.tuples(st.integers(0, 5), EXPRESSIONS, NAMES).map(
        lambda t: f"for i in range({t[0]}):\n    if i > 2:\n        break\n    {t[2]} = ({t[1]}, i)"
    ),
    st.tuples(NAMES, EXPRESSIONS, EXPRESSIONS).map(
        lambda t: (
            f"try:\n    {t[0]} = {t[1]}[0]\nexcept (IndexError, KeyError, TypeError):\n"
            f"    {t[0]} = {t[2]}\nfinally:\n    xs.append('f')"
        )
    ),
    st.tuples(NAMES, EXPRESSIONS, NAMES).map(
        lambda t: f"def g(v={t[1]}):\n    return [v, {t[2]}]\n{t[0]} = g()"
    ),
    st.tuples(NAMES, EXPRESSIONS).map(lambda t: f"{t[0]} = (lambda *a: [*a, {t[1]}])({t[0]}, 1)"),
)


def _program(body: list[str], shown: str) -> str:
    return (
        "def main():\n    "
        + PRELUDE
        + "".join(_guarded(line) for line in body)
        + _guarded(f"print({shown})")
    )


def _outputs(tmp_path_factory, source: str) -> tuple[list[str], list[str]]:
    """What neuronemu's interpreter printed running `source`, and what CPython printed."""
    expected = harness.run_cpython("generated", source)
    got = harness.run_neuronemu("generated", source, tmp_path_factory.mktemp("gen"))
    return got, expected


_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(st.lists(EXPRESSIONS, min_size=1, max_size=8))
def test_generated_expressions_print_as_in_cpython(tmp_path_factory, exprs):
    source = _program([f"print(repr({e}))" for e in exprs], "'end'")
    got, expected = _outputs(tmp_path_factory, source)
    assert got == expected, source


@_SETTINGS
@given(st.lists(STATEMENTS, min_size=1, max_size=6))
def test_generated_statements_leave_the_state_cpython_leaves(tmp_path_factory, body):
    source = _program(body, "repr((x, y, s, xs, t, d))")
    got, expected = _outputs(tmp_path_factory, source)
    assert got == expected, source


# A kernel class with some of the special methods, and operations on its objects: Python's
# operators and builtins must reach the class's methods, with CPython's fallbacks where it
# has none (NotImplemented, reflected forms, __bool__ from __len__, unhashable with __eq__).
DUNDERS = {
    "__add__": "return V(self.v + (o.v if isinstance(o, V) else o))",
    "__radd__": "return V(o * 10 + self.v)",
    "__iadd__": "self.v += 100\n        return self",
    "__mul__": "return NotImplemented if isinstance(o, str) else V(self.v * 2)",
    "__eq__": "return isinstance(o, V) and self.v == o.v",
    "__lt__": "return self.v < (o.v if isinstance(o, V) else o)",
    "__len__": "return abs(self.v) % 3",
    "__bool__": "return self.v > 1",
    "__repr__": "return f'V({self.v})'",
    "__getitem__": "return self.v * o if 0 <= o < 4 else [][o]",  # (ends iteration)
    "__contains__": "return o == self.v",
    "__hash__": "return hash(self.v)",
    "__neg__": "return V(-self.v)",
    "__call__": "return self.v + o",
}
_UNARY = ("__len__", "__bool__", "__repr__", "__hash__", "__neg__")
OPERATIONS = st.sampled_from(
    [
        "a + b", "a + 1", "1 + a", "a * 2", "'s' * a", "a == b", "a != b", "a < b", "b > a",
        "sorted([b, a])", "len(a)", "bool(a)", "not a", "repr(a)", "str([a, b])", "a[3]",
        "2 in a", "len({a, b})", "-a", "a(5)", "max(a, b)", "f'{a}'", "[x for x in [a] if x]",
        "sum([a, b], 0)", "a if a else b",
    ]
)  # fmt: skip


def _class(methods: list[str]) -> str:
    lines = ["class V:", "    def __init__(self, v):", "        self.v = v"]
    for name in methods:
        params = "self" if name in _UNARY else "self, o"
        lines += [f"    def {name}({params}):", f"        {DUNDERS[name]}"]
    return "\n".join(lines) + "\n\n"


@_SETTINGS
@given(
    st.lists(st.sampled_from(sorted(DUNDERS)), unique=True, max_size=8),
    st.lists(OPERATIONS, min_size=1, max_size=6),
    st.integers(-3, 4),
    st.integers(-3, 4),
)
def test_generated_special_methods_run_as_in_cpython(tmp_path_factory, methods, ops, x, y):
    body = f"    a, b = V({x}), V({y})\n" + "".join(_guarded(f"print(repr({op}))") for op in ops)
    body += _guarded("a += 1\nprint(repr(a))")
    # (always a __repr__: object's default shows an address, which differs run to run)
    shown = sorted({*methods, "__repr__"})
    source = _class(shown) + "def main():\n" + body
    got, expected = _outputs(tmp_path_factory, source)
    assert got == expected, source
