"""The LALR half of the parser: `nki.lark` with Lark's Python indenter, and Lark's errors
as located syntax errors. Imported only when a source is not in the AST cache (importing
Lark costs a warm run about 50 ms)."""

from __future__ import annotations

import functools
import hashlib
import io
import re
import tokenize
from pathlib import Path
from typing import Any, cast

import lark
from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.grammar import Rule
from lark.indenter import DedentError, PythonIndenter
from lark.lexer import TerminalDef

from neuronemu.errors import KernelSyntaxError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.frontend import cache
from neuronemu.frontend.to_ast import ToAst
from neuronemu.limits import Limits

__all__ = [
    "parse",
    "parse_expression",
    "MAX_NESTED_BRACKETS",
    "MAX_NESTED_BLOCKS",
    "MAX_OPERATOR_CHAIN",
]

GRAMMAR_TEXT = Path(__file__).with_name("nki.lark").read_text(encoding="utf-8")

# CPython's own limits: 200 nested brackets ("too many nested parentheses"), 100 nested
# blocks ("too many levels of indentation"). Deeper nesting is refused while lexing, before
# anything recursive sees it.
MAX_NESTED_BRACKETS = 200
MAX_NESTED_BLOCKS = 100
# Operators chained without brackets or commas between them (`1 + 1 + ...`) nest the AST as
# deep as the chain is long; CPython's compiler gives up at a few thousand (a RecursionError
# "during compilation" for 5,000 on 3.11). Longer chains are refused while lexing, before
# the parser has built a tree it cannot walk.
MAX_OPERATOR_CHAIN = 3000
_OPERATORS = frozenset("+ - * / // % ** @ << >> & | ^ ~ and or not < > == != <= >= in is".split())
_CHAIN_ENDS = frozenset(", ; : = += -= *= /= //= %= **= @= <<= >>= &= |= ^=".split())


# Bounds on parser tables read from the cache, ~10x what nki.lark makes (498 states, 177
# symbols, 399 rules and terminals): larger tables are built afresh instead of loaded.
_MAX_STATES = 5000
_MAX_SYMBOLS = 2000
_MAX_MEMO = 5000
# Reductions by rules of at most one symbol that one token may cause. Only these can go on
# without end (a longer rule shrinks the stack, which only a shift or an empty rule grows).
# Valid tables make at most 9 per token (every kernel, test and module here; chains of 3,000
# unary operators or 2,000 lambdas); tables that loop make them forever, and are given up.
_MAX_SHORT_REDUCES_PER_TOKEN = 10_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The options of `_build()`'s Lark, as it serializes them (a test compares): loaded tables
# get these, never options read from the cache.
_OPTIONS = {
    "parser": "lalr",
    "lexer": "contextual",
    "start": ["start"],
    "priority": "normal",
    "propagate_positions": False,
    "maybe_placeholders": True,
}


class _BadTables(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, what: str, limit: int, line: int, col: int):
        super().__init__(what)
        self.what, self.limit, self.line, self.col = what, limit, line, col


class _Indenter(PythonIndenter):
    """Python's indenter, refusing nesting deeper than CPython accepts; it remembers the last
    token, so that a construct too deep for the AST builder can still be placed."""

    last_line = 1
    last_col = 1
    short_reduces_left = _MAX_SHORT_REDUCES_PER_TOKEN
    # Where `match` and `case` are keywords in the text being parsed (`soft_keywords`).
    soft: dict[tuple[int, int], str] = {}

    def _process(self, stream):
        chain = 0
        for token in super()._process(stream):
            if token.type in ("NAME", "KW_CASE"):
                # `match` where CPython takes it for a keyword; `case` only there (the lexer
                # makes it KW_CASE wherever the parser's lookahead allows one, which LALR's
                # merged states allow after any simple statement)
                soft = self.soft.get((token.line, token.column))
                if soft is not None and token.type == "NAME" and token == soft[3:].lower():
                    token = Token.new_borrow_pos(soft, token, token)
                elif token.type == "KW_CASE" and soft != "KW_CASE":
                    token = Token.new_borrow_pos("NAME", token, token)
            self.short_reduces_left = _MAX_SHORT_REDUCES_PER_TOKEN
            if token.line:
                self.last_line, self.last_col = token.line, token.column
            if token.value in _OPERATORS:
                chain += 1
                if chain > MAX_OPERATOR_CHAIN:
                    raise _TooDeep("operators", MAX_OPERATOR_CHAIN, token.line, token.column)
            elif token.value in _CHAIN_ENDS or token.type == "_NEWLINE":
                chain = 0
            if self.paren_level >= MAX_NESTED_BRACKETS:
                raise _TooDeep("brackets", MAX_NESTED_BRACKETS, token.line, token.column)
            if len(self.indent_level) > MAX_NESTED_BLOCKS:
                raise _TooDeep("blocks", MAX_NESTED_BLOCKS, token.line, token.column)
            yield token
        self.short_reduces_left = _MAX_SHORT_REDUCES_PER_TOKEN  # for the end of the input


