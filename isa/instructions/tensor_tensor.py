"""tensor_tensor: dst = data1 <op> data2, elementwise, computed in fp32.

Ref: nki.isa.tensor_tensor. Same partition size and elements per partition; data1 and data2
not both in PSUM; bitvec ops on integer dtypes only. When every tile is int32/uint32 and none
is in PSUM, the default engine is GpSimd, whose native integer arithmetic is exact for all
32-bit values; engine=vector (or a PSUM tile) keeps the fp32 path. nl.power runs on GpSimd.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from neuronemu_isa.instructions._common import (
    bitvec,
    bitvec_checks,
    f32,
    no_gpsimd_psum,
    rows,
    streaming_cycles,
)
from neuronemu_isa.numerics import exact_ints, raw_bits
from neuronemu_isa.ops import ALU_BINARY, BITVEC_OPS, alu
from neuronemu_isa.spec import (
    ON_CHIP,
    PSUM,
    SBUF,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    OperandInfo,
    Out,
    not_both_psum,
    same_free_size,
    same_partition_size,
)

# divide and power keep fp32 math on GpSimd too: the docs do not say how they round on
# integers. Every other arithmetic op is exact on int64 (comparisons give 0/1).
_FP32_ONLY_OPS = frozenset({"divide", "power"})
_INT32_TYPES = frozenset({"int32", "uint32"})


def semantics(data1, data2, *, op, engine=Engine.VECTOR):
    if op in BITVEC_OPS:
        # "treats all input elements as bit patterns without any data type casting": the
        # result is written as bits too (inferred for a dst of another type: see raw_bits).
        return raw_bits(bitvec(op, rows(data1), rows(data2)))
    if (
        engine == Engine.GPSIMD
        and op not in _FP32_ONLY_OPS
        and all(isinstance(d, np.ndarray) and d.dtype.kind in "iu" for d in (data1, data2))
    ):
        # Exact in int64, and written without the fp32 trip; a result outside dst's range
        # follows EXACT_INT_OVERFLOW (inferred: the docs promise exactness for in-range
        # results only).
        return exact_ints(alu(op)(exact_ints(rows(data1)), exact_ints(rows(data2))))
    with np.errstate(all="ignore"):
        return alu(op)(rows(f32(data1)), rows(f32(data2)))


def default_engine(operands: Mapping[str, Any], attrs: Mapping[str, Any]) -> Engine:
    if attrs.get("op") == "power":
        return Engine.GPSIMD  # also with a PSUM tile, which the GpSimd constraint then names
    tiles = [t for t in operands.values() if isinstance(t, OperandInfo)]
    if all(t.dtype in _INT32_TYPES and t.buffer != PSUM for t in tiles):
        return Engine.GPSIMD
    return Engine.VECTOR


def power_on_gpsimd(c: Check) -> str | None:
    if c.attrs.get("op") == "power" and c.engine != Engine.GPSIMD:
        return f"op=power runs on the GpSimd engine only, not {c.engine.value}"
    return None


def cost(c: Check) -> int:
    # ISA-old: max(64, N) when one input is in PSUM, or both in SBUF, bf16, add/mul/sub;
    # otherwise max(64, 2N) (two input streams over one SBUF port).
    d1, d2, dst = c.tile("data1"), c.tile("data2"), c.tile("dst")
    n = d1.free_size
    one_pass = (PSUM in (d1.buffer, d2.buffer)) or (
        d1.buffer == d2.buffer == SBUF
        and {d1.dtype, d2.dtype, dst.dtype} == {"bfloat16"}
        and c.attrs["op"] in ("add", "multiply", "subtract")
    )
    return streaming_cycles(c, n if one_pass else 2 * n, d1, d2, dst)


def older_call(bound: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The older compiler broadcast a [P, 1] operand along the free dims: a tensor_scalar
    with that column as operand0 (inferred: nki-samples' legacy double_row_matmul scales a
    [128, 1024] tile by a [128, 1] column with tensor_tensor)."""
    a, b = bound.get("data1"), bound.get("data2")
    sa: tuple[int, ...] = tuple(getattr(a, "shape", ()))
    sb: tuple[int, ...] = tuple(getattr(b, "shape", ()))
    if len(sa) < 2 or len(sb) < 2 or sa[0] != sb[0]:
        return None
    fa, fb = int(np.prod(sa[1:])), int(np.prod(sb[1:]))
    rest = {k: v for k, v in bound.items() if k not in ("data1", "data2", "op")}
    op = bound.get("op")
    if fb == 1 < fa:
        return "tensor_scalar", rest | {"data": a, "operand0": b, "op0": op}
    if fa == 1 < fb:
        return "tensor_scalar", rest | {"data": b, "operand0": a, "op0": op, "reverse0": True}
    return None


SPEC = InstrSpec(
    name="tensor_tensor",
    engines=(Engine.VECTOR, Engine.GPSIMD),
    operands=(Out("dst", *ON_CHIP), In("data1", *ON_CHIP), In("data2", *ON_CHIP)),
    attrs=(Attr("op", choices=tuple(ALU_BINARY)),),
    constraints=(
        same_partition_size("dst", "data1", "data2"),
        same_free_size("dst", "data1", "data2"),
        not_both_psum("data1", "data2"),
        no_gpsimd_psum("dst", "data1", "data2"),
        power_on_gpsimd,
        bitvec_checks(("op",), ("data1", "data2", "dst"), vector_only=False),
    ),
    semantics=semantics,
    cost=cost,
    default_engine=default_engine,
    doc=__doc__,
    positional=("dst", "data1", "data2", "op", "engine"),
    older_call=older_call,
)
