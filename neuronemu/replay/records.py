"""What a replayed loop records of its repeats (neuronemu.replay.repeats makes them; the
program table, neuronemu.program.table, is the one reader outside replay/): the blocks of
instructions that repeat a base, and the forms the repeats of one instruction share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Form", "Repeated"]


class Form:
    """What the repeats of one instruction in a replayed loop share (`Instr.form`): a key for
    what depends on their form alone, and the names of the operands each role reads."""

    __slots__ = ("views", "_variants")

    def __init__(self) -> None:
        self.views: dict[str, list[tuple[str, bool]]] = {}  # role -> (name, is .index)
        self._variants: dict[tuple, Form] = {}

    def variant(self, flags: tuple) -> Form:
        """The form of the repeats whose accumulation flags, decided from what was written
        (`accumulate=None`), came out as `flags`: one per outcome."""
        if not flags:
            return self
        form = self._variants.get(flags)
        if form is None:
            form = self._variants[flags] = Form()
        return form


@dataclass(eq=False)
class Repeated:
    """Instructions [start, start + count * period) that repeat [base, base + period) (a
    replayed loop's iterations, neuronemu.replay.repeats): instruction j of repeat r is
    base + j's, its operands of tiles the iteration took at `ids[r, position]` (not the
    base's) and its moving views moved on by r + 1 steps."""

    base: int
    period: int
    count: int
    # per instruction of the period: operand -> (position of its tensor among the tiles an
    # iteration takes, or -1 for a tensor from before the loop; its move per dim per step)
    sources: list[dict[str, tuple[int, tuple[int, ...]]]]
    ids: np.ndarray  # (count, positions): the tensor ids each repeat took
    # per instruction of the period: its repeats have the base's attributes and operands of
    # the base's shapes, dtypes and buffers (its form: what its checks, costs, FLOPs and HBM
    # bytes depend on, but where operands start); False where an accumulation flag was
    # decided per repeat or a tile taken from a list differs from the base's
    alike: list[bool] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.base + self.period
