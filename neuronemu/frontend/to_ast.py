"""Lark parse tree (of Lark's python.lark) to the frozen AST of `ast.py`."""

from __future__ import annotations

import ast as _pyast
from typing import Any

from lark import Token, Transformer, Tree, v_args
from lark.tree import Meta

from neuronemu.errors import KernelSyntaxError, SourceSpan
from neuronemu.frontend import ast as A

_UNSUPPORTED = {
    "del_stmt": "'del'",
    "global_stmt": "'global'",
    "nonlocal_stmt": "'nonlocal'",
    "raise_stmt": "'raise'",
    "yield_stmt": "'yield'",
    "yield_expr": "'yield'",
    "yield_from": "'yield from'",
    "try_stmt": "'try'",
    "try_finally": "'try'",
    "match_stmt": "'match'",
    "async_stmt": "'async'",
    "async_funcdef": "'async def'",
    "lambdef": "'lambda'",
    "lambdef_nocond": "'lambda'",
    "assign_expr": "':=' (walrus)",
    "await_expr": "'await'",
    "set": "set literals",
    "set_comprehension": "set comprehensions",
}


@v_args(meta=True)
class ToAst(Transformer):
    """One instance per file; `fixed_span` pins every node to one span (f-string fields)."""

    def __init__(self, path: str, fixed_span: SourceSpan | None = None):
        super().__init__(visit_tokens=False)
        self.path = path
        self.fixed_span = fixed_span

    def _span(self, meta: Meta | Token | None) -> SourceSpan:
        if self.fixed_span is not None:
            return self.fixed_span
        if isinstance(meta, Token):
            return SourceSpan(self.path, meta.line or 1, meta.column or 1,
                              meta.end_line, meta.end_column)
        if meta is None or getattr(meta, "empty", True):
            return SourceSpan(self.path, 1, 1)
        return SourceSpan(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def __default__(self, data: str, children: list[Any], meta: Meta) -> Any:
        # Parts of constructs outside the NKI subset (except clauses, with items...): kept as
        # Unsupported, an error only if a kernel reaches them.
        return A.Unsupported(self._span(meta), _UNSUPPORTED.get(data, f"'{data}'"))

    # Module structure ----------------------------------------------------------------------

    def file_input(self, meta, children):
        return A.Module(self._span(meta), tuple(c for c in children if isinstance(c, A.Node)))

    def suite(self, meta, children):
        return tuple(c for c in children if isinstance(c, A.Node))

    def decorated(self, meta, children):
        decorators, fn = children
        if isinstance(fn, A.FunctionDef):
            return A.FunctionDef(fn.span, fn.name, fn.params, fn.body, tuple(decorators))
        if isinstance(fn, A.ClassDef):
            return A.ClassDef(fn.span, fn.name, fn.bases, fn.keywords, fn.body,
                              tuple(decorators))
        return fn

    def classdef(self, meta, children):
        name, arguments, body = children
        bases, keywords = arguments if arguments is not None else ((), ())
        return A.ClassDef(self._span(meta), name, bases, keywords, body, ())

    def decorators(self, meta, children):
        return list(children)

    def decorator(self, meta, children):
        target: A.Node = children[0]
        rest = [c for c in children[1:] if c is not None]
        if rest:
            args, kwargs = rest[0] if isinstance(rest[0], tuple) else ((), ())
            target = A.Call(self._span(meta), target, args, kwargs)
        return target

    def dotted_name(self, meta, children):
        node: A.Node = A.Name(self._span(meta), children[0])
        for part in children[1:]:
            node = A.Attribute(self._span(meta), node, part)
        return node

    def name(self, meta, children):
        return str(children[0])

    # Functions -----------------------------------------------------------------------------

    def funcdef(self, meta, children):
        name, params, _returns, body = children
        return A.FunctionDef(self._span(meta), name, tuple(params or ()), body, ())

    def _param(self, item: Any, kind: str) -> A.Param:
        default = None
        if isinstance(item, tuple) and item[0] == "param":
            _, item, default = item
        name = item[1] if isinstance(item, tuple) else item
        span = self.fixed_span or (default.span if default is not None else None)
        return A.Param(span or SourceSpan(self.path, 1, 1), name, default, kind)

    def parameters(self, meta, children):
        params: list[A.Param] = []
        for c in children:
            if c is None or (isinstance(c, Token) and c.type == "SLASH"):
                continue
            if isinstance(c, list):  # starparams / kwparams already expanded
                params.extend(c)
            else:
                params.append(self._param(c, "normal"))
        return [self._respan(p, meta) for p in params]

    def _respan(self, p: A.Param, meta) -> A.Param:
        return A.Param(p.span if p.default is not None else self._span(meta), p.name, p.default,
                       p.kind)

    def paramvalue(self, meta, children):
        return ("param", children[0], children[1])

    def typedparam(self, meta, children):
        return ("typed", children[0])

    def starparams(self, meta, children):
        head, post = children
        return ([head] if head is not None else []) + post

    def starparam(self, meta, children):
        return self._param(children[0], "varargs")

    def starguard(self, meta, children):
        return None

    def poststarparams(self, meta, children):
        out: list[A.Param] = []
        for c in children:
            if c is None:
                continue
            if isinstance(c, list):
                out.extend(c)
            else:
                out.append(self._param(c, "kwonly"))
        return out

    def kwparams(self, meta, children):
        return [self._param(children[0], "kwargs")]

    # Simple statements ---------------------------------------------------------------------

    def expr_stmt(self, meta, children):
        return A.ExprStmt(self._span(meta), children[0])

    def assign_stmt(self, meta, children):
        return children[0]

    def assign(self, meta, children):
        return A.Assign(self._span(meta), tuple(children[:-1]), children[-1])

    def annassign(self, meta, children):
        target, annotation, value = children
        return A.AnnAssign(self._span(meta), target, annotation, value)

    def augassign(self, meta, children):
        target, op, value = children
        return A.AugAssign(self._span(meta), target, op, value)

    def augassign_op(self, meta, children):
        return str(children[0])[:-1]

    def pass_stmt(self, meta, children):
        return A.Pass(self._span(meta))

    def break_stmt(self, meta, children):
        return A.Break(self._span(meta))

    def continue_stmt(self, meta, children):
        return A.Continue(self._span(meta))

    def return_stmt(self, meta, children):
        return A.Return(self._span(meta), children[0])

    def assert_stmt(self, meta, children):
        return A.Assert(self._span(meta), children[0], children[1])

    def import_stmt(self, meta, children):
        return children[0]

    def import_name(self, meta, children):
        return A.Import(self._span(meta), tuple(children[0]))

    def dotted_as_names(self, meta, children):
        return list(children)

    def dotted_as_name(self, meta, children):
        return (_dotted(children[0]), children[1])

    def import_from(self, meta, children):
        level = 0
        module = ""
        names: list[tuple[str, str | None]] = [("*", None)]
        for c in children:
            if isinstance(c, tuple) and c and c[0] == "dots":
                level = c[1]
            elif isinstance(c, A.Node):
                module = _dotted(c)
            elif isinstance(c, list):
                names = c
        return A.ImportFrom(self._span(meta), module, level, tuple(names))

    def dots(self, meta, children):
        return ("dots", sum(len(str(t)) for t in children))

    def import_as_names(self, meta, children):
        return [c for c in children if c is not None]

    def import_as_name(self, meta, children):
        return (children[0], children[1])

    # Compound statements -------------------------------------------------------------------

    def if_stmt(self, meta, children):
        test, body, elifs, orelse = children
        tail: tuple[A.Node, ...] = tuple(orelse or ())
        for etest, ebody, espan in reversed(elifs):
            tail = (A.If(espan, etest, ebody, tail),)
        return A.If(self._span(meta), test, body, tail)

    def elifs(self, meta, children):
        return list(children)

    def elif_(self, meta, children):
        return (children[0], children[1], self._span(meta))

    def while_stmt(self, meta, children):
        test, body, orelse = children
        return A.While(self._span(meta), test, body, tuple(orelse or ()))

    def with_stmt(self, meta, children):
        items, body = children
        return A.With(self._span(meta), tuple(items), body)

    def with_items(self, meta, children):
        return list(children)

    def with_item(self, meta, children):
        expr, alias = children
        return (expr, None if alias is None else A.Name(self._span(meta), alias))

    def for_stmt(self, meta, children):
        target, iterable, body, orelse = children
        return A.For(self._span(meta), target, iterable, body, tuple(orelse or ()))

    # Expressions ---------------------------------------------------------------------------

    def var(self, meta, children):
        return A.Name(self._span(meta), children[0])

    def number(self, meta, children):
        text = str(children[0]).replace("_", "")
        span = self._span(meta)
        if text[-1] in "jJ":
            return A.Unsupported(span, "complex numbers")
        if any(c in text for c in ".eE") and not text.lower().startswith("0x"):
            return A.Const(span, float(text))
        return A.Const(span, int(text, 0))

    def string(self, meta, children):
        return self._string(str(children[0]), self._span(meta))

    def string_concat(self, meta, children):
        parts: list[Any] = []
        for c in children:
            if isinstance(c, A.Const):
                parts.append(c.value)
            else:
                parts.extend(c.parts)
        if all(isinstance(p, str) for p in parts):
            return A.Const(self._span(meta), "".join(parts))
        return A.FString(self._span(meta), tuple(parts))

    def _string(self, text: str, span: SourceSpan) -> A.Node:
        prefix = text[: len(text) - len(text.lstrip("rRbBuUfF"))].lower()
        if "f" not in prefix:
            try:
                return A.Const(span, _pyast.literal_eval(text))
            except (ValueError, SyntaxError) as exc:
                raise KernelSyntaxError(f"invalid string literal: {exc}", span) from None
        body_text = text[len(prefix):]
        quote = body_text[:3] if body_text[:3] in ('"""', "'''") else body_text[0]
        raw = body_text[len(quote): -len(quote)]
        return A.FString(span, tuple(_split_fstring(raw, "r" in prefix, span)))

    def const_none(self, meta, children):
        return A.Const(self._span(meta), None)

    def const_true(self, meta, children):
        return A.Const(self._span(meta), True)

    def const_false(self, meta, children):
        return A.Const(self._span(meta), False)

    def ellipsis(self, meta, children):
        return A.Const(self._span(meta), Ellipsis)

    def getattr(self, meta, children):
        return A.Attribute(self._span(meta), children[0], children[1])

    def getitem(self, meta, children):
        return A.Subscript(self._span(meta), children[0], children[1])

    def slice(self, meta, children):
        lower, upper, step = children
        return A.Slice(self._span(meta), lower, upper, step)

    def sliceop(self, meta, children):
        return children[0]

    def subscript_tuple(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(children))

    def tuple(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(c for c in children if c is not None))

    def testlist_tuple(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(c for c in children if c is not None))

    def exprlist(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(c for c in children if c is not None))

    def list(self, meta, children):
        return A.ListExpr(self._span(meta), tuple(c for c in children if c is not None))

    def dict(self, meta, children):
        keys, values = [], []
        for c in children:
            if c is None:
                continue
            if not isinstance(c, tuple):
                return A.Unsupported(self._span(meta), "'**' in dict literals")
            keys.append(c[0])
            values.append(c[1])
        return A.DictExpr(self._span(meta), tuple(keys), tuple(values))

    def key_value(self, meta, children):
        return (children[0], children[1])

    def star_expr(self, meta, children):
        return A.Starred(self._span(meta), children[0])

    def funccall(self, meta, children):
        func, arguments = children
        args, kwargs = arguments if arguments is not None else ((), ())
        return A.Call(self._span(meta), func, args, kwargs)

    def arguments(self, meta, children):
        args: list[A.Node] = []
        kwargs: list[A.Keyword] = []
        for c in children:
            if c is None:
                continue
            if isinstance(c, A.Keyword):
                kwargs.append(c)
            elif isinstance(c, list):  # `**mapping, name=value` after the positionals
                kwargs.extend(c)
            elif isinstance(c, tuple) and c and c[0] == "star":
                for item in c[1]:
                    (kwargs if isinstance(item, A.Keyword) else args).append(item)
            elif isinstance(c, A.Comprehension):
                args.append(A.Comprehension(c.span, "tuple", c.elt, None, c.targets, c.iters,
                                            c.conds))
            else:
                args.append(c)
        return (tuple(args), tuple(kwargs))

    def argvalue(self, meta, children):
        target, value = children
        if not isinstance(target, A.Name):
            raise KernelSyntaxError("keyword argument name must be a plain name",
                                    self._span(meta))
        return A.Keyword(self._span(meta), target.id, value)

    def starargs(self, meta, children):
        items: list[Any] = []
        for c in children:
            if c is None:
                continue
            if isinstance(c, list):
                items.extend(c)
            else:
                items.append(c)
        return ("star", items)

    def stararg(self, meta, children):
        return A.Starred(self._span(meta), children[0])

    def kwargs(self, meta, children):
        return [A.Keyword(self._span(meta), None, children[0]), *children[1:]]

    def _binop_chain(self, meta, children):
        node = children[0]
        i = 1
        while i < len(children):
            op = str(children[i])
            node = A.BinOp(self._span(meta), op, node, children[i + 1])
            i += 2
        return node

    arith_expr = _binop_chain
    term = _binop_chain
    shift_expr = _binop_chain

    def _fixed_chain(self, meta, children, op):
        node = children[0]
        for c in children[1:]:
            node = A.BinOp(self._span(meta), op, node, c)
        return node

    def or_expr(self, meta, children):
        return self._fixed_chain(meta, children, "|")

    def xor_expr(self, meta, children):
        return self._fixed_chain(meta, children, "^")

    def and_expr(self, meta, children):
        return self._fixed_chain(meta, children, "&")

    def power(self, meta, children):
        return A.BinOp(self._span(meta), "**", children[0], children[1])

    def factor(self, meta, children):
        return A.UnaryOp(self._span(meta), str(children[0]), children[1])

    def not_test(self, meta, children):
        return A.UnaryOp(self._span(meta), "not", children[0])

    def or_test(self, meta, children):
        return A.BoolOp(self._span(meta), "or", tuple(children))

    def and_test(self, meta, children):
        return A.BoolOp(self._span(meta), "and", tuple(children))

    def comparison(self, meta, children):
        return A.Compare(self._span(meta), children[0], tuple(children[1::2]),
                         tuple(children[2::2]))

    def comp_op(self, meta, children):
        return " ".join(str(t) for t in children)

    def test(self, meta, children):
        body, cond, orelse = children
        return A.IfExp(self._span(meta), cond, body, orelse)

    def comprehension(self, meta, children):
        elt, fors, cond = children
        targets = tuple(f[0] for f in fors)
        iters = tuple(f[1] for f in fors)
        conds: tuple[A.Node | None, ...] = (None,) * (len(fors) - 1) + (cond,)
        return (elt, targets, iters, conds)

    def comp_fors(self, meta, children):
        return list(children)

    def comp_for(self, meta, children):
        _async, target, iterable = children
        return (target, iterable)

    def list_comprehension(self, meta, children):
        elt, targets, iters, conds = children[0]
        return A.Comprehension(self._span(meta), "list", elt, None, targets, iters, conds)

    def tuple_comprehension(self, meta, children):
        elt, targets, iters, conds = children[0]
        return A.Comprehension(self._span(meta), "tuple", elt, None, targets, iters, conds)

    def dict_comprehension(self, meta, children):
        (key, value), targets, iters, conds = children[0]
        return A.Comprehension(self._span(meta), "dict", value, key, targets, iters, conds)



def _dotted(node: A.Node) -> str:
    if isinstance(node, A.Name):
        return node.id
    assert isinstance(node, A.Attribute)
    return f"{_dotted(node.value)}.{node.attr}"


def _split_fstring(raw: str, is_raw: bool, span: SourceSpan) -> list[Any]:
    """Split an f-string body into literal text and (expr, conversion, spec) fields."""
    from neuronemu.frontend.parser import parse_expression

    def lit(s: str) -> str:
        if is_raw:
            return s
        return _pyast.literal_eval('"""' + s.replace('"', '\\"') + '"""') if s else s

    parts: list[Any] = []
    buf = ""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch in "{}" and raw[i: i + 2] in ("{{", "}}"):
            buf += ch
            i += 2
            continue
        if ch == "}":
            raise KernelSyntaxError("f-string: single '}' is not allowed", span)
        if ch != "{":
            buf += ch
            i += 1
            continue
        depth, j = 1, i + 1
        while j < len(raw) and depth:
            depth += {"{": 1, "}": -1}.get(raw[j], 0)
            j += 1
        if depth:
            raise KernelSyntaxError("f-string: expecting '}'", span)
        field = raw[i + 1: j - 1]
        if buf:
            parts.append(lit(buf))
            buf = ""
        spec = ""
        conv = None
        # split off a format spec at the first top-level ':' (not inside brackets)
        level = 0
        for k, c in enumerate(field):
            if c in "([{":
                level += 1
            elif c in ")]}":
                level -= 1
            elif c == ":" and level == 0:
                field, spec = field[:k], field[k + 1:]
                break
        if len(field) >= 2 and field[-2] == "!" and field[-1] in "rsa":
            field, conv = field[:-2], field[-1]
        if field.rstrip().endswith("="):
            field = field.rstrip()[:-1]
            parts.append(field + "=")
            conv = conv or ("r" if not spec else None)
        parts.append((parse_expression(field, span), conv, spec))
        i = j
    if buf:
        parts.append(lit(buf))
    return parts
