"""nki.isa instructions neuronemu does not model: calling one from a kernel is a located error."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelTypeError
from neuronemu_isa import REGISTRY

KERNEL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    {call}
    nisa.dma_copy(dst=out, src=t)
    return out
"""

CALLS = {
    # An exchange that reduces on the way is not modelled yet.
    "sendrecv_compute": "nisa.sendrecv_compute(t, t, 1, 1, reduce_op=nl.add)",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unsupported_instruction_is_a_located_error(kernel_file, name: str) -> None:
    assert name not in REGISTRY
    path = kernel_file(KERNEL.format(call=CALLS[name]))
    with pytest.raises(KernelTypeError) as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    text = str(info.value)
    assert f"nki.isa.{name} is not supported by neuronemu yet" in text
    assert f"{path}:11:5" in text
