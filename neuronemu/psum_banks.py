"""The PSUM bank rule: a matmul writes one bank, so its result may not cross a bank boundary
(checked once the tiles are placed)."""

from __future__ import annotations

import functools

from neuronemu.allocator import Placement
from neuronemu.errors import ConstraintError, shown
from neuronemu.ir import View
from neuronemu.program import Instr
from neuronemu_isa import Arch

__all__ = ["check_psum_banks"]


def check_psum_banks(instrs: list[Instr], placements: dict[int, Placement], arch: Arch) -> None:
    """A matmul writes one PSUM bank: its dst may not cross a 2 KiB bank boundary (each
    spec's `one_psum_bank` operands)."""
    bank = arch.psum_bank_bytes
    for ins in instrs:
        for name in ins.spec.one_psum_bank:
            _check_one_bank(ins, name, placements, bank)


def _check_one_bank(ins: Instr, name: str, placements: dict[int, Placement], bank: int) -> None:
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
