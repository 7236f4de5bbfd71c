"""The jitted race check's grid (Accesses.grid): two non-empty boxes of a gridded tensor
that overlap, both filed, share a cell; a box over more cells than allowed, or empty, is
filed under none (compared with all of its tensor's); a tensor always accessed at one box,
never written, or accessed few times gets no grid; no two tensors share a cell."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neuronemu.checks.access_table import Accesses

DIMS = 2


def _accesses(tensor, write, lo, hi) -> Accesses:
    """An access table of these columns (as a program's would hold them)."""
    acc = object.__new__(Accesses)
    acc.tensor = np.asarray(tensor, dtype=np.int64)
    acc.ids = np.arange(int(acc.tensor.max()) + 1 if len(tensor) else 0)
    acc.instr = np.arange(len(tensor), dtype=np.int64)
    acc.write = np.asarray(write, dtype=np.bool_)
    acc.lo = np.asarray(lo, dtype=np.int64).reshape(-1, DIMS)
    acc.hi = np.asarray(hi, dtype=np.int64).reshape(-1, DIMS)
    return acc


boxes = st.tuples(
    st.integers(0, 3),  # tensor
    st.booleans(),  # write
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), min_size=DIMS, max_size=DIMS),
)


@given(st.lists(boxes, min_size=1, max_size=60), st.integers(0, 8), st.integers(1, 6))
def test_overlapping_boxes_share_a_cell_and_wide_ones_are_filed_nowhere(drawn, above, most):
    tensor = [t for t, _, _ in drawn]
    write = [w for _, w, _ in drawn]
    lo = [[a for a, _ in box] for _, _, box in drawn]
    hi = [[a + n for a, n in box] for _, _, box in drawn]
    acc = _accesses(tensor, write, lo, hi)
    grid = acc.grid(above, most)
    cells = [set(grid.cell[grid.ptr[a] : grid.ptr[a + 1]].tolist()) for a in range(len(tensor))]
    assert (grid.owner == np.repeat(np.arange(len(tensor)), np.diff(grid.ptr))).all()
    for t in set(tensor):
        mine = [a for a in range(len(tensor)) if tensor[a] == t]
        one_box = len({(tuple(lo[a]), tuple(hi[a])) for a in mine}) == 1
        expected = len(mine) > above and any(write[a] for a in mine) and not one_box
        assert bool(grid.gridded[t]) == expected
        for a in mine:
            empty = any(h <= lo_ for lo_, h in zip(lo[a], hi[a]))
            if not expected or empty:
                assert not cells[a]
            others = (cells[b] for b in range(len(tensor)) if tensor[b] != t)
            assert not cells[a] & set().union(*others)  # (each tensor's cells its own)
        if not expected:
            continue
        filed = [a for a in mine if cells[a]]
        assert all(len(cells[a]) <= most for a in filed)
        for a, b in itertools.combinations(filed, 2):
            overlap = all(max(lo[a][d], lo[b][d]) < min(hi[a][d], hi[b][d]) for d in range(DIMS))
            if overlap:
                assert cells[a] & cells[b], (a, b)
    assert grid.n_cells == len(set().union(*cells)) if any(cells) else grid.n_cells == 0


def test_an_output_written_a_column_at_a_time_is_filed_a_cell_per_column():
    """The case the grid is for: 1,000 one-column writes of a [128, 1000] output (and one
    read of all of it, wide): each write under its own cell."""
    n = 1000
    lo = [[0, j] for j in range(n)] + [[0, 0]]
    hi = [[128, j + 1] for j in range(n)] + [[128, n]]
    grid = _accesses([0] * (n + 1), [True] * n + [False], lo, hi).grid(64, 16)
    assert grid.gridded.tolist() == [True]
    assert grid.n_cells == n
    assert np.diff(grid.ptr).tolist() == [1] * n + [0]
    assert sorted(grid.cell.tolist()) == list(range(n))


def test_gridded_tensors_past_one_without_a_grid_keep_cells_of_their_own():
    """Tensors 0 and 2 written a column at a time (gridded), 1 read as often (no grid): the
    two gridded tensors' accesses, at the same boxes, are filed under different cells."""
    n = 100
    tensor = [t for t in (0, 1, 2) for _ in range(n)]
    write = [t != 1 for t in tensor]
    lo = [[0, j] for _ in range(3) for j in range(n)]
    hi = [[128, j + 1] for _ in range(3) for j in range(n)]
    grid = _accesses(tensor, write, lo, hi).grid(64, 16)
    assert grid.gridded.tolist() == [True, False, True]
    first, second = (
        set(grid.cell[grid.ptr[t * n] : grid.ptr[(t + 1) * n]].tolist()) for t in (0, 2)
    )
    assert len(first) == len(second) == n and not first & second
    assert grid.n_cells == 2 * n
