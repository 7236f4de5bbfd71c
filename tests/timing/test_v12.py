"""V12 (reference/neuroncore.md D3): whole kernels against AWS's published Trn2 profiles.

The kernel-optimization tutorial profiles four fp32 matmuls, lhsT [8192, 4096] @ rhs
[8192, 8192], on Trn2 (nki/guides/tutorials/kernel-optimization.rst, profiles
nki/img/how-to/v{2..5}-*.png). `v12_matmuls.py` holds neuronemu's own versions of them (the
same loops and tile sizes); `benches/v12.py` runs the tutorial's originals beside them.

Goals: each total within 10% of the published one, Tensor-engine active time within 5%, DMA
active time within 15 percentage points; v2 clearly the slowest, v3 to v5 within 5% of each
other. The published profiler's "active" times count an engine as active while one of its
instructions is in flight (`engines[...]["active_ns"]`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import neuronemu

KERNELS = Path(__file__).resolve().parent / "v12_matmuls.py"
# version -> (kernel, total ms, TensorE active ms, DMA active share), read off the profiles
PUBLISHED = {
    "v2": ("tiled", 39.89, 34.82, 0.9993),
    "v3": ("hoisted", 28.20, 28.16, 0.9973),
    "v4": ("blocked_free", 28.41, 28.28, 0.9570),
    "v5": ("blocked_all", 28.30, 28.16, 0.2154),
}

# A hundred thousand instructions each: with the jitted scheduler only (the passes of .ci/run
# that run the scheduler's plain twin or bounds checks cover it on small programs); on one
# worker, which makes the four runs once (~25 s).
pytestmark = [
    pytest.mark.skipif(
        os.environ.get("NUMBA_DISABLE_JIT") == "1" or os.environ.get("NUMBA_BOUNDSCHECK") == "1",
        reason="kernel-level figures need the jitted scheduler",
    ),
    pytest.mark.xdist_group("v12"),
]


@pytest.fixture(scope="module")
def runs():
    inputs = {"lhsT": np.zeros((8192, 4096), np.float32), "rhs": np.zeros((8192, 8192), np.float32)}
    limits = {"trace_seconds": 900, "run_seconds": 1800}
    return {
        version: neuronemu.run(
            KERNELS, inputs, kernel=kernel, target="trn2", timing_only=True, limits=limits
        )
        for version, (kernel, *_) in PUBLISHED.items()
    }


@pytest.mark.parametrize("version", PUBLISHED)
def test_total_time_is_within_10_percent_of_the_published_profile(runs, version):
    _, total_ms, _, _ = PUBLISHED[version]
    assert runs[version].time_ns / 1e6 == pytest.approx(total_ms, rel=0.10)


@pytest.mark.parametrize("version", PUBLISHED)
def test_tensor_engine_active_time_is_within_5_percent(runs, version):
    _, _, tensor_ms, _ = PUBLISHED[version]
    active_ms = runs[version].engines["tensor"]["active_ns"] / 1e6
    assert active_ms == pytest.approx(tensor_ms, rel=0.05)


# DMA active is the time some transfer is in flight, its fixed trigger latency included: v4
# moves 6.7 GB where the hardware moves ~8.7 GB (neuronemu's spill policy, Belady's, keeps more
# rhs tiles), and its transfers' latencies fill the rest; the margin there is narrow (v5:
# 36.2% against 21.5%).
@pytest.mark.parametrize("version", ["v2", "v3", "v4", "v5"])
def test_dma_active_share_is_within_15_points(runs, version):
    _, _, _, dma_share = PUBLISHED[version]
    r = runs[version]
    assert r.engines["dma"]["active_ns"] / r.time_ns == pytest.approx(dma_share, abs=0.15)


def test_the_tiled_version_is_clearly_slowest_and_the_others_close(runs):
    times = {v: r.time_ns for v, r in runs.items()}
    others = [times[v] for v in ("v3", "v4", "v5")]
    assert times["v2"] > 1.2 * max(others)
    assert max(others) <= 1.05 * min(others)
    # Why v2 is slow: its critical path is DMA, the others' the Tensor engine or DMA bandwidth.
    top = runs["v2"].critical_path.by_cause()[0][0]
    assert top.startswith("dma")
