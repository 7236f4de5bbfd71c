"""The sequencers' own instructions: scalar registers and the branches of device loops.

Each engine's sequencer has private 32-bit registers and a register ALU "for dynamic
condition and address calculations, branching for control flow execution, and triggering
DMA transfers" (neuroncore.md §1; nki/guides/architecture/trainium_inferentia2_arch.rst,
NeuronCore-v2 Compute Engines). neuronemu runs the register instructions of a kernel
(`nisa.scalar_load`, NkiScalar arithmetic, `nisa.register_*`) on the Sync engine's sequencer,
which runs control instructions only; an engine that reads a register waits for it like any
other value (inferred: the compiler places each register where it is used and copies it
between sequencers; one producer and a semaphore is the same order).

A device loop (`nl.fori_loop`, `nl.while_loop`, `nl.if_else`, older `nl.dynamic_range`) is
one copy of its body; every sequencer with instructions in it ends the body with a `branch`
(compare and jump back), so the loop costs each engine a branch per iteration (nki.language
.fori_loop: "the loop compiles into a compare-and-branch").
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from neuronemu_isa import REGISTRY
from neuronemu_isa.spec import HBM, REG, SBUF, Attr, Check, Engine, In, InstrSpec, Out

__all__ = [
    "SPECS",
    "SCALAR_ALU_OPS",
    "scalar_alu_value",
    "BRANCH",
    "LOOP_KINDS",
    "CORE_BARRIER",
    "SENDRECV",
]

# Inferred (no AWS document gives these): a register ALU operation and a compare-and-branch
# take a few sequencer cycles; a register load from SBUF is one SBUF access (~60 cycles to
# start an access on NC-v2, trainium_inferentia2_arch.rst); from HBM, a DMA's fixed cost.
REGISTER_ALU_CYCLES = 4
BRANCH_CYCLES = 8
REGISTER_SBUF_CYCLES = 64

INT_DTYPES = ("int32", "int64")

# nki.isa.scalar_alu: op -> what it computes; divide truncates toward zero and fmod takes
# the sign of data1 (C semantics); comparisons give int32 0 or 1.
SCALAR_ALU_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)),
    "fmod": lambda a, b: np.sign(a) * (np.abs(a) % np.abs(b)),
    "maximum": np.maximum,
    "minimum": np.minimum,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}
COMPARISONS = frozenset(("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"))
# int64 scalars support only these (nki.isa.scalar_alu).
INT64_OPS = frozenset(("add", "subtract", "multiply"))


def scalar_alu_value(op: str, a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`a op b` as the register ALU computes it: in two's complement of `dtype`, wrapping
    (a 32-bit scalar never widens: 100000 * 100000 is 1410065408, nki.isa.NkiScalar)."""
    # Inferred: no document says what a register divide by zero gives; numpy's 0 it is.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        wide = SCALAR_ALU_OPS[op](np.asarray(a, np.int64), np.asarray(b, np.int64))
    if op in COMPARISONS:
        return np.asarray(wide, np.int32)
    return np.asarray(wide).astype(np.int64).astype(dtype)


def _alu(data1, data2, op, **_):
    b = np.full_like(data1, data2) if np.isscalar(data2) else data2
    return scalar_alu_value(op, data1, b, np.asarray(data1).dtype)


def _copy(src, **_):
    return np.asarray(src)


def _nothing(**_):
    return {}


def _memory_cost(name: str):
    """A register load or store: one SBUF access, or a DMA's fixed cost to HBM."""

    def cost(c: Check) -> int:
        t = c.tile_or_none(name)
        if t is not None and t.buffer == HBM:
            return int(c.arch.dma_fixed_ns * c.arch.clock_ghz("sync"))
        return REGISTER_SBUF_CYCLES

    return cost


SCALAR_LOAD = InstrSpec(
    name="scalar_load",
    engines=(Engine.SYNC,),
    operands=(In("src", SBUF, HBM, dtypes=INT_DTYPES), Out("dst", REG, dtypes=INT_DTYPES)),
    semantics=_copy,
    cost=_memory_cost("src"),
    doc="nisa.scalar_load(src): a 1x1 int32/int64 SBUF or HBM tensor's value into a register",
)

