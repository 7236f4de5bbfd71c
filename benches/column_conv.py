"""Output a column at a time (bench_scale.py): a depthwise three-tap filter along the free
dim, each output column made by a multiply, a sum over the taps and its own DMA to HBM, as
kernels from autotuners and course work often are. On [1024, 8192] fp32: 196,576
instructions of tiles a few bytes wide, every output write disjoint from the others (so the
race check finds none superseded, and the placement ring fills with tiny segments)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def column_conv(x, taps):
    rows, width = x.shape
    out = nl.ndarray((rows, width - 2), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(rows // 128):
        part = slice(r * 128, (r + 1) * 128)
        line = nl.ndarray((128, width), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=line, src=x[part, :])
        weights = nl.ndarray((128, 3), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=weights, src=taps[part, :])
        for j in nl.affine_range(width - 2):
            terms = nl.ndarray((128, 3), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=terms, data1=line[:, j : j + 3], data2=weights, op=nl.multiply)
            column = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=column, op=nl.add, data=terms, axis=1, keepdims=True)
            nisa.dma_copy(dst=out[part, j : j + 1], src=column)
    return out
