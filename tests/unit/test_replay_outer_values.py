"""A loop nested in a recorded iteration of another is replayed even where the outer loop's
is not: what the kernel computes from the outer loop's variable (a ragged tile's end,
`min(start + 128, C)`) is the same in every iteration of the inner loop, so it concerns
only the outer loop's replay (neuronemu.replay.journal: `Marked.level`), which makes only
the iterations where min() picks the same argument (`journal.chosen`)."""

from __future__ import annotations

import numpy as np
import pytest
from _iterations import count_interpreted

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu.replay import templates

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# Row tiles of 128 (the last ragged when C is not a multiple), each row block's columns
# one at a time: out = 2 * img.
RAGGED = (
    HEADER
    + """@nki.jit
def k(img):
    C, W = img.shape
    out = nl.ndarray((C, W), dtype=img.dtype, buffer=nl.shared_hbm)
    for c_tile in nl.affine_range((C + 127) // 128):
        c_start = c_tile * 128
        c_end = min(c_start + 128, C)
        rows = c_end - c_start
        block = nl.ndarray((128, W), dtype=img.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=block[0:rows, 0:W], src=img[c_start:c_end, 0:W])
        for i in nl.affine_range(W):
            o = nl.ndarray((128, 1), dtype=img.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(
                dst=o[0:rows, 0:1], data=block[0:rows, i:i + 1], op0=nl.multiply, operand0=2.0
            )
            nisa.dma_copy(dst=out[c_start:c_end, i:i + 1], src=o[0:rows, 0:1])
    return out
"""
)


# The same, the rows worked out again in each inner iteration (an equal value each time,
# made of the outer loop's variable).
AGAIN = RAGGED.replace(
    "            o = nl.ndarray((128, 1), dtype=img.dtype, buffer=nl.sbuf)\n",
    "            o = nl.ndarray((128, 1), dtype=img.dtype, buffer=nl.sbuf)\n"
    "            rows = c_end - c_start\n",
)


@pytest.mark.parametrize("source", [RAGGED, AGAIN], ids=["rows-once", "rows-each-time"])
@pytest.mark.parametrize("rows", [512, 400])
def test_an_inner_loop_replays_under_an_outer_min(kernel_file, monkeypatch, rows, source):
    assert source.count("rows = c_end - c_start") == (1 if source is RAGGED else 2)
    path = kernel_file(source)
    img = np.arange(rows * 64, dtype=np.float32).reshape(rows, 64)
    templates.ENABLED = False
    try:
        unrolled = neuronemu.run(path, {"img": img})
    finally:
        templates.ENABLED = True
    seen = count_interpreted(monkeypatch)
    replayed = neuronemu.run(path, {"img": img})
    np.testing.assert_array_equal(replayed.outputs["out"], 2 * img)
    assert dumps(replayed.program) == dumps(unrolled.program)
    assert replayed.cycles == unrolled.cycles
    # Each of the outer loop's 4 row tiles that is traced interprets 3 of the inner loop's
    # 64 iterations. The outer loop's min() picks c_start + 128 in its first three: at 512
    # rows its fourth does too and is replayed; at 400 it picks C, and it is traced.
    inner = source.splitlines().index("        for i in nl.affine_range(W):") + 1
    assert seen.count(inner) == (3 if rows == 512 else 4) * 3