SCALAR_STORE = InstrSpec(
    name="scalar_store",
    engines=(Engine.SYNC,),
    operands=(In("src", REG, dtypes=INT_DTYPES), Out("dst", SBUF, HBM, dtypes=INT_DTYPES)),
    semantics=_copy,
    cost=_memory_cost("dst"),
    doc="nisa.scalar_store(dst, value): a register's value into a 1x1 SBUF or HBM tensor",
)


SCALAR_ALU = InstrSpec(
    name="scalar_alu",
    engines=(Engine.SYNC,),
    operands=(
        In("data1", REG, dtypes=INT_DTYPES),
        In("data2", REG, dtypes=INT_DTYPES, scalar=True),
        Out("dst", REG, dtypes=INT_DTYPES),
    ),
    attrs=(Attr("op", choices=tuple(SCALAR_ALU_OPS)),),
    semantics=_alu,
    cost=lambda c: REGISTER_ALU_CYCLES,
    doc="nisa.scalar_alu(data1, data2, op): register arithmetic (NkiScalar operators)",
)

REGISTER_MOVE = InstrSpec(
    name="register_move",
    engines=(Engine.SYNC,),
    operands=(In("src", REG, scalar=True), Out("dst", REG)),
    semantics=lambda src, dst_shape, **_: (
        np.full(dst_shape, src, dtype=np.int64) if np.isscalar(src) else np.asarray(src)
    ),
    cost=lambda c: REGISTER_ALU_CYCLES,
    doc="nisa.register_move(dst, src): an immediate or another register into a register",
)

LOOP_KINDS = ("for", "while", "if", "else")

# The end of a device loop's body on one sequencer: compare and jump back (or, for if_else,
# the jump over the other branch). `cond` is the register it compares, when the loop's
# bound or condition is one.
BRANCH = InstrSpec(
    name="branch",
    engines=(Engine.SYNC, Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD),
    operands=(In("cond", REG, optional=True),),
    attrs=(Attr("loop", 0), Attr("kind", "for", choices=LOOP_KINDS)),
    semantics=_nothing,
    cost=lambda c: BRANCH_CYCLES,
    doc="the compare-and-branch closing a device loop's body on one engine",
)

# Between the two physical cores of a logical NeuronCore (nki.lnc; nki.isa.core_barrier,
# nki.isa.sendrecv): the Nth call on one core meets the Nth on the other ("paired across
# NeuronCore ranks positionally by program order", nki.lnc.sendrecv).
# core_barrier: each core "writes a semaphore to each other core ... and then waits for the
# other cores' semaphores": an `arrive` after everything the core did before, and a `wait`
# after both arrivals that everything the core does afterwards follows (neuronemu fences the
# whole core: inferred, the docs say the engine that runs it waits).
CORE_BARRIER = InstrSpec(
    name="core_barrier",
    engines=(Engine.GPSIMD, Engine.VECTOR, Engine.SCALAR, Engine.TENSOR, Engine.SYNC),
    operands=(),  # `data` names the tensor; the barrier orders, it does not access it
    attrs=(
        Attr("phase", "arrive", choices=("arrive", "wait")),
        Attr("data", ""),
        Attr("cores", (0, 1)),
    ),
    semantics=_nothing,
    cost=lambda c: BRANCH_CYCLES,  # inferred: a remote semaphore write, a local wait
    doc="nki.isa.core_barrier(data, cores): both cores reach it before either goes on",
)


# sendrecv: this core's `src` tile goes to the peer's `dst` while the peer's `src` comes into
# this core's `dst`; in the program, each core's instruction copies the peer's src (`src`
# names it once the pair is matched) into its own dst, on its DMA engines.
SENDRECV = InstrSpec(
    name="sendrecv",
    engines=(Engine.DMA,),
    operands=(In("src", SBUF), Out("dst", SBUF)),
    attrs=(
        Attr("send_to_rank", 1),
        Attr("recv_from_rank", 1),
        Attr("pipe_id", 0),
        Attr("pair", -1),  # the peer core's sendrecv (its instruction index)
    ),
    semantics=_copy,
    cost=lambda c: REGISTRY["dma_copy"].cost(c),
    peer="src",
    doc="nki.isa.sendrecv(src, dst, send_to_rank, recv_from_rank): swap tiles between cores",
)

SPECS = {
    s.name: s
    for s in (SCALAR_LOAD, SCALAR_STORE, SCALAR_ALU, REGISTER_MOVE, BRANCH, CORE_BARRIER, SENDRECV)
}
