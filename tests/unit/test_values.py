"""Views: slicing a tensor at trace time matches NumPy indexing of its backing array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor

SPAN = SourceSpan("t.py", 1, 1)


def _tensor(shape, buffer="hbm") -> Tensor:
    return Tensor("t", tuple(shape), ALL_DTYPES["float32"], BUFFERS[buffer], SPAN)


@st.composite
def index_for(draw, n):
    if draw(st.booleans()):
        return draw(st.integers(-n, n - 1))
    start = draw(st.one_of(st.none(), st.integers(0, n)))
    stop = draw(st.one_of(st.none(), st.integers(0, n)))
    step = draw(st.one_of(st.none(), st.integers(1, 3)))
    return slice(start, stop, step)


@given(st.data())
def test_chained_slicing_of_hbm_tensor_matches_numpy(data):
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    view = _tensor(shape).full()
    expected = arr
    for _ in range(2):
        if expected.ndim == 0 or expected.size == 0:
            break
        index = tuple(data.draw(index_for(n)) for n in expected.shape)
        expected = expected[index]
        view = view.subscript(index, SPAN)
    assert view.shape == expected.shape
    got = arr[(*view.np_index(), Ellipsis)]
    np.testing.assert_array_equal(got, expected)
    lo_hi = view.bounds()
    touched = np.zeros(shape, dtype=bool)
    touched[(*view.np_index(), Ellipsis)] = True
    for d, (lo, hi) in enumerate(lo_hi):
        axes = tuple(a for a in range(len(shape)) if a != d)
        used = np.nonzero(touched.any(axis=axes))[0]
        if used.size:
            assert lo <= used.min() and used.max() < hi


def test_integer_index_keeps_partition_dim_of_on_chip_tile():
    tile = _tensor((128, 64), "sbuf").full()
    assert tile.subscript(3, SPAN).shape == (1, 64)
    assert tile.subscript((3, 5), SPAN).shape == (1, 1)
    assert tile.subscript((slice(None), 5), SPAN).shape == (128, 1)  # a tile keeps a free dim
    assert _tensor((128, 4, 8), "sbuf").full().subscript((slice(None), 1), SPAN).shape == (128, 8)
    hbm = _tensor((128, 64)).full()
    assert hbm.subscript(3, SPAN).shape == (64,)


def test_ellipsis_fills_remaining_dims():
    view = _tensor((4, 5, 6)).full().subscript((Ellipsis, 2), SPAN)
    assert view.shape == (4, 5)


def test_out_of_bounds_slice_is_an_error():
    with pytest.raises(ConstraintError, match=r"slice 0:300 is out of bounds for dim 0"):
        _tensor((256, 4)).full().subscript(slice(0, 300), SPAN)


def test_out_of_bounds_integer_is_an_error():
    with pytest.raises(ConstraintError, match="index 9 is out of bounds"):
        _tensor((8, 4)).full().subscript(9, SPAN)


def test_non_integer_index_is_a_type_error():
    with pytest.raises(KernelTypeError, match="must be an int or a slice"):
        _tensor((8, 4)).full().subscript(1.5, SPAN)
