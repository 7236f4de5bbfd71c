"""Lark parse tree (of nki.lark) to the frozen AST of `ast.py`; operators grouped by precedence."""

from __future__ import annotations

import ast as _pyast
import dataclasses
import warnings
from typing import Any

from lark import Token, Tree, v_args

from neuronemu.errors import BudgetError, KernelSyntaxError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.frontend.located import NOWHERE, Op, first, join, last, located
from neuronemu.frontend.match_rules import MatchRules
from neuronemu.limits import Limits

# Rules for constructs outside the NKI subset: kept as Unsupported nodes, an error only if a
# kernel reaches them.
_UNSUPPORTED = {
    "await_expr": "'await'",
}

# Binding power of binary operators (Python's precedence, loosest first); comparisons chain.
_BINARY = {
    "or": 1,
    "and": 2,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "//": 10,
    "%": 10,
    "@": 10,
    "**": 12,
}
_COMPARISON = {"<", ">", "<=", ">=", "==", "!=", "in", "not in", "is", "is not"}
_COMPARISON_POWER = 4
_UNARY = {"not": 3, "-": 11, "+": 11, "~": 11}


@v_args(wrapper=located)
class ToAst(MatchRules):
    """One instance per file; `fixed_span` pins every node to one span (f-string fields)."""

    def __init__(
        self, path: str, fixed_span: SourceSpan | None = None, limits: Limits | None = None
    ):
        super().__init__(visit_tokens=False)
        self.path = path
        self.fixed_span = fixed_span
        self.limits = limits or Limits()

    def _span(self, span: SourceSpan) -> SourceSpan:
        return self.fixed_span if self.fixed_span is not None else span

    def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
        if data.startswith("_"):  # a helper rule Lark splices into its parent
            return Tree(data, children)
        start, end = first(children), last(children)
        span = (
            SourceSpan(self.path, start[0], start[1], end[0], end[1])
            if start and end
            else SourceSpan(self.path, NOWHERE, NOWHERE)
        )
        return A.Unsupported(self._span(span), _UNSUPPORTED.get(data, f"'{data}'"))

    # Module structure ----------------------------------------------------------------------

    def start(self, meta, children):
        return A.Module(self._span(meta), tuple(c for c in children if isinstance(c, A.Node)))

    def suite(self, meta, children):
        return tuple(c for c in children if isinstance(c, A.Node))

    def decorated(self, meta, children):
        *decorators, node = children
        if isinstance(node, A.FunctionDef):
            return A.FunctionDef(node.span, node.name, node.params, node.body, tuple(decorators))
        return A.ClassDef(
            node.span, node.name, node.bases, node.keywords, node.body, tuple(decorators)
        )

    def decorator(self, meta, children):
        return children[0]

    def dotted_name(self, meta, children):
        span = self._span(meta)
        node: A.Node = A.Name(span, str(children[0]))
        for part in children[1:]:
            node = A.Attribute(span, node, str(part))
        return node

    # Functions and classes -----------------------------------------------------------------

    def funcdef(self, meta, children):
        name, params, _returns, body = children
        return A.FunctionDef(self._span(meta), str(name), tuple(params or ()), body, ())

    def parameters(self, meta, children):
        out: list[A.Param] = []
        keyword_only = False
        for kind, name, default, span in children:
            if kind == "slash":  # the parameters before it are positional-only
                out = [dataclasses.replace(p, positional_only=True) for p in out]
                continue
            if kind == "varargs":
                keyword_only = True
                if name is None:  # a bare `*`: the parameters after it are keyword-only
                    continue
            if kind == "normal" and keyword_only:
                kind = "kwonly"
            out.append(A.Param(span, name, default, kind))
        return out

    def param_normal(self, meta, children):
        name, _annotation, default = children
        return ("normal", str(name), default, self._span(meta))

    lambda_params = parameters

    def lambda_param_normal(self, meta, children):
        name, default = children
        return ("normal", str(name), default, self._span(meta))

    def lambdef(self, meta, children):
        params, body = children
        return A.Lambda(self._span(meta), tuple(params or ()), body)

    def param_star(self, meta, children):
        name = children[0] if children else None
        return ("varargs", None if name is None else str(name), None, self._span(meta))

    def param_starstar(self, meta, children):
        return ("kwargs", str(children[0]), None, self._span(meta))

    def param_slash(self, meta, children):
        return ("slash", None, None, self._span(meta))

    def classdef(self, meta, children):
        name, arguments, body = children
        bases, keywords = arguments if arguments is not None else ((), ())
        return A.ClassDef(self._span(meta), str(name), bases, keywords, body, ())

    # Simple statements ---------------------------------------------------------------------

    def expr_stmt(self, meta, children):
        return A.ExprStmt(self._span(meta), children[0])

    def assign(self, meta, children):
        return A.Assign(self._span(meta), tuple(children[:-1]), children[-1])

    def annassign(self, meta, children):
        target, annotation, value = children
        return A.AnnAssign(self._span(meta), target, annotation, value)

    def augassign(self, meta, children):
        target, op, value = children
        return A.AugAssign(self._span(meta), target, str(op)[:-1], value)

    def pass_stmt(self, meta, children):
        return A.Pass(self._span(meta))

    def break_stmt(self, meta, children):
        return A.Break(self._span(meta))

    def continue_stmt(self, meta, children):
        return A.Continue(self._span(meta))

    def return_stmt(self, meta, children):
        return A.Return(self._span(meta), children[0])

    def yield_expr(self, meta, children):
        value = [c for c in children if not (type(c) is Token and c.type.startswith("KW_"))]
        return A.Yield(self._span(meta), value[0] if value else None)

    def yield_from(self, meta, children):
        return A.YieldFrom(self._span(meta), children[-1])

    def del_stmt(self, meta, children):
        targets: list[A.Node] = []
        pending = [c for c in children if not (type(c) is Token and c.type == "KW_DEL")]
        while pending:  # (`del a, (b, c)` deletes each name in turn)
            t = pending.pop(0)
            if isinstance(t, (A.TupleExpr, A.ListExpr)):
                pending[:0] = t.elts
            else:
                targets.append(t)
        return A.Delete(self._span(meta), tuple(targets))

    def global_stmt(self, meta, children):
        return A.Global(self._span(meta), tuple(str(c) for c in children))

    def nonlocal_stmt(self, meta, children):
        return A.Nonlocal(self._span(meta), tuple(str(c) for c in children))

    def yield_stmt(self, meta, children):
        return A.ExprStmt(self._span(meta), children[0])

    def raise_stmt(self, meta, children):
        exc, cause = children[0], children[-1]  # [test, KW_FROM or None, test or None]
        return A.Raise(self._span(meta), exc, cause)

    def try_stmt(self, meta, children):
        body, *rest = [c for c in children if not (type(c) is Token and c.type.startswith("KW_"))]
        handlers = tuple(c for c in rest if isinstance(c, A.ExceptHandler))
        tail = [c for c in rest if not isinstance(c, A.ExceptHandler)]
        if not handlers:  # try: ... finally: ...
            return A.Try(self._span(meta), body, (), (), tuple(tail[0]))
        orelse, finalbody = tail
        return A.Try(self._span(meta), body, handlers, tuple(orelse or ()), tuple(finalbody or ()))

    def except_clause(self, meta, children):
        kept = [c for c in children if not (type(c) is Token and c.type.startswith("KW_"))]
        type_, name, body = kept
        return A.ExceptHandler(self._span(meta), type_, None if name is None else str(name), body)

    def assert_stmt(self, meta, children):
        return A.Assert(self._span(meta), children[0], children[1])

    def import_name(self, meta, children):
        return A.Import(self._span(meta), tuple(children))

    def dotted_as_name(self, meta, children):
        name, alias = children
        return (_dotted(name), None if alias is None else str(alias))

    def import_from(self, meta, children):
        level, module, names = 0, "", [("*", None)]
        for c in children:
            if isinstance(c, Token) and c.type == "DOTS":
                level = len(c)
            elif isinstance(c, A.Node):
                module = _dotted(c)
            elif isinstance(c, list):
                names = c
        return A.ImportFrom(self._span(meta), module, level, tuple(names))

    def import_star(self, meta, children):
        return [("*", None)]

    def import_as_names(self, meta, children):
        return [c for c in children if c is not None]

    def import_as_name(self, meta, children):
        name, alias = children
        return (str(name), None if alias is None else str(alias))

    # Compound statements -------------------------------------------------------------------

    def if_stmt(self, meta, children):
        test, body, *elifs, orelse = children
        tail: tuple[A.Node, ...] = tuple(orelse or ())
        for etest, ebody, espan in reversed(elifs):
            tail = (A.If(espan, etest, ebody, tail),)
        return A.If(self._span(meta), test, body, tail)

    def elif_(self, meta, children):
        return (children[0], children[1], self._span(meta))

    def while_stmt(self, meta, children):
        test, body, orelse = children
        return A.While(self._span(meta), test, body, tuple(orelse or ()))

    def for_stmt(self, meta, children):
        target, iterable, body, orelse = children
        return A.For(self._span(meta), target, iterable, body, tuple(orelse or ()))

    def with_stmt(self, meta, children):
        *items, body = children
        return A.With(self._span(meta), tuple(items), body)

    def with_item(self, meta, children):
        expr, alias = children  # (a name, or a target as `for` takes: `as (a, b)`)
        return (expr, alias)

    # Operators -----------------------------------------------------------------------------

    def unary_op(self, meta, children):
        return Op(True, str(children[0]), self._span(meta))

    def binop(self, meta, children):
        return Op(False, " ".join(str(t) for t in children), self._span(meta))

    def operators(self, meta, children):
        return _group(children)

    def ternary(self, meta, children):
        body, test, orelse = children
        return A.IfExp(self._span(meta), test, body, orelse)

    def star_expr(self, meta, children):
        return A.Starred(self._span(meta), children[0])

    # Atoms ---------------------------------------------------------------------------------

    def var(self, meta, children):
        return A.Name(self._span(meta), str(children[0]))

    def number(self, meta, children):
        text = str(children[0]).replace("_", "")
        span = self._span(meta)
        kind = children[0].type
        if kind == "IMAG_NUMBER":
            return A.Unsupported(span, "complex numbers")
        if kind == "FLOAT_NUMBER":
            return A.Const(span, float(text))
        # Bits from the digit count, before converting: a huge literal is refused unread.
        digits = len(text) - (2 if kind != "DEC_NUMBER" else 0)
        per_digit = {"HEX_NUMBER": 4, "OCT_NUMBER": 3, "BIN_NUMBER": 1}.get(kind, 3.33)
        if digits * per_digit > self.limits.int_bits + 4:
            raise BudgetError(
                f"integer literal of {digits:,} digits is over the int_bits "
                f"budget of {self.limits.int_bits:,} bits",
                span,
                hint="raise it with --limit int_bits=N",
            )
        return A.Const(span, int(text, 0))

    def string(self, meta, children):
        return self._string(str(children[0]), self._span(meta))

    def strings(self, meta, children):
        parts: list[Any] = []
        for c in children:
            if isinstance(c, A.Const):
                parts.append(c.value)
            else:
                parts.extend(c.parts)
        if all(isinstance(p, str) for p in parts):
            return A.Const(self._span(meta), "".join(parts))
        if all(isinstance(p, bytes) for p in parts):
            return A.Const(self._span(meta), b"".join(parts))
        if any(isinstance(p, bytes) for p in parts):
            raise KernelSyntaxError("cannot mix bytes and str literals", self._span(meta))
        return A.FString(self._span(meta), tuple(parts))

    def _string(self, text: str, span: SourceSpan) -> A.Node:
        if len(text) > self.limits.literal_bytes:
            raise BudgetError(
                f"string literal of {len(text):,} characters is over the "
                f"literal_bytes budget of {self.limits.literal_bytes:,}",
                span,
                hint="raise it with --limit literal_bytes=N",
            )
        prefix = text[: len(text) - len(text.lstrip("rRbBuUfF"))].lower()
        if "f" not in prefix:
            try:
                with warnings.catch_warnings():  # "invalid escape sequence": not ours to warn
                    warnings.simplefilter("ignore")
                    return A.Const(span, _pyast.literal_eval(text))
            except (ValueError, SyntaxError) as exc:
                raise KernelSyntaxError(f"invalid string literal: {exc}", span) from None
        body_text = text[len(prefix) :]
        quote = body_text[:3] if body_text[:3] in ('"""', "'''") else body_text[0]
        raw = body_text[len(quote) : -len(quote)]
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
        return A.Attribute(self._span(meta), children[0], str(children[1]))

    def getitem(self, meta, children):
        return A.Subscript(self._span(meta), children[0], children[1])

    def slice(self, meta, children):
        lower, upper, step = children
        return A.Slice(self._span(meta), lower, upper, step)

    def sliceop(self, meta, children):
        return children[0]

    def subscript_tuple(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(c for c in children if c is not None))

    def tuple(self, meta, children):
        return A.TupleExpr(self._span(meta), tuple(c for c in children if c is not None))

    def list(self, meta, children):
        return A.ListExpr(self._span(meta), tuple(c for c in children if c is not None))

    def dict(self, meta, children):
        items = [c for c in children if c is not None]
        for c in items:
            if isinstance(c, A.Unsupported):
                return c
        return A.DictExpr(self._span(meta), tuple(k for k, _ in items), tuple(v for _, v in items))

    def key_value(self, meta, children):
        return (children[0], children[1])

    def walrus(self, meta, children):
        return A.NamedExpr(self._span(meta), str(children[0]), children[-1])

    def dict_unpack(self, meta, children):
        return (A.DictUnpack(self._span(meta), children[0]), children[0])

    # Comprehensions ------------------------------------------------------------------------

    def comp_for(self, meta, children):
        targets: list[A.Node] = []
        iters: list[A.Node] = []
        conds: list[A.Node | None] = []
        for kind, a, b in children:
            if kind == "for":
                targets.append(a)
                iters.append(b)
                conds.append(None)
            else:
                prev = conds[-1]
                conds[-1] = a if prev is None else A.BoolOp(a.span, "and", (prev, a))
        return (tuple(targets), tuple(iters), tuple(conds))

    def comp_for_clause(self, meta, children):
        return ("for", children[0], children[1])

    def comp_if_clause(self, meta, children):
        return ("if", children[0], None)

    def _comprehension(self, kind: str, meta, children) -> A.Comprehension:
        elt, (targets, iters, conds) = children
        key = None
        if kind == "dict":
            key, elt = elt
        return A.Comprehension(self._span(meta), kind, elt, key, targets, iters, conds)

    def list_comprehension(self, meta, children):
        return self._comprehension("list", meta, children)

    def tuple_comprehension(self, meta, children):
        return self._comprehension("tuple", meta, children)

    def dict_comprehension(self, meta, children):
        return self._comprehension("dict", meta, children)

    def set_comprehension(self, meta, children):
        return self._comprehension("set", meta, children)

    def set(self, meta, children):
        return A.SetExpr(self._span(meta), tuple(c for c in children if c is not None))

    # Calls ---------------------------------------------------------------------------------

    def funccall(self, meta, children):
        func, arguments = children
        args, kwargs = arguments if arguments is not None else ((), ())
        return A.Call(self._span(meta), func, args, kwargs)

    def arguments(self, meta, children):
        args: list[A.Node] = []
        kwargs: list[A.Keyword] = []
        for c in children:
            if isinstance(c, A.Keyword):
                kwargs.append(c)
            else:
                args.append(c)
        return (tuple(args), tuple(kwargs))

    def kwarg(self, meta, children):
        return A.Keyword(self._span(meta), str(children[0]), children[1])

    def stararg(self, meta, children):
        return A.Starred(self._span(meta), children[0])

    def kwstar(self, meta, children):
        return A.Keyword(self._span(meta), None, children[0])

    def generator_arg(self, meta, children):
        return self._comprehension("tuple", meta, children)


