"""A program's instruction list whose replayed instructions are made when first read
(neuronemu.program.lazy): it reads as the list of every instruction made, makes each once,
and gives the dependency arrays without making any; a replayed matmul is compiled with
most of its instructions unmade, and its dependencies are those of the loop unrolled."""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import neuronemu
from neuronemu.program.lazy import Instrs, Later, Tiles, deps_csr
from neuronemu.replay import templates


class _Ins:
    """An instruction as far as the list is concerned: its slot and its dependencies."""

    def __init__(self, index: int):
        self.index = index
        self.deps = tuple(range(max(0, index - index % 3), index))


class _Maker(Later):
    """Makes slot i's `_Ins(i)`, counting what it made (a slot made twice is a fault)."""

    def __init__(self) -> None:
        self.made: list[int] = []

    def make(self, index: int) -> _Ins:  # type: ignore[override]
        self.made.append(index)
        return _Ins(index)

    def deps_at(self, index: int) -> tuple[int, ...]:
        return _Ins(index).deps


# A list: runs of made instructions (False, n) and of slots left to a maker (True, n).
RUNS = st.lists(st.tuples(st.booleans(), st.integers(1, 6)), min_size=1, max_size=6)
READS = st.lists(
    st.one_of(
        st.tuples(st.just("index"), st.integers(-40, 40)),
        st.tuples(
            st.just("slice"),
            st.integers(-40, 40),
            st.integers(-40, 40),
            st.sampled_from([1, 2, -1]),
        ),
        st.tuples(st.sampled_from(["iter", "reversed", "copy", "pickle", "pop", "insert"])),
    ),
    max_size=8,
)


def _built(runs: list[tuple[bool, int]]) -> tuple[Instrs, list[_Maker]]:
    instrs, makers = Instrs(), []
    for later, n in runs:
        if later:
            makers.append(_Maker())
            instrs.add_later(makers[-1], n)
        else:
            first = len(instrs)
            instrs.extend([_Ins(first + k) for k in range(n)])
    return instrs, makers


def _faults(runs: list[tuple[bool, int]], reads: list[tuple]) -> list[str]:
    instrs, makers = _built(runs)
    n = len(instrs)
    expected = list(range(n))  # each slot's instruction, by its index, as a plain list moves
    faults = []
    seen: dict[int, object] = {}  # slot -> the object read there (the same on every read)

    def same(got: object, index: int) -> None:
        if got.index != index:  # type: ignore[attr-defined]
            faults.append(f"read {got} for {index}")
        if seen.setdefault(index, got) is not got:
            faults.append(f"slot {index} made twice")

    indptr, indices = deps_csr(instrs)
    want = [_Ins(i).deps for i in range(n)]
    if np.diff(indptr).tolist() != [len(d) for d in want] or indices.tolist() != [
        d for ds in want for d in ds
    ]:
        faults.append("deps_csr")
    if sum(len(m.made) for m in makers):
        faults.append("deps_csr made slots")
    for read in reads:
        op = read[0]
        if op == "index" and -len(expected) <= read[1] < len(expected):
            same(instrs[read[1]], expected[read[1]])
        elif op == "slice":
            s = slice(read[1], read[2], read[3])
            got = instrs[s]
            if type(got) is not list or [g.index for g in got] != expected[s]:
                faults.append(f"slice {s}")
            for g, i in zip(got, expected[s]):
                same(g, i)
        elif op in ("iter", "reversed", "copy"):
            got = {"iter": list(iter(instrs)), "reversed": list(reversed(instrs))[::-1]}.get(
                op, instrs.copy()
            )
            if [g.index for g in got] != expected:
                faults.append(op)
            for g, i in zip(got, expected):
                same(g, i)
        elif op == "pickle":
            back = pickle.loads(pickle.dumps(instrs))
            if [g.index for g in back] != expected:
                faults.append("pickle")
        elif op == "pop" and expected:
            got = instrs.pop(0)
            same(got, expected.pop(0))
        elif op == "insert":  # (each inserted one has an index of its own, below 0)
            new = -1 - sum(1 for i in expected if i < 0)
            instrs.insert(0, _Ins(new))
            expected.insert(0, new)
            seen[new] = instrs[0]
    made = [i for m in makers for i in m.made]
    if len(made) != len(set(made)):
        faults.append("a slot made twice")
    if [g.index for g in instrs] != expected or instrs.later:
        faults.append("the list at the end")
    return faults


