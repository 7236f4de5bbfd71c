"""The values of the plain copies, `dma_copy` and `tensor_copy`: one set of properties, since
both convert through fp32 (nki.isa.dma_copy, nki.isa.tensor_copy) and round on write."""

from __future__ import annotations

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    INTS,
    NP_DTYPES,
    assert_bits_equal,
    random_array,
    seeds,
    tile_shapes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY
from neuronemu_isa.numerics import cast_to

COPIES = ["dma_copy", "tensor_copy"]


def _copy(name: str, x: np.ndarray, dst: str) -> np.ndarray:
    """What a copy of `x` writes into a `dst` tile of its shape."""
    return cast_to(np.asarray(REGISTRY[name].semantics(src=x)).reshape(x.shape), NP_DTYPES[dst])


@pytest.mark.parametrize("name", COPIES)
@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(FLOATS), seed=seeds)
def test_a_copy_converts_floats_through_fp32(name, shape, src, dst, seed):
    x = random_array(seed, shape, src, -3e4, 3e4)
    assert_bits_equal(_copy(name, x, dst), x.astype(np.float32).astype(NP_DTYPES[dst]))


@pytest.mark.parametrize("name", COPIES)
@settings(deadline=None)
@given(shape=tile_shapes(), dtype=st.sampled_from(FLOATS + INTS), seed=seeds)
def test_a_copy_between_equal_dtypes_is_bit_exact(name, shape, dtype, seed):
    x = random_array(seed, shape, dtype, -1e9, 1e9)
    assert_bits_equal(_copy(name, x, dtype), x)


@pytest.mark.parametrize("name", COPIES)
def test_a_copy_of_equal_dtypes_keeps_nan_payloads_and_signed_zeros(name):
    bits = np.array([[0x7FC00001, 0xFFC00123, 0x80000000, 0x00000001]], dtype=np.uint32)
    out = _copy(name, bits.view(np.float32), "float32")
    np.testing.assert_array_equal(out.view(np.uint32), bits)


@pytest.mark.parametrize("name", COPIES)
@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(INTS), dst=st.sampled_from(INTS), seed=seeds)
def test_a_copy_between_int_dtypes_saturates(name, shape, src, dst, seed):
    # Small enough that the fp32 detour is exact; wide enough to overflow narrow targets.
    x = random_array(seed, shape, src, -70000, 70000)
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(x.astype(np.int64), info.min, info.max).astype(NP_DTYPES[dst])
    assert_bits_equal(_copy(name, x, dst), expected)


@pytest.mark.parametrize("name", COPIES)
@settings(deadline=None)
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS), dst=st.sampled_from(INTS), seed=seeds)
def test_a_copy_float_to_int_rounds_half_even_and_saturates(name, shape, src, dst, seed):
    x = random_array(seed, shape, src, -70000.0, 70000.0)
    ties = np.array([2.5, -3.5, 0.5, 1.5, -0.5], dtype=np.float32).astype(x.dtype)
    x.reshape(-1)[:5] = ties[: x.size]
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(np.rint(x.astype(np.float64)), info.min, info.max).astype(NP_DTYPES[dst])
    assert_bits_equal(_copy(name, x, dst), expected)


@pytest.mark.parametrize("name", COPIES)
@settings(deadline=None)
@given(shape=tile_shapes(), dst=st.sampled_from(FLOATS), seed=seeds)
def test_a_copy_int_to_float_rounds_through_fp32(name, shape, dst, seed):
    x = random_array(seed, shape, "int32", -(2**31), 2**31 - 1)
    with np.errstate(over="ignore"):  # int32 beyond float16's range becomes inf
        out = _copy(name, x, dst)
        expected = x.astype(np.float32).astype(NP_DTYPES[dst])
    assert_bits_equal(out, expected)


@pytest.mark.parametrize("name", COPIES)
def test_a_copy_to_int_sends_nan_to_zero_and_inf_to_the_limits(name):
    x = np.array([[np.nan, np.inf, -np.inf, 1e10]], dtype=np.float32)
    out = cast_to(np.asarray(REGISTRY[name].semantics(src=x)), np.dtype(np.int16))
    np.testing.assert_array_equal(out, np.array([[0, 32767, -32768, 32767]], dtype=np.int16))
