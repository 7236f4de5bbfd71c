"""neuronemu.simulate takes a kernel function object, as nki.simulate does: its source file
and name are found with inspect, and the file is traced (the function never runs)."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import neuronemu

MODULE = """
try:  # a module the user's own Python imports: NKI may be absent there
    import nki
    import nki.isa as nisa
    import nki.language as nl
except ImportError:
    nki = None


def add_rows(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a[i * 128:(i + 1) * 128, :])
    nisa.dma_copy(dst=y, src=b[i * 128:(i + 1) * 128, :])
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=x)
    return out
"""


@pytest.fixture
def user_module(tmp_path):
    path = tmp_path / "user_kernels.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("user_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["user_kernels"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("user_kernels", None)


def test_simulate_takes_the_kernel_function_and_a_grid(user_module):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(2))
    out = neuronemu.simulate(user_module.add_rows, grid=(2,))(a, b)
    np.testing.assert_array_equal(out, a + b)


def test_simulate_of_something_without_a_source_file_says_so():
    with pytest.raises(neuronemu.NeuronEmuError, match="cannot find the source file"):
        neuronemu.simulate(len)
