"""An independent, scalar XORWOW (Marsaglia 2003) for checking the PRNG instructions."""

from __future__ import annotations

M = 0xFFFFFFFF


def xorwow(state: list[int], count: int) -> tuple[list[int], list[int]]:
    """`count` outputs of one generator [x, y, z, w, v, d]; returns (outputs, new state)."""
    x, y, z, w, v, d = state
    out = []
    for _ in range(count):
        t = (x ^ (x >> 2)) & M
        x, y, z, w = y, z, w, v
        v = ((v ^ ((v << 4) & M)) ^ (t ^ ((t << 1) & M))) & M
        d = (d + 362437) & M
        out.append((v + d) & M)
    return out, [x, y, z, w, v, d]


def lane(words: list[int], count: int) -> tuple[list[int], list[int]]:
    """One lane with several generators of 6 words used in turn."""
    gens = [list(words[i : i + 6]) for i in range(0, len(words), 6)]
    out = []
    for i in range(count):
        (value,), gens[i % len(gens)] = xorwow(gens[i % len(gens)], 1)
        out.append(value)
    return out, [w for g in gens for w in g]
