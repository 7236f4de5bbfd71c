"""SBUF and PSUM addresses for a program's tiles: first fit over their live ranges.

A tile is live from its first use to its last (instruction indices). SBUF is allocated in bytes
per partition, PSUM in whole 2 KiB banks (a PSUM tensor starts at a bank boundary, nki docs).
A tile reserves its byte range in every partition (conservative for tiles of < 128
partitions). Capacity overflow and a matmul result crossing a PSUM bank are located errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa import Arch, Buffer
from neuronemu.errors import AllocationError, ConstraintError
from neuronemu.program import Instr
from neuronemu.trace.values import Tensor, View

__all__ = ["Placement", "allocate", "check_psum_banks"]


@dataclass
class Placement:
    tensor: Tensor
    offset: int  # bytes from the start of each partition
    size: int  # bytes per partition reserved
    first: int  # instruction indices of the live range
    last: int
    pinned: bool = False


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def allocate(tensors: list[Tensor], uses: dict[int, list[int]], instrs: list[Instr],
             arch: Arch) -> dict[int, Placement]:
    """Addresses for every on-chip tensor some instruction uses, by tensor id."""
    placements: dict[int, Placement] = {}
    for buffer in (Buffer.SBUF, Buffer.PSUM):
        if buffer == Buffer.SBUF:
            capacity = arch.sbuf_usable_bytes_per_partition
            unit = arch.sbuf_min_align_bytes
        else:
            capacity = arch.psum_bytes_per_partition
            unit = arch.psum_bank_bytes
        live = sorted((t for t in tensors if t.buffer == buffer and t.id in uses),
                      key=lambda t: (uses[t.id][0], t.id))
        active: list[Placement] = []
        for t in live:
            first, last = uses[t.id]
            active = [p for p in active if p.last >= first]
            # Tiles align to their dtype's size too (inferred: natural alignment).
            step = max(unit, t.dtype.itemsize) if buffer == Buffer.SBUF else unit
            size = _align(max(t.bytes_per_partition, 1), step)
            if t.address is not None:
                offset = t.address
                if offset % step:
                    raise AllocationError(
                        f"{buffer.value.upper()} tensor {t.name!r} at offset {offset} is not "
                        f"aligned to {step} bytes", t.span)
            else:
                offset = _first_fit(active, size, step)
            if offset + size > capacity:
                names = ", ".join(f"{p.tensor.name} ({p.size} B)" for p in
                                  sorted(active, key=lambda p: -p.size)[:4])
                raise AllocationError(
                    f"{buffer.value.upper()} over capacity: tile {t.name!r} needs {size} bytes "
                    f"per partition at offset {offset}, past the {capacity} usable on "
                    f"{arch.name}", t.span,
                    hint=f"live here: {names}; free tiles sooner (allocate them in the loop "
                         "that uses them) or use smaller tiles" if names else None)
            clash = next((p for p in active if p.offset < offset + size and
                          offset < p.offset + p.size), None)
            if clash is not None:
                raise AllocationError(
                    f"{t.name!r} at offset {offset} overlaps {clash.tensor.name!r} "
                    f"[{clash.offset}, {clash.offset + clash.size}) while both are live",
                    t.span)
            placement = Placement(t, offset, size, first, last, t.address is not None)
            placements[t.id] = placement
            active.append(placement)
    return placements


def _first_fit(active: list[Placement], size: int, unit: int) -> int:
    offset = 0
    for p in sorted(active, key=lambda p: p.offset):
        if offset + size <= p.offset:
            break
        offset = max(offset, _align(p.offset + p.size, unit))
    return offset


def check_psum_banks(instrs: list[Instr], placements: dict[int, Placement], arch: Arch) -> None:
    """A matmul writes one PSUM bank: its dst may not cross a 2 KiB bank boundary."""
    bank = arch.psum_bank_bytes
    for ins in instrs:
        if ins.spec.name != "nc_matmul":
            continue
        dst = ins.operands["dst"]
        if not isinstance(dst, View) or dst.tensor.id not in placements:
            continue
        lo, hi = _byte_range(dst)
        base = placements[dst.tensor.id].offset
        if (base + lo) // bank != (base + hi - 1) // bank:
            raise ConstraintError(
                f"nc_matmul: dst {dst!r} covers bytes [{base + lo}, {base + hi}) of each "
                f"partition, across PSUM banks {(base + lo) // bank} and "
                f"{(base + hi - 1) // bank}; a matmul result must lie within one "
                f"{bank}-byte bank", ins.span)


def _byte_range(view: View) -> tuple[int, int]:
    """The [lo, hi) bytes of one partition that a view of an on-chip tensor touches."""
    shape = view.tensor.shape
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, 0, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    bounds = view.bounds()
    lo = sum(b[0] * strides[d] for d, b in enumerate(bounds) if d > 0)
    hi = sum((b[1] - 1) * strides[d] for d, b in enumerate(bounds) if d > 0) + 1
    size = view.dtype.itemsize
    return lo * size, hi * size
