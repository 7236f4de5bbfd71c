"""tensor_tensor: dst = data1 <op> data2, elementwise, computed in fp32.

Ref: nki.isa.tensor_tensor. Same partition size and elements per partition; data1 and data2
not both in PSUM; bitvec ops on integer dtypes only.
"""

from __future__ import annotations

import numpy as np

from isa._ops import ALU_BINARY, BITVEC_OPS, alu
from isa._spec import (ON_CHIP, PSUM, SBUF, Attr, Check, Engine, In, InstrSpec, Out,
                       not_both_psum, same_free_size, same_partition_size)
from isa.instructions._common import (bitvec, bitvec_checks, f32, no_gpsimd_psum, rows,
                                      streaming_cycles)


def semantics(data1, data2, *, op):
    if op in BITVEC_OPS:
        return bitvec(op, rows(data1), rows(data2))
    with np.errstate(all="ignore"):
        return alu(op)(rows(f32(data1)), rows(f32(data2)))


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
        bitvec_checks(("op",), ("data1", "data2", "dst"), vector_only=False),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data1", "data2", "op", "engine"),
)