def _group(items: list[Any]) -> A.Node:
    """Group a flat operand/operator sequence by Python's precedence (precedence climbing)."""
    pos = 0

    def operand() -> A.Node:
        nonlocal pos
        item = items[pos]
        pos += 1
        if isinstance(item, Op):  # a prefix operator
            value = climb(_UNARY[item.text])
            return A.UnaryOp(join(item.span, value.span), item.text, value)
        return item

    def climb(min_power: int) -> A.Node:
        nonlocal pos
        left = operand()
        while pos < len(items):
            op = items[pos]
            power = _COMPARISON_POWER if op.text in _COMPARISON else _BINARY[op.text]
            if power < min_power:
                break
            if op.text in _COMPARISON:
                ops: list[str] = []
                rights: list[A.Node] = []
                while pos < len(items) and items[pos].text in _COMPARISON:
                    ops.append(items[pos].text)
                    pos += 1
                    rights.append(climb(_COMPARISON_POWER + 1))
                left = A.Compare(join(left.span, rights[-1].span), left, tuple(ops), tuple(rights))
                continue
            if op.text in ("and", "or"):  # a chain of one of them is one node (linear time)
                values = [left]
                while pos < len(items) and items[pos].text == op.text:
                    pos += 1
                    values.append(climb(power + 1))
                left = A.BoolOp(join(left.span, values[-1].span), op.text, tuple(values))
                continue
            pos += 1
            # `**` is right-associative; everything else groups to the left.
            right = climb(power if op.text == "**" else power + 1)
            left = A.BinOp(join(left.span, right.span), op.text, left, right)
        return left

    return climb(0)


