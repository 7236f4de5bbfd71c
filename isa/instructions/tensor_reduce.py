"""tensor_reduce: dst = op-reduction of data over its trailing free axes, on the Vector engine.

Ref: nki.isa.tensor_reduce (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.tensor_reduce.html). `axis` names the last contiguous free axes (never axis 0);
arithmetic ops reduce in fp32 and may `negate` the result; bitvec ops reduce the raw integer
bits. `keepdims` only shapes dst, so the values do not depend on it.
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import bitvec_checks, f32, fold_free, streaming_cycles
from neuronemu_isa.numerics import raw_bits
from neuronemu_isa.ops import ALU_BINARY, BITVEC_OPS
from neuronemu_isa.spec import (
    ON_CHIP,
    SBUF,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    Result,
    same_partition_size,
)

# nki.isa "Supported Math Operators": the legal reduction operators.
REDUCE_OPS = (
    "add",
    "subtract",
    "multiply",
    "maximum",
    "minimum",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
    "logical_xor",
)


def _axes(axis) -> tuple[int, ...]:
    return tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)


def semantics(data, *, op, axis, negate=False, keepdims=False):
    kept = data.ndim - len(_axes(axis))
    x = data.reshape(math.prod(data.shape[:kept]), -1)
    if op in BITVEC_OPS:  # bit patterns in and out, never through fp32 (see raw_bits)
        return raw_bits(fold_free(ALU_BINARY[op], x)).reshape(data.shape[:kept])
    with np.errstate(all="ignore"):
        out = fold_free(ALU_BINARY[op], f32(x))
    return (-out if negate else out).reshape(data.shape[:kept])


def cost(c: Check) -> int:
    # ISA-old: N/2 when data and dst are bf16 and op is add or maximum, else N (MIN_II floor).
    data, dst = c.tile("data"), c.tile("dst")
    n = data.free_size
    if data.dtype == dst.dtype == "bfloat16" and c.attrs["op"] in ("add", "maximum"):
        n = (n + 1) // 2
    return streaming_cycles(c, n, data, dst)


def _axis_is_trailing(c: Check) -> str | None:
    data = c.tile("data")
    axes = _axes(c.attrs.get("axis"))
    if not axes or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
        return f"axis {c.attrs.get('axis')!r} must be an int or a list of ints"
    rank = len(data.shape)
    want = tuple(range(rank - len(axes), rank))
    if sorted(axes) != list(want) or 0 in axes:
        return (
            f"axis {list(axes)} must be the last contiguous free axes of data (rank "
            f"{rank}), e.g. {[rank - 1]} or {list(range(1, rank))}; axis 0 cannot be reduced"
        )
    return None


def _dst_size(c: Check) -> str | None:
    if _axis_is_trailing(c) is not None:
        return None  # reported by _axis_is_trailing
    data, dst = c.tile("data"), c.tile("dst")
    axes = _axes(c.attrs.get("axis"))
    kept = math.prod(data.shape[1 : len(data.shape) - len(axes)])
    if dst.free_size != kept:
        return (
            f"dst has {dst.free_size} elements per partition; reducing axis {list(axes)} "
            f"of data {list(data.shape)} leaves {kept}"
        )
    return None


def _negate_is_arithmetic(c: Check) -> str | None:
    if c.attrs.get("negate") and c.attrs["op"] in BITVEC_OPS:
        return f"negate=True applies to arithmetic ops only, not bitvec op {c.attrs['op']!r}"
    return None


def result(c: Check) -> Result:
    """The reduced axes dropped (or kept as 1 with keepdims); a tile keeps a free dim."""
    data = c.tile("data")
    shape = data.shape
    axis = c.attrs.get("axis")
    axes = {
        a % len(shape)
        for a in (axis if isinstance(axis, (list, tuple)) else (axis,))
        if isinstance(a, int)
    }
    keep = bool(c.attrs.get("keepdims"))
    out = tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)
    return (out if len(out) > 1 else (shape[0], 1)), data.dtype, SBUF


SPEC = InstrSpec(
    name="tensor_reduce",
    engines=(Engine.VECTOR,),
    operands=(Out("dst", *ON_CHIP), In("data", *ON_CHIP)),
    attrs=(
        Attr("op", choices=REDUCE_OPS),
        Attr("axis"),
        Attr("negate", False, (False, True)),
        Attr("keepdims", False, (False, True)),
    ),
    constraints=(
        same_partition_size("dst", "data"),
        _axis_is_trailing,
        _dst_size,
        _negate_is_arithmetic,
        bitvec_checks(("op",), ("data", "dst"), vector_only=True),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "op", "data", "axis", "negate", "keepdims"),
    result=result,
)
