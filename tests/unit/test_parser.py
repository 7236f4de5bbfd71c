"""Parser: the located AST of kernel files, syntax errors with line:column, caching."""

from __future__ import annotations

import os

import pytest

from neuronemu.errors import KernelSyntaxError
from neuronemu.frontend import ast as A
from neuronemu.frontend import parse_source

SOURCE = '''\
import nki
import nki.language as nl
from neuronxcc import nki as legacy


@nki.jit
def kernel(a, b=2, *rest, scale=1.5, **extra):
    """Docstring."""
    rows, cols = a.shape
    for i in nl.affine_range(rows // 128):
        x = a[i * 128:(i + 1) * 128, ::2]
    if b is not None and 0 < b <= 4:
        label = f"b={b:03d} {cols!r}"
    elif b:
        b += 1
    else:
        pass
    assert rows > 0, "rows must be positive"
    return [c * 2 for c in range(3) if c]
'''


def _kernel() -> A.FunctionDef:
    module = parse_source(SOURCE, "k.py")
    fn = module.body[3]
    assert isinstance(fn, A.FunctionDef)
    return fn


def test_imports_keep_module_and_alias():
    body = parse_source(SOURCE, "k.py").body
    assert body[0] == A.Import(None, (("nki", None),))
    assert body[1] == A.Import(None, (("nki.language", "nl"),))
    assert body[2] == A.ImportFrom(None, "neuronxcc", 0, (("nki", "legacy"),))


def test_parameters_of_every_kind():
    params = _kernel().params
    assert [(p.name, p.kind) for p in params] == [
        ("a", "normal"),
        ("b", "normal"),
        ("rest", "varargs"),
        ("scale", "kwonly"),
        ("extra", "kwargs"),
    ]
    assert params[1].default == A.Const(None, 2)
    assert params[3].default == A.Const(None, 1.5)


def test_decorator_is_kept():
    assert _kernel().decorators == (A.Attribute(None, A.Name(None, "nki"), "jit"),)


def test_statements_carry_line_and_column():
    fn = _kernel()
    loop = fn.body[2]
    assert isinstance(loop, A.For)
    assert (loop.span.line, loop.span.col) == (10, 5)
    inner = loop.body[0]
    assert (inner.span.line, inner.span.col) == (11, 9)


def test_slices_distinguish_missing_bounds():
    loop = _kernel().body[2]
    index = loop.body[0].value.index
    assert isinstance(index, A.TupleExpr)
    first, second = index.elts
    assert isinstance(first, A.Slice) and first.step is None
    assert second == A.Slice(None, None, None, A.Const(None, 2))


def test_fstring_fields_with_spec_and_conversion():
    branch = _kernel().body[3]
    fstring = branch.body[0].value
    assert isinstance(fstring, A.FString)
    assert fstring.parts[0] == "b="
    expr, conv, spec = fstring.parts[1]
    assert expr == "b" and conv is None and spec == "03d"
    assert fstring.parts[3][1] == "r"


def test_elif_becomes_nested_if_and_chained_comparison():
    branch = _kernel().body[3]
    assert isinstance(branch, A.If)
    cond = branch.test
    assert isinstance(cond, A.BoolOp) and cond.op == "and"
    assert cond.values[1].ops == ("<", "<=")
    assert isinstance(branch.orelse[0], A.If)
    assert isinstance(branch.orelse[0].body[0], A.AugAssign)


def test_assert_keeps_message():
    stmt = _kernel().body[4]
    assert isinstance(stmt, A.Assert)
    assert stmt.msg == A.Const(None, "rows must be positive")


def test_comprehension():
    ret = _kernel().body[5]
    comp = ret.value
    assert isinstance(comp, A.Comprehension) and comp.kind == "list"
    assert comp.conds == (A.Name(None, "c"),)


def test_unsupported_constructs_parse_but_are_marked():
    module = parse_source("def f():\n    x = await g()\n", "t.py")
    assert isinstance(module.body[0].body[0].value, A.Unsupported)
    assert "await" in module.body[0].body[0].value.what


def test_del_walrus_and_dict_unpacking_keep_their_parts():
    source = "def f():\n    del a, (b[0], c.d)\n    y = (n := 3)\n    z = {**m, 'k': 1}\n"
    delete, walrus, display = parse_source(source, "t.py").body[0].body
    assert isinstance(delete, A.Delete)
    assert [type(t) for t in delete.targets] == [A.Name, A.Subscript, A.Attribute]
    assert isinstance(walrus.value, A.NamedExpr) and walrus.value.target == "n"
    keys, values = display.value.keys, display.value.values
    assert isinstance(keys[0], A.DictUnpack) and keys[0].value == values[0] == A.Name(None, "m")


def test_global_nonlocal_and_yield_from_keep_what_they_name():
    module = parse_source(
        "def f():\n    global x, y\n    nonlocal z\n    r = yield from g()\n", "t.py"
    )
    glob, nonloc, assign = module.body[0].body
    assert isinstance(glob, A.Global) and glob.names == ("x", "y")
    assert isinstance(nonloc, A.Nonlocal) and nonloc.names == ("z",)
    assert isinstance(assign.value, A.YieldFrom) and isinstance(assign.value.value, A.Call)


