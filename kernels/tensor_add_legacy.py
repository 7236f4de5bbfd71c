"""Elementwise add in the older `neuronxcc.nki` style: nl.load, nl.add and nl.store."""

import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def tensor_add_legacy(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    tile_rows = nl.tile_size.pmax
    for i in nl.affine_range((rows + tile_rows - 1) // tile_rows):
        lo = i * tile_rows
        hi = min(lo + tile_rows, rows)
        a_tile = nl.load(a[lo:hi, :])
        b_tile = nl.load(b[lo:hi, :])
        nl.store(out[lo:hi, :], value=nl.add(a_tile, b_tile))
    return out
