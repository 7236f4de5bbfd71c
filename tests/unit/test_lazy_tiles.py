"""A quick replayed iteration's tiles made when read (neuronemu.replay.lazy_tiles): the
program, its tiles (ids, names, kinds), placements, reuses, reuse dependencies and cycles are
those of the tiles made at once, with the allocator's plain and jitted paths; and the
columns the allocator and the checks take (`tensor_groups`) are those of the tiles made."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.build import allocator
from neuronemu.nasm.write import dumps
from neuronemu.program.lazy import Tiles, tensor_groups
from neuronemu.replay import lazy_tiles

BF16 = ml_dtypes.bfloat16
MATMUL = "tests/timing/v12_matmuls.py"

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# Tiles never bound to a variable (named when the trace ends), names counted on across
# loops, a tile read after its loop.
NAMES = HEADER + (
    "@nki.jit\n"
    "def k(x):\n"
    "    out = nl.ndarray((1024, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    for m in nl.affine_range(8):\n"
    "        t = nl.load(x[m * 128 : (m + 1) * 128, :])\n"
    "        nl.store(out[m * 128 : (m + 1) * 128, :], value=nl.exp(t))\n"
    "    for m in nl.affine_range(6):\n"
    "        t = nl.load(x[m * 128 : (m + 1) * 128, :])\n"
    "        u = nl.multiply(t, 2.0)\n"
    "        nl.store(out[m * 128 : (m + 1) * 128, :], value=nl.add(u, t))\n"
    "    nl.store(out[0:128, :], value=nl.exp(u))\n"
    "    return out\n"
)

# A tile without a name from its loop, bound to a variable after it (made through the
# iteration's own list, then named); a loop that makes no tile (it takes no ids).
AFTER = HEADER + (
    "def two(x, m):\n"
    "    t = x[m * 128 : (m + 1) * 128, :]\n"
    "    return nl.load(t), nl.exp(nl.load(t))\n"
    "\n"
    "@nki.jit\n"
    "def k(x):\n"
    "    out = nl.ndarray((1024, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    for m in nl.affine_range(8):\n"
    "        pair = two(x, m)\n"
    "        nl.store(out[m * 128 : (m + 1) * 128, :], value=nl.add(pair[0], pair[1]))\n"
    "    last = pair[1]\n"
    "    for m in nl.affine_range(8):\n"
    "        nl.store(out[m * 128 : (m + 1) * 128, :], value=last)\n"
    "    u = nl.exp(last)\n"
    "    nl.store(out[0:128, :], value=u)\n"
    "    return out\n"
)


def _facts(path: str, inputs: dict, kernel: str | None) -> dict:
    """What making the tiles late must not change. The run first (its allocation and checks
    take the tiles as columns), then the program's facts, its tiles last."""
    cycles = neuronemu.run(path, inputs, kernel=kernel, timing_only=True).cycles
    program = neuronemu.compile_kernel(path, inputs, kernel=kernel)
    unmade = program.tensors.later if isinstance(program.tensors, Tiles) else 0
    consumers, producers = program.reuse_deps
    memory_map = program.memory_map()
    reuses = list(program.reuses)
    text = dumps(program)
    deps = [ins.deps for ins in program.instrs]
    tensors = program.tensors
    lowest = min(t.id for t in tensors)
    names = {t.id: t.name for t in tensors}
    return {
        "cycles": cycles,
        "memory map": memory_map,
        "reuses": [(names[old], names[new]) for old, new in reuses],
        "reuse deps": (consumers.tolist(), producers.tolist()),
        "program text": text,
        "deps": deps,
        "tiles": [
            (t.id - lowest, t.name, t.shape, t.dtype.name, t.buffer, t.kind, t.core, t.address)
            for t in tensors
        ],
        "unmade": unmade > 0,
    }


def _compare(path: str, inputs: dict, kernel: str | None = None) -> tuple[list[str], dict]:
    lazy_tiles.ENABLED = False
    try:
        made = _facts(path, inputs, kernel)
    finally:
        lazy_tiles.ENABLED = True
    late = _facts(path, inputs, kernel)
    return [what for what in made if what != "unmade" and made[what] != late[what]], late


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("kernel", ["tiled", "hoisted", "blocked_free"])
def test_replayed_matmuls_with_late_tiles_are_those_made_at_once(kernel, jitted, monkeypatch):
    if jitted:  # (the jitted placement takes the tiles as columns)
        monkeypatch.setattr(allocator, "JIT_ABOVE", 0)
    inputs = {"lhsT": np.zeros((1024, 1024), BF16), "rhs": np.zeros((1024, 2048), BF16)}
    differences, late = _compare(MATMUL, inputs, kernel)
    assert differences == []
    # (tiles left unmade by the build: the path was taken; the plain path makes them all)
    assert late["unmade"] == jitted


def test_unbound_tiles_and_names_counted_across_loops_are_those_made_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(allocator, "JIT_ABOVE", 0)
    path = tmp_path / "k.py"
    path.write_text(NAMES)
    differences, late = _compare(str(path), {"x": np.ones((1024, 512), np.float32)})
    assert differences == []
    assert late["unmade"]
    names = [name for _, name, *_ in late["tiles"]]
    assert len(set(names)) == len(names) and "t.13" in names and "u.5" in names


def test_a_tile_bound_after_its_loop_and_a_loop_without_tiles_as_made_at_once(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(allocator, "JIT_ABOVE", 0)
    path = tmp_path / "k.py"
    path.write_text(AFTER)
    differences, late = _compare(str(path), {"x": np.ones((1024, 512), np.float32)})
    assert differences == []
    named = {name: at for at, name, *_ in late["tiles"]}
    assert "last" in named and "last.1" not in named
    # (the tile-free loop took no ids: `u` follows the first loop's last tile)
    assert named["u"] == max(at for at, name, *_ in late["tiles"] if name != "u") + 1


def test_tile_columns_are_those_of_the_tiles_made(monkeypatch):
    monkeypatch.setattr(allocator, "JIT_ABOVE", 0)
    program = neuronemu.compile_kernel(
        MATMUL,
        {"lhsT": np.zeros((1024, 512), BF16), "rhs": np.zeros((1024, 1024), BF16)},
        kernel="tiled",
    )
    tensors = program.tensors
    assert isinstance(tensors, Tiles) and tensors.later
    # some tiles made here and there (runs partly made), then the columns
    for k in range(0, len(tensors), 7):
        tensors[k]  # noqa: B018
    ids, groups, reps = found = tensor_groups(tensors)
    assert tensor_groups(tensors) is found  # (worked out once while the list is the same)
    tensors.append(tensors[0])
    assert tensor_groups(tensors) is not found and len(tensor_groups(tensors)[0]) == len(ids) + 1
    del tensors[-1]
    # what changes the list but by appending forgets them (a change keeping its length too)
    tensor_groups(tensors)
    tensors.insert(0, tensors.pop())
    assert tensors.groups is None
    tensors.insert(len(tensors), tensors.pop(0))
    made = list(tensors)  # (every tile made)
    assert ids.tolist() == [t.id for t in made]
    for t, g in zip(made, groups.tolist()):
        rep = reps[g]
        assert (rep.shape, rep.dtype, rep.buffer, rep.kind, rep.core, rep.address) == (
            t.shape,
            t.dtype,
            t.buffer,
            t.kind,
            t.core,
            t.address,
        )
        assert (rep.partition_offset, rep.base, rep.kind_of_buffer) == (
            t.partition_offset,
            t.base,
            t.kind_of_buffer,
        )
    # every tile made once: the same object on every read
    assert all(a is b for a, b in zip(made, tensors))
