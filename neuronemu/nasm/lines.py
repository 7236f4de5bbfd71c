"""The text form of a program read into plain records, one a line, metered token by token:
the clocks read as the text is parsed and walked, and every number, nesting and argument
list bounded before it is read."""

from __future__ import annotations

import ast as _pyast
import gc
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedInput, VisitError

from neuronemu.errors import KernelSyntaxError, KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend.lalr import MAX_NESTED_BRACKETS
from neuronemu.limits import Meter
from neuronemu.program.pseudo import SPECS

__all__ = ["attr_value", "read_records"]

# The parse reads the clocks once per this many tokens (and the tree walk per as many nodes).
_TOKENS_PER_TICK = 64
_NUMBER_TOKENS = frozenset({"INT", "SIGNED_INT", "SIGNED_NUMBER"})
# The most `name=value` arguments a line may have: an instruction's operands and attributes,
# each given once (or a device loop's four); a line of more is refused as it is read.
_MAX_ARGS = max(4, *(len(spec.operands) + len(spec.attrs) for spec in SPECS.values()))

_GRAMMAR = Path(__file__).with_name("nasm.lark")
_parser_cache: list[Lark] = []


def _parser() -> Lark:
    # No Lark cache: it is a pickle in the temporary directory, which anyone could plant.
    if not _parser_cache:
        _parser_cache.append(
            Lark(
                _GRAMMAR.read_text(encoding="utf-8"),
                parser="lalr",
                propagate_positions=True,
                maybe_placeholders=True,
            )
        )
    return _parser_cache[0]