# Set when tables from the cache failed a parse: this process then builds its own.
_DISTRUST_CACHED_TABLES = False


@functools.lru_cache(maxsize=1)
def _parser() -> tuple[Lark, ToAst, _Indenter, bool]:
    """The LALR parser, with the AST builder applied as it parses (no parse tree is built),
    and whether its tables came from the cache.

    It is not reentrant (the indenter keeps state), which is why f-string fields are parsed
    later, when the tracer first evaluates them. Building the tables takes ~0.4 s, so they are
    kept in the user's cache as plain data (never Lark's own pickle cache, which would run
    whatever a planted file holds). Tables read from there are checked for shape and size,
    and a parse with them that loops or fails inside Lark is done again with tables built
    here (`_parse`).
    """
    to_ast = ToAst("<string>")
    indenter = _Indenter()
    key = hashlib.sha256(f"{lark.__version__}\0{GRAMMAR_TEXT}".encode()).hexdigest()
    tables = None if _DISTRUST_CACHED_TABLES else cache.load_tables(key)
    if tables is not None and _well_formed(tables):
        try:
            parser = Lark.__new__(Lark)
            data = {**tables["data"], "options": dict(_OPTIONS)}
            parser._load(
                {"data": data, "memo": tables["memo"]}, transformer=to_ast, postlex=indenter
            )
            _meter(parser, indenter)
            return parser, to_ast, indenter, True
        except Exception:  # noqa: BLE001 - tables of another shape: build them again
            pass
    parser = _build(to_ast, indenter)
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    # The postlexer and transformer are objects, given again when the tables are loaded.
    data["options"] = {
        k: v for k, v in data["options"].items() if k not in ("postlex", "transformer")
    }
    cache.store_tables(key, {"data": data, "memo": memo})
    return parser, to_ast, indenter, False


def _build(to_ast: ToAst, indenter: _Indenter) -> Lark:
    return Lark(
        GRAMMAR_TEXT,
        parser="lalr",
        postlex=indenter,
        start="start",
        propagate_positions=False,  # to_ast.py places nodes from their tokens
        maybe_placeholders=True,
        transformer=to_ast,
    )


def _well_formed(tables: Any) -> bool:
    """Are these cached tables of the shape Lark serializes, within the size bounds, every
    action a shift to a state or a reduction by a rule, and every name a plain identifier
    (Lark looks rule names up as attributes of the AST builder)?"""
    try:
        memo, data = tables["memo"], tables["data"]
        table = data["parser"]["parser"]
        states, symbols = table["states"], table["tokens"]
        if not (
            set(tables) == {"data", "memo"}
            and set(data) == {"parser", "rules", "options", "__type__"}
            and isinstance(memo, dict)
            and isinstance(states, dict)
            and isinstance(symbols, dict)
            and len(memo) <= _MAX_MEMO
            and len(states) <= _MAX_STATES
            and len(symbols) <= _MAX_SYMBOLS
            and all(isinstance(v, str) and len(v) <= 200 for v in symbols.values())
        ):
            return False
        rules = set()
        for ref, item in memo.items():
            if item["__type__"] == "Rule":
                if not all(isinstance(s["name"], str) for s in item["expansion"]):
                    return False
                # Lark calls the builder's attribute of the first of these names that is set.
                names = (item["origin"]["name"], item["alias"], item["options"]["template_source"])
                if not all(n is None or _is_plain(n) for n in names):
                    return False
                rules.add(ref)
            elif item["__type__"] != "TerminalDef" or not _is_plain(item["name"]):
                return False
        for actions in states.values():
            if not isinstance(actions, dict) or len(actions) > len(symbols):
                return False
            for symbol, (kind, arg) in actions.items():
                if symbol not in symbols:
                    return False
                if kind == 0 and arg in states:
                    continue
                if kind == 1 and isinstance(arg, dict) and list(arg) == ["@"]:
                    if arg["@"] in rules:
                        continue
                return False
        ends = (table["start_states"], table["end_states"])
        return all(set(e) == {"start"} and e["start"] in states for e in ends)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _is_plain(name: Any) -> bool:
    return (
        isinstance(name, str)
        and bool(_NAME.match(name))
        and not (name.startswith("__") and name.endswith("__"))
    )


