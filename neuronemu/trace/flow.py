"""Statements that leave a block early: `return`, `break`, `continue`, `raise`, `assert`, and
`try` (whose handlers catch only what kernel code may catch).

An error kernel code cannot catch (a budget, a hardware rule) goes on past every `finally`:
a `return`, `break` or `continue` there, or an exception the kernel raises there, never
replaces it; after a budget the `finally` blocks do not run at all (the run is over, and
more kernel code would only spend more).
"""

from __future__ import annotations

from typing import Any

from neuronemu.errors import BudgetError, KernelTypeError, NeuronEmuError, shown
from neuronemu.frontend import ast as A
from neuronemu.trace import confine, nesting
from neuronemu.trace.exceptions import ExceptionClass, Raised, caught, is_exception, matches
from neuronemu.trace.generators import Abort
from neuronemu.trace.objects import UserClass
from neuronemu.trace.scopes import UNBOUND
from neuronemu.trace.state import TracerState

__all__ = ["Return", "Break", "Continue", "Flow"]


class Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class Break(Exception):
    pass


class Continue(Exception):
    pass


def _final(exc: BaseException) -> bool:
    """Is `exc` the end of the run, so that no more kernel code runs on its way out?"""
    return isinstance(exc, (BudgetError, Abort))


def _uncatchable(exc: BaseException) -> bool:
    return isinstance(exc, NeuronEmuError) and caught(exc) is None


class Flow(TracerState):
    """`return`, `break`, `continue`, `raise`, `assert` and `try` (see tracer.py)."""

    def _s_Break(self, s: A.Break, env: Any) -> None:
        raise Break()

    def _s_Continue(self, s: A.Continue, env: Any) -> None:
        raise Continue()

    def _s_Return(self, s: A.Return, env: Any) -> None:
        raise Return(None if s.value is None else self.eval(s.value, env))

    def _s_Assert(self, s: A.Assert, env: Any) -> None:
        if not self.truth(self.eval(s.test, env), s.test.span):
            msg = "" if s.msg is None else confine.text(self.meter, self.eval(s.msg, env), s.span)
            error = KernelTypeError(f"assertion failed{': ' + msg if msg else ''}", s.span)
            raise error.as_python("AssertionError", (msg,) if msg else ())

    def _s_Raise(self, s: A.Raise, env: Any) -> None:
        if s.exc is None:
            if not self.handling:
                raise KernelTypeError("no active exception to re-raise", s.span)
            raise self.handling[-1]
        value = self.eval(s.exc, env)
        if isinstance(value, (ExceptionClass, UserClass)):
            value = self.call(value, [], {}, s.span)  # `raise ValueError`
        if not is_exception(value):
            raise KernelTypeError(
                f"exceptions must derive from BaseException, got {shown(value)}", s.span
            )
        if s.cause is not None:  # `from e` (or `from None`: no cause, no context shown)
            cause = self.eval(s.cause, env)
            if isinstance(cause, (ExceptionClass, UserClass)):
                cause = self.call(cause, [], {}, s.cause.span)
            if cause is not None and not is_exception(cause):
                raise KernelTypeError(
                    "exception causes must derive from BaseException", s.cause.span
                ).as_python("TypeError")
            value.cause, value.suppress_context = cause, True
        nesting.check_text(self.meter, value, s.span)  # its message is made now
        raise Raised(value, s.span)

    def _s_Try(self, s: A.Try, env: Any) -> None:
        try:
            self._try_body(s, env)
        except BaseException as exc:
            if _final(exc):
                raise
            if not _uncatchable(exc):
                self.exec_body(s.finalbody, env)  # its return/break/raise replaces exc
                raise
            try:
                self.exec_body(s.finalbody, env)
            except (Return, Break, Continue):
                raise exc from None
            except BaseException as later:
                if _final(later) or _uncatchable(later):
                    raise
                raise exc from None
            raise
        self.exec_body(s.finalbody, env)

    def _try_body(self, s: A.Try, env: Any) -> None:
        try:
            self.trying += 1
            try:
                self.exec_body(s.body, env)
            finally:
                self.trying -= 1
        except NeuronEmuError as err:
            value = caught(err)
            handler = None if value is None else self._handler(s.handlers, value, env)
            if handler is None:
                raise
            if handler.name is not None:
                env.bind(handler.name, value)
            self.handling.append(err)
            try:
                self.exec_body(handler.body, env)
            except NeuronEmuError as inner:  # raised while handling: `value` is its context
                if inner is not err and getattr(inner, "kernel_context", None) is None:
                    inner.kernel_context = value  # type: ignore[attr-defined]
                raise
            finally:
                self.handling.pop()
                if handler.name is not None:  # `except E as e`: e is deleted, as in CPython
                    if env.vars.pop(handler.name, None) is not None and env is not self.globals:
                        env.vars[handler.name] = UNBOUND  # (a function's local, unbound again)
        else:
            self.exec_body(s.orelse, env)

    def _handler(
        self, handlers: tuple[A.ExceptHandler, ...], value: Any, env: Any
    ) -> A.ExceptHandler | None:
        for h in handlers:
            if h.type is None or matches(value, self.eval(h.type, env), h.type.span):
                return h
        return None
