"""A replayed iteration's tiles whose histories and live ranges are left to be made when asked
for (neuronemu.replay.repeats, `_Deferred`): the program, its placements, reuses, reuse
dependencies and cycles are those of the tiles' state made at once, whether the passes take
it as arrays (the allocator, the reuse dependencies) or an instruction touches a tile again
after its loop."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu.replay import repeats

BF16 = ml_dtypes.bfloat16
MATMUL = "tests/timing/v12_matmuls.py"

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# The last iteration's tile is read again after the loop: its state is made then.
AFTER_LOOP = HEADER + (
    "@nki.jit\n"
    "def k(x):\n"
    "    out = nl.ndarray((1024, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    last = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    for m in nl.affine_range(8):\n"
    "        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=t, src=x[m * 128 : (m + 1) * 128, :])\n"
    "        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
    "        nisa.tensor_copy(dst=o, src=t)\n"
    "        nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, :], src=o)\n"
    "    again = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.tensor_copy(dst=again, src=t)\n"
    "    nisa.dma_copy(dst=last, src=again)\n"
    "    return out, last\n"
)


def _facts(path: str, inputs: dict, kernel: str | None) -> dict:
    """What the deferral must not change: the program text, memory map, reuses, reuse
    dependencies, each instruction's deps and the cycles of a timing-only run."""
    program = neuronemu.compile_kernel(path, inputs, kernel=kernel)
    consumers, producers = program.reuse_deps  # (before `instrs` settles them)
    names = {t.id: t.name for t in program.tensors}
    return {
        "memory map": program.memory_map(),
        "reuses": [(names[old], names[new]) for old, new in program.reuses],  # (not ids)
        "reuse deps": (consumers.tolist(), producers.tolist()),
        "program text": dumps(program),
        "deps": [ins.deps for ins in program.instrs],
        "cycles": neuronemu.run(path, inputs, kernel=kernel, timing_only=True).cycles,
    }


def _differences(path: str, inputs: dict, kernel: str | None = None) -> list[str]:
    repeats.DEFER = False
    try:
        made = _facts(path, inputs, kernel)
    finally:
        repeats.DEFER = True
    deferred = _facts(path, inputs, kernel)
    return [what for what in made if made[what] != deferred[what]]


@pytest.mark.parametrize("kernel", ["tiled", "hoisted", "blocked_free"])
def test_replayed_matmuls_with_deferred_tiles_are_those_made_at_once(kernel):
    inputs = {"lhsT": np.zeros((1024, 1024), BF16), "rhs": np.zeros((1024, 2048), BF16)}
    assert _differences(MATMUL, inputs, kernel) == []


def test_a_tile_touched_after_its_loop_has_the_state_made_at_once(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(AFTER_LOOP)
    inputs = {"x": np.ones((1024, 512), np.float32)}
    assert _differences(str(path), inputs) == []
    # (and the read after the loop waits for the copy into the last iteration's tile)
    program = neuronemu.compile_kernel(str(path), inputs)
    instrs = program.instrs
    after = next(i for i in instrs if i.spec.name == "tensor_copy" and i.index > len(instrs) - 3)
    into_last = max(
        i.index
        for i in instrs[: after.index]
        if i.spec.name == "dma_copy"
        and i.queue >= 0
        and i.view("dst").tensor is after.view("src").tensor
    )
    assert into_last in after.deps


def test_deferred_live_ranges_are_found_by_any_int_id(monkeypatch):
    # (the mapping the allocator gets: a tile a replay deferred, by Python or NumPy id)
    from neuronemu.build import allocator

    seen = []
    real = allocator.allocate

    def spy(tensors, uses, *args, **kwargs):
        seen.append((tensors, uses))
        return real(tensors, uses, *args, **kwargs)

    # (the plan the builder asks for, `allocate_planned`, places by this one at this size)
    monkeypatch.setattr(allocator, "allocate", spy)
    inputs = {"lhsT": np.zeros((1024, 1024), BF16), "rhs": np.zeros((1024, 2048), BF16)}
    neuronemu.compile_kernel(MATMUL, inputs, kernel="tiled")
    tensors, uses = seen[0]
    deferred = [t.id for t in tensors if t.id in uses and t.id not in uses.uses]
    assert deferred, "the case must defer some tiles' live ranges"
    for tid in deferred[:: max(1, len(deferred) // 50)]:
        got = uses[np.int64(tid)]
        assert np.int64(tid) in uses and got == uses[tid]
        assert all(type(x) is int for x in got)
