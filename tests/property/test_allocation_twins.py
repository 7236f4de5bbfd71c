"""The allocator's two paths agree: the plain one (neuronemu.build.allocator.allocate) and the one
over flat arrays (allocator.allocate_columns, by the jitted neuronemu.jit.compiled.place and by
its plain twin) give the same placements, in the same order, the same reuses and the same
peaks; where the plain path raises (a tile over capacity or placed wrongly), the arrays path
declines (None), so that the plain one says why.

Tiles are generated directly: SBUF and PSUM tiles of one to four quadrants, some placed by
the kernel (`address=`, sometimes misaligned or over a live tile), live over random ranges,
in a buffer small enough that the ring wraps and some tiles do not fit."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuronemu.build import allocator
from neuronemu.errors import AllocationError, SourceSpan
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor
from neuronemu.jit import compiled as _jit

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
SPAN = SourceSpan("tiles.py", 1, 1)


def _arch(align: int, capacity: int) -> SimpleNamespace:
    # (the constants the allocator reads; capacities small enough to wrap and overflow)
    return SimpleNamespace(
        name="tiny",
        tile_quadrant_partitions=32,
        sbuf_partitions=128,
        sbuf_usable_bytes_per_partition=capacity,
        sbuf_min_align_bytes=align,
        psum_bytes_per_partition=4 * 512,
        psum_bank_bytes=512,
    )


@st.composite
def tiles(draw, capacity: int):
    """(tensors, uses): tiles in creation order, most of them used over [first, last]; now
    and then many (so that each quadrant's segments outgrow their first arrays)."""
    tensors, uses = [], {}
    many = draw(st.integers(0, 9)) == 0
    for k in range(draw(st.integers(1, 120 if many else 24))):
        psum = draw(st.integers(0, 5)) == 0
        parts = draw(st.sampled_from([128, 128, 96, 64, 33, 32, 16]))
        p0 = None
        if parts < 128 and draw(st.booleans()):
            p0 = draw(st.sampled_from([p for p in (0, 32, 64, 96) if p + parts <= 128]))
        dtype = ALL_DTYPES[draw(st.sampled_from(["float32", "bfloat16", "int8"]))]
        width = draw(st.integers(1, 300 if not psum else 512))  # (PSUM: up to 4 banks)
        t = Tensor(f"t{k}", (parts, width), dtype, BUFFERS["psum" if psum else "sbuf"], SPAN)
        t.partition_offset = p0
        if draw(st.integers(0, 6)) == 0:  # placed by the kernel: mostly aligned and in range
            held = width * dtype.itemsize
            limit = (4 * 512 if psum else capacity) - held
            t.address = draw(
                st.one_of(
                    st.integers(0, max(limit, 0) // 512).map(lambda n: 512 * n),
                    st.integers(0, max(limit, 0) // 64).map(lambda n: 64 * n),
                    st.just(max(limit, 0)),
                    st.integers(0, capacity),
                )
            )
        tensors.append(t)
        if draw(st.integers(0, 9)):
            first = draw(st.integers(0, 40 if not many else 200))
            uses[t.id] = [first, first + draw(st.integers(0, 12))]
    return tensors, uses


def _plain(tensors, uses, arch, rotate):
    try:
        return allocator.allocate(tensors, uses, [], arch, rotate=rotate, use_jit=False)
    except AllocationError:
        return None


def _summary(allocation):
    """What an allocation says, by tile name (ids differ between examples)."""
    if allocation is None:
        return None
    placements = [
        (p.tensor.name, p.offset, p.size, p.first, p.last, p.pinned, p.partition)
        for p in allocation.placements.values()
    ]
    reuses = [(old.tensor.name, new.tensor.name) for old, new in allocation.reuses]
    return placements, reuses, {b.value: n for b, n in allocation.peak.items()}


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 32, 64]), st.sampled_from([2048, 3000, 3072]))
def test_the_arrays_path_places_as_the_plain_one(data, align, capacity):
    tensors, uses = data.draw(tiles(capacity))
    rotate = data.draw(st.booleans())
    arch = _arch(align, capacity)
    want = _summary(_plain(tensors, uses, arch, rotate))
    for place in (_jit._place_py, _jit.place):
        got = allocator.allocate_columns(tensors, uses, arch, rotate, place)  # type: ignore[arg-type]
        assert _summary(got) == want


def test_the_generated_tiles_wrap_reuse_and_overflow():
    # (the examples are not vacuous: rings wrap over freed bytes, making reuses, and a tile
    # that does not fit makes the plain path raise)
    arch = _arch(1, 3000)
    sbuf = BUFFERS["sbuf"]
    f32 = ALL_DTYPES["float32"]
    ring = [Tensor(f"r{k}", (128, 300), f32, sbuf, SPAN) for k in range(4)]
    uses = {t.id: [k, k + 1] for k, t in enumerate(ring)}
    got = allocator.allocate_columns(ring, uses, arch, True, _jit.place)  # type: ignore[arg-type]
    assert _summary(got) == _summary(_plain(ring, uses, arch, True))
    assert got is not None and [(o.tensor.name, n.tensor.name) for o, n in got.reuses] == [
        ("r0", "r2"),
        ("r1", "r3"),
    ]
    big = [Tensor(f"b{k}", (128, 400), f32, sbuf, SPAN) for k in range(2)]
    uses = {t.id: [0, 3] for t in big}
    assert _plain(big, uses, arch, True) is None
    assert allocator.allocate_columns(big, uses, arch, True, _jit.place) is None  # type: ignore[arg-type]
