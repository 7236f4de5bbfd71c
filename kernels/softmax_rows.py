"""Softmax of each row of x [N, D]: exp(x - max) / sum(exp(x - max)).

The row max comes from the Vector engine (tensor_reduce, negated). The Scalar engine computes
the exponential with the negated max as its per-row bias, so x - max costs nothing extra, and
sums each row into its reduce registers as it goes (reduce_cmd reset_reduce), read out into
`total`: no separate pass over the row for the sum.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_rows(x):
    n_rows, dim = x.shape
    out = nl.ndarray((n_rows, dim), dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for t in nl.affine_range((n_rows + P - 1) // P):
        r0 = t * P
        rows = min(P, n_rows - r0)
        xt = nl.ndarray((rows, dim), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0 : r0 + rows, :])
        neg_max = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True)
        e = nl.ndarray((rows, dim), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            dst=e,
            op=nl.exp,
            data=xt,
            bias=neg_max,
            reduce_op=nl.add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        y = nl.ndarray((rows, dim), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[r0 : r0 + rows, :], src=y)
    return out
