"""The four fp32 matmuls whose Trn2 profiles AWS publishes (reference D3, row V12), written
for neuronemu from the kernel-optimization tutorial's description: result[M, N] =
lhsT[K, M].T @ rhs[K, N] with 128 x 128 stationary tiles, 128 x 512 moving tiles and one
PSUM bank per output tile. Each version changes where the inputs are loaded:

- `tiled`: both input tiles are loaded right before each matmul;
- `hoisted`: a column of lhsT tiles is loaded per M tile and a column of rhs tiles per N tile;
- `blocked_free`: as `hoisted`, over blocks of 2 M tiles and 2 N tiles;
- `blocked_all`: blocks of 16 M tiles, 2 N tiles and 8 K tiles, the K blocks summed in SBUF.
"""

import nki
import nki.isa as nisa
import nki.language as nl

P = 128  # contraction rows per matmul (partitions)
TM = 128  # stationary columns: output rows of a matmul
TN = 512  # moving columns: output columns of a matmul


def _check(lhsT, rhs, bm, bn, bk):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"lhsT has K={K} rows but rhs has {K2}"
    assert M % (TM * bm) == 0 and N % (TN * bn) == 0 and K % (P * bk) == 0, "ragged shapes"
    return K, M, N


def _store(result, acc, row, col):
    """PSUM -> SBUF -> HBM for one output tile."""
    out = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=result[row : row + TM, col : col + TN], src=out)


@nki.jit
def tiled(lhsT, rhs):
    K, M, N = _check(lhsT, rhs, 1, 1, 1)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // P):
                a = nl.ndarray((P, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((P, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * P : (k + 1) * P, m * TM : (m + 1) * TM])
                nisa.dma_copy(dst=b, src=rhs[k * P : (k + 1) * P, n * TN : (n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            _store(result, acc, m * TM, n * TN)
    return result


def _column(src, K, col, width):
    """The K // P tiles [P, width] of `src`'s columns [col, col + width), down K."""
    tiles = []
    for k in nl.affine_range(K // P):
        t = nl.ndarray((P, width), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src[k * P : (k + 1) * P, col : col + width])
        tiles.append(t)
    return tiles


def _accumulate(stationary, moving):
    """One output tile: the sum over K of its matmuls, in a PSUM bank."""
    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
    for a, b in zip(stationary, moving):
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    return acc


@nki.jit
def hoisted(lhsT, rhs):
    K, M, N = _check(lhsT, rhs, 1, 1, 1)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.hbm)
    for m in nl.affine_range(M // TM):
        stationary = _column(lhsT, K, m * TM, TM)
        for n in nl.affine_range(N // TN):
            moving = _column(rhs, K, n * TN, TN)
            _store(result, _accumulate(stationary, moving), m * TM, n * TN)
    return result


@nki.jit
def blocked_free(lhsT, rhs, block_m=2, block_n=2):
    K, M, N = _check(lhsT, rhs, block_m, block_n, 1)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.hbm)
    for mb in nl.affine_range(M // (TM * block_m)):
        stationary = [_column(lhsT, K, (mb * block_m + i) * TM, TM) for i in range(block_m)]
        for nb in nl.affine_range(N // (TN * block_n)):
            moving = [_column(rhs, K, (nb * block_n + j) * TN, TN) for j in range(block_n)]
            for i in nl.affine_range(block_m):
                for j in nl.affine_range(block_n):
                    acc = _accumulate(stationary[i], moving[j])
                    _store(result, acc, (mb * block_m + i) * TM, (nb * block_n + j) * TN)
    return result


@nki.jit
def blocked_all(lhsT, rhs, block_m=16, block_n=2, block_k=8):
    K, M, N = _check(lhsT, rhs, block_m, block_n, block_k)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.hbm)
    rows, cols = TM * block_m, TN * block_n
    for nb in nl.affine_range(N // cols):
        # Partial sums of every output tile of this column block, kept in SBUF across K.
        sums = [
            [nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf) for _ in range(block_n)]
            for _ in range((M // rows) * block_m)
        ]
        for row in sums:
            for t in row:
                nisa.memset(dst=t, value=0.0)
        for kb in nl.sequential_range(K // (P * block_k)):
            moving = []
            for k in range(block_k):
                b = nl.ndarray((P, cols), dtype=rhs.dtype, buffer=nl.sbuf)
                krow = (kb * block_k + k) * P
                nisa.dma_copy(dst=b, src=rhs[krow : krow + P, nb * cols : (nb + 1) * cols])
                moving.append(b)
            for mb in nl.affine_range(M // rows):
                stationary = []
                for k in nl.affine_range(block_k):
                    a = nl.ndarray((P, rows), dtype=lhsT.dtype, buffer=nl.sbuf)
                    krow = (kb * block_k + k) * P
                    nisa.dma_copy(dst=a, src=lhsT[krow : krow + P, mb * rows : (mb + 1) * rows])
                    stationary.append(a)
                for j in nl.affine_range(block_n):
                    for i in nl.affine_range(block_m):
                        acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(block_k):
                            nisa.nc_matmul(
                                dst=acc,
                                stationary=stationary[k][:, i * TM : (i + 1) * TM],
                                moving=moving[k][:, j * TN : (j + 1) * TN],
                            )
                        total = sums[mb * block_m + i][j]
                        nisa.tensor_tensor(dst=total, data1=total, data2=acc, op=nl.add)
        for r, row in enumerate(sums):
            packed = nl.ndarray((TM, cols), dtype=nl.float32, buffer=nl.sbuf)
            for j in nl.affine_range(block_n):
                nisa.tensor_copy(dst=packed[:, j * TN : (j + 1) * TN], src=row[j])
            nisa.dma_copy(
                dst=result[r * TM : (r + 1) * TM, nb * cols : (nb + 1) * cols], src=packed
            )
    return result
