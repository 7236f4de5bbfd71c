"""The engines' pseudo-random generators: XORWOW state per compute lane, as engine registers.

nki.isa.rand_set_state: the PRNG is XORWOW with 6 uint32 of state per lane on GpSimd and 24 on
the Vector engine (inferred: four generators of 6 words, used in turn), persisting between
instructions. The generator is Marsaglia's XORWOW (five xorshift words and a Weyl counter).
How nki.isa.set_rng_seed expands one 32-bit seed into lane states is not documented: here
(inferred) each word is a SplitMix32 step of seed ^ lane. Results are deterministic from the
seeds, but are not the hardware's bit for bit.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.spec import RegisterFile

WORDS = 6  # x, y, z, w, v, d
WEYL = np.uint32(362437)
STATE_WORDS = {"gpsimd": 6, "vector": 24}  # nki.isa.rand_set_state: XORWOW state per lane
# The engines' PRNG state: whole register files (every lane's state), one per engine.
RNG_STATE = RegisterFile("uint32", words=lambda engine: STATE_WORDS[engine.value], per_lane=False)


def draw(state: np.ndarray, count: int, lanes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`count` uint32 per lane from the first `lanes` (all) lanes of XORWOW `state` [P, 6k];
    returns (values [lanes, count], the whole state with those lanes advanced)."""
    if lanes is not None and lanes < state.shape[0]:
        bits, drawn = draw(state[:lanes], count)
        whole = state.astype(np.uint32).copy()
        whole[:lanes] = drawn
        return bits, whole
    s = state.astype(np.uint32).reshape(state.shape[0], -1, WORDS).copy()
    generators = s.shape[1]
    out = np.empty((state.shape[0], count), np.uint32)
    with np.errstate(over="ignore"):
        for i in range(count):
            g = s[:, i % generators]
            x, v = g[:, 0].copy(), g[:, 4].copy()
            t = x ^ (x >> np.uint32(2))
            g[:, 0:4] = g[:, 1:5]
            g[:, 4] = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
            g[:, 5] = g[:, 5] + WEYL
            out[:, i] = g[:, 4] + g[:, 5]
    return out, s.reshape(state.shape)


def splitmix32(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint32) + np.uint32(0x9E3779B9)).astype(np.uint32)
        z = (z ^ (z >> np.uint32(16))) * np.uint32(0x85EBCA6B)
        z = (z ^ (z >> np.uint32(13))) * np.uint32(0xC2B2AE35)
        return z ^ (z >> np.uint32(16))


def seeded_state(seed: int, lanes: int, words: int) -> np.ndarray:
    """Lane states from one seed (inferred expansion; XORWOW needs a nonzero state)."""
    lane = np.arange(lanes, dtype=np.uint32)[:, None]
    word = np.arange(words, dtype=np.uint32)[None, :]
    with np.errstate(over="ignore"):
        state = splitmix32(
            np.uint32(seed) ^ (lane * np.uint32(0x01000193)) ^ (word << np.uint32(24))
        )
    return np.where(state == 0, np.uint32(1), state)


def uniform(bits: np.ndarray, low: np.ndarray | float, high: np.ndarray | float) -> np.ndarray:
    """[0, 1) from the top 24 bits (exact in fp32), scaled to [low, high) (inferred)."""
    unit = (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
    return np.float32(low) + unit * (np.float32(high) - np.float32(low))