def _meter(parser: Lark, indenter: _Indenter) -> None:
    """Count the reductions by rules of at most one symbol that each token causes."""
    callbacks = parser.parser.parser.parser.callbacks
    for rule, callback in list(callbacks.items()):
        if isinstance(rule, Rule) and len(rule.expansion) <= 1:
            callbacks[rule] = _metered(callback, indenter)


def _metered(callback: Any, indenter: _Indenter) -> Any:
    def reduce(children: list) -> Any:
        indenter.short_reduces_left -= 1
        if indenter.short_reduces_left < 0:
            raise _BadTables
        return callback(children)

    return reduce


def _parse(text: str, path: str, limits: Limits, fixed_span: SourceSpan | None = None) -> A.Module:
    global _DISTRUST_CACHED_TABLES
    try:
        return _parse_with(_parser(), text, path, limits, fixed_span)
    except (UnexpectedInput, DedentError, NeuronEmuError):
        raise
    except Exception:
        if not _parser()[3]:
            raise
    # Cached tables that loop or fail inside Lark (a valid parse raises only the errors
    # above): parse again with tables built from the grammar (stored over the bad ones).
    _DISTRUST_CACHED_TABLES = True
    _parser.cache_clear()
    return _parse_with(_parser(), text, path, limits, fixed_span)


def _parse_with(
    made: tuple[Lark, ToAst, _Indenter, bool],
    text: str,
    path: str,
    limits: Limits,
    fixed_span: SourceSpan | None,
) -> A.Module:
    parser, to_ast, indenter, _ = made
    # f-string fields parse while a file parses
    saved = (to_ast.path, to_ast.fixed_span, to_ast.limits, indenter.soft)
    to_ast.path, to_ast.fixed_span, to_ast.limits = path, fixed_span, limits
    indenter.soft = soft_keywords(text)
    try:
        return cast(A.Module, parser.parse(text))  # (what the AST builder made)
    except _TooDeep as exc:
        if exc.what == "operators":
            raise KernelSyntaxError(
                f"more than {exc.limit:,} operators in a row: an expression this long nests "
                "deeper than neuronemu (or CPython's compiler) follows",
                SourceSpan(path, exc.line, exc.col),
                hint="sum many terms with a loop or sum(...) instead",
            ) from None
        raise KernelSyntaxError(
            f"too many nested {exc.what} (at most {exc.limit}, as in CPython)",
            SourceSpan(path, exc.line, exc.col),
        ) from None
    except RecursionError:
        raise KernelSyntaxError(
            "expression nested too deeply to parse",
            SourceSpan(path, indenter.last_line, indenter.last_col),
        ) from None
    finally:
        to_ast.path, to_ast.fixed_span, to_ast.limits, indenter.soft = saved


# A line that may begin a `match` statement (the tokenizer runs only where one does).
_MATCH_LINE = re.compile(r"^[ \t\f]*match\b", re.M)
# What may follow `match` as the start of its subject: an operator of these, a number, a
# string, or a name other than these keywords. Any other (`=`, `.`, `:`) makes the line a
# statement using a variable named `match`.
_BEGINS = frozenset("( [ { - + ~ * ...".split())
_NOT_BEGINS = frozenset(
    "and as assert break class continue def del elif else except finally for from global if "
    "import in is nonlocal or pass raise return try while with yield".split()
)