def test_try_keeps_its_handlers_else_and_finally():
    source = (
        "try:\n    x = 1\nexcept (KeyError, ValueError) as e:\n    pass\nexcept:\n    y = 2\n"
        "else:\n    z = 3\nfinally:\n    w = 4\n"
    )
    node = parse_source(source, "t.py").body[0]
    assert isinstance(node, A.Try)
    assert [h.name for h in node.handlers] == ["e", None]
    assert isinstance(node.handlers[0].type, A.TupleExpr) and node.handlers[1].type is None
    assert [s.targets[0].id for s in node.orelse + node.finalbody] == ["z", "w"]
    bare = parse_source("try:\n    pass\nfinally:\n    w = 4\n", "t.py").body[0]
    assert (bare.handlers, len(bare.finalbody)) == ((), 1)


def test_raise_and_yield_parse():
    body = parse_source("def g():\n    yield 1\n    x = yield\n    raise E('m') from c\n", "t.py")
    first, second, third = body.body[0].body
    assert isinstance(first.value, A.Yield) and first.value.value == A.Const(None, 1)
    assert isinstance(second.value, A.Yield) and second.value.value is None
    assert isinstance(third, A.Raise) and isinstance(third.cause, A.Name)


@pytest.mark.parametrize(
    ("source", "line", "col", "words"),
    [
        ("def f(:\n    pass\n", 1, 7, "unexpected"),
        ("x = (1,\n", 1, 8, "end of file"),
        ("for i in range(3)\n    pass\n", 1, 18, "end of line"),
        ("x = 1 $ 2\n", 1, 7, "invalid character"),
    ],
)
def test_syntax_errors_are_located(source, line, col, words):
    with pytest.raises(KernelSyntaxError) as info:
        parse_source(source, "bad.py")
    err = info.value
    assert (err.span.line, err.span.col) == (line, col)
    assert words in err.message
    assert err.render().startswith(f"bad.py:{line}:{col}: error: invalid syntax")


def test_identical_source_is_parsed_once():
    a = parse_source(SOURCE, "k.py")
    b = parse_source(SOURCE, "k.py")
    assert a is b


def test_an_unchanged_file_is_not_parsed_again_by_a_new_process(tmp_path, monkeypatch):
    from neuronemu.frontend import lalr, parser

    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(tmp_path / "cache"))
    source = SOURCE + "\n# cache test\n"
    first = parse_source(source, "cached.py")
    assert list((tmp_path / "cache").glob("*.json"))
    parser._AST_CACHE.clear()  # as in a new process: only the disk cache is left

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(lalr, "parse", no_parsing)
    again = parse_source(source, "cached.py")
    assert again == first and again is not first
    with pytest.raises(AssertionError, match="parsed again"):
        parse_source(source + "x = 1\n", "cached.py")  # a changed file is parsed


def test_a_cached_ast_is_not_reused_by_another_ast_builder(tmp_path, monkeypatch):
    from neuronemu.frontend import lalr, parser

    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(tmp_path / "cache"))
    source = SOURCE + "\n# builder test\n"
    parse_source(source, "built.py")
    parser._AST_CACHE.clear()
    monkeypatch.setattr(parser, "_BUILDER_HASH", "another to_ast.py")

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(lalr, "parse", no_parsing)
    with pytest.raises(AssertionError, match="parsed again"):
        parse_source(source, "built.py")


def test_cache_can_be_turned_off(tmp_path, monkeypatch):
    from neuronemu.frontend import cache

    monkeypatch.setenv("NEURONEMU_CACHE_DIR", "")
    parse_source(SOURCE + "\n# uncached\n", "uncached.py")
    assert cache.cache_dir() is None


def test_a_chain_of_operators_longer_than_cpython_compiles_is_refused_while_lexing():
    # CPython 3.11's compiler recurses on `1 + 1 + ...` and fails past a few thousand terms;
    # neuronemu refuses past 3,000 operators in a row, at the first one too many, before
    # parsing the rest (a 100,000-term sum took 8 s to parse before being refused).
    ok = "n = " + " + ".join(["1"] * 3001) + "\n"  # 3,000 operators
    parse_source(ok, "k.py")
    many = "m = [" + ", ".join(["x + 1"] * 5000) + "]\n"  # commas end each chain
    parse_source(many, "k.py")
    with pytest.raises(KernelSyntaxError, match="more than 3,000 operators in a row") as info:
        parse_source("n = " + " + ".join(["1"] * 100_000) + "\n", "k.py")
    assert (info.value.span.line, info.value.span.col) == (1, 5 + 3000 * 4 + 2)


def test_a_cached_file_is_read_back_without_importing_lark(tmp_path):
    """A warm run loads no parser: Lark is imported only when a source must be parsed."""
    import subprocess
    import sys

    kernel = tmp_path / "k.py"
    kernel.write_text(SOURCE)
    child = (
        "import sys\n"
        "from neuronemu.frontend import parse_file\n"
        f"parse_file({str(kernel)!r})\n"
        "print('lark' in sys.modules)\n"
    )
    env = {**os.environ, "NEURONEMU_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env)
        for _ in range(2)
    ]
    assert [r.stdout.strip() for r in runs] == ["True", "False"], [r.stderr for r in runs]
