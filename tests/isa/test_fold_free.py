"""`fold_free` (the reductions along a partition's elements) combines them strictly left to
right, as an engine walks them: the same bits as a loop written here, element by element,
for every op it reduces (with and without a start value), signed zeros, NaN and inf
included, and tiles of one partition (where NumPy's reduction would sum pairwise)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa.instructions._common import fold_free

SPECIAL = [np.float32(v) for v in (-0.0, 0.0, np.nan, np.inf, -np.inf, 1e30, -1e-30)]


def _left_to_right(fn, x: np.ndarray, init) -> np.ndarray:
    acc = None
    if init is not None:
        acc = np.broadcast_to(np.asarray(init, np.float32).reshape(-1), (x.shape[0],)).copy()
    for i in range(x.shape[1]):
        acc = x[:, i].copy() if acc is None else fn(acc, x[:, i]).astype(np.float32)
    return acc


@st.composite
def tiles(draw) -> np.ndarray:
    p = draw(st.sampled_from([1, 2, 3, 37, 128]))
    f = draw(st.integers(1, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal((p, f)) * 10.0 ** rng.integers(-3, 7, (p, f))).astype(np.float32)
    if draw(st.booleans()):  # (some special values, or a tile of them alone)
        mask = rng.random((p, f)) < draw(st.sampled_from([0.05, 1.0]))
        x[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
    return x


@settings(max_examples=60, deadline=None)
@given(
    x=tiles(),
    fn=st.sampled_from([np.add, np.multiply, np.maximum, np.minimum, np.subtract]),
    init=st.sampled_from(["none", "scalar", "negative zero", "column", "vector"]),
)
def test_fold_free_is_left_to_right(x, fn, init):
    p = x.shape[0]
    start = {
        "none": None,
        "scalar": np.float32(0.5),
        "negative zero": np.float32(-0.0),
        "column": np.linspace(-2, 2, p, dtype=np.float32).reshape(p, 1),
        "vector": np.linspace(3, -3, p, dtype=np.float32),
    }[init]
    with np.errstate(all="ignore"):
        want = _left_to_right(fn, x, start)
        got = fold_free(fn, x, start)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_a_sum_of_negative_zeros_stays_negative_zero():
    # (NumPy's add.reduce starts from +0.0, which would make it +0.0)
    x = np.full((4, 7), -0.0, dtype=np.float32)
    assert np.signbit(fold_free(np.add, x)).all()
