"""Python exceptions at trace time: the builtin classes a kernel can raise and catch, the
exceptions a kernel raises, and which of neuronemu's errors a kernel's `except` may catch.

A kernel's `raise` propagates as `Raised`, a located kernel error (uncaught, it reads
`path:line:col: error: ValueError: ...` at the raise). neuronemu's own errors are caught
only where they stand for a Python exception (a missing key, a failed import, an assert:
`NeuronEmuError.python_error`); budgets and hardware rules are never caught by kernel code.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan, shown
from neuronemu.trace.objects import UserClass, UserObject

__all__ = ["BUILTIN_EXCEPTIONS", "ExceptionClass", "KernelException", "Raised", "caught", "matches"]

_NAMES = (
    "BaseException Exception ArithmeticError AssertionError AttributeError ImportError "
    "IndexError KeyError LookupError ModuleNotFoundError NameError NotImplementedError "
    "OverflowError RuntimeError StopIteration TypeError ValueError ZeroDivisionError"
).split()


@dataclass(frozen=True)
class ExceptionClass:
    """A builtin exception class (`ValueError`) as a trace-time value."""

    name: str
    py: type[BaseException]

    def __repr__(self) -> str:
        return f"<class '{self.name}'>"


BUILTIN_EXCEPTIONS = {n: ExceptionClass(n, getattr(builtins, n)) for n in _NAMES}


@dataclass(eq=False)
class KernelException:
    """An exception value: `ValueError("bad")`, or an instance of a kernel's own exception
    class without an `__init__`."""

    cls: ExceptionClass | UserClass
    args: tuple[Any, ...]

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else str(self.args) if self.args else ""

    def __repr__(self) -> str:
        return f"{self.cls.name}({', '.join(repr(a) for a in self.args)})"


class Raised(KernelTypeError):
    """A kernel exception on its way up; uncaught, a located error at the `raise`."""

    def __init__(self, value: Any, span: SourceSpan):
        plain = isinstance(value, KernelException) or getattr(value, "exc_args", None) is not None
        text = str(value) if plain else shown(value)
        super().__init__(f"{class_of(value).name}: {text}" if text else class_of(value).name, span)
        self.value = value


def class_of(value: Any) -> ExceptionClass | UserClass:
    return value.cls


def builtin_base(cls: Any) -> ExceptionClass | None:
    """The builtin exception class a class derives from (itself, for a builtin one)."""
    if isinstance(cls, ExceptionClass):
        return cls
    if isinstance(cls, UserClass):  # along its resolution order: each class once
        for c in cls.order():
            for base in c.bases:
                if isinstance(base, ExceptionClass):
                    return base
    return None


def is_exception(value: Any) -> bool:
    """Can `value` be raised: an exception value, or an object of an exception class?"""
    return isinstance(value, (KernelException, UserObject)) and (
        builtin_base(value.cls) is not None
    )


def _derives(cls: Any, target: UserClass) -> bool:
    return cls is target or (isinstance(cls, UserClass) and target in cls.order())


def matches(value: Any, handler: Any, span: SourceSpan) -> bool:
    """Does `except handler:` catch `value` (handler a class or a tuple of classes)?"""
    if isinstance(handler, tuple):
        return any(matches(value, h, span) for h in handler)
    base = builtin_base(class_of(value))
    if isinstance(handler, ExceptionClass):
        return base is not None and issubclass(base.py, handler.py)
    if isinstance(handler, UserClass) and builtin_base(handler) is not None:
        return _derives(class_of(value), handler)
    raise KernelTypeError(
        f"catching classes that do not derive from BaseException is not allowed, got "
        f"{shown(handler)}",
        span,
    )


def caught(err: NeuronEmuError) -> Any:
    """The exception value a kernel's `except` sees for `err`, or None if kernel code may
    not catch it."""
    if isinstance(err, Raised):
        return err.value
    if err.python_error in BUILTIN_EXCEPTIONS:
        args = err.python_args if err.python_args is not None else (err.message,)
        return KernelException(BUILTIN_EXCEPTIONS[err.python_error], args)
    return None
