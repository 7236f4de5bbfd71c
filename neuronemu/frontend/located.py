"""Placing the AST builder's nodes: the spans Lark does not propagate (that doubled the parse
time), taken from the children's tokens and nodes, and the operator tokens of a flat
`operators` sequence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Token

from neuronemu.errors import SourceSpan
from neuronemu.frontend import ast as A

__all__ = ["NOWHERE", "Op", "first", "join", "last", "located"]


@dataclass(frozen=True)
class Op:
    """An operator token of a flat `operators` sequence."""

    unary: bool
    text: str
    span: SourceSpan


def join(a: SourceSpan, b: SourceSpan) -> SourceSpan:
    return SourceSpan(a.path, a.line, a.col, b.end_line, b.end_col)


# A node whose source position is unknown (`()`, `...`); never used to place a parent.
NOWHERE = 0


def first(obj: Any) -> tuple[int, int] | None:
    """The line and column where `obj` (a node, token, list or span) begins."""
    if isinstance(obj, A.Node):
        span = obj.span
        return (span.line, span.col) if span.line else None
    if isinstance(obj, Token):
        return (obj.line, obj.column) if obj.line and obj.column is not None else None
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = first(item)
            if found:
                return found
        return None
    if isinstance(obj, (SourceSpan, Op)):
        span = obj if isinstance(obj, SourceSpan) else obj.span
        return (span.line, span.col) if span.line else None
    return None


def last(obj: Any) -> tuple[int, int] | None:
    """The line and column where `obj` ends."""
    if isinstance(obj, A.Node):
        span = obj.span
        return (span.end_line or span.line, span.end_col or span.col + 1) if span.line else None
    if isinstance(obj, Token):
        return (
            (obj.end_line, obj.end_column) if obj.end_line and obj.end_column is not None else None
        )
    if isinstance(obj, (list, tuple)):
        for item in reversed(obj):
            found = last(item)
            if found:
                return found
        return None
    if isinstance(obj, (SourceSpan, Op)):
        span = obj if isinstance(obj, SourceSpan) else obj.span
        return (span.end_line or span.line, span.end_col or span.col + 1) if span.line else None
    return None


def located(method: Any, data: str, children: list[Any], meta: Any) -> Any:
    """Call a rule method with the span its children cover (Lark propagates no positions:
    that doubled the parse time); leading-keyword tokens place it, then are dropped."""
    bound = method.base_func  # Lark's v_args wrapper around the bound rule method
    start = end = None
    keywords = False
    for c in children:  # one pass: the first position, and whether keywords are to be dropped
        if type(c) is Token and c.type.startswith("KW_"):
            keywords = True
        if start is None:
            start = first(c)
    for c in reversed(children):
        end = last(c)
        if end is not None:
            break
    path = bound.__self__.path
    span = (
        SourceSpan(path, start[0], start[1], end[0], end[1])
        if start and end
        else SourceSpan(path, NOWHERE, NOWHERE)
    )
    if keywords:
        children = [c for c in children if not (type(c) is Token and c.type.startswith("KW_"))]
    return bound(span, children)
