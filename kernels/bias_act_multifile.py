"""act(x * scale + bias[row]) over [N, D], ragged tiles allowed: a kernel split over files.

The tiling config (a frozen dataclass), the activation choice (an Enum) and the load helper
live in the sibling module `_tiling.py`.
"""

import nki
import nki.isa as nisa
import nki.language as nl
from _tiling import ACTIVATIONS, Act, TileConfig, load_block


@nki.jit
def bias_act_multifile(x, bias, act="relu", config=TileConfig(scale=0.5)):
    n_rows, n_cols = x.shape
    assert bias.shape == (n_rows, 1), f"bias must be [{n_rows}, 1], got {list(bias.shape)}"
    op = ACTIVATIONS[Act(act)]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(config.row_tiles(n_rows)):
        r0 = i * config.rows
        r1 = min(r0 + config.rows, n_rows)
        b = load_block(bias, r0, r1, 0, 1)
        for j in nl.affine_range(config.col_tiles(n_cols)):
            c0 = j * config.cols
            c1 = min(c0 + config.cols, n_cols)
            t = load_block(x, r0, r1, c0, c1)
            y = nl.ndarray(t.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.activation(dst=y, op=op, data=t, bias=b, scale=config.scale)
            nisa.dma_copy(dst=out[r0:r1, c0:c1], src=y)
    return out