@given(RUNS, READS)
def test_a_lazy_list_reads_as_the_list_of_its_instructions_each_made_once(runs, reads):
    assert _faults(runs, reads) == []


def test_a_slot_is_made_only_when_read():
    instrs, (maker,) = _built([(False, 2), (True, 5), (False, 1)])
    assert (len(instrs), instrs.later) == (8, 5)
    assert instrs[3].index == 3 and instrs[-2].index == 6
    assert maker.made == [3, 6] and instrs.later == 3
    assert [i.index for i in instrs[2:5]] == [2, 3, 4]
    assert maker.made == [3, 6, 2, 4] and instrs.later == 1


MATMUL = (
    "import nki\n"
    "import nki.isa as nisa\n"
    "import nki.language as nl\n"
    "\n"
    "@nki.jit\n"
    "def k(lhsT, rhs):\n"
    "    out = nl.ndarray((1024, 1024), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    for m in nl.affine_range(8):\n"
    "        for n in nl.affine_range(2):\n"
    "            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
    "            for k in nl.affine_range(8):\n"
    "                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
    "                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)\n"
    "                row = k * 128\n"
    "                nisa.dma_copy(dst=a, src=lhsT[row : row + 128, m * 128 : (m + 1) * 128])\n"
    "                nisa.dma_copy(dst=b, src=rhs[row : row + 128, n * 512 : (n + 1) * 512])\n"
    "                nisa.nc_matmul(dst=acc, stationary=a, moving=b)\n"
    "            o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
    "            nisa.tensor_copy(dst=o, src=acc)\n"
    "            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=o)\n"
    "    return out\n"
)


def test_a_replayed_matmul_gives_its_dependency_arrays_without_making_its_repeats(tmp_path):
    # (a program this small is checked by the plain passes, which make every instruction:
    # the program as compiled, before them)
    path = tmp_path / "k.py"
    path.write_text(MATMUL)
    bf16 = ml_dtypes.bfloat16
    inputs = {"lhsT": np.ones((1024, 1024), bf16), "rhs": np.ones((1024, 1024), bf16)}
    program = neuronemu.compile_kernel(str(path), inputs)
    instrs = program.raw_instrs
    unmade = instrs.later
    arrays = program.table().arrays()
    still = instrs.later
    templates.ENABLED = False
    try:
        unrolled = neuronemu.compile_kernel(str(path), inputs)
    finally:
        templates.ENABLED = True
    made = [ins.deps for ins in instrs]  # (every slot made now)
    again = program.table().arrays()  # (from the instructions made)
    assert isinstance(instrs, Instrs) and unmade > len(instrs) // 2 and still == unmade
    assert instrs.later == 0
    assert arrays["dep_indptr"].tolist() == again["dep_indptr"].tolist()
    assert arrays["dep_indices"].tolist() == again["dep_indices"].tolist()
    assert made == [ins.deps for ins in unrolled.raw_instrs]


def test_lazy_lists_compare_as_the_lists_of_their_items():
    # (two lazy lists of ints made when read, and the plain list they read as)
    class Tenfold(Later):
        def make(self, index: int) -> int:
            return index * 10

    def lazy() -> Tiles:
        items = Tiles([0])
        items.add_later(Tenfold(), 3)
        return items

    plain = [0, 10, 20, 30]
    assert lazy() == plain and lazy() == lazy() and not lazy() != plain
    assert lazy() < [0, 10, 20, 31] and lazy() <= plain and lazy() >= lazy()
    assert lazy() > [0, 10, 20] and not lazy() != lazy()
