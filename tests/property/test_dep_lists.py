"""Edges added in bulk (neuronemu.dep_lists.add_edges, the reuse edges of a finished program)
leave every instruction's deps and waits as adding them one instruction at a time does:
the new dependencies joined in, ascending; a stream's wait replaced by a later new
dependency on it (never by one on the instruction's own stream, never by one it had);
nothing changed where nothing new came. The waits are generated freely (some instructions'
waits are not the latest dependency per stream: the two-core syncs add edges without them).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.dep_lists import add_edges, csr

SETTINGS = settings(deadline=None, max_examples=300)


@st.composite
def programs(draw):
    n = draw(st.integers(1, 30))
    streams = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    instrs = []
    for i in range(n):
        deps = sorted(draw(st.sets(st.integers(0, max(i - 1, 0)), max_size=5)) - {i})
        by_stream: dict[int, int] = {}
        for w in draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=3)):
            if w != i:
                by_stream[streams[w]] = max(w, by_stream.get(streams[w], -1))
        instrs.append(SimpleNamespace(deps=tuple(deps), waits=tuple(sorted(by_stream.values()))))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    return streams, instrs, edges


def _one_at_a_time(streams, instrs, edges):
    """The expected deps and waits: each instruction's new dependencies added to it alone."""
    added: dict[int, set[int]] = {}
    for row, dep in edges:
        if row != dep:
            added.setdefault(row, set()).add(dep)
    out = []
    for i, ins in enumerate(instrs):
        new = added.get(i, set()) - set(ins.deps)
        if not new:
            out.append((ins.deps, ins.waits))
            continue
        latest = {streams[w]: w for w in ins.waits}
        for d in new:
            if streams[d] != streams[i] and d > latest.get(streams[d], -1):
                latest[streams[d]] = d
        out.append((tuple(sorted(new | set(ins.deps))), tuple(sorted(latest.values()))))
    return out


@SETTINGS
@given(programs())
def test_edges_added_in_bulk_are_those_added_one_at_a_time(case):
    streams, instrs, edges = case
    expected = _one_at_a_time(streams, instrs, edges)
    rows = np.array([r for r, _ in edges], dtype=np.int64)
    deps = np.array([d for _, d in edges], dtype=np.int64)
    indptr, indices = add_edges(instrs, np.array(streams, dtype=np.int64), rows, deps)
    assert [(ins.deps, ins.waits) for ins in instrs] == expected
    want_ptr, want_indices = csr([d for d, _ in expected])
    assert indptr.tolist() == want_ptr.tolist()
    assert indices.tolist() == want_indices.tolist()


def test_csr_of_lists():
    indptr, indices = csr([(3, 5), (), (1,)])
    assert indptr.tolist() == [0, 2, 2, 3]
    assert indices.tolist() == [3, 5, 1]


def test_a_programs_arrays_follow_its_deps_when_they_change():
    """The dependency lists Builder.finish keeps serve `as_arrays` only while every
    instruction's deps are those they were made from."""
    bf16 = ml_dtypes.bfloat16
    program = neuronemu.compile_kernel(
        Path(__file__).resolve().parents[2] / "tests" / "timing" / "v12_matmuls.py",
        {"lhsT": np.zeros((8192, 128), bf16), "rhs": np.zeros((8192, 2048), bf16)},
        kernel="tiled",
    )
    assert program.reuses  # (the SBUF ring wraps: the kept lists are made)
    as_made = csr([ins.deps for ins in program.instrs])
    arrays = program.as_arrays()
    assert arrays["dep_indptr"].tolist() == as_made[0].tolist()
    assert arrays["dep_indices"].tolist() == as_made[1].tolist()
    last = program.instrs[-1]
    assert 0 not in last.deps
    last.deps = tuple(sorted({*last.deps, 0}))
    changed = program.as_arrays()
    want = csr([ins.deps for ins in program.instrs])
    assert changed["dep_indices"].tolist() == want[1].tolist() != as_made[1].tolist()
