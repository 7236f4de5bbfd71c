"""Reuse dependencies (a tile placed over a dead tile's bytes waits for the old tile's
accesses): worked out as arrays when the program is sealed, merged into the arrays of the
jitted passes, and into the instructions' own `deps` and `waits` only when those are read."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu import pipeline
from neuronemu.checks import hazards
from neuronemu.nasm.write import dumps
from neuronemu.sim import timing

MATMUL = "tests/timing/v12_matmuls.py"
BF16 = ml_dtypes.bfloat16


def _compiled(path: str, kernel: str | None, shapes: dict[str, tuple[int, int]]):
    dtype = BF16 if path == MATMUL else np.float32
    inputs = {name: np.zeros(shape, dtype) for name, shape in shapes.items()}
    return neuronemu.compile_kernel(path, inputs, kernel=kernel)


CASES = [
    (MATMUL, "tiled", {"lhsT": (2048, 1024), "rhs": (2048, 2048)}),
    (MATMUL, "hoisted", {"lhsT": (2048, 1024), "rhs": (2048, 2048)}),
    (MATMUL, "blocked_all", {"lhsT": (2048, 2048), "rhs": (2048, 2048)}),
    ("kernels/transpose_pe.py", None, {"x": (512, 512)}),
]


def _expected_pairs(program) -> set[tuple[int, int]]:
    """From the instructions' accesses alone: for each reuse, each stream's first access to
    the new tile follows each stream's last access to the old one."""
    uses: dict[int, dict[str, list[int]]] = {}
    for ins in program.raw_instrs:
        for role in ("in", "out"):
            for _, view in ins.views(role):
                per_stream = uses.setdefault(view.tensor.root.id, {})
                span = per_stream.setdefault(ins.stream, [ins.index, ins.index])
                span[0] = min(span[0], ins.index)
                span[1] = max(span[1], ins.index)
    out = set()
    for old, new in program.reuses:
        for _, last in uses.get(old, {}).values():
            for first, _ in uses.get(new, {}).values():
                if first != last:
                    out.add((first, last))
    return out


def _rows(indptr: np.ndarray, indices: np.ndarray) -> list[list[int]]:
    return [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(len(indptr) - 1)]


@pytest.mark.parametrize("path,kernel,shapes", CASES)
def test_pending_pairs_are_each_reuse_first_after_last(path, kernel, shapes):
    program = _compiled(path, kernel, shapes)
    assert program.reuses, "the case must reuse bytes"
    consumer, producer = program.reuse_deps
    got = list(zip(consumer.tolist(), producer.tolist()))
    assert got == sorted(set(got)), "sorted, each pair once"
    assert set(got) == _expected_pairs(program)


def test_pairs_worked_out_a_few_reuses_at_a_time_are_the_same(monkeypatch):
    from neuronemu.program import reuse_deps

    monkeypatch.setattr(reuse_deps, "CHUNK", 7)  # (chunk ends fall inside and between)
    program = _compiled(*CASES[0])
    consumer, producer = program.reuse_deps
    got = list(zip(consumer.tolist(), producer.tolist()))
    assert len(program.reuses) > 7 * 3 and got == sorted(set(got))
    assert set(got) == _expected_pairs(program)


@pytest.mark.parametrize("path,kernel,shapes", CASES)
def test_arrays_merged_are_the_settled_dependencies(path, kernel, shapes):
    program = _compiled(path, kernel, shapes)
    own = [set(ins.deps) for ins in program.raw_instrs]  # (before they are settled)
    added: dict[int, set[int]] = {}
    for first, last in _expected_pairs(program):
        added.setdefault(first, set()).add(last)
    expected = [sorted(deps | added.get(i, set())) for i, deps in enumerate(own)]
    merged = program.table().arrays()
    assert program.reuse_deps is not None, "the table's arrays merge without settling"
    assert _rows(merged["dep_indptr"], merged["dep_indices"]) == expected
    instrs = program.instrs  # settles
    assert program.reuse_deps is None
    assert [list(ins.deps) for ins in instrs] == expected
    settled = program.table().arrays()
    for key in ("dep_indptr", "dep_indices"):
        np.testing.assert_array_equal(settled[key], merged[key])
    # Waits: the latest dependency on each other stream.
    for ins in instrs:
        latest: dict[str, int] = {}
        for d in ins.deps:
            stream = instrs[d].stream
            if stream != ins.stream:
                latest[stream] = max(latest.get(stream, -1), d)
        assert ins.waits == tuple(sorted(latest.values())), ins.index


def test_schedule_is_the_same_pending_or_settled():
    pending = _compiled(*CASES[0])
    settled = _compiled(*CASES[0])
    settled.instrs  # noqa: B018  (settles)
    a, b = timing.schedule(pending), timing.schedule(settled)
    assert pending.reuse_deps is not None and len(pending.reuse_deps[0])
    np.testing.assert_array_equal(a.start_ns, b.start_ns)
    np.testing.assert_array_equal(a.end_ns, b.end_ns)
    assert a.total_ns == b.total_ns


def test_text_form_has_the_reuse_waits_unsettled_or_not():
    pending = _compiled(*CASES[0])
    settled = _compiled(*CASES[0])
    settled.instrs  # noqa: B018
    without = _compiled(*CASES[0])
    without.reuse_deps = None  # (as if no tile reused bytes)
    assert dumps(pending) == dumps(settled) != dumps(without)


def test_timing_only_run_leaves_them_pending_until_read(monkeypatch):
    """A timing-only run whose passes are the jitted ones (as past JIT_ABOVE instructions)
    reads no instruction's deps: they stay pending, and the time is the same as a run
    whose plain race check settled them."""
    inputs = {"lhsT": np.zeros((2048, 1024), BF16), "rhs": np.zeros((2048, 2048), BF16)}

    def run():
        return neuronemu.run(
            MATMUL, inputs, kernel="tiled", timing_only=True, print_fn=lambda _: None
        )

    plain = run()
    assert plain.program.reuse_deps is None  # (the plain race check read them)
    for module in (pipeline, hazards, timing):
        monkeypatch.setattr(module, "JIT_ABOVE", 0)
    jitted = run()
    program = jitted.program
    assert program.reuse_deps is not None and len(program.reuse_deps[0])
    assert jitted.time_ns == plain.time_ns
    pairs = _expected_pairs(program)
    deps = [set(ins.deps) for ins in program.instrs]  # (a reader sees them all)
    assert program.reuse_deps is None
    assert pairs and all(last in deps[first] for first, last in pairs)


@pytest.mark.parametrize("path,kernel,shapes", CASES)
def test_per_instr_reads_each_repeat_from_its_source(path, kernel, shapes):
    """`Table.per_instr` asks only the instructions that repeat none and gives each
    repeat its source's answer: the same as asking every instruction."""
    program = _compiled(path, kernel, shapes)
    instrs = program.raw_instrs
    if kernel == "tiled":
        assert program.repeats, "the case must have replayed loops"
    table = program.table()
    source = table.base
    asked: list[int] = []
    for get in (
        lambda i: i.stream,
        lambda i: i.ns,
        lambda i: (i.engine, i.span, i.queue, i.core, i.cycles),
    ):
        got = table.per_instr(lambda i: asked.append(i.index) or str(get(i)), object)
        assert got.tolist() == [str(get(i)) for i in instrs]
    own = table.originals()
    assert sorted(set(asked)) == own and len(asked) == 3 * len(own)
    assert all(source[source[i]] == source[i] for i in range(len(instrs)))
    if program.repeats:
        assert len(own) < len(instrs)
