"""neuronemu.strategies: shapes within the limits asked for, arrays of any dtype exactly
representable in it, and the README's example: a property test that catches a softmax
without its max-subtract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from neuronemu import strategies as nst
from neuronemu.testing import assert_kernel_matches

# exp(x) / sum(exp(x)) per row: right for small x, NaN once exp overflows fp32.
NAIVE_SOFTMAX = """import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def softmax(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.reciprocal(dst=total, data=total)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=total)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def softmax_reference(x):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@settings(max_examples=25, deadline=None)
@given(shape=nst.shapes(max_free=64, free_dims=2, tiles=2, ragged=True))
def test_shapes_stay_within_the_limits(shape):
    rows, *free = shape
    assert 1 <= rows <= 256 and len(free) == 2 and all(1 <= f <= 64 for f in free)


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from(["float32", "bfloat16", "float16", "float8_e4m3", "int8", "int32"]),
    values=st.sampled_from(sorted(nst.VALUES)),
)
def test_arrays_are_of_their_dtype_and_exact_in_it(data, dtype, values):
    x = data.draw(nst.arrays(dtype, (4, 8), values=values))
    assert x.shape == (4, 8) and x.dtype.name == np.dtype(nst.dtype_of(dtype)).name
    if x.dtype.kind == "f" or x.dtype.kind == "V":
        finite = x.astype(np.float64)
        assert not np.isnan(finite).any()  # nan=False by default
        back = nst.cast_to(finite.astype(np.float32), x.dtype)
        np.testing.assert_array_equal(np.asarray(back).astype(np.float64), finite)


def test_values_names_a_known_family():
    with pytest.raises(ValueError, match="one of"):
        nst.arrays("float32", (2, 2), values="huge").example()


def test_a_property_test_catches_a_softmax_without_its_max_subtract(kernel_file):
    path = kernel_file(NAIVE_SOFTMAX)

    def correct(x) -> bool:
        try:
            assert_kernel_matches(path, softmax_reference, {"x": x}, explain=False)
            return True
        except AssertionError:
            return False

    # Within Hypothesis' default number of examples, "large" values overflow its exp.
    found = find(
        nst.arrays("float32", (128, 64), values="large"),
        lambda x: not correct(x),
        settings=settings(
            max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        ),  # fmt: skip
    )
    # A row past what fp32 holds: 64 * exp(x) overflows once x > ln(3.4e38 / 64) ~ 84.7.
    assert found.max() > np.log(np.finfo(np.float32).max / 64)
    assert correct(np.zeros((128, 64), np.float32))  # and small ones pass
