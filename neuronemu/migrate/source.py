"""A kernel file's text with its tokens: offsets of line:col positions, matching brackets,
the top-level arguments of a call and the extent of a statement, for edits in place."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

from neuronemu.errors import KernelSyntaxError, SourceSpan

__all__ = ["Argument", "Source"]

_NOT_CODE = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


@dataclass(frozen=True)
class Argument:
    """One argument of a call as written: `keyword` None for a positional one; `start`,
    `end` the offsets of its value's text."""

    keyword: str | None
    start: int
    end: int


class Source:
    """Positions in a file's text. The AST gives where a construct starts (its spans' ends
    leave out closing brackets); Python's tokenizer gives where its brackets close."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self._line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(i + 1)
        self.tokens: list[tokenize.TokenInfo] = []
        try:
            self.tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
            line = getattr(exc, "lineno", None) or (exc.args[1][0] if len(exc.args) > 1 else 1)
            raise KernelSyntaxError(
                f"cannot tokenize the file: {exc.args[0]}", SourceSpan(path, int(line), 1)
            ) from None
        self._starts = [self.offset(*t.start, one_based=False) for t in self.tokens]
        self.closing: dict[int, int] = {}  # offset of an opening bracket -> of its closing one
        self.top_commas: dict[int, list[int]] = {}  # opening bracket -> its own commas
        stack: list[int] = []
        for tok, at in zip(self.tokens, self._starts):
            if tok.type != tokenize.OP:
                continue
            if tok.string in "([{":
                stack.append(at)
                self.top_commas[at] = []
            elif tok.string in ")]}" and stack:
                self.closing[stack.pop()] = at
            elif tok.string == "," and stack:
                self.top_commas[stack[-1]].append(at)

    def offset(self, line: int, col: int, one_based: bool = True) -> int:
        """The text offset of a (1-based line, column) position; columns 1-based (as in
        spans) unless `one_based` is False (as in tokens). The tokenizer places its last
        tokens on the line after a file's last line when no newline ends it: its end."""
        if line > len(self._line_starts):
            return len(self.text)
        return self._line_starts[line - 1] + col - (1 if one_based else 0)

    def at(self, span: SourceSpan) -> int:
        return self.offset(span.line, span.col)

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line_start(self, offset: int) -> int:
        return self._line_starts[self.line_of(offset) - 1]

    def indent(self, offset: int) -> str:
        """The whitespace that opens the line of `offset`."""
        start = self.line_start(offset)
        end = start
        while end < len(self.text) and self.text[end] in " \t":
            end += 1
        return self.text[start:end]

    def begins_line(self, offset: int) -> bool:
        return self.text[self.line_start(offset) : offset].strip() == ""

    def _token_index(self, offset: int) -> int:
        lo, hi = 0, len(self._starts)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._starts[mid] < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def next_op(self, offset: int, op: str) -> int | None:
        """The offset of the first `op` token at or after `offset`."""
        for k in range(self._token_index(offset), len(self.tokens)):
            tok = self.tokens[k]
            if tok.type == tokenize.OP and tok.string == op:
                return self._starts[k]
        return None

    def call_parens(self, func_end: int) -> tuple[int, int] | None:
        """(open, close) offsets of the parentheses of a call whose callee ends at
        `func_end`."""
        opening = self.next_op(func_end, "(")
        if opening is None or opening not in self.closing:
            return None
        return opening, self.closing[opening]

    def arguments(self, opening: int) -> list[Argument]:
        """The arguments between a bracket at `opening` and its closing one."""
        close = self.closing[opening]
        bounds = [opening, *self.top_commas[opening], close]
        out = []
        for a, b in zip(bounds, bounds[1:]):
            start, end = a + 1, a + 1 + len(self.text[a + 1 : b].rstrip())
            while start < end:  # past blanks and comment lines before the argument
                if self.text[start] in " \t\r\n":
                    start += 1
                elif self.text[start] == "#":
                    newline = self.text.find("\n", start, end)
                    start = end if newline < 0 else newline + 1
                else:
                    break
            if start >= end:
                continue  # (after a trailing comma: nothing but comments)
            keyword = None
            name, eq, rest = self.text[start:end].partition("=")
            if eq and name.strip().isidentifier() and not rest.startswith("="):
                keyword = name.strip()
                start = start + len(name) + 1
                while self.text[start] in " \t\n":
                    start += 1
            out.append(Argument(keyword, start, self._code_end(start, b)))
        return out

    def _code_end(self, start: int, before: int) -> int:
        """The end of the last code token (not a comment) between `start` and `before`."""
        k = self._token_index(before) - 1
        while k >= 0 and self._starts[k] >= start:
            tok = self.tokens[k]
            if tok.type not in _NOT_CODE:
                return self.offset(*tok.end, one_based=False)
            k -= 1
        return start

    def statement_end(self, offset: int) -> int:
        """The offset just past the last code token of the logical line starting at
        `offset` (a trailing comment is not part of it)."""
        last = offset
        for k in range(self._token_index(offset), len(self.tokens)):
            tok = self.tokens[k]
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                break
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            last = self.offset(*tok.end, one_based=False)
        return last

    def span(self, offset: int) -> SourceSpan:
        line = self.line_of(offset)
        return SourceSpan(self.path, line, offset - self._line_starts[line - 1] + 1)
