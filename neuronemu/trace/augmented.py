"""Augmented assignment (`target op= value`): a PSUM tile accumulated in place by the
instruction that computes into it, an on-chip tile updated by one instruction into it, and
trace-time values as CPython does them (the target's container and index evaluated once;
lists, dicts, sets and kernel objects changed in place)."""

from __future__ import annotations

import collections
import functools
import operator
from typing import Any

from neuronemu.errors import KernelTypeError, shown
from neuronemu.frontend import ast as A
from neuronemu.replay import journal
from neuronemu.trace import confine, nesting
from neuronemu.trace.expressions import _TILE_OPS
from neuronemu.trace.interpreter import _is_tensor
from neuronemu.trace.lib.assign import NO_FIT
from neuronemu.trace.lib.modules import import_module
from neuronemu.trace.objects import UserObject
from neuronemu.trace.state import Env, TracerState
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import BlockTensor, Builtin
from neuronemu_isa import Buffer

__all__ = ["Augmented"]

_IN_PLACE = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "<<": operator.ilshift,
    ">>": operator.irshift, "&": operator.iand, "|": operator.ior, "^": operator.ixor,
    "@": operator.imatmul,
}  # fmt: skip
_CONTAINER_TYPES = (list, dict, set, collections.deque)
_IN_PLACE_TYPES = (*_CONTAINER_TYPES, UserObject)


class Augmented(TracerState):
    """Augmented assignment of the tracer (see tracer.py)."""

    def _s_AugAssign(self, s: A.AugAssign, env: Env) -> None:
        target, holder, key = s.target, None, None
        if isinstance(target, A.Subscript):
            holder, key = self.eval(target.value, env), self.eval(target.index, env)
            current = self._subscript(holder, key, target.span)
        elif isinstance(target, A.Attribute):
            holder = self.eval(target.value, env)
            current = self.getattr(holder, target.attr, target.span)
        else:
            current = self.eval(target, env)
        if self._accumulated(s, current, env):
            return  # accumulated in place: the target names the same tile
        operand = self.eval(s.value, env)
        if self._updated_in_place(s, holder, current, operand):
            return
        if isinstance(current, _IN_PLACE_TYPES) and s.op in _IN_PLACE and not _is_tensor(holder):
            journal.refuse(self.meter, "an in-place operator")
            confine.check_binop(self.meter, s.op, current, operand, s.span)
            nesting.mutated(self.meter, current)
            try:
                value = _IN_PLACE[s.op](current, operand)
            except (TypeError, ValueError) as exc:
                raise KernelTypeError(f"operator {shown(s.op + '=')}: {exc}", s.span).as_python(
                    type(exc).__name__, exc.args
                ) from None
            if isinstance(current, _CONTAINER_TYPES):
                nesting.check_made(self.meter, current, s.span)
        else:
            value = self.binop(s.op, current, operand, s.span)
        if isinstance(target, A.Subscript) and not _is_tensor(holder):
            self.set_item(holder, key, value, target.span)
        elif isinstance(target, A.Attribute):
            journal.attribute_set(self.meter, holder)
            self.set_attribute(holder, target.attr, value, target.span)
        else:
            self.assign(target, value, env)

    def _updated_in_place(self, s: A.AugAssign, holder: Any, current: Any, operand: Any) -> bool:
        """`t[...] op= v` on an SBUF or PSUM tile (the write-in-place pass): `t[...] =
        nl.op(t[...], v)`, written straight into the slice as any nl.* call assigned to one
        is (nki.isa.tensor_tensor computes in fp32 and casts on writing its output tile), not
        into a new tile copied back."""
        if not (
            self.builder.write_in_place
            and isinstance(s.target, A.Subscript)
            and _is_tensor(holder)
            and _is_tensor(current)
            and s.op in _TILE_OPS
        ):
            return False
        view = as_view(current)
        if view is None or view.buffer == Buffer.HBM:
            return False
        fn = import_module(self, "nki.language", s.span).members[_TILE_OPS[s.op]]
        if not getattr(fn.call, "takes_into", False):
            return False
        return fn.call(s.span, current, operand, _into=view) is not NO_FIT

    def _accumulated(self, s: A.AugAssign, current: Any, env: Env) -> bool:
        """`psum_tile += nisa.nc_matmul(...)` (an instruction that can accumulate): done by
        the instruction, into the tile."""
        if not (
            s.op == "+"
            and isinstance(s.value, A.Call)
            and _is_tensor(current)
            and not isinstance(current, BlockTensor)
        ):
            return False
        target = as_view(current)
        func = self.eval(s.value.func, env)
        if not (
            target is not None
            and target.buffer == Buffer.PSUM
            and isinstance(func, Builtin)
            and func.accumulate is not None
        ):
            return False
        args, kwargs = self._arguments(s.value, env)
        self.library_call(
            func.name,
            functools.partial(func.accumulate, s.value.span, target),
            s.value.span,
            args,
            kwargs,
            func.check_arguments,
        )
        return True
