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


def bitvec(op: str, a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """A bitvec ALU op on the raw integer bits of `a` (nki: right_shift is logical)."""
    from isa._ops import alu

    b = np.asarray(b).astype(a.dtype)
    if op == "right_shift" and a.dtype.kind == "i":
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        return np.right_shift(a.view(unsigned), b.astype(unsigned)).view(a.dtype)
    return alu(op)(a, b)


def bitvec_checks(ops: tuple[str, ...], tiles: tuple[str, ...], vector_only: bool):
    """Bitvec ops need integer dtypes (and maybe the Vector engine); no mixing with arithmetic."""
    from isa._ops import BITVEC_OPS

    def check(c: Check) -> str | None:
        chosen = [c.attrs.get(o) for o in ops if c.attrs.get(o) is not None]
        kinds = {op in BITVEC_OPS for op in chosen}
        if True not in kinds:
            return None
        if len(kinds) > 1:
            return f"ops {chosen} mix bitvec and arithmetic ops; both must be of one kind"
        if vector_only and c.engine != Engine.VECTOR:
            return f"bitvec op {chosen[0]!r} runs on the Vector engine only, not {c.engine.value}"
        for name in tiles:
            t = c.tile(name)
            if t is not None and not t.dtype.startswith(("int", "uint")):
                return f"bitvec op {chosen[0]!r} needs integer dtypes; {name} is {t.dtype}"
        return None

    return check


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
