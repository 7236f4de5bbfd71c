"""The race check's two passes agree: the plain one (programs up to hazards.JIT_ABOVE
instructions) and the jitted one over flat arrays (larger programs) find the same first race,
with the same message, or none, and defer the same pairs of two cores' writes to HBM.

Programs from the builder are race-free by construction, so races are made: generated
kernels (and chains of short-lived tiles whose bytes are reused) with some instructions'
dependencies dropped."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.build import allocator
from neuronemu.checks import accesses, hazards
from neuronemu.checks.access_table import Accesses
from neuronemu.checks.hazards import first_race

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
SETTINGS = settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])


def _both(program, deferred=True):
    """Each pass's answer: the race's rendering (or None) and the deferred pairs. The plain
    pass answers twice, the second time with every tensor's accesses filed by grid cell from
    the first (neuronemu.checks.accesses.Boxes), and wide boxes past 2 cells: it must answer the
    same (else the first answer is returned as None). The jitted pass answers twice too, the
    second time stopping to poll after every access (hazards.RACE_WORK = 0), and with every
    written tensor's accesses filed by grid cell (Accesses.grid), wide boxes past 2 cells:
    it must answer the same, having polled after every access checked but the last (more if
    it started again with room for more deferred pairs; else its answer is None)."""
    answers = []
    for jit in (False, True):
        pairs: list[tuple[int, int]] | None = [] if deferred else None
        race = first_race(program, pairs, use_jit=jit)
        answers.append((race.render() if race else None, pairs))
    polls: list[Any] = []  # (the spans it polled at)
    saved_jit = hazards.RACE_WORK, hazards.GRID_ABOVE, hazards.MAX_CELLS
    hazards.RACE_WORK, hazards.GRID_ABOVE, hazards.MAX_CELLS = 0, 0, 2
    try:
        pairs = [] if deferred else None
        race = first_race(program, pairs, use_jit=True, poll=polls.append)
    finally:
        hazards.RACE_WORK, hazards.GRID_ABOVE, hazards.MAX_CELLS = saved_jit
    checked = len(Accesses(program).instr) if race is None else len(polls) + 1
    if (race.render() if race else None, pairs) != answers[1] or len(polls) < checked - 1:
        answers[1] = (None, None)
    saved = accesses.GRID_ABOVE, accesses.MAX_CELLS
    accesses.GRID_ABOVE, accesses.MAX_CELLS = 0, 2
    try:
        pairs = [] if deferred else None
        race = first_race(program, pairs, use_jit=False)
    finally:
        accesses.GRID_ABOVE, accesses.MAX_CELLS = saved
    if (race.render() if race else None, pairs) != answers[0]:
        answers[0] = (None, None)
    return answers


def _thin(program, data):
    """Drop some dependencies of some instructions (their waits follow in the passes: both
    read `deps`)."""
    n = len(program.instrs)
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=12, unique=True)):
        ins = program.instrs[i]
        keep = data.draw(st.lists(st.booleans(), min_size=len(ins.deps), max_size=len(ins.deps)))
        ins.deps = tuple(d for d, k in zip(ins.deps, keep) if k)


STEPS = [
    "nisa.tensor_scalar(dst={d}, data={s}, op0=nl.add, operand0=1.0)",
    "nisa.tensor_copy(dst={d}, src={s}, engine=nisa.engine.gpsimd)",
    "nisa.activation(dst={d}, op=nl.copy, data={s}, scale=2.0)",
    "nisa.dma_copy(dst={d}, src={s})",
]


class _Drawer:
    """`draw` as a `data` object (for _thin)."""

    def __init__(self, draw):
        self.draw = draw


@st.composite
def programs(draw, tmp):
    """Tiles of 128 x `width` fp32 written and read a quarter at a time on several engines
    and DMA queues, some made anew, some written again in part; placed first fit, so that
    the bytes of dead tiles are reused at once. Then some dependencies dropped."""
    width = draw(st.sampled_from([512, 8192]))  # 2 or 32 KiB per partition
    q = width // 4
    n = draw(st.integers(3, 12))
    body = [
        f"    x0 = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=x0, src=a)",
    ]
    tiles = 1
    for _ in range(n):
        src = draw(st.integers(max(0, tiles - 3), tiles - 1))
        if draw(st.booleans()):
            dst = tiles
            tiles += 1
            body.append(
                f"    x{dst} = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.sbuf)"
            )
            window = ":"
        else:
            dst = draw(st.integers(0, tiles - 1))
            c = draw(st.integers(0, 3)) * q
            window = f":, {c}:{c + q}"
        c = draw(st.integers(0, 3)) * q
        read = window if window == ":" else f":, {c}:{c + q}"
        step = draw(st.sampled_from(STEPS))
        body.append("    " + step.format(d=f"x{dst}[{window}]", s=f"x{src}[{read}]"))
        if draw(st.integers(0, 3)) == 0:
            c = draw(st.integers(0, 3)) * q
            body.append(f"    nisa.dma_copy(dst=out[:, {c}:{c + q}], src=x{dst}[:, {c}:{c + q}])")
    body.append(f"    nisa.dma_copy(dst=out, src=x{tiles - 1})")
    text = (
        HEADER + "@nki.jit\ndef k(a):\n"
        f"    out = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        + "\n".join(body)
        + "\n    return out\n"
    )
    path = tmp.mktemp("k") / "k.py"
    path.write_text(text)
    saved, allocator.ROTATE = allocator.ROTATE, False
    try:
        program = neuronemu.compile_kernel(path, {"a": np.zeros((128, width), np.float32)})
    finally:
        allocator.ROTATE = saved
    _thin(program, _Drawer(draw))
    return program


@SETTINGS
@given(st.data())
def test_the_same_first_race_when_orders_are_missing(tmp_path_factory, data):
    program = data.draw(programs(tmp_path_factory))
    plain, jitted = _both(program)
    assert plain == jitted
    plain, jitted = _both(program, deferred=False)
    assert plain == jitted


CHAIN = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.shared_hbm)
    x0 = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x0, src=a)
    x1 = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=x1, data=x0, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=x0)
    x2 = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=x2, op=nl.copy, data=x1, scale=2.0)
    x3 = nl.ndarray((128, 8192), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=x3, src=x2, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=out, src=x3)
    return out
"""


