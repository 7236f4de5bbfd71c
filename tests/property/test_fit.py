"""The allocator's first fit (neuronemu.build.allocator._fit_between) against a byte-by-byte search
on generated maps: placements of one or two quadrant maps made in sequence (later ones over
earlier, dead ones), live or dead at the instruction asked about, and reserved byte ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neuronemu.build.allocator import Placement, _ByteMap, _fit_between

CAPACITY = 256


def _oracle(placed, reserved, size, step, lo, hi, now):
    """The first aligned offset in [lo, hi) whose bytes no live owner nor reserved range
    holds: each map's bytes told one by one (the last placement over a byte owns it)."""
    owners = []
    for entries in placed:
        byte = [None] * CAPACITY
        for p in entries:
            for b in range(p.offset, p.offset + p.size):
                byte[b] = p
        owners.append(byte)
    offset = -(-lo // step) * step
    while offset < hi and offset + size <= CAPACITY:
        span = range(offset, offset + size)
        if not any(
            o is not None and o.last >= now for byte in owners for o in (byte[b] for b in span)
        ):
            if not any(r0 < offset + size and offset < r1 for r0, r1 in reserved):
                return offset
        offset += step
    return None


@st.composite
def maps(draw):
    """Maps as the allocator makes them: placements in order of their first instruction,
    each over bytes no tile then live holds; and an instruction, at or after the last
    placement's first, to ask at."""
    placed, quads, now = [], [], 0
    for _ in range(draw(st.integers(1, 2))):
        m, entries = _ByteMap(), []
        for _ in range(draw(st.integers(0, 14))):
            now += draw(st.integers(0, 2))
            offset = draw(st.integers(0, CAPACITY - 1))
            size = draw(st.integers(1, min(64, CAPACITY - offset)))
            p = Placement(None, offset, size, now, now + draw(st.integers(0, 8)))  # type: ignore[arg-type]
            if any(
                q.last >= now and q.offset < offset + size and offset < q.offset + q.size
                for q in entries
            ):
                continue  # (the allocator never places over a live tile)
            m.assign(offset, offset + size, p)
            entries.append(p)
        placed.append(entries)
        quads.append(m)
    return placed, quads, now + draw(st.integers(0, 6))


@given(
    maps(),
    st.lists(st.tuples(st.integers(0, CAPACITY), st.integers(1, 40)), max_size=3),
    st.integers(1, 80),
    st.sampled_from([1, 2, 4, 32]),
    st.integers(0, CAPACITY),
    st.integers(0, CAPACITY + 16),
)
def test_first_fit_is_the_first_free_aligned_offset(placed_quads, reserved, size, step, lo, hi):
    placed, quads, now = placed_quads
    reserved = [(r0, r0 + n) for r0, n in reserved]
    got = _fit_between(quads, reserved, size, step, CAPACITY, lo, hi, now)
    assert got == _oracle(placed, reserved, size, step, lo, hi, now)


def test_the_oracle_sees_a_blocker():
    # (the test's own search is not vacuous: a live tile moves the answer past it)
    m = _ByteMap()
    p = Placement(None, 0, 40, 0, 9)  # type: ignore[arg-type]
    m.assign(0, 40, p)
    assert _oracle([[p]], [], 16, 32, 0, CAPACITY, 5) == 64
    assert _fit_between([m], [], 16, 32, CAPACITY, 0, CAPACITY, 5) == 64
