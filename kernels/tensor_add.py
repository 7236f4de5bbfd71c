"""Elementwise add of two [M, N] HBM tensors, in the current `import nki` style.

Tiles of [128, F] are moved to SBUF by DMA, added on the Vector engine and moved back; F is
1024 columns when they divide the width (else 512), so that a 2-byte dtype's transfers move
the 2 KiB per partition the DMA guide recommends (nki-dma-overview.rst).
"""

import nki
import nki.isa as nisa
import nki.language as nl

TILE_P = 128
MAX_TILE_F = 1024


@nki.jit
def tensor_add(a, b):
    assert a.shape == b.shape, f"a {a.shape} and b {b.shape} must have the same shape"
    rows, cols = a.shape
    TILE_F = MAX_TILE_F if cols % MAX_TILE_F == 0 else 512
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
