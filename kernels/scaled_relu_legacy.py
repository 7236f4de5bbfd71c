"""relu(x * scale + shift) over an [N, D] tensor, N not a multiple of 128: the older
`neuronxcc.nki` dialect with nl.arange index expressions and a mask on the ragged last tile."""

import math

import neuronxcc.nki.language as nl
from neuronxcc import nki


@nki.jit
def scaled_relu_legacy(x, scale=2.0, shift=-0.5):
    n_rows, n_cols = x.shape
    out = nl.ndarray((n_rows, n_cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(n_cols)[None, :]
    for t in nl.affine_range(math.ceil(n_rows / nl.tile_size.pmax)):
        rows = t * nl.tile_size.pmax + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < n_rows))
        y = nl.relu(
            nl.add(nl.multiply(tile, scale, mask=(rows < n_rows)), shift, mask=(rows < n_rows)),
            mask=(rows < n_rows),
        )
        nl.store(out[rows, i_f], value=y, mask=(rows < n_rows))
    return out
