"""Blocked matmul: result[M, N] = lhsT[K, M].T @ rhs[K, N], with K outermost in each block.

The output is cut into blocks of block_m x block_n (multiples of 128 x 512). For each block,
every K tile of lhsT and rhs is loaded once, as one [128, block_m] and one [128, block_n]
transfer, and multiplied into all the block's [128, 512] output tiles, which accumulate in
PSUM side by side: a block holds (block_m / 128) * (block_n / 512) PSUM banks at once (8
fit), and larger blocks move fewer, larger transfers. `bufs` K tiles of each input are
loaded ahead (the tiles of a block rotate through that many buffers).

A kernel to tune: `neuronemu sweep kernels/matmul_blocked.py --param block_m=... ...`.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_blocked(lhsT, rhs, block_m=256, block_n=1024, bufs=2):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"contraction dims differ: lhsT has K={K}, rhs has K={K2}"
    P = nl.tile_size.pmax
    TM = nl.tile_size.gemm_stationary_fmax
    TN = nl.tile_size.gemm_moving_fmax
    assert block_m % TM == 0 and block_n % TN == 0, "blocks must be tile multiples"
    assert K % P == 0 and M % block_m == 0 and N % block_n == 0, "shapes must be block multiples"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    tiles_m, tiles_n = block_m // TM, block_n // TN

    for mb in nl.affine_range(M // block_m):
        for nb in nl.affine_range(N // block_n):
            acc = [
                [nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum) for _ in range(tiles_n)]
                for _ in range(tiles_m)
            ]
            # The input tiles of this block, `bufs` of each in flight.
            a_bufs = [
                nl.ndarray((P, block_m), dtype=lhsT.dtype, buffer=nl.sbuf) for _ in range(bufs)
            ]
            b_bufs = [
                nl.ndarray((P, block_n), dtype=rhs.dtype, buffer=nl.sbuf) for _ in range(bufs)
            ]
            for k in nl.sequential_range(K // P):
                a = a_bufs[k % bufs]
                b = b_bufs[k % bufs]
                nisa.dma_copy(
                    dst=a, src=lhsT[k * P : (k + 1) * P, mb * block_m : (mb + 1) * block_m]
                )
                nisa.dma_copy(
                    dst=b, src=rhs[k * P : (k + 1) * P, nb * block_n : (nb + 1) * block_n]
                )
                for i in nl.affine_range(tiles_m):
                    for j in nl.affine_range(tiles_n):
                        nisa.nc_matmul(
                            dst=acc[i][j],
                            stationary=a[:, i * TM : (i + 1) * TM],
                            moving=b[:, j * TN : (j + 1) * TN],
                        )
            for i in nl.affine_range(tiles_m):
                for j in nl.affine_range(tiles_n):
                    out = nl.ndarray((TM, TN), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=out, src=acc[i][j])
                    row = mb * block_m + i * TM
                    col = nb * block_n + j * TN
                    nisa.dma_copy(dst=result[row : row + TM, col : col + TN], src=out)
    return result
