"""tensor_scalar: dst = (data <op0> operand0) <op1> operand1, in fp32.

Ref: nki.isa.tensor_scalar. Each operand is an fp32 immediate or a [P, 1] tile broadcast along
the free dimension; `reverse` swaps an op's operands. On the Scalar engine of NC-v3 only
(multiply, add), (multiply) and (add) are allowed.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    bitvec,
    bitvec_checks,
    f32,
    no_gpsimd_psum,
    rows,
    scalar_or_column,
    streaming_cycles,
)
from neuronemu_isa.numerics import raw_bits
from neuronemu_isa.ops import ALU_BINARY, ALU_UNARY, BITVEC_OPS, alu
from neuronemu_isa.spec import (
    ON_CHIP,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    per_partition_or_scalar,
    same_free_size,
    same_partition_size,
)

_OPS = tuple(ALU_BINARY) + tuple(ALU_UNARY)


def _apply(op, x, operand, reverse):
    if op in ALU_UNARY:  # a unary op reads only the data; there is nothing to reverse
        return ALU_UNARY[op](x)
    fn = alu(op)
    return fn(operand, x) if reverse else fn(x, operand)


def _bitvec_step(op, x, operand, reverse):
    y = np.asarray(0 if operand is None else operand)
    y = (y if y.ndim == 0 else rows(y)).astype(x.dtype)
    if reverse:
        return bitvec(op, np.broadcast_to(y, x.shape).copy(), x)
    return bitvec(op, x, y)


def semantics(data, operand0=None, operand1=None, *, op0, reverse0=False, op1=None, reverse1=False):
    if op0 in BITVEC_OPS:  # raw integer bits; operands are cast to data's integer type
        x = rows(data)
        out = _bitvec_step(op0, x, operand0, reverse0)
        if op1 is not None:
            out = _bitvec_step(op1, out, operand1, reverse1)
        # nki.isa.tensor_scalar / nki.api.shared: bitvec ops treat elements as bit patterns
        # without casting, so the result is written as bits, not through fp32 (inferred for
        # a dst of another integer type: see raw_bits).
        return np.broadcast_to(raw_bits(out), x.shape)
    x = rows(f32(data))
    with np.errstate(all="ignore"):
        out = _apply(op0, x, scalar_or_column(0.0 if operand0 is None else operand0), reverse0)
        if op1 is not None:
            out = _apply(
                op1, out, scalar_or_column(0.0 if operand1 is None else operand1), reverse1
            )
    return np.broadcast_to(out, x.shape)


def cost(c: Check) -> int:
    # ISA-old: max(64, N) for one or two ops alike.
    data = c.tile("data")
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


def _op1_pairs_with_operand1(c: Check) -> str | None:
    if (c.attrs.get("op1") is None) != (c.operands.get("operand1") is None):
        return "op1 and operand1 must be given together (or both left None)"
    if c.attrs["op0"] in ALU_BINARY and c.operands.get("operand0") is None:
        return f"op0 {c.attrs['op0']!r} is binary; operand0 is required"
    return None


def _scalar_engine_pairs(c: Check) -> str | None:
    if c.engine != Engine.SCALAR:
        return None
    pair = (c.attrs["op0"], c.attrs.get("op1"))
    if pair not in (("multiply", "add"), ("multiply", None), ("add", None)):
        return f"the Scalar engine supports (multiply, add), (multiply) or (add); got {pair}"
    return None


SPEC = InstrSpec(
    name="tensor_scalar",
    engines=(Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD),
    operands=(
        Out("dst", *ON_CHIP),
        In("data", *ON_CHIP),
        In("operand0", *ON_CHIP, optional=True, scalar=True),
        In("operand1", *ON_CHIP, optional=True, scalar=True),
    ),
    attrs=(
        Attr("op0", choices=_OPS),
        Attr("reverse0", False, (False, True)),
        Attr("op1", None, _OPS + (None,)),
        Attr("reverse1", False, (False, True)),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        same_free_size("dst", "data"),
        per_partition_or_scalar("operand0", "data"),
        per_partition_or_scalar("operand1", "data"),
        _op1_pairs_with_operand1,
        _scalar_engine_pairs,
        # nki.isa.tensor_scalar: "Bitvec: Vector only, integer dtypes".
        bitvec_checks(("op0", "op1"), ("data", "dst"), vector_only=True),
        no_gpsimd_psum("dst", "data", "operand0", "operand1"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=(
        "dst",
        "data",
        "op0",
        "operand0",
        "reverse0",
        "op1",
        "operand1",
        "reverse1",
        "engine",
    ),
)
