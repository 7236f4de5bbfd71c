"""SBUF/PSUM placement: rotation through the buffer, reuse of freed bytes (and the waits it
needs), partition offsets, the peak of bytes in use, and tiles as views of the buffers."""

from __future__ import annotations

import bisect
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.build import allocator, spill
from neuronemu.checks.hazards import first_race
from neuronemu.errors import ConstraintError, RaceError
from neuronemu.nasm.read import load_program
from neuronemu.nasm.write import dumps
from neuronemu.sim import functional

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# Each iteration loads a 64 KiB-per-partition tile and reads it on the Vector engine. On trn1
# (176 KiB usable) the third tile does not fit after the second, so it wraps to offset 0.
RING = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(3):
        t = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        s = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t[:, i:i + 4])
        nisa.dma_copy(dst=out, src=s)
    return out
"""


def compile_src(kernel_file, body: str, target="trn1", inputs=None):
    inputs = (
        {"a": np.arange(128 * 16384, dtype=np.float32).reshape(128, 16384)}
        if inputs is None
        else inputs
    )
    return neuronemu.compile_kernel(kernel_file(HEADER + body), inputs, target=target)


def placed(program):
    return {p.tensor.name: (p.offset, p.size) for p in program.placements.values()}


def test_each_iteration_gets_fresh_space_until_the_ring_wraps(kernel_file):
    p = compile_src(kernel_file, RING)
    where = placed(p)
    assert where["t"] == (0, 65536)
    assert where["t.1"][0] > where["t"][0] + 65536 - 1  # not over t, though t is dead
    assert where["t.2"] == (0, 65536)  # no room after t.1: wraps onto t
    assert sorted(
        (p.placements[o].tensor.name, p.placements[n].tensor.name) for o, n in p.reuses
    ) == [("s", "s.2"), ("t", "t.2")]
    # The peak counts bytes live at once (t, s; then t.1, s.1; ...), not addresses spanned.
    assert p.sbuf_peak_bytes == 65536 + 16


def test_first_fit_packs_freed_space_at_once(kernel_file, monkeypatch):
    monkeypatch.setattr(allocator, "ROTATE", False)
    p = compile_src(kernel_file, RING)
    assert placed(p)["t.1"] == (0, 65536) and placed(p)["t.2"] == (0, 65536)


def test_a_reused_tile_waits_for_the_last_reader_of_the_old_one(kernel_file):
    p = compile_src(kernel_file, RING)
    by_name = {}
    for ins in p.instrs:
        for _, v in ins.views("in") + ins.views("out"):
            by_name.setdefault(v.tensor.name, []).append(ins)
    last_read_of_t = by_name["t"][-1]
    first_write_of_t2 = by_name["t.2"][0]
    assert last_read_of_t.engine.value == "vector" and first_write_of_t2.engine.value == "dma"
    assert last_read_of_t.index in first_write_of_t2.deps
    assert last_read_of_t.index in first_write_of_t2.waits  # across streams: a semaphore
    assert first_race(p) is None


def test_deleting_a_reuse_wait_from_the_text_form_is_a_race(kernel_file, tmp_path):
    p = compile_src(kernel_file, RING)
    a = {"a": np.zeros((128, 16384), np.float32)}
    text = dumps(p)
    waiter = next(
        i
        for i in p.instrs
        if i.spec.name == "dma_copy" and i.views("out")[0][1].tensor.name == "t.2"
    )
    line = next(x for x in text.splitlines() if x.strip().startswith(f"@{waiter.index} "))
    assert "wait(" in line
    path = tmp_path / "k.nasm"
    path.write_text(text)
    assert first_race(load_program(path, a)) is None  # as dumped: still race-free
    path.write_text(
        text.replace(line, line[: line.index(" wait(")] + line[line.index(")  ;") + 1 :])
    )
    race = first_race(load_program(path, a))
    assert isinstance(race, RaceError)
    assert "placed where t was" in str(race) and f"#{waiter.index} dma_copy" in str(race)


def test_values_are_right_when_tiles_share_bytes_in_every_order(kernel_file):
    a = np.random.default_rng(0).standard_normal((128, 16384)).astype(np.float32)
    p = compile_src(kernel_file, RING, inputs={"a": a})
    assert p.reuses
    for seed in (None, 1, 2, 3):
        out = functional.execute(p, {"a": a}, shuffle_seed=seed)["out"]
        np.testing.assert_array_equal(out, a[:, 2:6])  # the last iteration's slice


def test_a_tile_over_freed_bytes_reads_as_fresh_memory(kernel_file):
    # u takes t's bytes after t dies; reading u before writing it sees NaN, not t's data.
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
    nisa.dma_copy(dst=t, src=a[:, 0:8])
    nisa.dma_copy(dst=out, src=t)
    u = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
    nisa.dma_copy(dst=out, src=u)
    return out
"""
    a = np.ones((128, 16384), np.float32)
    path = kernel_file(HEADER + body)
    result = neuronemu.run(path, {"a": a}, target="trn1", allow_uninit=True)
    assert result.program.reuses
    assert np.isnan(result.outputs["out"]).all()


def test_tiles_in_different_partitions_may_share_bytes(kernel_file, tmp_path):
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    lo = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf, address=(0, 1024))
    hi = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf, address=(64, 1024))
    nisa.dma_copy(dst=lo, src=a[0:64, 0:8])
    nisa.dma_copy(dst=hi, src=a[64:128, 8:16])
    nisa.dma_copy(dst=out[0:64, :], src=lo)
    nisa.dma_copy(dst=out[64:128, :], src=hi)
    return out
