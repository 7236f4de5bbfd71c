"""Cached LALR parser for kernel files: `nki.lark` with Lark's Python indenter.

Kernel files are whole Python modules (host code included), so the grammar covers Python's
statements broadly; the specializer, not the grammar, enforces the NKI subset where code runs.
"""

from __future__ import annotations

import functools
import hashlib
import io
import tokenize
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import (UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                             UnexpectedToken, VisitError)
from lark.indenter import DedentError, PythonIndenter

from neuronemu.errors import KernelSyntaxError, SourceSpan, UsageError, register_source
from neuronemu.frontend import ast as A

__all__ = ["parse_source", "parse_file", "parse_expression"]


_GRAMMAR = Path(__file__).with_name("nki.lark")


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    # cache=True stores the LALR tables on disk, so only the first run ever builds them.
    return Lark(
        _GRAMMAR.read_text(encoding="utf-8"),
        parser="lalr",
        postlex=PythonIndenter(),
        start="start",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
    )


_TOKEN_WORDS = {
    "_NEWLINE": "end of line",
    "_INDENT": "indent",
    "_DEDENT": "dedent",
    "$END": "end of file",
    "RPAR": "')'",
    "LPAR": "'('",
    "RSQB": "']'",
    "LSQB": "'['",
    "COLON": "':'",
    "COMMA": "','",
    "NAME": "a name",
}


def _syntax_error(exc: UnexpectedInput, path: str, text: str) -> KernelSyntaxError:
    line = getattr(exc, "line", None) or 1
    col = getattr(exc, "column", None) or 1
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            what = "unexpected end of file"
            line = max(1, len(text.splitlines()))
            col = len(text.splitlines()[-1]) + 1 if text.splitlines() else 1
        elif tok.type in ("_INDENT", "_DEDENT"):
            what = "unexpected indentation"
        elif tok.type == "_NEWLINE":
            what = "unexpected end of line"
        else:
            what = f"unexpected {tok.value!r}"
        expected = sorted(_TOKEN_WORDS.get(t, t) for t in exc.accepts or exc.expected)
        hint = None
        if 0 < len(expected) <= 6:
            hint = "expected " + " or ".join(e if " " in e or "'" in e else repr(e.lower())
                                              for e in expected)
    elif isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        what = f"invalid character {ch!r}"
        hint = None
    elif isinstance(exc, UnexpectedEOF):
        what = "unexpected end of file"
        hint = None
    else:  # pragma: no cover - Lark has no other UnexpectedInput kinds today
        what = str(exc).splitlines()[0]
        hint = None
    return KernelSyntaxError(f"invalid syntax: {what}", SourceSpan(path, line, col), hint)


def _dedent_error(text: str, path: str) -> KernelSyntaxError:
    """Lark's indenter does not say where a bad dedent is; the tokenizer does (no code runs)."""
    line = 1
    try:
        for _ in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
    except IndentationError as exc:
        line = exc.lineno or 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return KernelSyntaxError("invalid syntax: unindent does not match any outer indentation "
                             "level", SourceSpan(path, line, 1))


_AST_CACHE: dict[str, A.Module] = {}


def parse_source(text: str, path: str = "<string>") -> A.Module:
    """Parse kernel source text to the AST; identical text is parsed once per process."""
    register_source(path, text)
    key = hashlib.sha256(path.encode() + b"\0" + text.encode()).hexdigest()
    cached = _AST_CACHE.get(key)
    if cached is not None:
        return cached
    if not text.endswith("\n"):
        text += "\n"
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, path, text) from None
    except DedentError:
        raise _dedent_error(text, path) from None
    from neuronemu.frontend.to_ast import ToAst

    try:
        module = ToAst(path).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, KernelSyntaxError):
            raise exc.orig_exc from None
        raise
    _AST_CACHE[key] = module
    return module


def parse_file(path: str | Path) -> A.Module:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such kernel file: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read kernel file {p}: {exc}") from None
    return parse_source(text, str(path))


def parse_expression(text: str, span: SourceSpan) -> A.Node:
    """Parse one expression (an f-string field); errors point at the enclosing string."""
    try:
        tree = _parser().parse(f"({text})\n")
    except UnexpectedInput:
        raise KernelSyntaxError(f"invalid expression in f-string: {text!r}", span) from None
    from neuronemu.frontend.to_ast import ToAst

    module = ToAst(span.path, fixed_span=span).transform(tree)
    stmt = module.body[0]
    assert isinstance(stmt, A.ExprStmt)
    return stmt.value


def token_span(path: str, tok: Token) -> SourceSpan:
    return SourceSpan(path, tok.line or 1, tok.column or 1, tok.end_line, tok.end_column)
