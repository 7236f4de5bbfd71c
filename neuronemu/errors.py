"""Source spans and the user-facing error classes, with caret rendering."""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "neutral",
    "shown",
    "SourceSpan",
    "NeuronEmuError",
    "KernelSyntaxError",
    "KernelTypeError",
    "ConstraintError",
    "AllocationError",
    "MemoryAccessError",
    "RaceError",
    "MismatchError",
    "UsageError",
    "BudgetError",
    "InternalError",
    "register_source",
]

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict = 3, 8, 8, 6
_SHOWN.maxset = _SHOWN.maxfrozenset = _SHOWN.maxdeque = _SHOWN.maxarray = 8
_SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = 80, 40, 120


def shown(value: Any) -> str:
    """A value as messages quote it: its repr, abbreviated (a kernel's list may hold a
    billion elements through aliasing; quoting it must cost nothing), with no host address."""
    try:
        return neutral(_SHOWN.repr(value))
    except ValueError:  # (an int past Python's 4,300 digits of str)
        if isinstance(value, int):
            return f"<{type(value).__name__} of {value.bit_length():,} bits>"
        return f"<{type(value).__name__}>"


# `<list_iterator object at 0x7f3a...>`, `<function f at 0x...>`: where this process's
# memory lies, which neither a kernel's output nor its error messages may show.
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+\b")


def neutral(text: str) -> str:
    """`text` with the addresses of host objects' default reprs left out:
    `<list_iterator object>`, as CPython shows the object less its address."""
    return _ADDRESS.sub("", text) if " at 0x" in text else text


# Source text of every file the front end has read, so that any later stage (verifier,
# simulator) can quote the offending line without carrying the text around.
_SOURCES: dict[str, str] = {}
# A quoted source line longer than this is shown as a window around the error's column.
_CARET_LINE_CHARS = 160


def register_source(path: str, text: str) -> None:
    _SOURCES[path] = text


@dataclass(frozen=True)
class SourceSpan:
    """A 1-based line/column range in a kernel file."""

    path: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def source_line(self) -> str | None:
        text = _SOURCES.get(self.path)
        if text is None:
            return None
        lines = text.splitlines()
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1]
        return None

    def caret(self) -> str | None:
        """The source line and a caret (with tildes under the rest of a one-line span)."""
        line = self.source_line()
        if line is None:
            return None
        width = 1
        if self.end_line == self.line and self.end_col is not None and self.end_col > self.col:
            width = self.end_col - self.col
        col = self.col
        if len(line) > _CARET_LINE_CHARS:  # a window around the column, not a megabyte line
            start = max(0, min(col - 1 - _CARET_LINE_CHARS // 2, len(line) - _CARET_LINE_CHARS))
            line = (
                ("..." if start else "")
                + line[start : start + _CARET_LINE_CHARS]
                + ("..." if start + _CARET_LINE_CHARS < len(line) else "")
            )
            col = col - start + (3 if start else 0)
            width = min(width, _CARET_LINE_CHARS - (col - 1) + 3)
        pad = "".join(c if c == "\t" else " " for c in line[: col - 1])
        return f"{line}\n{pad}^{'~' * (width - 1)}"


_E = TypeVar("_E", bound="NeuronEmuError")


# The calls from other files an error shows on its way out (NeuronEmuError.add_caller).
MAX_CALLERS_SHOWN = 8


class NeuronEmuError(Exception):
    """A problem with the user's kernel or input; rendered as `path:line:col: error: ...`."""

    exit_code = 1

    def __init__(self, message: str, span: SourceSpan | None = None, hint: str | None = None):
        message, hint = neutral(message), None if hint is None else neutral(hint)
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    # The Python exception this error stands for at trace time (KeyError, ImportError...),
    # which a kernel's `try`/`except` may catch; None for neuronemu's own kinds (budgets,
    # hardware rules), which no kernel code can catch.
    python_error: str | None = None
    python_args: tuple | None = None  # that exception's args (default: the message)

    def as_python(self: _E, name: str, args: tuple | None = None) -> _E:
        """This error, marked as standing for Python's `name` exception."""
        self.python_error, self.python_args = name, args
        return self

    # Where calls from other files led to the error, innermost first: for an error in a
    # helper module, the kernel's line that called into it (Interpreter._run_body); at most
    # MAX_CALLERS_SHOWN, and how many more there were.
    called_from: tuple[SourceSpan, ...] = ()
    more_callers: int = 0

    def add_caller(self, span: SourceSpan) -> None:
        """A call at `span` led here: noted when it is in another file than the error and
        than the call last noted (the first line of each file on the way out)."""
        last = self.called_from[-1] if self.called_from else self.span
        if last is None or span.path == last.path:
            return
        if len(self.called_from) < MAX_CALLERS_SHOWN:
            self.called_from = (*self.called_from, span)
        else:
            self.more_callers += 1

    def raised_again(self) -> NeuronEmuError:
        """This error, raised again from another place (a deferred one): without the calls
        that led to it the last time."""
        self.called_from, self.more_callers = (), 0
        return self

    def render(self) -> str:
        head = f"{self.span}: error: {self.message}" if self.span else f"error: {self.message}"
        parts = [head]
        if self.span is not None:
            caret = self.span.caret()
            if caret:
                parts.append(caret)
        for caller in self.called_from:
            parts.append(f"{caller}: note: called from here")
            caret = caller.caret()
            if caret:
                parts.append(caret)
        if self.more_callers:
            parts.append(f"note: and {self.more_callers} more calls from other files")
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()


class KernelSyntaxError(NeuronEmuError):
    """The file is not valid Python, or uses Python outside the NKI subset."""


class KernelTypeError(NeuronEmuError):
    """A value of the wrong kind, an unknown name, a failed kernel `assert`."""


class ConstraintError(NeuronEmuError):
    """An instruction operand breaks a documented hardware rule."""


class AllocationError(NeuronEmuError):
    """SBUF or PSUM capacity, bank or alignment rules broken."""


class MemoryAccessError(NeuronEmuError):
    """Out-of-bounds or never-written memory accessed."""


class RaceError(NeuronEmuError):
    """Two instructions unordered by semaphores touch the same bytes."""


class MismatchError(NeuronEmuError):
    """Kernel outputs differ from the reference beyond tolerance: raised by
    `neuronemu.testing.assert_kernel_matches` (as an AssertionError too); `run` reports a
    mismatch in `Result.check` instead, and the CLI exits 1."""


class UsageError(NeuronEmuError):
    """Bad command-line input: a malformed SPEC, a missing input, an unknown option value."""

    exit_code = 2


class BudgetError(NeuronEmuError):
    """A run used up one of its budgets (`neuronemu.limits.Limits`): time, memory, sizes."""


class InternalError(Exception):
    """A neuronemu bug: never the user's fault, always reported with a traceback hint."""
