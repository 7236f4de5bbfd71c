"""Shared dtype sets, constraint helpers and per-element cost rules of the compute engines."""

from __future__ import annotations

import math

import numpy as np

from isa._numerics import DTYPES
from isa._spec import PSUM, Check, Engine, OperandInfo

ANY_DTYPE = frozenset(DTYPES)
MATMUL_IN = frozenset({"float8_e4m3", "float8_e5m2", "bfloat16", "float16", "float32"})
F32 = frozenset({"float32"})


def f32(x: np.ndarray | float) -> np.ndarray:
    """Engines compute in fp32 (nki.isa: "arithmetic ... performed in float32")."""
    return np.asarray(x, dtype=np.float32)


def rows(x: np.ndarray) -> np.ndarray:
    """[P, free...] as [P, F], the per-partition element streams an engine walks."""
    return x.reshape(x.shape[0], -1)


def scalar_or_column(x: np.ndarray | float) -> np.ndarray:
    """An immediate, or a [P, 1] tile broadcast along the free dimension."""
    return f32(x) if np.ndim(x) == 0 else rows(f32(x))


def no_gpsimd_psum(*names: str):
    def check(c: Check) -> str | None:
        if c.engine != Engine.GPSIMD:
            return None
        for n in names:
            t = c.tile(n)
            if t is not None and t.buffer == PSUM:
                return f"{n} is in PSUM, which the GpSimd engine cannot access; use vector"
        return None

    return check


def lane_elems_per_cycle(c: Check, engine: Engine, *tiles: OperandInfo | None) -> float:
    """Elements each lane (partition) processes per cycle for this engine and these dtypes.

    Vector: 512 elem/cycle over 128 lanes for 16-bit dtypes and 256 otherwise on NC-v3/v4,
    128 on NC-v2 (arch constants); Scalar and GpSimd: their per-cycle rates.
    """
    lanes = c.arch.sbuf_partitions
    if engine == Engine.VECTOR:
        sixteen = all(t is None or t.itemsize <= 2 for t in tiles)
        key = "cost_vector_elems_per_cycle_16bit" if sixteen else "cost_vector_elems_per_cycle"
        return c.arch[key] / lanes
    if engine == Engine.GPSIMD:
        return c.arch.cost_gpsimd_elems_per_cycle / lanes
    return c.arch.cost_scalar_elems_per_cycle / lanes


def streaming_cycles(c: Check, elements: int, *tiles: OperandInfo | None) -> int:
    """Cost of streaming `elements` per lane: max(MIN_II, N / rate), plus GpSimd start-up.

    Ref: nki.isa cost notes (ISA-old): most Vector/Scalar instructions take max(64, N) cycles
    on NC-v2; nki_perf_guide.rst: GpSimd instruction start-up ~150 cycles.
    """
    rate = lane_elems_per_cycle(c, c.engine, *tiles)
    cycles = max(c.arch.cost_min_ii_cycles, math.ceil(elements / rate))
    if c.engine == Engine.GPSIMD:
        cycles += c.arch.cost_gpsimd_startup_cycles
    return int(cycles)