def test_each_order_dropped_the_same_race_of_either_kind(tmp_path):
    """A chain whose tiles reuse dead tiles' bytes: each dependency in turn is dropped; both
    passes report the same race, on data or on reused bytes (both kinds occur, so the
    property test above is not vacuous)."""
    path = tmp_path / "k.py"
    path.write_text(HEADER + CHAIN)
    saved, allocator.ROTATE = allocator.ROTATE, False
    try:
        program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 8192), np.float32)})
    finally:
        allocator.ROTATE = saved
    assert program.reuses
    kinds = set()
    for ins in program.instrs:
        deps = ins.deps
        for d in deps:
            ins.deps = tuple(x for x in deps if x != d)
            plain, jitted = _both(program)
            assert plain == jitted
            if plain[0] is not None:
                kinds.add("placed where" in plain[0])
        ins.deps = deps
    assert kinds == {True, False}


TWO_CORES = """
@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    for t in range(rows // 128):
        r0 = nl.program_id(0) * rows + t * 128
        x = nl.load(a[r0:r0 + 128, :])
        y = nl.load(b[r0:r0 + 128, :])
        nl.store(out[%(write)s:%(write)s + 128, :], value=nl.add(x, y))
    return out


def on_two_cores(a, b):
    return add[nl.nc(2)](a, b)
"""


@pytest.mark.parametrize("write", ["t * 128", "t * 128 + 64"])
def test_two_cores_writes_to_the_same_hbm_are_deferred_alike(tmp_path, write):
    """Both cores store to the same rows (`t * 128`; or off the 128-row cells of the jitted
    pass's grid, each store in two: still one pair each): deferred to the run by both
    passes; and with deferral off, both report the first such pair as the race."""
    path = tmp_path / "k.py"
    path.write_text(HEADER + TWO_CORES % dict(write=write))
    a = np.zeros((1024, 64), np.float32)
    program = neuronemu.compile_kernel(path, {"a": a, "b": a}, kernel="on_two_cores")
    assert program.cores == 2
    plain, jitted = _both(program)
    assert plain == jitted
    assert plain[0] is None and len(plain[1]) >= 4  # every store of one core meets the other's
    plain, jitted = _both(program, deferred=False)
    assert plain == jitted
    assert plain[0] is not None and "race on" in plain[0]


SHARED_CELL = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x0 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x0, src=a)
    x = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=x[:, 0:64], src=x0[:, 0:64])
    nisa.tensor_copy(dst=x[:, 64:128], src=x0[:, 64:128], engine=nisa.engine.gpsimd)
    nisa.activation(dst=x[:, 128:256], op=nl.copy, data=x0[:, 128:256])
    nisa.activation(dst=x[:, 256:512], op=nl.copy, data=x0[:, 256:512])
    nisa.activation(dst=x[:, 0:128], op=nl.copy, data=x0[:, 0:128])
    nisa.dma_copy(dst=out, src=x)
    return out
"""


@pytest.mark.parametrize(
    ("dropped", "first"),
    [(5, "while #1 tensor_copy ("), (6, "while #3 activation (")],
)
def test_the_first_of_the_earlier_writes_is_the_race_however_they_are_filed(
    tmp_path, dropped, first
):
    """Waits dropped: the last activation (#5) races with both copies before it (other
    engines), which lie in one 128-column cell of the jitted pass's grid, whose list holds
    the later first; the store of all of x (#6, over four cells: a wide access) races with
    the writes not superseded, filed under their cells. The race named is with the first,
    as the plain pass names it."""
    path = tmp_path / "k.py"
    path.write_text(HEADER + SHARED_CELL)
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 512), np.float32)})
    assert [ins.spec.name for ins in program.instrs][5:] == ["activation", "dma_copy"]
    program.instrs[dropped].deps = ()
    plain, jitted = _both(program)
    assert plain == jitted
    assert plain[0] is not None and first in plain[0]
