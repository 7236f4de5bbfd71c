"""The dependency history (neuronemu.checks.accesses): what each access conflicts with, and what a
write supersedes, against a plain model written here (every access not yet covered by a
later write of its tensor, compared with each new access), on generated access sequences;
with the accesses kept in a list and filed by grid cell (`Boxes`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neuronemu.checks import accesses
from neuronemu.checks.accesses import conflicts, copy_history, record
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor, View

SHAPES = [(16,), (8, 12), (4, 6, 5)]


def _tensors() -> list[Tensor]:
    return [Tensor(f"t{k}", s, ALL_DTYPES["float32"], BUFFERS["sbuf"], None) for k, s in
            enumerate(SHAPES)]  # fmt: skip


@st.composite
def _box(draw, shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """A strided box: per dim (start, stop, step), possibly empty or reversed."""
    out = []
    for n in shape:
        step = draw(st.sampled_from([1, 1, 1, 2, 3, -1]))
        start = draw(st.integers(0, n - 1))
        count = draw(st.integers(0, n))
        stop = start + count * step
        if step > 0:
            stop = min(stop, n)
        else:
            stop = max(stop, -1)
        out.append((start, stop, step))
    return tuple(out)


@st.composite
def _program(draw) -> list[tuple[list[tuple[int, tuple]], list[tuple[int, tuple]]]]:
    """Instructions, each reading and writing a few boxes of three tensors."""
    n = draw(st.integers(1, 60))
    out = []
    for _ in range(n):
        accesses = []
        for _ in range(2):
            k = draw(st.lists(st.integers(0, len(SHAPES) - 1), max_size=2))
            accesses.append([(t, draw(_box(SHAPES[t]))) for t in k])
        out.append((accesses[0], accesses[1]))
    return out


def _meets(a, b) -> bool:
    return all(alo < bhi and blo < ahi for (alo, ahi), (blo, bhi) in zip(a, b))


def _inside(outer, inner) -> bool:
    return all(olo <= ilo and ihi <= ohi for (olo, ohi), (ilo, ihi) in zip(outer, inner))


def _model_deps(program, tensors):
    """Per instruction, the earlier ones it conflicts with, from a plain list of accesses."""
    live: list[tuple[int, tuple, int, bool]] = []  # (tensor, bounds, instruction, write?)
    out = []
    for index, (reads, writes) in enumerate(program):
        rs = [(t, View(tensors[t], box, tuple(range(len(box)))).bounds()) for t, box in reads]
        ws = [(t, View(tensors[t], box, tuple(range(len(box)))).bounds()) for t, box in writes]
        deps = set()
        for t, b in rs:
            deps |= {i for u, c, i, w in live if u == t and w and _meets(c, b)}
        for t, b in ws:
            deps |= {i for u, c, i, w in live if u == t and _meets(c, b)}
        out.append(deps)
        live += [(t, b, index, False) for t, b in rs]
        for t, b in ws:
            live = [
                e for e in live if e[0] != t or (not e[3] and e[2] == index) or not _inside(b, e[1])
            ]
            live.append((t, b, index, True))
    return out


@given(_program(), st.sampled_from([(16, 64), (0, 64), (0, 2), (3, 1)]))
def test_history_finds_the_conflicts_a_plain_scan_finds(program, grid):
    saved = accesses.GRID_ABOVE, accesses.MAX_CELLS
    accesses.GRID_ABOVE, accesses.MAX_CELLS = grid  # (filed by cell past GRID_ABOVE; boxes
    try:  # over more than MAX_CELLS cells compared with everything)
        got, want = _history_and_model(program)
    finally:
        accesses.GRID_ABOVE, accesses.MAX_CELLS = saved
    assert got == want


def _history_and_model(program):
    """Per instruction, the conflicts the history finds and those a plain scan finds."""
    tensors = _tensors()
    history: dict = {}
    got = []
    for index, (reads, writes) in enumerate(program):
        rs = [View(tensors[t], box, tuple(range(len(box)))) for t, box in reads]
        ws = [View(tensors[t], box, tuple(range(len(box)))) for t, box in writes]
        got.append(conflicts(history, rs, ws))
        record(history, rs, ws, index)
        if index % 7 == 3:  # a copy carries on as the original would
            history = {k: copy_history(h) for k, h in history.items()}
    return got, _model_deps(program, tensors)
