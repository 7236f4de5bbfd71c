"""Helpers shared by kernels in this directory: a tiling config and the activations it names."""

from dataclasses import dataclass
from enum import Enum

import nki.isa as nisa
import nki.language as nl


class Act(Enum):
    RELU = "relu"
    TANH = "tanh"
    SIGMOID = "sigmoid"


ACTIVATIONS = {Act.RELU: nl.relu, Act.TANH: nl.tanh, Act.SIGMOID: nl.sigmoid}


@dataclass(frozen=True)
class TileConfig:
    rows: int = 128
    cols: int = 512
    scale: float = 1.0

    def row_tiles(self, n_rows):
        return (n_rows + self.rows - 1) // self.rows

    def col_tiles(self, n_cols):
        return (n_cols + self.cols - 1) // self.cols


def load_block(src, r0, r1, c0, c1):
    """DMA src[r0:r1, c0:c1] into a fresh SBUF tile."""
    tile = nl.ndarray((r1 - r0, c1 - c0), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=src[r0:r1, c0:c1])
    return tile
