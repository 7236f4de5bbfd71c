"""The program table's rows of accesses (neuronemu.program.table.Rows): joined as the parts are let
go of, column by column, they are the rows joined as usual."""

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
    want, got = Rows.joined(copies), Rows.joined(parts, consume=True)
    for a, b in zip(
        (want.instr, want.tensor, want.lo, want.hi, *want.extra),
        (got.instr, got.tensor, got.lo, got.hi, *got.extra),
    ):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert all(len(p.instr) == 0 and not p.extra for p in parts)  # (let go of)
