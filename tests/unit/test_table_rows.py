"""The program table's rows of accesses (neuronemu.program.table.Rows): joined, whether or not
the parts are let go of column by column, they are NumPy's concatenation of the parts."""

from __future__ import annotations

import numpy as np

from neuronemu.program.table import Rows


def test_rows_joined_as_they_are_let_go_of_are_the_rows_joined():
    rng = np.random.default_rng(3)

    def part(n: int, dims: int) -> Rows:
        lo = rng.integers(0, 9, (n, dims))
        extra = (rng.integers(0, 5, n), rng.random(n) < 0.5)
        return Rows(rng.integers(0, 99, n), rng.integers(0, 7, n), lo, lo + 1, extra)

    parts = [part(4, 2), part(0, 1), part(3, 3), part(5, 1)]
    copies = [Rows(p.instr, p.tensor, p.lo, p.hi, p.extra) for p in parts]

    def padded(a: np.ndarray, fill: int) -> np.ndarray:  # (to 3 dims, with [0, 1))
        return np.pad(a, ((0, 0), (0, 3 - a.shape[1])), constant_values=fill)

    want = [  # (NumPy's own concatenation and padding)
        np.concatenate([p.instr for p in parts]),
        np.concatenate([p.tensor for p in parts]),
        np.concatenate([padded(p.lo, 0) for p in parts]),
        np.concatenate([padded(p.hi, 1) for p in parts]),
        *(np.concatenate(c) for c in zip(*(p.extra for p in parts))),
    ]
    for joined in (Rows.joined(copies), Rows.joined(parts, consume=True)):
        got = (joined.instr, joined.tensor, joined.lo, joined.hi, *joined.extra)
        for a, b in zip(want, got, strict=True):
            assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert all(len(p.instr) == 0 and not p.extra for p in parts)  # (let go of)
