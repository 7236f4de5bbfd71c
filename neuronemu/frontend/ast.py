"""Frozen AST of the Python subset NKI kernels are written in; every node carries a span."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neuronemu.errors import SourceSpan


@dataclass(frozen=True)
class Node:
    span: SourceSpan = field(compare=False, repr=False)


# Expressions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Name(Node):
    id: str


@dataclass(frozen=True)
class Const(Node):
    value: Any


@dataclass(frozen=True)
class FString(Node):
    """f-string: literal parts (str) and fields (expression text, conversion, format spec).

    Field expressions are parsed when first evaluated (`parse_expression`)."""

    parts: tuple[str | tuple[str, str | None, str], ...]


@dataclass(frozen=True)
class Attribute(Node):
    value: Node
    attr: str


@dataclass(frozen=True)
class Subscript(Node):
    value: Node
    index: Node


@dataclass(frozen=True)
class Slice(Node):
    lower: Node | None
    upper: Node | None
    step: Node | None


@dataclass(frozen=True)
class TupleExpr(Node):
    elts: tuple[Node, ...]


@dataclass(frozen=True)
class ListExpr(Node):
    elts: tuple[Node, ...]


@dataclass(frozen=True)
class SetExpr(Node):
    elts: tuple[Node, ...]


@dataclass(frozen=True)
class DictExpr(Node):
    """`{k: v, **m}`: an item `**m` has a DictUnpack of m for its key and m for its value."""

    keys: tuple[Node, ...]
    values: tuple[Node, ...]


@dataclass(frozen=True)
class DictUnpack(Node):
    value: Node


@dataclass(frozen=True)
class NamedExpr(Node):
    """`name := value`: value, also bound to name (in a comprehension, in the scope around
    it)."""

    target: str
    value: Node


@dataclass(frozen=True)
class Starred(Node):
    value: Node


@dataclass(frozen=True)
class Keyword(Node):
    """`name=value` in a call; `name` None means `**value`."""

    name: str | None
    value: Node


@dataclass(frozen=True)
class Call(Node):
    func: Node
    args: tuple[Node, ...]  # may contain Starred
    keywords: tuple[Keyword, ...]


@dataclass(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class UnaryOp(Node):
    op: str  # "-", "+", "~", "not"
    operand: Node


@dataclass(frozen=True)
class BoolOp(Node):
    op: str  # "and" | "or"
    values: tuple[Node, ...]


@dataclass(frozen=True)
class Compare(Node):
    left: Node
    ops: tuple[str, ...]
    comparators: tuple[Node, ...]


@dataclass(frozen=True)
class IfExp(Node):
    test: Node
    body: Node
    orelse: Node


@dataclass(frozen=True)
class Lambda(Node):
    """`lambda params: body`: a function whose body returns one expression."""

    params: tuple[Param, ...]
    body: Node


@dataclass(frozen=True)
class Yield(Node):
    """`yield value` (an expression; its value is what `send()` passed, else None)."""

    value: Node | None


@dataclass(frozen=True)
class YieldFrom(Node):
    """`yield from iterable`: delegation; its value is the sub-generator's return value."""

    value: Node


@dataclass(frozen=True)
class Comprehension(Node):
    """List/tuple/set/dict comprehension; `key` set only for dicts."""

    kind: str  # "list" | "tuple" | "set" | "dict"
    elt: Node
    key: Node | None
    targets: tuple[Node, ...]
    iters: tuple[Node, ...]
    conds: tuple[Node | None, ...]


@dataclass(frozen=True)
class Unsupported(Node):
    """A construct the NKI subset rejects; an error only if the kernel actually reaches it."""

    what: str


# Statements --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExprStmt(Node):
    value: Node


@dataclass(frozen=True)
class Assign(Node):
    targets: tuple[Node, ...]
    value: Node


@dataclass(frozen=True)
class AugAssign(Node):
    target: Node
    op: str
    value: Node


@dataclass(frozen=True)
class AnnAssign(Node):
    target: Node
    annotation: Node
    value: Node | None


@dataclass(frozen=True)
class If(Node):
    test: Node
    body: tuple[Node, ...]
    orelse: tuple[Node, ...]


@dataclass(frozen=True)
class For(Node):
    target: Node
    iter: Node
    body: tuple[Node, ...]
    orelse: tuple[Node, ...]


@dataclass(frozen=True)
class While(Node):
    test: Node
    body: tuple[Node, ...]
    orelse: tuple[Node, ...]


@dataclass(frozen=True)
class Delete(Node):
    """`del a, b[i], c.x`: each target unbound, its item or its attribute removed."""

    targets: tuple[Node, ...]


@dataclass(frozen=True)
class Global(Node):
    """`global a, b`: assignments in the function bind the module's names."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Nonlocal(Node):
    """`nonlocal a, b`: assignments in the function bind the enclosing function's names."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class With(Node):
    """`with ctx [as name], ...:` (kernels may only use `nl.no_reorder()`)."""

    items: tuple[tuple[Node, Node | None], ...]
    body: tuple[Node, ...]


