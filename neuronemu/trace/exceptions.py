"""Python exceptions at trace time: the builtin classes a kernel can raise and catch, the
exceptions a kernel raises, and which of neuronemu's errors a kernel's `except` may catch.

A kernel's `raise` propagates as `Raised`, a located kernel error (uncaught, it reads
`path:line:col: error: ValueError: ...` at the raise). neuronemu's own errors are caught
only where they stand for a Python exception (a missing key, a failed import, an assert:
`NeuronEmuError.python_error`); budgets and hardware rules are never caught by kernel code.
"""

from __future__ import annotations

import builtins
import dataclasses
from dataclasses import dataclass
from typing import Any

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan, shown
from neuronemu.trace.objects import UserClass, UserObject

__all__ = ["BUILTIN_EXCEPTIONS", "ExceptionClass", "KernelException", "Raised", "caught", "matches"]

_NAMES = (
    "BaseException Exception GeneratorExit ArithmeticError AssertionError AttributeError "
    "ImportError IndexError KeyError LookupError ModuleNotFoundError NameError NotImplementedError "
    "OverflowError RuntimeError StopIteration TypeError UnboundLocalError ValueError "
    "ZeroDivisionError"
).split()


@dataclass(frozen=True)
class ExceptionClass:
    """A builtin exception class (`ValueError`) as a trace-time value."""

    name: str
    py: type[BaseException]

    def __repr__(self) -> str:
        return f"<class '{self.name}'>"


BUILTIN_EXCEPTIONS = {n: ExceptionClass(n, getattr(builtins, n)) for n in _NAMES}
# dataclasses' error for a frozen instance's field set (an AttributeError).
FROZEN_INSTANCE_ERROR = ExceptionClass("FrozenInstanceError", dataclasses.FrozenInstanceError)


@dataclass(eq=False)
class KernelException:
    """An exception value: `ValueError("bad")`, or an instance of a kernel's own exception
    class without an `__init__`."""

    cls: ExceptionClass | UserClass
    args: tuple[Any, ...]
    # Its chain, as CPython keeps it: `raise ... from cause`, and the exception being handled
    # when it was raised.
    cause: Any = None
    context: Any = None
    suppress_context: bool = False

    def __str__(self) -> str:
        return exception_text(self.cls, self.args)

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
    not catch it; its `__context__` is the exception that was being handled where `err`
    was raised."""
    value: Any = None
    if isinstance(err, Raised):
        value = err.value
    elif err.python_error in BUILTIN_EXCEPTIONS:
        args = err.python_args if err.python_args is not None else (err.message,)
        value = KernelException(BUILTIN_EXCEPTIONS[err.python_error], args)
    context = getattr(err, "kernel_context", None)
    if value is not None and context is not None and context is not value:
        if getattr(value, "context", None) is None:
            value.context = context
    return value


def exception_text(cls: Any, args: tuple[Any, ...]) -> str:
    """`str()` of an exception: its one argument (a KeyError's repr of it), or its args."""
    if len(args) == 1:
        base = builtin_base(cls)
        return repr(args[0]) if base is not None and issubclass(base.py, KeyError) else str(args[0])
    return str(args) if args else ""


def exception_attr(value: Any, attr: str) -> tuple[bool, Any]:
    """The chain attributes of an exception value, and a StopIteration's `value`."""
    if attr == "__cause__":
        return True, value.cause
    if attr == "__context__":
        return True, value.context
    if attr == "__suppress_context__":
        return True, value.suppress_context
    if attr == "value" and builtin_base(value.cls) is BUILTIN_EXCEPTIONS.get("StopIteration"):
        args = value.args if isinstance(value, KernelException) else value.exc_args
        return True, args[0] if args else None
    return False, None
