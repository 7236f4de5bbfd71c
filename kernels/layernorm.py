"""Layer normalization of each row of x [N, D] (no affine parameters):
(x - mean) / sqrt(var + eps), with the statistics from the Vector engine's bn_stats (one per
chunk of at most 512 columns) combined by bn_aggr.

Rows are processed 128 at a time; the last row tile and the last column chunk may be ragged.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def layernorm(x, eps=1e-5):
    n_rows, dim = x.shape
    out = nl.ndarray((n_rows, dim), dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    F = nl.tile_size.bn_stats_fmax
    chunks = (dim + F - 1) // F
    for t in nl.affine_range((n_rows + P - 1) // P):
        r0 = t * P
        rows = min(P, n_rows - r0)
        xt = nl.ndarray((rows, dim), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + rows, :])
        stats = nl.ndarray((rows, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            c0 = c * F
            nisa.bn_stats(dst=stats[:, 6 * c : 6 * c + 6], data=xt[:, c0 : min(c0 + F, dim)])
        mean_var = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        # rstd = 1 / sqrt(var + eps): an add on Vector, then rsqrt on the Scalar engine.
        shifted = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=mean_var[:, 1:2], op0=nl.add, operand0=eps)
        rstd = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=shifted)
        y = nl.ndarray((rows, dim), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=y,
            data=xt,
            op0=nl.subtract,
            operand0=mean_var[:, 0:1],
            op1=nl.multiply,
            operand1=rstd,
        )
        nisa.dma_copy(dst=out[r0 : r0 + rows, :], src=y)
    return out
