"""NKI dtypes as values: `nl.bfloat16`, `a.dtype`, `np.float32` name one of these."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from neuronemu_isa.numerics import DTYPES, dtype_of, itemsize

__all__ = ["DType", "ALL_DTYPES", "MX_DTYPES"]

# NC-v4 MX types pack several values per element (nki.language: float8 x4, float4 x4): their
# element sizes in bytes. Kernels may name them; tensors of them need nc_matmul_mx and
# quantize_mx, which neuronemu does not model yet.
MX_DTYPES = {"float8_e4m3fn_x4": 4, "float8_e5m2_x4": 4, "float4_e2m1fn_x4": 2}


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


ALL_DTYPES = {name: DType(name) for name in DTYPES}