def _dotted(node: A.Node) -> str:
    if isinstance(node, A.Name):
        return node.id
    assert isinstance(node, A.Attribute)
    return f"{_dotted(node.value)}.{node.attr}"


def _split_fstring(raw: str, is_raw: bool, span: SourceSpan) -> list[Any]:
    """Split an f-string body into literal text and (expression text, conversion, spec)."""

    def lit(s: str) -> str:
        if is_raw or not s:
            return s
        try:
            with warnings.catch_warnings():  # "invalid escape sequence": not ours to warn
                warnings.simplefilter("ignore")
                return _pyast.literal_eval('"""' + s.replace('"', '\\"') + '"""')
        except (ValueError, SyntaxError) as exc:
            raise KernelSyntaxError(f"invalid f-string literal text: {exc}", span) from None

    parts: list[Any] = []
    buf = ""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch in "{}" and raw[i : i + 2] in ("{{", "}}"):
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
        field = raw[i + 1 : j - 1]
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
                field, spec = field[:k], field[k + 1 :]
                break
        if len(field) >= 2 and field[-2] == "!" and field[-1] in "rsa":
            field, conv = field[:-2], field[-1]
        if field.rstrip().endswith("="):
            field = field.rstrip()[:-1]
            parts.append(field + "=")
            conv = conv or ("r" if not spec else None)
        if not field.strip():
            raise KernelSyntaxError("f-string: empty expression not allowed", span)
        parts.append((field, conv, spec))
        i = j
    if buf:
        parts.append(lit(buf))
    return parts
