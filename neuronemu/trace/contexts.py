"""`with` blocks: `nl.no_reorder()`, and context managers of the kernel's own classes
(`__enter__`/`__exit__`, the exception handed to `__exit__`, a true return suppressing it)."""

from __future__ import annotations

from typing import Any

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.replay import journal
from neuronemu.trace.exceptions import caught, matches
from neuronemu.trace.flow import Break, Continue, Return
from neuronemu.trace.lib.emit import NO_REORDER
from neuronemu.trace.objects import LibraryContext, UserObject
from neuronemu.trace.state import TracerState
from neuronemu.trace.values import Builtin

__all__ = ["Contexts"]


class Contexts(TracerState):
    """`with` statements of the tracer (see tracer.py)."""

    def with_items(self, s: A.With, i: int, env: Any) -> None:
        """Enter `s.items[i]`, then the items after it, then run the body (as Python nests
        `with a, b:` into `with a: with b:`)."""
        if i == len(s.items):
            self.exec_body(s.body, env)
            return
        expr, alias = s.items[i]
        manager = self.eval(expr, env)
        if manager is NO_REORDER and alias is None:
            # Dynamically scoped: everything traced under the block keeps program order.
            journal.refuse(self.meter, "a no_reorder block")
            self.builder.no_reorder_depth += 1
            try:
                self.with_items(s, i + 1, env)
            finally:
                self.builder.no_reorder_depth -= 1
            return
        enter, leave = self._protocol(manager, expr)
        value = self.call(enter, [], {}, expr.span)
        if alias is not None:
            self.assign(alias, value, env)
        try:
            self.with_items(s, i + 1, env)
        except (Return, Break, Continue):
            self.call(leave, [None, None, None], {}, expr.span)
            raise
        except NeuronEmuError as err:
            exc = caught(err)
            if exc is None:  # a budget or a hardware rule: no kernel code sees it
                raise
            self.handling.append(err)
            try:
                suppress = self.call(leave, [exc.cls, exc, None], {}, expr.span)
            finally:
                self.handling.pop()
            if not self.truth(suppress, expr.span):
                raise
        else:
            self.call(leave, [None, None, None], {}, expr.span)

    def _protocol(self, manager: Any, expr: A.Node) -> tuple[Any, Any]:
        if isinstance(manager, LibraryContext):
            return _library_protocol(manager)
        if isinstance(manager, UserObject):
            found_enter, _ = manager.cls.lookup("__enter__")
            found_exit, _ = manager.cls.lookup("__exit__")
            if found_enter and found_exit:
                return (
                    self.getattr(manager, "__enter__", expr.span),
                    self.getattr(manager, "__exit__", expr.span),
                )
        name = manager.cls.name if isinstance(manager, UserObject) else type(manager).__name__
        raise KernelTypeError(
            f"{name!r} object does not support the context manager protocol (with blocks take "
            "nl.no_reorder() or an object of a kernel class with __enter__ and __exit__)",
            expr.span,
        ).as_python("TypeError")


def _library_protocol(manager: LibraryContext) -> tuple[Builtin, Builtin]:
    """`__enter__` and `__exit__` of a contextlib manager, as CPython's contextlib runs them."""
    if manager.kind == "null":
        return (
            Builtin("nullcontext.__enter__", lambda span: manager.value),
            Builtin("nullcontext.__exit__", lambda span, *exc: False),
        )
    if manager.kind == "suppress":

        def leave_suppress(span: SourceSpan, et: Any, ev: Any, tb: Any) -> bool:
            return ev is not None and matches(ev, tuple(manager.value), span)

        return (
            Builtin("suppress.__enter__", lambda span: None),
            Builtin("suppress.__exit__", leave_suppress),
        )
    gen = manager.value

    def enter(span: SourceSpan) -> Any:
        try:
            return gen.send(None)
        except StopIteration:
            raise KernelTypeError("generator didn't yield", span).as_python(
                "RuntimeError"
            ) from None

    def leave(span: SourceSpan, et: Any, ev: Any, tb: Any) -> bool:
        if ev is None:
            try:
                gen.send(None)
            except StopIteration:
                return False
            raise KernelTypeError("generator didn't stop", span).as_python("RuntimeError")
        try:
            gen.throw(ev)
        except StopIteration:
            return True  # the generator caught it: the with block's exception is suppressed
        except NeuronEmuError as err:
            if caught(err) is ev:
                return False  # re-raised as it was: the with statement raises it
            raise
        raise KernelTypeError("generator didn't stop after throw()", span).as_python("RuntimeError")

    return Builtin("contextmanager.__enter__", enter), Builtin("contextmanager.__exit__", leave)
