"""The NKI compiler's PSUM zero-init: `nl.zeros(..., buffer=nl.psum)` starts a matmul
accumulation group, whose first matmul overwrites the bank instead of adding to zeros.

Ref: nki/guides/architecture/trainium_inferentia2_arch.rst (PSUM accumulation): "the first
nki.isa.nc_matmul instruction overwrites the destination PSUM bank", with `nl.zeros(...,
buffer=nl.psum)` followed by matmuls into it as the pattern that makes such a group; "with 8
PSUM banks per partition, TensorE can have up to eight outstanding matmul accumulation
groups ... TensorE can move onto the next accumulation group without waiting for
VectorE/ScalarE to evict previous accumulation group results". A memset on the Vector engine
would instead put every group behind the previous group's eviction (the engine runs in order).

So the zero fill of a PSUM tile is held back: if the first instruction to touch the tile is a
matmul that writes all of it and would add to it, that matmul overwrites and no fill is
emitted (0 + x is x: the values are those of the fill); anything else touching it first gets
the fill emitted just before it. A fill is never held across a device loop's edge, a core
or an SPMD instance (`flush_zero_fills`), but a tile made in a device loop's body and not
touched there after its `nl.zeros` is dead (nothing after the loop may use it, NKI Loops):
its fill is dropped at the loop's end, so it holds no PSUM for the loop (the compiler's
handling of a dead tile is not documented; inferred from its having no effect).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neuronemu.build.state import BuilderState
from neuronemu.ir import IndirectView, View
from neuronemu_isa import Buffer, InstrSpec

__all__ = ["ZeroFills"]


class ZeroFills(BuilderState):
    """Zero fills of PSUM tiles held back until the tile's first access (a Builder part)."""

    _zero_fills: dict[int, tuple[Any, Callable[[], Any]]]  # tile id -> (context, emit fill)
    fold_psum_zero_init: bool

    def hold_zero_fill(self, tile: Any, emit_fill: Callable[[], Any]) -> bool:
        """Hold back `emit_fill` for a new PSUM tile; False if it must run now."""
        if not self.fold_psum_zero_init or tile.buffer != Buffer.PSUM or tile.base is not None:
            emit_fill()
            return False
        self._zero_fills[tile.id] = (self._fill_context(), emit_fill)
        return True

    def drop_zero_fills(self, tile_ids: set[int]) -> None:
        """Forget the fills held for `tile_ids`: tiles nothing will touch (a device loop's
        own tiles its body never used after zeroing them, which nothing after the loop may
        use either), whose fill has no effect."""
        for tid in tile_ids & self._zero_fills.keys():
            del self._zero_fills[tid]

    def flush_zero_fills(self) -> None:
        """Emit every fill still held (at a device loop's edge, a core or instance change)."""
        while self._zero_fills:
            _, emit_fill = self._zero_fills.pop(next(iter(self._zero_fills)))
            emit_fill()

    def _zero_fill_before(
        self, spec: InstrSpec, operands: dict[str, Any], attrs: dict[str, Any]
    ) -> None:
        """Before an instruction is emitted: fold a held fill into it, or emit the fill."""
        fills = self._zero_fills
        context = self._fill_context()
        for tid in [t for t, (ctx, _) in fills.items() if ctx != context]:
            fills.pop(tid)[1]()
        touched = _roots(operands)
        held = [tid for tid in touched if tid in fills]
        if not held:
            return
        folded = _folds(spec, operands, attrs, held)
        for tid in held:
            if tid == folded:
                del fills[tid]
                flag = next(op.reads_if for op in spec.outputs if op.name == "dst")
                assert isinstance(flag, str)  # (_folds folds only a dst whose reads_if is a name)
                attrs[flag] = False  # the group's first matmul overwrites the bank
            else:
                fills.pop(tid)[1]()

    def _fill_context(self) -> tuple:
        return (self._core, self._instance, len(self._open), self.no_reorder_depth)


def _roots(operands: dict[str, Any]) -> list[int]:
    ids = []
    for v in operands.values():
        if isinstance(v, View):
            ids.append(v.tensor.root.id)
            if isinstance(v, IndirectView) and v.index is not None:
                ids.append(v.index.tensor.root.id)
    return ids


def _folds(spec: InstrSpec, operands: dict[str, Any], attrs: dict[str, Any], held: list[int]):
    """The tile whose fill `spec` takes over: it writes all of it as its `dst`, adding to
    what is there (accumulate True or None), and reads it nowhere else."""
    dst = operands.get("dst")
    out = next((op for op in spec.outputs if op.name == "dst"), None)
    if out is None or not isinstance(out.reads_if, str) or not isinstance(dst, View):
        return None
    if attrs.get(out.reads_if) is False or isinstance(dst, IndirectView):
        return None
    tid = dst.tensor.root.id
    if tid not in held or _roots(operands).count(tid) != 1:
        return None
    view = dst.as_root()
    return tid if view.box == view.tensor.full().box else None
