"""topk, the MX formats (quantize_mx, nc_matmul_mx) and the x4 dtypes through whole kernels,
against NumPy references written here from the docs (not from neuronemu_isa):

- nki.isa.topk (docs 2.32/2.33): per group of 16 partitions, snake element s is
  src[16g + s % 16, s // 16] for s < n; result j goes to partition 16g + j % 16, column j // 16,
  its value to val_dst and its snake position to idx_dst; only the first ceil(k / 16) columns
  are written.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import MemoryAccessError

BF16 = np.dtype(ml_dtypes.bfloat16)

TOPK_KERNEL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x):
    p, cols = x.shape
    vals = nl.ndarray((p, {width}), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    idxs = nl.ndarray((p, {width}), dtype=nl.uint32, buffer=nl.shared_hbm)
    src = nl.ndarray((p, cols), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    v = nl.ndarray((p, {k}), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((p, {k}), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=v, idx_dst=i, src=src, n={n}, sorted={sort})
    nisa.dma_copy(dst=vals, src=v[:, 0:{width}])
    nisa.dma_copy(dst=idxs, src=i[:, 0:{width}])
    return vals, idxs
"""


def _kernel(factory, source: str) -> str:
    """`source` written to a fresh file (Hypothesis examples share no fixture state)."""
    path = factory.mktemp("kernel") / "kernel.py"
    path.write_text(source)
    return str(path)


def _distinct_bf16(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """bfloat16 values that are pairwise different (so the top-k set is one set)."""
    size = math.prod(shape)
    bits = rng.choice(np.arange(0x0100, 0x7F00, dtype=np.uint16), size, replace=False)
    bits |= (rng.integers(0, 2, size) << 15).astype(np.uint16)
    return bits.reshape(shape).view(BF16)


@settings(max_examples=10, deadline=None)
@given(
    groups=st.integers(1, 8),
    n=st.integers(8, 300),
    k_frac=st.floats(0, 1),
    sort=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_topk_kernel_finds_each_groups_k_largest(tmp_path_factory, groups, n, k_frac, sort, seed):
    rng = np.random.default_rng(seed)
    p, cols = 16 * groups, math.ceil(n / 16) + int(rng.integers(0, 3))
    k = max(1, min(n, int(k_frac * n)))
    width = math.ceil(k / 16)
    x = _distinct_bf16(rng, (p, cols))
    path = _kernel(tmp_path_factory, TOPK_KERNEL.format(width=width, k=k, n=n, sort=sort))
    out = neuronemu.run(path, {"x": x}, target="trn2").outputs
    vals, idxs = out["vals"], out["idxs"]
    f = x.astype(np.float32)
    for g in range(groups):
        snake = [float(f[16 * g + s % 16, s // 16]) for s in range(n)]
        want = sorted(range(n), key=lambda s: snake[s], reverse=True)[:k]
        slots = [(16 * g + j % 16, j // 16) for j in range(k)]
        got_idx = [int(idxs[r, c]) for r, c in slots]
        got_val = [float(vals[r, c]) for r, c in slots]
        assert sorted(got_idx) == sorted(want)
        assert got_val == [snake[s] for s in got_idx]
        if sort:  # (inferred) sorted=True: largest first
            assert got_val == sorted(got_val, reverse=True)


UNWRITTEN_TAIL = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x):
    vals = nl.ndarray((16, 1), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    src = nl.ndarray((16, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src[:, 0:3], src=x)
    v = nl.ndarray((16, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=v, idx_dst=i, src=src, n={n})
    nisa.dma_copy(dst=vals, src=v[:, 0:1])
    return vals
"""


def test_topk_reads_only_the_first_n_snake_slots(tmp_path_factory):
    """Slots past n are ignored: a never-written fourth column is no uninitialized read for
    n = 48, and is one for n = 64."""
    x = _distinct_bf16(np.random.default_rng(0), (16, 3))
    ok = _kernel(tmp_path_factory, UNWRITTEN_TAIL.format(n=48))
    neuronemu.run(ok, {"x": x}, target="trn2")
    bad = _kernel(tmp_path_factory, UNWRITTEN_TAIL.format(n=64))
    with pytest.raises(MemoryAccessError, match="nothing wrote"):
        neuronemu.run(bad, {"x": x}, target="trn2")
