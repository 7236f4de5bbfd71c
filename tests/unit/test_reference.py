"""neuronemu.report.reference: the check reads outputs a block at a time, so its extra memory is a
few blocks whatever the output's size (the float64 figures themselves are the property test
tests/property/test_reference_check.py)."""

from __future__ import annotations

import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from neuronemu.report.reference import BLOCK_ELEMENTS, _blocks, compare

FLOAT64_BLOCK_BYTES = BLOCK_ELEMENTS * 8


@pytest.mark.parametrize("shape", [(), (0, 3), (7,), (5, 3), (2, 3, 4), (3, 1, 9), (1, 40)])
@pytest.mark.parametrize("block_elements", [1, 2, 5, 7, 12, 100])
def test_blocks_cover_each_element_once_in_c_order(shape, block_elements):
    flat = np.arange(math.prod(shape)).reshape(shape)
    seen = []
    for index, start in _blocks(shape, block_elements):
        block = flat[index].reshape(-1)
        assert block.size <= block_elements or block.size == 1
        assert block[0] == start
        seen.extend(block.tolist())
    assert seen == list(range(flat.size))


@pytest.fixture(scope="module")
def bf16_output():
    rng = np.random.default_rng(0)
    expected = rng.standard_normal((4096, 4096), dtype=np.float32)
    return expected.astype(ml_dtypes.bfloat16), expected


def _peak_bytes(got, want) -> int:
    tracemalloc.start()
    try:
        check = compare({"out": got}, [want], {"out": "bfloat16"}, None, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert check.passed
    return peak


def test_the_check_of_an_equal_output_needs_a_few_blocks_not_copies_of_it(bf16_output):
    got, _ = bf16_output
    peak = _peak_bytes(got, got.copy())
    # (the check read whole outputs as float64: 1.3 GiB at its peak for this 32 MiB one)
    assert peak <= 16 * FLOAT64_BLOCK_BYTES < got.nbytes / 4


def test_the_check_of_an_output_that_differs_everywhere_needs_a_few_blocks(bf16_output):
    got, expected = bf16_output  # bf16 against its own float32 values: every element differs
    assert _peak_bytes(got, expected) <= 16 * FLOAT64_BLOCK_BYTES < got.nbytes / 4


@pytest.mark.parametrize("rtol, atol", [(1e-3, 1e-3), (None, None), (1e-3, 0.0), (0.5, 10.0)])
def test_a_finite_value_where_the_reference_is_infinite_is_a_mismatch(rtol, atol):
    # |got - inf| <= atol + rtol * |inf| holds for any rtol > 0: it passed, silently.
    got = {"o": np.array([1.0, 2.0, -np.inf, np.inf], np.float32)}
    want = [np.array([np.inf, 2.0, -np.inf, -np.inf])]
    check = compare(got, want, {"o": "float32"}, rtol, atol)
    assert not check.passed
    assert check.outputs["o"].mismatches == 2  # [0]: 1 for inf; [3]: inf for -inf
