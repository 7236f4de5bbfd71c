"""Elementwise add of two [M, N] HBM tensors, in the current `import nki` style.

Tiles of [128, 512] are moved to SBUF by DMA, added on the Vector engine and moved back.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_P = 128
TILE_F = 512


@nki.jit
def tensor_add(a, b):
    assert a.shape == b.shape, f"a {a.shape} and b {b.shape} must have the same shape"
    rows, cols = a.shape
    assert rows % TILE_P == 0 and cols % TILE_F == 0, "shape must be a multiple of [128, 512]"
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // TILE_P):
        for j in nl.affine_range(cols // TILE_F):
            r = slice(i * TILE_P, (i + 1) * TILE_P)
            c = slice(j * TILE_F, (j + 1) * TILE_F)
            a_tile = nl.ndarray((TILE_P, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((TILE_P, TILE_F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a[r, c])
            nisa.dma_copy(dst=b_tile, src=b[r, c])
            sum_tile = nl.ndarray((TILE_P, TILE_F), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=sum_tile, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(dst=out[r, c], src=sum_tile)
    return out
