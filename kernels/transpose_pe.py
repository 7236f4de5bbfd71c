"""Transpose an [M, N] matrix on the Tensor engine, 128 x 128 blocks at a time.

Each block goes HBM -> SBUF by DMA, through the PE array into PSUM (nisa.nc_transpose on the
Tensor engine), back to SBUF on the Vector engine, and to its transposed place in HBM.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def transpose_pe(x):
    rows, cols = x.shape
    B = nl.tile_size.pmax
    assert rows % B == 0 and cols % B == 0, f"shape {x.shape} must be a multiple of {B}"
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // B):
        for j in nl.affine_range(cols // B):
            block = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=block, src=x[i * B : (i + 1) * B, j * B : (j + 1) * B])
            flipped = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=block, engine=nisa.engine.tensor)
            evicted = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=evicted, src=flipped)
            nisa.dma_copy(dst=out[j * B : (j + 1) * B, i * B : (i + 1) * B], src=evicted)
    return out
