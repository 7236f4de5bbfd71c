"""NKI dtypes as values: `nl.bfloat16`, `a.dtype`, `np.float32` name one of these."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from neuronemu_isa.numerics import DTYPES, PACKED, dtype_of, itemsize

__all__ = ["DType", "ALL_DTYPES", "MX_DTYPES"]

# NC-v4 MX types pack four values per element (nki.language: float8 x4, float4 x4): their
# element sizes in bytes. Tiles of them hold the packed words; nc_matmul_mx and quantize_mx
# read and write them, copies between tiles of one such dtype move their bits.
MX_DTYPES = {name: word.itemsize for name, (word, _) in PACKED.items()}


@dataclass(frozen=True)
class DType:
    """An NKI dtype as a trace-time value (`nl.bfloat16`, `a.dtype`, `np.float32`)."""

    name: str

    @functools.cached_property
    def np(self) -> np.dtype:
        return dtype_of(self.name)

    @functools.cached_property
    def itemsize(self) -> int:
        return MX_DTYPES.get(self.name) or itemsize(self.name)

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __str__(self) -> str:  # str(nl.bfloat16) is "bfloat16", as NKI kernels compare it
        return self.name


ALL_DTYPES = {name: DType(name) for name in (*DTYPES, *PACKED)}