@dataclass(frozen=True)
class MatchCase(Node):
    """`case pattern if guard: body`."""

    pattern: Node
    guard: Node | None
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Match(Node):
    """`match subject:` and its cases, tried in order (PEP 634)."""

    subject: Node
    cases: tuple[MatchCase, ...]


# Patterns of `case` (as CPython's ast names them) ------------------------------------------


@dataclass(frozen=True)
class MatchValue(Node):
    """A literal or a dotted name (`Color.RED`): the subject equals it."""

    value: Node


@dataclass(frozen=True)
class MatchSingleton(Node):
    """`None`, `True` or `False`: the subject is it."""

    value: Any


@dataclass(frozen=True)
class MatchSequence(Node):
    """`[a, *rest]`, `(a, b)`, `a, b`: a sequence of that length, item by item."""

    patterns: tuple[Node, ...]


@dataclass(frozen=True)
class MatchStar(Node):
    """`*name` (or `*_`) in a sequence pattern: the items no other pattern takes."""

    name: str | None


@dataclass(frozen=True)
class MatchMapping(Node):
    """`{key: pattern, **rest}`: a mapping holding every key, its values matching."""

    keys: tuple[Node, ...]
    patterns: tuple[Node, ...]
    rest: str | None


@dataclass(frozen=True)
class MatchClass(Node):
    """`Cls(p, attr=q)`: an instance of Cls, positional patterns by its `__match_args__`."""

    cls: Node
    patterns: tuple[Node, ...]
    kwd_attrs: tuple[str, ...]
    kwd_patterns: tuple[Node, ...]


@dataclass(frozen=True)
class MatchAs(Node):
    """`pattern as name`; a capture `name` (pattern None); the wildcard `_` (both None)."""

    pattern: Node | None
    name: str | None


@dataclass(frozen=True)
class MatchOr(Node):
    """`p | q`: the first alternative that matches."""

    patterns: tuple[Node, ...]


def pattern_names(pattern: Node) -> list[str]:
    """The names a `case` pattern binds (every alternative of `|` binds the same ones)."""
    names: list[str] = []
    stack: list[Node] = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, MatchOr):
            stack.append(p.patterns[0])
        elif isinstance(p, MatchAs):
            names.extend([p.name] if p.name is not None else [])
            stack.extend([p.pattern] if p.pattern is not None else [])
        elif isinstance(p, MatchStar):
            names.extend([p.name] if p.name is not None else [])
        elif isinstance(p, MatchMapping):
            names.extend([p.rest] if p.rest is not None else [])
            stack.extend(p.patterns)
        elif isinstance(p, MatchSequence):
            stack.extend(p.patterns)
        elif isinstance(p, MatchClass):
            stack.extend(p.patterns + p.kwd_patterns)
    return names


@dataclass(frozen=True)
class Return(Node):
    value: Node | None


@dataclass(frozen=True)
class Raise(Node):
    exc: Node | None  # None: re-raise the exception being handled
    cause: Node | None


@dataclass(frozen=True)
class ExceptHandler(Node):
    type: Node | None  # None: a bare `except:`
    name: str | None
    body: tuple[Node, ...]


@dataclass(frozen=True)
class Try(Node):
    body: tuple[Node, ...]
    handlers: tuple[ExceptHandler, ...]
    orelse: tuple[Node, ...]
    finalbody: tuple[Node, ...]


@dataclass(frozen=True)
class Assert(Node):
    test: Node
    msg: Node | None


@dataclass(frozen=True)
class Pass(Node):
    pass


@dataclass(frozen=True)
class Break(Node):
    pass


@dataclass(frozen=True)
class Continue(Node):
    pass


@dataclass(frozen=True)
class Param(Node):
    name: str
    default: Node | None
    kind: str  # "normal" | "varargs" | "kwargs" | "kwonly"
    positional_only: bool = False  # a "normal" one before `/`


@dataclass(frozen=True)
class FunctionDef(Node):
    name: str
    params: tuple[Param, ...]
    body: tuple[Node, ...]
    decorators: tuple[Node, ...]


@dataclass(frozen=True)
class ClassDef(Node):
    name: str
    bases: tuple[Node, ...]
    keywords: tuple[Keyword, ...]
    body: tuple[Node, ...]
    decorators: tuple[Node, ...]


@dataclass(frozen=True)
class Import(Node):
    """`import a.b as c`: names are (dotted module, alias or None)."""

    names: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class ImportFrom(Node):
    module: str
    level: int
    names: tuple[tuple[str, str | None], ...]  # ("*", None) for star imports


@dataclass(frozen=True)
class Module(Node):
    body: tuple[Node, ...]