"""
    a = np.random.default_rng(1).standard_normal((128, 16384)).astype(np.float32)
    result = neuronemu.run(kernel_file(HEADER + body), {"a": a}, target="trn1")
    parts = {p.tensor.name: (p.partition, p.offset) for p in result.program.placements.values()}
    assert parts == {"lo": (0, 1024), "hi": (64, 1024)}
    np.testing.assert_array_equal(result.outputs["out"][:64], a[:64, 0:8])
    np.testing.assert_array_equal(result.outputs["out"][64:], a[64:, 8:16])
    assert "[64, 128)" in result.program.memory_map()
    # lo and hi are live together but in different partitions: no partition holds both.
    assert result.program.sbuf_peak_bytes == 32
    # The text form keeps the placements.
    text = dumps(result.program)
    assert ".tensor hi tile sbuf float32[64,8] at(64, 1024)" in text
    path = tmp_path / "k.nasm"
    path.write_text(text)
    again = neuronemu.run(path, {"a": a})
    assert {
        p.tensor.name: (p.partition, p.offset) for p in again.program.placements.values()
    } == parts
    np.testing.assert_array_equal(again.outputs["out"], result.outputs["out"])


@pytest.mark.parametrize(
    "parts, start, ok",
    [
        (128, 0, True),
        (128, 32, False),
        (64, 64, True),
        (64, 32, False),
        (32, 96, True),
        (32, 16, False),
        (16, 112, False),
    ],
)
def test_a_placed_tile_follows_the_start_partition_rules(kernel_file, parts, start, ok):
    body = f"""
@nki.jit
def k(a):
    t = nl.ndarray(({parts}, 8), dtype=nl.float32, buffer=nl.sbuf, address=({start}, 0))
    nisa.memset(dst=t, value=0.0)
    return a
"""
    if ok:
        assert compile_src(kernel_file, body).placements
    else:
        with pytest.raises(ConstraintError, match=f"may start at partition .*not {start}"):
            compile_src(kernel_file, body)


def test_psum_tiles_rotate_through_the_banks(kernel_file):
    body = """
@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    for i in range(10):
        acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=x, moving=x)
        nisa.tensor_copy(dst=x[:, 0:4], src=acc[:, 0:4])
    return a
"""
    p = compile_src(kernel_file, body)
    banks = [
        pl.offset // 2048
        for pl in sorted(p.placements.values(), key=lambda q: q.first)
        if pl.tensor.buffer.value == "psum"
    ]
    assert banks == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
    assert p.psum_peak_bytes == 2048


def test_rotation_keeps_clear_of_a_tile_the_kernel_places_later(kernel_file):
    # w is placed automatically while p, first used later, is pinned where the ring would
    # otherwise put w: w must go elsewhere.
    body = """
@nki.jit
def k(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(3):
        t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=out, src=t[:, 0:8])
    w = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=w, value=1.0)
    p = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf, address=(0, 53248))
    nisa.tensor_copy(dst=p, src=w)
    nisa.dma_copy(dst=out, src=p[:, 0:8])
    return out
"""
    p = compile_src(kernel_file, body)
    where = placed(p)
    assert where["p"] == (53248, 16384)
    lo, size = where["w"]
    assert lo + size <= 53248 or lo >= 53248 + 16384


def test_a_placed_tile_past_capacity_says_where_it_would_fit(kernel_file):
    from neuronemu.errors import AllocationError

    body = """
@nki.jit
def k(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 180000))
    nisa.memset(dst=t, value=0.0)
    return a
"""
    with pytest.raises(AllocationError, match="at offset 180000, past the 180224 usable") as info:
        compile_src(kernel_file, body)
    assert info.value.hint == "place it below 179968 (or use a smaller tile)"


@settings(deadline=None, max_examples=200)
@given(data=st.data())
def test_live_tiles_by_next_access_are_those_a_scan_finds(data):
    # make_room's index (spill.ByNextAccess): the tiles next accessed after a bound,
    # latest first then by id, as now moves on and tiles come and go; against a scan of
    # every live tile (what make_room did before it had the index).
    index = spill.ByNextAccess()
    live: dict[int, list[int]] = {}  # id -> accesses
    placements: dict[int, allocator.Placement] = {}
    now = 0
    for tid in range(data.draw(st.integers(1, 40))):
        now += data.draw(st.integers(0, 3))
        if live and data.draw(st.booleans()):
            gone = data.draw(st.sampled_from(sorted(live)))
            del live[gone]
            index.remove(gone)
        accesses = sorted(data.draw(st.sets(st.integers(0, 60), max_size=6)))
        t = SimpleNamespace(id=tid)
        placements[tid] = allocator.Placement(t, 0, 1, now, now)  # type: ignore[arg-type]
        live[tid] = accesses
        index.add(placements[tid], accesses, now)
        bound = now + data.draw(st.integers(0, 10))
        scan = []
        for other, seq in live.items():
            k = bisect.bisect_left(seq, now)
            if k < len(seq) and seq[k] > bound:
                scan.append((-seq[k], other))
        want = [(-key, other) for key, other in sorted(scan)]
        got = [(nxt, p.tensor.id) for nxt, p in index.after(bound, now)]
        assert got == want
