"""Blocked matmul: result[M, N] = lhsT[K, M].T @ rhs[K, N], bf16 in, the whole K kept in SBUF.

A [block_m, K] block of lhsT stays in SBUF while every [K, block_n] block of rhs streams past
it, so each lhsT element is read from HBM once and each rhs element M / block_m times
(arithmetic intensity about 2 * block_m * block_n * K / (2 * (block_m * K + K * block_n)),
nki/guides/tutorials/matrix_multiplication.rst). Each [128, 512] output tile accumulates its K
tiles in one PSUM bank.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_blocked(lhsT, rhs, block_m=2048, block_n=512):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"contraction dims differ: lhsT has K={K}, rhs has K={K2}"
    TILE_K = nl.tile_size.pmax
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    assert K % TILE_K == 0, "K must be a multiple of 128"
    assert M % block_m == 0 and block_m % TILE_M == 0, "M must be a multiple of block_m"
    assert N % block_n == 0 and block_n % TILE_N == 0, "N must be a multiple of block_n"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for mb in nl.affine_range(M // block_m):
        lhsT_block = []
        for k in nl.affine_range(K // TILE_K):
            t = nl.ndarray((TILE_K, block_m), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(
                dst=t, src=lhsT[k * TILE_K : (k + 1) * TILE_K, mb * block_m : (mb + 1) * block_m]
            )
            lhsT_block.append(t)
        for nb in nl.affine_range(N // block_n):
            rhs_block = []
            for k in nl.affine_range(K // TILE_K):
                t = nl.ndarray((TILE_K, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=t, src=rhs[k * TILE_K : (k + 1) * TILE_K, nb * block_n : (nb + 1) * block_n]
                )
                rhs_block.append(t)
            for m in nl.affine_range(block_m // TILE_M):
                for n in nl.affine_range(block_n // TILE_N):
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TILE_K):
                        nisa.nc_matmul(
                            dst=acc,
                            stationary=lhsT_block[k][:, m * TILE_M : (m + 1) * TILE_M],
                            moving=rhs_block[k][:, n * TILE_N : (n + 1) * TILE_N],
                        )
                    out_tile = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out_tile, src=acc)
                    row = mb * block_m + m * TILE_M
                    col = nb * block_n + n * TILE_N
                    nisa.dma_copy(dst=result[row : row + TILE_M, col : col + TILE_N], src=out_tile)
    return result
