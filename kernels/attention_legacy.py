"""Single-head attention, softmax(q^T k) v^T, in the older `neuronxcc.nki` dialect.

q, k and v are [d, s] with d = 128 (the contraction of q^T k runs over the partitions). Each
128-row query tile computes its scores against every key tile in PSUM, takes the row softmax
in SBUF, and accumulates scores @ v^T with `psum += nisa.nc_matmul(...)`. The transposed
scores and v tiles are kept in tensors with a block dim before `nl.par_dim` (one tile per
block), and filled by assigning into them.
"""

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def attention_legacy(q, k, v):
    d, s = q.shape
    assert d == 128 and s % 128 == 0, "q, k, v are [128, s] with s a multiple of 128"
    tiles = s // 128
    out = nl.ndarray((s, d), dtype=q.dtype, buffer=nl.shared_hbm)
    k_sb = nl.load(k)
    v_sb = nl.load(v)
    # v^T, one [128 keys, d] tile per key block.
    v_t = nl.ndarray((tiles, nl.par_dim(128), d), dtype=q.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(tiles):
        v_t[j] = nisa.nc_transpose(v_sb[:, j * 128 : (j + 1) * 128])
    for i in nl.affine_range(tiles):
        q_sb = nl.load(q[:, i * 128 : (i + 1) * 128])
        scores = nl.ndarray((128, s), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(tiles):
            qk = nisa.nc_matmul(q_sb, k_sb[:, j * 128 : (j + 1) * 128])
            scores[:, j * 128 : (j + 1) * 128] = qk
        row_max = nl.max(scores, axis=1)
        probs = nl.exp(nl.subtract(scores, row_max))
        row_sum = nl.sum(probs, axis=1)
        probs_bf = nl.ndarray((128, s), dtype=q.dtype, buffer=nl.sbuf)
        probs_bf[...] = probs
        p_t = nl.ndarray((tiles, nl.par_dim(128), 128), dtype=q.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(tiles):
            p_t[j] = nisa.nc_transpose(probs_bf[:, j * 128 : (j + 1) * 128])
        acc = nl.zeros((128, d), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(tiles):
            acc += nisa.nc_matmul(p_t[j], v_t[j])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(acc, row_sum))
    return out
