"""Loops of the kernel's meta-program: `for` and `while` unrolled (a loop whose iterations
repeat is replayed, neuronemu.replay.templates), device loops traced once, and the loops
older NKI traces once (OnePass)."""

from __future__ import annotations

from typing import Any

from neuronemu.errors import KernelTypeError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.replay import journal, templates
from neuronemu.trace.flow import Break as _Break
from neuronemu.trace.flow import Continue as _Continue
from neuronemu.trace.flow import Return as _Return
from neuronemu.trace.lib import nl_control
from neuronemu.trace.objects import iterate
from neuronemu.trace.state import Env, TracerState
from neuronemu.trace.values import BlockTensor, DeviceRange, Scalar, is_tensor_like

__all__ = ["Loops", "OnePass", "ONE_PASS_RANGES_KEPT"]


# How many of the latest one-pass ranges are known as such (a range made, kept and iterated
# later: `r = nl.affine_range(n)` ... `for i in r:`); older ones are iterated as Python's.
ONE_PASS_RANGES_KEPT = 1024


def is_number(value: Any) -> bool:
    """An int or float (the loop variable's marked ints too), not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class OnePass:
    """A loop older NKI traces once: over the range `nl.affine_range` or `nl.sequential_range`
    (or `nl.dynamic_range` with int bounds) made, under `neuronxcc.nki`. The compiler runs the
    body's Python a single time and the device repeats what it recorded, so a number the body
    advances (`cur_addr += size`, the allocation offsets of nki-samples' allocated kernels)
    advances once, not once per iteration. neuronemu runs every iteration, each from the
    int and float locals of the function the first began with; after the loop they hold what
    the last pass left (what one pass leaves, unless it computed them from the loop
    variable). Numbers kept elsewhere (a container, a global) are not reset; a loop over
    `enumerate(nl.affine_range(n))` or a list of it is Python's.
    (NKI 0.7 made these ranges Python's `range`, unrolled: its kernels are not affected.)"""

    __slots__ = ("saved", "passes")

    def __init__(self, loop: A.For, env: Env):
        self.passes = 0
        targets = templates.target_names(loop.target)
        self.saved = {
            name: value
            for name, value in env.vars.items()
            if is_number(value) and name not in targets
        }

    def begin(self, env: Env) -> None:
        """An iteration starts: after the first, from the numbers the first began with
        (only those the last pass changed are bound again: a replay watches bindings)."""
        if self.passes:
            current = env.vars
            for name, value in self.saved.items():
                if current.get(name) is not value:
                    current[name] = value
        self.passes += 1


class Loops(TracerState):
    """`for` and `while` statements of the tracer (see tracer.py)."""

    templates: bool  # replay loops whose iterations match
    # The one-pass loops being run, by (loop, scope): a generator suspended inside one
    # leaves it open while other loops run.
    one_pass: dict[tuple[int, int], OnePass]

    def note_one_pass(self, made: range) -> None:
        """A loop over `made` is traced once (lib/context.py); the latest
        ONE_PASS_RANGES_KEPT such ranges are known."""
        kept = self.traced_once
        kept[id(made)] = made
        if len(kept) > ONE_PASS_RANGES_KEPT:
            del kept[next(iter(kept))]

    def _s_For(self, s: A.For, env: Env) -> None:
        iterable = self.eval(s.iter, env)
        if self.traced_once.get(id(iterable)) is not iterable:
            self._for(s, env, iterable)
            return
        key = (id(s), id(env))
        self.one_pass[key] = OnePass(s, env)
        try:
            self._for(s, env, iterable)
        finally:
            del self.one_pass[key]

    def _for(self, s: A.For, env: Env, iterable: Any) -> None:
        if isinstance(iterable, DeviceRange):
            var = nl_control.open_for(self, s.span, iterable.start, iterable.stop, iterable.step)
            self.assign(s.target, var, env)
            self._device_body(s, env)
            return
        if is_tensor_like(iterable) or isinstance(iterable, BlockTensor):
            raise KernelTypeError("cannot iterate over a tensor at trace time", s.iter.span)
        if self.meter.journals:
            journal.iterate(self.meter, iterable)
        if self.templates and isinstance(iterable, range) and len(iterable) >= templates.MIN_TRIPS:
            if self._templated(s, env, iterable):
                self.exec_body(s.orelse, env)
            return
        for item in iterate(iterable, s.iter.span):
            self.assign(s.target, item, env)
            if not self._iteration(s, env):
                return
        self.exec_body(s.orelse, env)

    def _s_While(self, s: A.While, env: Env) -> None:
        test = self.eval(s.test, env)
        if isinstance(test, Scalar) and test.older:  # `while reg:` (older NKI): on the device
            nl_control.open_while(self, s.span, test)
            self._device_body(s, env, retest=True)
            return
        while self.truth(test, s.test.span):
            if not self._iteration(s, env):
                return
            test = self.eval(s.test, env)
        self.exec_body(s.orelse, env)

    def _device_body(self, loop: A.For | A.While, env: Env, retest: bool = False) -> None:
        """The body of a device loop, traced once; `retest`: a `while` loop, whose test is
        traced again at the end of the body (the register the next pass is decided on)."""
        if loop.orelse:
            nl_control.abandon(self)
            raise KernelTypeError("a device loop cannot have an else: block", loop.span)
        try:
            self.exec_body(loop.body, env)
            cond = None
            if retest:
                assert isinstance(loop, A.While)
                again = self.eval(loop.test, env)
                if not isinstance(again, Scalar):
                    raise KernelTypeError(
                        "the condition of a device `while` must stay a register", loop.test.span
                    )
                cond = again.view
        except (_Break, _Continue, _Return):
            nl_control.abandon(self)
            raise KernelTypeError(
                "break, continue and return cannot leave a device loop's body (its trip "
                "count is decided when the kernel runs)",
                loop.span,
            ) from None
        except BaseException:
            nl_control.abandon(self)
            raise
        nl_control.close(self, cond)

    def _iteration(self, loop: A.For | A.While, env: Env) -> bool:
        """One pass of a loop body; False when it breaks out."""
        self._count_iteration(loop.span)
        if self.one_pass:
            once = self.one_pass.get((id(loop), id(env)))
            if once is not None:
                once.begin(env)
        try:
            self.exec_body(loop.body, env)
        except _Break:
            return False
        except _Continue:
            pass
        return True

    def _count_iteration(self, span: SourceSpan) -> None:
        self.meter.step(span)
