"""The PSUM bank rule: a matmul writes one bank, so its result may not cross a bank boundary
(checked once the tiles are placed)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np

from neuronemu.build.allocator import Placement
from neuronemu.errors import ConstraintError, shown
from neuronemu.ir import View
from neuronemu.program import Instr, Repeated
from neuronemu_isa import Arch

__all__ = ["check_psum_banks"]


def check_psum_banks(
    instrs: list[Instr],
    placements: Mapping[int, Placement],
    arch: Arch,
    repeats: list[Repeated] | tuple[()] = (),
) -> None:
    """A matmul writes one PSUM bank: its dst may not cross a 2 KiB bank boundary (each
    spec's `one_psum_bank` operands). A replayed loop's repeats (`repeats`) whose operand
    is its base's box of the iteration's own tile are checked at once, by the tiles'
    offsets (`_repeats_hold`); where one does not hold, instruction by instruction, to
    fail at the first that crosses."""
    bank = arch.psum_bank_bytes
    at = 0
    for rep in repeats:
        if _repeats_hold(instrs, placements, bank, rep):
            _check(instrs[at : rep.start], placements, bank)
            at = rep.start + rep.count * rep.period
    _check(instrs[at:], placements, bank)


def _check(instrs: list[Instr], placements: Mapping[int, Placement], bank: int) -> None:
    for ins in instrs:
        for name in ins.spec.one_psum_bank:
            _check_one_bank(ins, name, placements, bank)


def _repeats_hold(
    instrs: list[Instr], placements: Mapping[int, Placement], bank: int, rep: Repeated
) -> bool:
    """Does every repeat of `rep` keep its one-bank operands in one bank? True only where
    each such operand of the base is a box that does not move, of a tile the iteration
    makes (then each repeat's is the same box of its own tile: the same bytes, at its
    tile's offset) or of a tile from before the loop (the base's own answer)."""
    for j in range(rep.period):
        ins = instrs[rep.base + j]
        for name in ins.spec.one_psum_bank:
            tensor = ins.tensor_of(name)
            source = rep.sources[j].get(name)
            if tensor is None or source is None or any(source[1]) or tensor.base is not None:
                return False
            position = source[0]
            if position < 0:
                continue  # (the base's tile: checked with the base)
            lo, hi = _bytes_of(tensor.shape, ins.bounds_of(name), tensor.dtype.itemsize)
            offsets = np.array(
                [placements[t].offset for t in rep.ids[:, position].tolist() if t in placements],
                dtype=np.int64,
            )
            if np.any((offsets + lo) // bank != (offsets + hi - 1) // bank):
                return False
    return True


def _check_one_bank(ins: Instr, name: str, placements: Mapping[int, Placement], bank: int) -> None:
    tensor = ins.tensor_of(name)
    if tensor is None or tensor.root.id not in placements:
        return
    if tensor.base is None:  # (a view of the root itself: its bounds, without the view)
        lo, hi = _bytes_of(tensor.shape, ins.bounds_of(name), tensor.dtype.itemsize)
    else:
        lo, hi = _byte_range(ins.operand(name).as_root())
    base = placements[tensor.root.id].offset
    if (base + lo) // bank != (base + hi - 1) // bank:
        dst = ins.operand(name).as_root()
        raise ConstraintError(
            f"{ins.spec.name}: {name} {shown(dst)} covers bytes [{base + lo}, {base + hi}) of each "
            f"partition, across PSUM banks {(base + lo) // bank} and "
            f"{(base + hi - 1) // bank}; a matmul result must lie within one "
            f"{bank}-byte bank",
            ins.span,
        )


def _byte_range(view: View) -> tuple[int, int]:
    """The [lo, hi) bytes of one partition that a view of an on-chip tensor touches."""
    return _bytes_of(view.tensor.shape, view.bounds(), view.dtype.itemsize)


@functools.lru_cache(maxsize=4096)  # (a loop's matmuls write the same boxes of their tiles)
def _bytes_of(
    shape: tuple[int, ...], bounds: tuple[tuple[int, int], ...], size: int
) -> tuple[int, int]:
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, 0, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    lo = sum(b[0] * strides[d] for d, b in enumerate(bounds) if d > 0)
    hi = sum((b[1] - 1) * strides[d] for d, b in enumerate(bounds) if d > 0) + 1
    return lo * size, hi * size
