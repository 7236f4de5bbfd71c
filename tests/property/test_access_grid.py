"""The jitted race check's grid (Accesses.grid): two non-empty boxes of a gridded tensor
that overlap, both filed, share a cell; a box over more cells than allowed, or empty, is
filed under none (compared with all of its tensor's); a tensor always accessed at one box,
never written, or accessed few times gets no grid; each tensor's cells are its own range."""

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
            own = range(grid.cells_of[t], grid.cells_of[t + 1])
            assert cells[a] <= set(own)
            empty = any(h <= lo_ for lo_, h in zip(lo[a], hi[a]))
            if not expected or empty:
                assert not cells[a]
        if not expected:
            continue
        own = set(range(grid.cells_of[t], grid.cells_of[t + 1]))
        assert set().union(*(cells[a] for a in mine)) == own
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


def test_each_gridded_tensor_numbers_its_own_cells_past_those_without_a_grid():
    """Tensors 0 and 2 written a column at a time (gridded), 1 read as often (no grid):
    each gridded tensor's cells are exactly those its accesses are filed under."""
    n = 100
    tensor = [t for t in (0, 1, 2) for _ in range(n)]
    write = [t != 1 for t in tensor]
    lo = [[0, j] for _ in range(3) for j in range(n)]
    hi = [[128, j + 1] for _ in range(3) for j in range(n)]
    grid = _accesses(tensor, write, lo, hi).grid(64, 16)
    assert grid.gridded.tolist() == [True, False, True]
    for t in (0, 2):
        filed = grid.cell[grid.ptr[t * n] : grid.ptr[(t + 1) * n]]
        assert sorted(filed.tolist()) == list(range(grid.cells_of[t], grid.cells_of[t + 1]))
