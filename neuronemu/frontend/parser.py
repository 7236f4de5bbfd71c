"""Cached LALR parser for kernel files: `nki.lark` with Lark's Python indenter.

Kernel files are whole Python modules (host code included), so the grammar covers Python's
statements broadly; the specializer, not the grammar, enforces the NKI subset where code runs.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import io
import os
import pickle
import tempfile
import tokenize
from pathlib import Path

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import DedentError, PythonIndenter

from neuronemu.errors import KernelSyntaxError, SourceSpan, UsageError, register_source
from neuronemu.frontend import ast as A
from neuronemu.frontend.to_ast import ToAst

__all__ = ["parse_source", "parse_file", "parse_expression", "read_source"]


_GRAMMAR = Path(__file__).with_name("nki.lark")
_GRAMMAR_TEXT = _GRAMMAR.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _parser() -> tuple[Lark, ToAst]:
    """The LALR parser, with the AST builder applied as it parses (no parse tree is built).

    It is not reentrant (the indenter keeps state), which is why f-string fields are parsed
    later, when the tracer first evaluates them. cache=True stores the LALR tables on disk, so
    only the first run ever builds them.
    """
    to_ast = ToAst("<string>")
    lark = Lark(
        _GRAMMAR_TEXT,
        parser="lalr",
        postlex=PythonIndenter(),
        start="start",
        propagate_positions=False,  # to_ast.py places nodes from their tokens
        maybe_placeholders=True,
        cache=True,
        transformer=to_ast,
    )
    return lark, to_ast


def _parse(text: str, path: str, fixed_span: SourceSpan | None = None) -> A.Module:
    lark, to_ast = _parser()
    saved = (to_ast.path, to_ast.fixed_span)  # f-string fields parse while a file parses
    to_ast.path, to_ast.fixed_span = path, fixed_span
    try:
        return lark.parse(text)
    finally:
        to_ast.path, to_ast.fixed_span = saved


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
        opened = _unclosed_bracket(text, line)
        if opened is not None:  # as Python says it: the bracket, not where parsing stopped
            char, at_line, at_col = opened
            return KernelSyntaxError(f"invalid syntax: {char!r} was never closed",
                                     SourceSpan(path, at_line, at_col),
                                     hint=f"parsing stopped at line {line}, column {col} "
                                          f"({what})")
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


def _unclosed_bracket(text: str, line: int) -> tuple[str, int, int] | None:
    """The innermost bracket opened before `line` and never closed in the whole file, as
    (bracket, line, column), if any (the tokenizer runs no code)."""
    stack: list[tuple[str, int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                stack.append((tok.string, tok.start[0], tok.start[1] + 1))
            elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
                stack.pop()
    except tokenize.TokenError:  # the end of the file inside brackets: some never closed
        before = [b for b in stack if b[1] < line]
        return before[-1] if before else None
    except SyntaxError:
        pass
    return None


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
# Bump when the AST classes or to_ast.py change shape: on-disk ASTs of older versions are
# then simply not found.
_AST_FORMAT = "1"


def _cache_dir() -> Path | None:
    """Where parsed ASTs are kept between runs (NEURONEMU_CACHE_DIR; "" turns it off)."""
    configured = os.environ.get("NEURONEMU_CACHE_DIR")
    if configured == "":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neuronemu" / "ast"


def _load_cached(key: str) -> A.Module | None:
    directory = _cache_dir()
    if directory is None:
        return None
    try:
        with open(directory / f"{key}.pickle", "rb") as f:
            module = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None
    return module if isinstance(module, A.Module) else None


def _store_cached(key: str, module: A.Module) -> None:
    directory = _cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(module, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, directory / f"{key}.pickle")
    except (OSError, pickle.PicklingError, RecursionError):
        pass  # a cache that cannot be written is only slower, never wrong


def parse_source(text: str, path: str = "<string>") -> A.Module:
    """Parse kernel source text to the AST.

    ASTs are cached by content hash (of the grammar, the AST format, the path and the text),
    in memory and on disk, so an unchanged file is parsed once.
    """
    register_source(path, text)
    digest = hashlib.sha256()
    for part in (_AST_FORMAT, _GRAMMAR_TEXT, path, text):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    key = digest.hexdigest()
    cached = _AST_CACHE.get(key) or _load_cached(key)
    if cached is not None:
        _AST_CACHE[key] = cached
        return cached
    if not text.endswith("\n"):
        text += "\n"
    # The parse allocates hundreds of thousands of small objects and frees none of them: the
    # cyclic GC would scan them again and again for nothing.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        module = _parse(text, path)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, path, text) from None
    except DedentError:
        raise _dedent_error(text, path) from None
    finally:
        if gc_was_on:
            gc.enable()
    _AST_CACHE[key] = module
    _store_cached(key, module)
    return module


def read_source(path: str | Path, what: str = "kernel file") -> str:
    """A source file's text; a missing or unreadable file is a usage error."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such {what}: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {p}: {exc}") from None


def parse_file(path: str | Path) -> A.Module:
    return parse_source(read_source(path), str(path))


def parse_expression(text: str, span: SourceSpan) -> A.Node:
    """Parse one expression (an f-string field); errors point at the enclosing string."""
    try:
        module = _parse(f"({text})\n", span.path, fixed_span=span)
    except (UnexpectedInput, DedentError):
        raise KernelSyntaxError(f"invalid expression in f-string: {text!r}", span) from None
    stmt = module.body[0]
    assert isinstance(stmt, A.ExprStmt)
    return stmt.value
