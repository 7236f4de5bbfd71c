"""The Builder's shared state: what its parts (builder.py's mixins: control flow, repeats, the
PSUM zero-init fold) know of the Builder and of one another, declared once for the type
checker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neuronemu.checks.accesses import History
from neuronemu.errors import SourceSpan
from neuronemu.ir import Tensor
from neuronemu.limits import Meter
from neuronemu.program import Instr, Loop
from neuronemu_isa import Engine, InstrSpec

__all__ = ["BuilderState"]


class BuilderState:
    """The base of the Builder and of each of its parts: the fields a part uses (Builder's
    __init__ sets them, where each is explained) and the methods one part calls on another.
    A field only one part uses is declared in that part."""

    meter: Meter
    instrs: list[Instr]
    tensors: list[Tensor]
    loops: list[Loop]
    cores: int
    no_reorder_depth: int
    _core: int
    _instance: int
    written: set[int]
    _history: dict[int, History]
    _uses: dict[int, list[int]]
    _stream_uses: dict[int, dict[str, list[int]]]
    _epoch: dict[int, int]
    _syncs: dict[int, list[list[Instr]]]
    _shared: list[Tensor]
    _barrier: tuple[int, ...]
    _past_barrier: set[str]
    _open: list[tuple[Loop, int]]
    _body_local: dict[int, Loop]

    if TYPE_CHECKING:  # the methods one part calls on another, defined where the comment says
        # builder.py
        def emit(
            self,
            spec: InstrSpec,
            engine: Engine,
            operands: dict[str, Any],
            attrs: dict[str, Any],
            span: SourceSpan,
            cycles: int | None = None,
            shared: Any = None,
        ) -> Instr: ...
        def _set_deps(self, ins: Instr, deps: set[int]) -> None: ...
        def _flag_names(self, spec: InstrSpec) -> tuple[str, ...]: ...

        # psum_init.py
        def flush_zero_fills(self) -> None: ...

        # neuronemu/replay/repeats.py
        def _replays_moved(self) -> None: ...
        def settle_all(self) -> None: ...
        def _share(self, ins: Instr, shared: Any) -> None: ...
        def drop_zero_fills(self, tile_ids: set[int]) -> None: ...
