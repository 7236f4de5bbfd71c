"""`--explain-mismatch` on a logic bug: when even the unrounded shadow run differs from the
reference, it says the algorithm is wrong, and names no line as "the first to depart" (that
departure is only the kernel's own rounding: issue 43, item 2)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import neuronemu

KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for kk in range(4):
        s = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=lhsT[kk * 128:(kk + 1) * 128, :])
        m = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m, src=rhs[kk * 128:(kk + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=s, moving=m, accumulate=ACCUMULATE)
    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out
"""


def _explained(kernel_file, accumulate: str):
    rng = np.random.default_rng(2)
    inputs = {
        "lhsT": rng.standard_normal((512, 128)).astype(ml_dtypes.bfloat16),
        "rhs": rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16),
    }

    def reference(lhsT, rhs):
        return lhsT.astype(np.float64).T @ rhs.astype(np.float64)

    path = kernel_file(KERNEL.replace("ACCUMULATE", accumulate))
    return neuronemu.run(path, inputs, ref=reference, explain_mismatch=True)


def test_a_logic_bug_is_called_one_and_no_line_is_blamed_for_rounding(kernel_file):
    # accumulate=False on every K step: only the last K tile survives.
    check = _explained(kernel_file, "False").check
    assert not check.passed
    explained = check.explanation
    assert explained["verdict"] == "algorithm" and not explained["shadow_passed"]
    assert "the bug is in what the kernel computes" in explained["message"]
    assert "is the first to depart" not in explained["message"]


def test_a_correct_kernel_runs_without_an_explanation(kernel_file):
    check = _explained(kernel_file, "(kk > 0)").check
    assert check.passed and check.explanation is None
