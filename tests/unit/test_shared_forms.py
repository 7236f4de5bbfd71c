"""What a replayed loop's repeats share with the instruction they repeat is worked out once
(the program table's `base` and `form_base`): the DMA rows of the scheduler's inputs, HBM bytes,
matmul FLOPs, engine counts and the critical path's source lines. Each equals the same
figure worked out for every instruction on its own operands."""

from __future__ import annotations

import collections
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu.program.verify import instr_check
from neuronemu.sim import timing
from neuronemu_isa import Engine
from neuronemu_isa.spec import hbm_traffic

MATMUL = str(Path(__file__).resolve().parents[1] / "timing" / "v12_matmuls.py")
BF16 = ml_dtypes.bfloat16

# A replayed loop whose SBUF destination moves down the partitions each iteration (its
# transfers' DMA engines follow the first partition: no repeat shares its base's row), and
# one whose accumulation into a tile made before it is decided per repeat, and whose second
# matmul finds its stationary operand loaded.
MOVING = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def bands(x, w):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(8):
        nisa.dma_copy(dst=t[i * 16 : (i + 1) * 16, :], src=x[i * 16 : (i + 1) * 16, :])
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(6):
        a = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=w[k * 128 : (k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=t)
        nisa.nc_matmul(dst=acc, stationary=a, moving=t)  # (loaded already)
    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out
"""


def _cases(tmp_path: Path):
    moving = tmp_path / "bands.py"
    moving.write_text(MOVING)
    f32 = np.float32
    return [
        (MATMUL, "tiled", {"lhsT": ((1024, 512), BF16), "rhs": ((1024, 2048), BF16)}),
        (MATMUL, "hoisted", {"lhsT": ((1024, 512), BF16), "rhs": ((1024, 2048), BF16)}),
        (MATMUL, "blocked_all", {"lhsT": ((2048, 2048), BF16), "rhs": ((2048, 1024), BF16)}),
        (str(moving), "bands", {"x": ((128, 512), f32), "w": ((768, 128), f32)}),
    ]


@pytest.fixture(params=range(4), ids=["tiled", "hoisted", "blocked_all", "bands"])
def result(request, tmp_path):
    path, kernel, shapes = _cases(tmp_path)[request.param]
    inputs = {name: np.zeros(shape, dtype) for name, (shape, dtype) in shapes.items()}
    got = neuronemu.run(path, inputs, kernel=kernel, timing_only=True, print_fn=lambda _: None)
    assert got.program.repeats, "the case must have replayed loops"
    return got


def test_the_dma_rows_are_each_transfers_own(result):
    program = result.timeline.program
    arch, instrs = program.arch, program.raw_instrs
    a = timing.schedule_arrays(program)
    transfers = [i for i, ins in enumerate(instrs) if ins.engine == Engine.DMA]
    assert transfers
    for i in transfers:
        ins = instrs[i]
        first, count, hbm, gap = timing._dma_form(arch, *timing._transfer_sides(ins.operands))
        assert a["dma_lo"][i] == first + ins.core * arch.dma_queues, i
        assert a["dma_hi"][i] - a["dma_lo"][i] == count, i
        assert a["hbm_bytes"][i] == hbm and a["gap_ns"][i] == gap, i


def test_the_preload_times_are_each_matmuls_own(result):
    """The Tensor engine loads a matmul's stationary operand unless its previous
    instruction on that core loaded the same elements of the same tensor."""
    program = result.timeline.program
    arch, instrs = program.arch, program.raw_instrs
    got = timing.schedule_arrays(program)["pre_ns"]
    want = np.zeros(len(instrs))
    held: dict[int, tuple] = {}  # core -> (tensor id, pattern) loaded
    for i, ins in enumerate(instrs):
        if ins.engine != Engine.TENSOR:
            continue
        name = ins.spec.preloaded
        view = ins.operand(name) if name else None
        now = None if view is None else (view.tensor.id, view.as_pattern())
        if now is not None and held.get(ins.core) != now and ins.spec.preload_cost is not None:
            cost = ins.spec.preload_cost(instr_check(ins, arch))
            want[i] = cost / arch.clock_ghz("tensor")
        held[ins.core] = now
    assert np.array_equal(got, want)
    assert (want > 0).any()


def test_hbm_bytes_flops_and_counts_are_every_instructions_own(result):
    program = result.timeline.program
    arch, instrs = program.arch, program.raw_instrs
    read = write = flops = 0
    for ins in instrs:
        r, w = hbm_traffic(ins.spec, instr_check(ins, arch))
        read, write = read + r, write + w
        if ins.spec.flops is not None:
            flops += ins.spec.flops(instr_check(ins, arch))
    assert result.hbm_bytes == {"read": read, "write": write}
    assert read > 0 and write > 0
    assert result.matmul_flops == flops > 0
    counts = collections.Counter(
        "dma" if ins.engine == Engine.DMA else ins.engine.value for ins in instrs
    )
    assert {k: v for k, v in program.engine_counts().items() if v} == dict(counts)


def test_the_critical_paths_lines_are_its_instructions_own(result):
    path = result.critical_path
    instrs = result.timeline.program.raw_instrs
    assert path.stretches and path.lines
    assert all(path.lines[s.index] == str(instrs[s.index].span) for s in path.stretches)
    _by_cause_is_a_walks(path, instrs)


def _by_cause_is_a_walks(path, instrs) -> None:
    """By cause and by line (its text): the sums a walk over the stretches makes."""
    totals: dict[str, float] = {}
    per_line: dict[str, dict[str, float]] = {}
    for s in path.stretches:
        if s.ns > 0:
            totals[s.cause] = totals.get(s.cause, 0.0) + s.ns
            lines = per_line.setdefault(s.cause, {})
            line = str(instrs[s.index].span)
            lines[line] = lines.get(line, 0.0) + s.ns
    got = path.by_cause()
    assert {cause: ns for cause, ns, _ in got} == totals
    for cause, _, lines in got:
        assert dict(lines) == per_line[cause]
        assert len(lines) == len(per_line[cause])  # (a line once)


def test_a_text_programs_critical_path_counts_each_line_once(tmp_path):
    """A program read from its text form gives each instruction a span of its own: the
    stretches of one kernel line still add up under that line, once."""
    inputs = {"lhsT": np.ones((512, 256), BF16), "rhs": np.ones((512, 1024), BF16)}
    program = neuronemu.compile_kernel(MATMUL, inputs, kernel="tiled")
    text = tmp_path / "tiled.nasm"
    text.write_text(dumps(program))
    got = neuronemu.run(text, inputs, timing_only=True, print_fn=lambda _: None)
    instrs = got.timeline.program.raw_instrs
    assert len({id(ins.span) for ins in instrs}) > len({str(ins.span) for ins in instrs})
    _by_cause_is_a_walks(got.critical_path, instrs)


def test_a_repeat_whose_flag_or_partition_moves_is_not_taken_as_its_bases(tmp_path):
    """`bands`: its first loop's transfers move across partitions (the table's
    `base_where` keeps them their own) and its second loop's matmul decides its
    accumulation per repeat (`Repeated.alike` is False for it)."""
    path, kernel, shapes = _cases(tmp_path)[3]
    inputs = {name: np.zeros(shape, dtype) for name, (shape, dtype) in shapes.items()}
    program = neuronemu.compile_kernel(path, inputs, kernel=kernel)
    instrs = program.raw_instrs
    by_kind = {}
    for rep in program.repeats:
        for j in range(rep.period):
            by_kind[instrs[rep.base + j].spec.name] = (rep, j)
    rep, j = by_kind["nc_matmul"]
    assert not rep.alike[j]
    assert "dma_copy" in by_kind
    table = program.table()
    still = table.base_where(timing._sbuf_names)
    moving = [
        i
        for i, ins in enumerate(instrs)
        if ins.spec.name == "dma_copy" and table.base[i] != i and still[i] == i
    ]
    assert moving and all(table.form_base[i] != i for i in moving)


def test_the_access_table_of_nested_blocks_is_that_listed_one_by_one(result):
    """A block whose base holds inner blocks takes the base's accesses from those already
    made (`access_table._rows_from`): the same table as from each instruction's."""
    from neuronemu.checks.access_table import Accesses

    program = result.timeline.program
    made = Accesses(program)
    repeats, program.repeats = program.repeats, []
    try:
        listed = Accesses(program)
    finally:
        program.repeats = repeats
    for column in ("instr", "slot", "tensor", "write", "plain", "merged", "lo", "hi", "ids"):
        np.testing.assert_array_equal(getattr(made, column), getattr(listed, column))