@v_args(meta=True)
class _Lines(Transformer):
    """The parse tree as plain records: ("kernel", name), ("tensor", ...), ("instr", ...);
    the clocks read as the nodes that repeat within a line are made."""

    def __init__(self, path: str, meter: Meter):
        super().__init__()
        self.path = path
        self.meter = meter
        self._until_tick = _TOKENS_PER_TICK

    def _span(self, meta: Any) -> SourceSpan:
        return SourceSpan(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tick(self, meta: Any) -> None:
        self._until_tick -= 1
        if self._until_tick <= 0:
            self._until_tick = _TOKENS_PER_TICK
            self.meter.tick(self._span(meta), _TOKENS_PER_TICK)

    def start(self, meta, children):
        return list(children)

    def kernel_dir(self, meta, children):
        return ("kernel", str(children[0]))

    def source_dir(self, meta, children):
        return ("source", _pyast.literal_eval(str(children[0])))

    def target_dir(self, meta, children):
        return ("target", str(children[0]), self._span(meta))

    def grid_dir(self, meta, children):
        return ("grid", tuple(int(c) for c in children), self._span(meta))

    def tensor_dir(self, meta, children):
        name, kind, buffer, dtype, *dims, data, placed, returned = children
        return (
            "tensor",
            str(name),
            str(kind),
            str(buffer),
            str(dtype),
            tuple(int(d) for d in dims),
            self._span(meta),
            None if data is None else _pyast.literal_eval(str(data)),
            placed,
            returned,
        )

    def returned(self, meta, children):
        return tuple(int(c) for c in children)

    def placed(self, meta, children):
        return tuple(int(c) for c in children)

    def alias_dir(self, meta, children):
        return ("alias", *(str(c) for c in children), self._span(meta))

    def loop_dir(self, meta, children):
        number, kind, first, last, *rest = children
        args = [(c[1], c[2]) for c in rest if isinstance(c, tuple) and c[0] == "arg"]
        loc = next((c for c in rest if isinstance(c, Token) and c.type == "LOC"), None)
        return (
            "loop",
            int(number),
            str(kind),
            int(first),
            int(last),
            args,
            _location(str(loc)) if loc is not None else None,
            self._span(meta),
        )

    def carries(self, meta, children):
        return ("carry", [int(c) for c in children])

    def afters(self, meta, children):
        return ("after", [int(c) for c in children])

    def stream(self, meta, children):
        return ("stream", str(children[0]), self._span(meta))

    def instr(self, meta, children):
        index, name, *rest = children
        args = [c for c in rest if isinstance(c, tuple) and c[0] == "arg"]
        waits: list = next((c[1] for c in rest if isinstance(c, tuple) and c[0] == "waits"), [])
        carry: list = next((c[1] for c in rest if isinstance(c, tuple) and c[0] == "carry"), [])
        after: list = next((c[1] for c in rest if isinstance(c, tuple) and c[0] == "after"), [])
        loc = next((c for c in rest if isinstance(c, Token) and c.type == "LOC"), None)
        return (
            "instr",
            int(index),
            str(name),
            [(a[1], a[2]) for a in args],
            waits,
            _location(str(loc)) if loc is not None else None,
            self._span(meta),
            carry,
            after,
        )

    def arg(self, meta, children):
        self._tick(meta)
        return ("arg", str(children[0]), children[1])

    def view(self, meta, children):
        self._tick(meta)
        name, *index = children
        return ("view", str(name), None if index == [None] else tuple(index))

    def pattern_view(self, meta, children):
        name, pattern, offset = children
        return ("pattern", str(name), attr_value(pattern), int(offset))

    def indirect_view(self, meta, children):
        name, pattern, offset, mode, index, unit, limit = children
        return (
            "indirect",
            str(name),
            attr_value(pattern),
            int(offset),
            str(mode),
            index,
            int(unit),
            int(limit),
        )

    def at(self, meta, children):
        self._tick(meta)
        return int(children[0])

    def span(self, meta, children):
        self._tick(meta)
        lo, hi, step = (None if c is None else int(c) for c in children)
        return slice(lo, hi, step)

    def number(self, meta, children):
        self._tick(meta)
        text = str(children[0])
        return float(text) if any(c in text for c in ".eEn") else int(text)

    def string(self, meta, children):
        return _pyast.literal_eval(str(children[0]))

    def tuple(self, meta, children):
        return ("tuple", tuple(c for c in children if c is not None))

    def list(self, meta, children):
        return ("list", tuple(c for c in children if c is not None))

    def waits(self, meta, children):
        return ("waits", [c for c in children if c is not None])

    def wait(self, meta, children):
        self._tick(meta)
        return (str(children[0]), int(children[1]), self._span(meta))


def _parse(text: str, file: str, meter: Meter) -> Tree:
    """The parse tree of `text`, token by token: the clocks read as it goes, at the token
    reached (a long line is work too), and before any number is read, its size checked
    against the int_bits budget (Python reads no int of over 4,300 digits) and brackets
    nested no deeper than in a kernel (the tree is walked recursively)."""
    parser = _parser().parse_interactive(text if text.endswith("\n") else text + "\n")
    token = None
    until_tick, depth, args = _TOKENS_PER_TICK, 0, 0
    try:
        for token in parser.iter_parse():
            until_tick -= 1
            if until_tick <= 0:
                until_tick = _TOKENS_PER_TICK
                meter.tick(_token_span(file, token), _TOKENS_PER_TICK)
            if token.type in _NUMBER_TOKENS:
                _check_number(token, file, meter)
            elif token.type == "_NL":
                args = 0
            elif token.type == "EQUAL":
                args += 1
                if args > _MAX_ARGS:
                    raise KernelTypeError(
                        f"more than {_MAX_ARGS} arguments on one line: no instruction takes "
                        "as many (each is given once)",
                        _token_span(file, token),
                    )
            elif token.type in ("LPAR", "LSQB"):
                depth += 1
                if depth > MAX_NESTED_BRACKETS:
                    raise KernelSyntaxError(
                        f"too many nested brackets (at most {MAX_NESTED_BRACKETS}, as in a kernel)",
                        _token_span(file, token),
                    )
            elif token.type in ("RPAR", "RSQB"):
                depth -= 1
        return parser.feed_eof(token)
    except UnexpectedInput as exc:
        raise KernelSyntaxError(
            "invalid program text", SourceSpan(file, exc.line or 1, exc.column or 1)
        ) from None


def _unwrapped(exc: VisitError, file: str) -> Exception:
    """What a node's conversion raised: a neuronemu error as it is; a value its text cannot
    be read as (a string literal's bad escape, an int past Python's digits) a located
    syntax error at the node; anything else, a neuronemu bug, as it is."""
    orig = exc.orig_exc
    if isinstance(orig, NeuronEmuError):
        return orig
    if not isinstance(orig, (ValueError, SyntaxError, OverflowError, RecursionError)):
        return orig
    meta = getattr(exc.obj, "meta", None)
    line, col = getattr(meta, "line", 1), getattr(meta, "column", 1)
    return KernelSyntaxError(
        f"invalid program text: cannot read this {str(exc.rule).removesuffix('_dir')} "
        f"({type(orig).__name__})",
        SourceSpan(file, line or 1, col or 1),
    )


def _token_span(file: str, token: Token) -> SourceSpan:
    return SourceSpan(file, token.line or 1, token.column or 1)


def _check_number(token: Token, file: str, meter: Meter) -> None:
    """An integer token of more digits than the int_bits budget holds is refused unread."""
    text = str(token)
    if any(c in text for c in ".eEn"):
        return  # (a float: read in linear time, to inf if need be)
    digits = len(text.lstrip("+-"))
    if digits * 3.33 > meter.limits.int_bits + 4:
        raise meter.over("int_bits", f"an integer of {digits:,} digits", _token_span(file, token))


def _location(text: str) -> SourceSpan | None:
    body = text.lstrip(";").strip()
    path, _, rest = body.rpartition(":")
    path, _, line = path.rpartition(":")
    try:
        return SourceSpan(path, int(line), int(rest))
    except ValueError:
        return None


_WORDS = {"True": True, "False": False, "None": None}


def attr_value(value: Any) -> Any:
    """Attribute values: bare words are names (op=add) or True/False/None."""
    if isinstance(value, tuple) and value and value[0] == "view":
        _, name, index = value
        if index is not None:
            raise ValueError(f"{name}[...] is not an attribute value")
        return _WORDS.get(name, name)
    if isinstance(value, tuple) and value and value[0] == "tuple":
        return tuple(attr_value(v) for v in value[1])
    if isinstance(value, tuple) and value and value[0] == "list":
        return [attr_value(v) for v in value[1]]
    return value


def read_records(text: str, file: str, meter: Meter) -> list[tuple]:
    """The records of a program's `text` (read from `file`): ("kernel", name),
    ("tensor", ...), ("instr", ...) and the others, in file order; bad text is a located
    error, and so is running out of a budget while reading it."""
    gc_was_on = gc.isenabled()
    # (a node per token, all kept: each collection would walk them all again, as for a kernel)
    gc.disable()
    try:
        return _Lines(file, meter).transform(_parse(text, file, meter))
    except VisitError as exc:  # (Lark's wrapper of what a node's conversion raised)
        raise _unwrapped(exc, file) from None
    finally:
        if gc_was_on:
            gc.enable()
