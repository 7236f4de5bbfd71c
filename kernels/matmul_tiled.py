"""Tiled matmul: result[M, N] = lhsT[K, M].T @ rhs[K, N], bf16 in, K accumulated in PSUM.

The Tensor engine contracts over the partition dim (K, 128 per tile); each [128, 512] output
tile accumulates its K tiles in one PSUM bank (fp32), then the Vector engine copies it to SBUF
(casting to the output dtype) for the DMA back to HBM.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"contraction dims differ: lhsT has K={K}, rhs has K={K2}"
    TILE_K = nl.tile_size.pmax
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    assert K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0, "shapes must be tile multiples"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        # The stationary tiles of this row block are reused for every column block.
        lhsT_tiles = []
        for k in nl.affine_range(K // TILE_K):
            t = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=t, src=lhsT[k * TILE_K : (k + 1) * TILE_K, m * TILE_M : (m + 1) * TILE_M]
            )
            lhsT_tiles.append(t)
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=rhs_tile,
                    src=rhs[k * TILE_K : (k + 1) * TILE_K, n * TILE_N : (n + 1) * TILE_N],
                )
                # accumulate is left to default (None): the first matmul into `acc`
                # overwrites, the following ones add.
                nisa.nc_matmul(dst=acc, stationary=lhsT_tiles[k], moving=rhs_tile)
            out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(
                dst=result[m * TILE_M : (m + 1) * TILE_M, n * TILE_N : (n + 1) * TILE_N],
                src=out_tile,
            )
    return result
