"""Generator functions at trace time: a kernel function whose body yields runs, when iterated,
in a thread of its own that hands each value over and waits, so that its statements (and the
instructions they emit) interleave with the consumer's exactly as Python's would.

One thread runs at a time: the consumer waits while the generator runs and the other way
round, so the tracer's state is never touched by two at once. A generator left unfinished is
closed when the trace ends (its `finally` blocks run, as when Python collects it), or, when
the trace failed, aborted (unwound without running more kernel code). Resuming a generator
that is running (two that resume each other) is Python's ValueError, never a wait.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.trace import nesting
from neuronemu.trace.exceptions import (
    BUILTIN_EXCEPTIONS,
    ExceptionClass,
    KernelException,
    Raised,
    caught,
    is_exception,
)
from neuronemu.trace.objects import iterate

__all__ = ["KernelGenerator", "Abort", "is_generator_function", "current", "expression", "MAX_LIVE"]

# Generators alive at once (each holds a waiting thread); inferred, far above what kernels
# use, and low enough that a runaway stays cheap.
MAX_LIVE = 64
# Trace-time steps (the loop_iterations budget) one resume costs: a thread hand-over is
# ~15 us, some 20 loop iterations' worth, so a runaway generator meets the budget as soon.
RESUME_STEPS = 16
# Each generator thread's stack: deep enough for the tracer's recursion limit.
# (The main thread's is 8 MiB under the usual `ulimit -s`.)
_STACK_BYTES = 16 << 20

_local = threading.local()


def current() -> KernelGenerator | None:
    """The generator whose body this thread runs (None in the main trace)."""
    return getattr(_local, "generator", None)


def is_generator_function(fn: A.FunctionDef) -> bool:
    """Does `fn`'s own body (not a nested def, class or lambda) contain a `yield`?"""
    stack: list[Any] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (A.Yield, A.YieldFrom)):
            return True
        if isinstance(node, (A.FunctionDef, A.ClassDef, A.Lambda)):
            continue
        if isinstance(node, A.Node):
            stack.extend(getattr(node, f) for f in node.__dataclass_fields__ if f != "span")
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
    return False


class Abort(BaseException):
    """Sent into a suspended generator to unwind it without running its `finally` blocks
    (the trace has failed: no more kernel code runs)."""