def soft_keywords(text: str) -> dict[tuple[int, int], str]:
    """Where `match` and `case` are keywords, as CPython decides (a PEG parser, trying the
    statement first): a logical line beginning with the name `match`, then something that may
    begin an expression, and ending in `:` outside brackets; in the block under it, the lines
    beginning with `case`. (line, Lark's column) -> "KW_MATCH" or "KW_CASE".

    Python's tokenizer reads the text (it runs no code); a text it cannot read gets none (the
    parser then says what is wrong)."""
    if not _MATCH_LINE.search(text):
        return {}
    found: dict[tuple[int, int], str] = {}
    line: list[tuple[tokenize.TokenInfo, int]] = []
    depth = level = start_level = 0
    case_levels: list[int] = []  # the indentation of the case blocks of the open match blocks
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT:
                level += 1
            elif tok.type == tokenize.DEDENT:
                level -= 1
            elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                while case_levels and start_level < case_levels[-1]:
                    case_levels.pop()
                if line:
                    first = line[0][0]
                    where = (first.start[0], first.start[1] + 1)
                    if _is_match(line):
                        found[where] = "KW_MATCH"
                        case_levels.append(start_level + 1)
                    elif case_levels and start_level == case_levels[-1] and first.string == "case":
                        found[where] = "KW_CASE"
                line, depth = [], 0
            elif tok.type not in (tokenize.COMMENT, tokenize.NL):
                if not line:
                    start_level = level
                if tok.type == tokenize.OP and tok.string in ")]}":
                    depth -= 1
                line.append((tok, depth))
                if tok.type == tokenize.OP and tok.string in "([{":
                    depth += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _is_match(line: list[tuple[tokenize.TokenInfo, int]]) -> bool:
    if len(line) < 3 or line[0][0].type != tokenize.NAME or line[0][0].string != "match":
        return False
    second = line[1][0]
    last, last_depth = line[-1]
    return (
        (
            second.type in (tokenize.NUMBER, tokenize.STRING)
            or (second.type == tokenize.NAME and second.string not in _NOT_BEGINS)
            or (second.type == tokenize.OP and second.string in _BEGINS)
        )
        and last.type == tokenize.OP
        and last.string == ":"
        and last_depth == 0
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
        opened = _unclosed_bracket(text, line)
        if opened is not None:  # as Python says it: the bracket, not where parsing stopped
            char, at_line, at_col = opened
            return KernelSyntaxError(
                f"invalid syntax: {char!r} was never closed",
                SourceSpan(path, at_line, at_col),
                hint=f"parsing stopped at line {line}, column {col} ({what})",
            )
        expected = sorted(_TOKEN_WORDS.get(t, t) for t in exc.accepts or exc.expected)
        hint = None
        if 0 < len(expected) <= 6:
            hint = "expected " + " or ".join(
                e if " " in e or "'" in e else repr(e.lower()) for e in expected
            )
    elif isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream
        ch = text[pos] if pos is not None and pos < len(text) else "?"
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
    return KernelSyntaxError(
        "invalid syntax: unindent does not match any outer indentation level",
        SourceSpan(path, line, 1),
    )


def parse(text: str, path: str, limits: Limits, fixed_span: SourceSpan | None = None) -> A.Module:
    """Parse `text` (ending in a newline); any syntax error is a located KernelSyntaxError."""
    try:
        module = _parse(text, path, limits, fixed_span)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, path, text) from None
    except DedentError:
        raise _dedent_error(text, path) from None
    _check_jumps(module)
    return module


def _check_jumps(module: A.Module) -> None:
    """CPython's compile-time rules for where `break`, `continue` and `return` may stand (a
    located syntax error, as CPython's, before anything runs)."""
    stack: list[tuple[A.Node, bool, bool]] = [(s, False, False) for s in reversed(module.body)]
    while stack:  # (in source order; nested blocks without recursion)
        node, in_loop, in_func = stack.pop()
        if isinstance(node, A.Break) and not in_loop:
            raise KernelSyntaxError("'break' outside loop", node.span)
        if isinstance(node, A.Continue) and not in_loop:
            raise KernelSyntaxError("'continue' not properly in loop", node.span)
        if isinstance(node, A.Return) and not in_func:
            raise KernelSyntaxError("'return' outside function", node.span)
        blocks: list[tuple[tuple[A.Node, ...], bool, bool]] = []
        if isinstance(node, A.FunctionDef):
            blocks = [(node.body, False, True)]
        elif isinstance(node, A.ClassDef):
            blocks = [(node.body, False, False)]
        elif isinstance(node, (A.For, A.While)):
            blocks = [(node.body, True, in_func), (node.orelse, in_loop, in_func)]
        elif isinstance(node, A.If):
            blocks = [(node.body, in_loop, in_func), (node.orelse, in_loop, in_func)]
        elif isinstance(node, A.With):
            blocks = [(node.body, in_loop, in_func)]
        elif isinstance(node, A.Match):
            blocks = [(case.body, in_loop, in_func) for case in node.cases]
        elif isinstance(node, A.Try):
            inner = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
            blocks = [(block, in_loop, in_func) for block in inner]
        for block, loop, func in reversed(blocks):
            stack.extend((s, loop, func) for s in reversed(block))


def parse_expression(text: str, span: SourceSpan, limits: Limits) -> A.Node:
    """Parse one expression (an f-string field); errors point at the enclosing string."""
    try:
        module = _parse(f"({text})\n", span.path, limits, fixed_span=span)
    except KernelSyntaxError as err:
        raise KernelSyntaxError(f"invalid expression in f-string: {err.message}", span) from None
    except (UnexpectedInput, DedentError):
        raise KernelSyntaxError(f"invalid expression in f-string: {text!r}", span) from None
    stmt = module.body[0]
    assert isinstance(stmt, A.ExprStmt)
    return stmt.value
