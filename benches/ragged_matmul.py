"""A matmul whose N is not a multiple of the tile (bench_scale.py): each output column block
is min(512, N - n0) wide, as kernels written for any shape take a ragged last tile; K
innermost, each tile loaded where it is used. On [2048, 2048]^T @ [2048, 8000] bf16:
12,800 instructions, the last of each row's 16 column blocks 320 wide."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def ragged_matmul(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range((N + 511) // 512):
            n0 = n * 512
            w = min(512, N - n0)
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=b[:, 0:w], src=rhs[k * 128 : (k + 1) * 128, n0 : n0 + w])
                nisa.nc_matmul(dst=acc[:, 0:w], stationary=a, moving=b[:, 0:w])
            out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out[:, 0:w], src=acc[:, 0:w])
            nisa.dma_copy(dst=result[m * 128 : (m + 1) * 128, n0 : n0 + w], src=out[:, 0:w])
    return result
