"""The instructions a replayed loop makes from its base (neuronemu.replay.repeats), with their
views made late."""

from __future__ import annotations

from typing import Any

from neuronemu.errors import SourceSpan
from neuronemu.ir import Tensor, View
from neuronemu.program import Instr
from neuronemu.replay.records import Form
from neuronemu_isa import Engine, InstrSpec

__all__ = ["LateInstr"]


class LateInstr(Instr):
    """An instruction a replayed loop made from its base (neuronemu.replay.repeats) whose
    views of the iteration's own tiles are made when first asked for: making them was most
    of a replay's time, and the passes that take a repeated block as one (`Repeated`) or
    ask only for a view's tensor, bounds, start or one operand (`tensor_of`, `bounds_of`,
    `start_of`, `operand`) never need them all. `_late`: (the recipe of every operand, in
    order: (name, value, None) or (name, None, maker); the iteration's step; its tensors;
    per operand not made yet, (its maker, its tensor's maker, its bounds as a function of
    the step, or None)), None once made; `_operands`: the operands made so far."""

    _operands: dict[str, View | float | None]
    _late: tuple | None

    @classmethod
    def made(
        cls,
        base: Instr,
        index: int,
        kind: tuple[InstrSpec, Engine, SourceSpan],
        operands: dict,
        attrs: dict,
        form: Form | None,
        late: tuple,
    ) -> LateInstr:
        """Instruction `index` of `kind` (spec, engine, source), a repeat of `base` (its
        queue, costs and core) with these attributes and form, its operands `operands` and,
        to be made, `late`; no dependencies yet. (Made directly: Instr's __init__ would set
        `operands` through the property.)"""
        ins = object.__new__(cls)
        # (set one by one, in the same order for all: their dicts then share one key table,
        # as those a class's __init__ makes do: made by dict.update they held 24 MB more
        # on the 100k matmul)
        ins.index = index
        ins.spec, ins.engine, ins.span = kind
        ins._operands = operands
        ins._late = late
        ins.attrs = attrs
        ins.queue = base.queue
        ins.cycles = base.cycles
        ins.ns = base.ns
        ins.deps = ins.waits = ins.carried = ()
        ins.core = base.core
        ins.epoch = base.epoch
        ins.form = form
        return ins

    @property
    def operands(self) -> dict[str, View | float | None]:
        late = self._late
        if late is not None:
            recipe, s, tensors, _ = late
            have = self._operands
            self._operands = {
                k: v if make is None else have[k] if k in have else make(s, tensors)
                for k, v, make in recipe
            }
            self._late = None
        return self._operands

    @operands.setter
    def operands(self, value: dict[str, View | float | None]) -> None:
        self._operands = value
        self._late = None

    def __getstate__(self) -> dict[str, Any]:
        self.operands  # noqa: B018  (the recipe's makers are closures: the views go instead)
        return dict(self.__dict__)

    def operand(self, name: str) -> Any:
        late = self._late
        if late is None or (made := late[3].get(name)) is None:  # (made, or made at once)
            return self._operands.get(name)
        return made[0](late[1], late[2])

    def tensor_of(self, name: str) -> Tensor | None:
        late = self._late
        if late is None or (made := late[3].get(name)) is None:
            return super().tensor_of(name)
        return made[1](late[1], late[2])

    def start_of(self, name: str) -> int:
        return self.bounds_of(name)[0][0]

    def bounds_of(self, name: str) -> tuple[tuple[int, int], ...]:
        late = self._late
        if late is None or (made := late[3].get(name)) is None or made[2] is None:
            return self.operand(name).bounds()
        return made[2](late[1])