class KernelGenerator:
    """The iterator a generator function's call returns."""

    def __init__(
        self,
        name: str,
        run: Callable[[], Any],
        live: list[KernelGenerator],
        charge: Callable[[int], None],
        span: SourceSpan,
    ):
        self.name = name
        self.span = span  # where the generator function was called
        self._charge = charge
        self._run = run
        self._live = live
        self._thread: threading.Thread | None = None
        self._channels: tuple[queue.Queue[str], queue.Queue[tuple[str, Any]]] | None = None
        self._done = False
        self._running = False  # its body runs (or waits on a generator it resumed)
        self._sent: Any = None  # what `send()` passes: the value of the `yield` it resumes
        self._thrown: Any = None  # what `throw()` raises there
        charge(RESUME_STEPS)  # making one is work too (a kernel may make many, and drop them)

    @property
    def _to_gen(self) -> queue.Queue[str]:
        assert self._channels is not None, "the generator has not started"
        return self._channels[0]

    @property
    def _from_gen(self) -> queue.Queue[tuple[str, Any]]:
        assert self._channels is not None, "the generator has not started"
        return self._channels[1]

    def __repr__(self) -> str:
        return f"<generator object {self.name}>"

    def __iter__(self) -> KernelGenerator:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, sent: Any) -> Any:
        """Resume the generator; its paused `yield` evaluates to `sent`."""
        if sent is not None and self._thread is None and not self._done:
            raise KernelTypeError(
                "can't send non-None value to a just-started generator", self.span
            ).as_python("TypeError")
        if self._done:
            raise StopIteration
        self._charge(RESUME_STEPS)
        if self._running:  # itself, or one that resumed the generator resuming it
            raise KernelTypeError(f"generator {self.name} is already running", self.span).as_python(
                "ValueError", ("generator already executing",)
            )
        self._sent = sent
        kind, value = self._resume("next")
        if kind == "yield":
            return value
        self._finish()
        if kind == "raise":
            raise value
        raise StopIteration(value)

    def throw(self, exc: Any) -> Any:
        """Raise `exc` (an exception value, or a class to call) at the paused `yield`, as
        `generator.throw` does; the generator's next value, or what it raises."""
        if isinstance(exc, (ExceptionClass,)):
            exc = KernelException(exc, ())
        if not is_exception(exc):
            raise KernelTypeError("throw() argument must be an exception", self.span).as_python(
                "TypeError"
            )
        if self._thread is None or self._done:  # not started, or finished: raised here
            self._finish()
            raise Raised(exc, self.span)
        self._charge(RESUME_STEPS)
        self._thrown = exc
        kind, value = self._resume("throw")
        if kind == "yield":
            return value
        self._finish()
        if kind == "raise":
            raise value
        raise StopIteration(value)

    def _resume(self, command: str) -> tuple[str, Any]:
        self._running = True
        try:
            if self._thread is None:
                self._start()
            else:
                self._to_gen.put(command)
            return self._from_gen.get()
        finally:
            self._running = False

    def close(self, called: bool = False) -> None:
        """Unwind a suspended generator (its `finally` blocks run). The kernel's own
        exceptions they raise are dropped, as Python drops them when it collects a
        generator; a budget (or another error kernel code cannot catch) is raised.
        `called`: by the kernel's `g.close()`, where one that yields again is CPython's
        RuntimeError (it is not run further)."""
        kind, value = "", None
        if self._thread is not None and not self._done:
            kind = "yield"
            try:
                while kind == "yield":  # a finally block that yields again is closed again
                    self._charge(RESUME_STEPS)
                    kind, value = self._resume("close")
                    if kind == "yield" and called:
                        raise RuntimeError("generator ignored GeneratorExit")
            except BaseException:
                self.abort()
                raise
        self._finish()
        if kind == "raise" and isinstance(value, NeuronEmuError) and caught(value) is None:
            raise value

    def abort(self) -> None:
        """Unwind a suspended generator without running any more of its code."""
        if self._running:  # (never: one thread runs at a time, and the caller is that one)
            return
        if self._thread is not None and not self._done:
            self._to_gen.put("abort")
            self._from_gen.get()
        self._finish()

    def suspend(self, value: Any) -> Any:
        """Called in the generator's thread at a `yield`: hand `value` over and wait; the
        value sent when it resumes (None for `next()`)."""
        self._from_gen.put(("yield", value))
        command = self._to_gen.get()
        if command == "close":  # GeneratorExit at the yield: its code may see it
            raise Raised(KernelException(BUILTIN_EXCEPTIONS["GeneratorExit"], ()), self.span)
        if command == "abort":
            raise Abort
        if command == "throw":
            thrown, self._thrown = self._thrown, None
            raise Raised(thrown, self.span)
        sent, self._sent = self._sent, None
        return sent

    def delegate(self, inner: Any, step: Callable[[], None]) -> Any:
        """`yield from inner` in this generator's body: each of inner's values is yielded,
        each value sent goes on to inner (a kernel generator), and inner's return value is
        the expression's. Closing this generator closes inner first, as Python does."""
        sent = None
        while True:
            step()
            try:
                item = inner.send(sent) if isinstance(inner, KernelGenerator) else next(inner)
            except StopIteration as stop:
                return stop.value
            try:
                sent = self.suspend(item)
            except Raised as exit:
                if _is_exit(exit) and isinstance(inner, KernelGenerator):
                    inner.close()
                raise

    def _start(self) -> None:
        if len(self._live) >= MAX_LIVE:
            raise KernelTypeError(
                f"more than {MAX_LIVE} generators are suspended at once; finish or drop some",
                self.span,
            )
        self._live.append(self)
        self._channels = (queue.Queue(maxsize=1), queue.Queue(maxsize=1))  # made when it runs

        def body() -> None:
            _local.generator = self
            try:
                result = ("return", self._run())
            except Abort:
                result = ("closed", None)
            except Raised as exc:  # GeneratorExit out of its body: closed, as it should be
                result = ("closed", None) if _is_exit(exc) else ("raise", exc)
            except BaseException as exc:  # handed to the consumer, who raises it
                result = ("raise", exc)
            self._from_gen.put(result)

        saved = threading.stack_size()
        threading.stack_size(_STACK_BYTES)
        try:
            thread = threading.Thread(target=body, name=f"kernel-{self.name}", daemon=True)
            thread.start()
            self._thread = thread
        except RuntimeError as exc:  # no thread to be had (address space, process limits)
            self._live.remove(self)
            raise KernelTypeError(
                f"generator {self.name}: cannot start ({exc})", self.span
            ) from None
        finally:
            threading.stack_size(saved)

    def _finish(self) -> None:
        self._done = True
        if self in self._live:
            self._live.remove(self)
        if self._thread is not None:
            self._thread.join()


def expression(tracer: Any, e: A.Comprehension, local: Any) -> Any:
    """`(elt for ...)`: lazy, as CPython's (its first iterable evaluated now, the rest as
    items are taken; each item a step), run by `tracer` in `local`. (In an iteration being
    recorded for a replay the tracer makes it at once instead: the replay compares items.)"""

    def items(level: int, iterable: Any) -> Any:
        for item in iterate(iterable, e.iters[level].span):
            tracer._count_iteration(e.span)
            tracer.assign(e.targets[level], item, local)
            cond = e.conds[level]
            if cond is None or tracer.truth(tracer.eval(cond, local), cond.span):
                if level + 1 == len(e.iters):
                    yield tracer.eval(e.elt, local)
                else:
                    yield from items(level + 1, tracer.eval(e.iters[level + 1], local))

    first = tracer.eval(e.iters[0], local)
    made = items(0, first)
    nesting.check_chained(tracer.meter, made, (first,), e.span, "a generator expression")
    return made


def _is_exit(err: Raised) -> bool:
    """Is `err` the GeneratorExit close() raises at a yield (or one kernel code raised)?"""
    return getattr(err.value, "cls", None) is BUILTIN_EXCEPTIONS["GeneratorExit"]


def not_in_generator(span: SourceSpan) -> KernelTypeError:
    return KernelTypeError("'yield' outside a generator function", span)
