"""What a program's accesses prove about its reads at once (neuronemu.checks.hazards's
uninitialized-read check): that every read reads written data, without walking each
instruction's per-element flags. A read after a whole write of its tensor, or inside what
earlier exact writes covered, reads written data, by induction in program order (see
`reads_written`); a program where that holds for every read has no uninitialized read."""

from __future__ import annotations

import math

import numpy as np

from neuronemu.checks.access_table import Accesses
from neuronemu.program import Program
from neuronemu.program.lazy import tensor_groups
from neuronemu.program.table import distinct

__all__ = ["reads_written", "COVER_ACCESSES", "COVER_ELEMENTS", "COVER_GRID"]


def reads_written(program: Program, acc: Accesses) -> bool:
    """Does every read come after an instruction that wrote the whole of what it reads
    (or read a kernel input, constant or loop variable; reads of what the instruction
    merges into aside)? Then, in program order, every instruction reads written data only,
    so writes its outputs whole, and `uninitialized_reads` finds nothing. A read of a
    tensor written in parts counts too where earlier writes that write their boxes exactly
    cover it (a tile written a column block at a time, read whole): by the same induction
    those writes wrote written data. (A write through an alias, or of a stepped box, is
    never taken for covering its box: its root box may hold bytes it does not write.)"""
    ids, groups, reps = tensor_groups(program.tensors)  # (a replay's tiles, unmade)
    kinds = np.fromiter((t.kind in ("input", "constant", "loopvar") for t in reps), bool, len(reps))
    flagged = ~np.isin(acc.ids, ids[kinds[groups]])
    whole = acc.whole_writes(program.tensors)
    first = np.full(len(acc.ids), np.iinfo(np.int64).max, dtype=np.int64)
    written, at = np.unique(acc.tensor[whole], return_index=True)  # (in program order)
    first[written] = acc.instr[whole][at]
    reads = ~acc.write & ~acc.merged & flagged[acc.tensor]
    left = reads & (first[acc.tensor] >= acc.instr)
    return not left.any() or _written_before(acc, np.flatnonzero(left))


# How much `_written_before` looks at (accesses of the tensors it checks, and elements of
# their grids) before it leaves the program to the flag walk (inferred: well under a second
# of work; most programs need none of it).
COVER_ACCESSES = 1 << 20
COVER_ELEMENTS = 1 << 26  # (cells, in all; one tensor's grid at most COVER_GRID)
COVER_GRID = 1 << 24


def _written_before(acc: Accesses, rows: np.ndarray) -> bool:
    """Does each read of `rows` (access numbers) lie inside what earlier writes of its
    tensor that write exactly their boxes (`Accesses.plain`) wrote? Per tensor, its
    accesses in program order over a grid of its elements (reads before the writes of the
    same instruction, as the rows list them), its cells the spans between the bounds its
    boxes have (each box covers whole cells: what covers the cells covers the elements)."""
    checked = np.zeros(len(acc.instr), dtype=np.bool_)
    checked[rows] = True
    tensors = distinct(acc.tensor[rows])
    mine = np.flatnonzero(np.isin(acc.tensor, tensors) & ((acc.write & acc.plain) | checked))
    if len(mine) > COVER_ACCESSES:
        return False
    mine = mine[np.argsort(acc.tensor[mine], kind="stable")]  # (by tensor, in program order)
    starts = np.flatnonzero(np.r_[True, acc.tensor[mine][1:] != acc.tensor[mine][:-1]])
    elements = 0
    for part in np.split(mine, starts[1:]):
        # (the grid's cells: per dim, the spans between the bounds some box of it has)
        lows, highs, extent = [], [], []
        for d in range(acc.lo.shape[1]):
            cuts = distinct(np.concatenate((acc.lo[part, d], acc.hi[part, d])))
            lows.append(np.searchsorted(cuts, acc.lo[part, d]))
            highs.append(np.searchsorted(cuts, acc.hi[part, d]))
            extent.append(len(cuts) - 1)
        size = math.prod(extent)
        elements += size
        if elements > COVER_ELEMENTS or size > COVER_GRID:
            return False
        grid = np.zeros(tuple(extent), dtype=np.bool_)
        writes = acc.write[part].tolist()
        for a, lo, hi, is_write in zip(
            part.tolist(), np.stack(lows, 1).tolist(), np.stack(highs, 1).tolist(), writes
        ):
            box = tuple(slice(b, e) for b, e in zip(lo, hi))
            if is_write:
                grid[box] = True
            elif checked[a] and not grid[box].all():
                return False
    return True
