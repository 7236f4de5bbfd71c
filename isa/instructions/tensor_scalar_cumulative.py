"""tensor_scalar_cumulative: reg = op1(src[i] <op0> imm0, reg); dst[i] = reg, per partition.

Ref: nki.isa.tensor_scalar_cumulative (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
nki/api/generated/nki.isa.tensor_scalar_cumulative.html). Vector engine, fp32, over each
partition's flattened free axes. The register starts at op1's identity (reset_reduce: 0 for add
and subtract, 1 for multiply, -inf/+inf for maximum/minimum) or at imm1 (load_reduce); note the
doc's operand order, op1(new, reg), so subtract gives new - reg. imm0/imm1 are fp32 immediates
or [P, 1] tiles. `reduce_cmd=reduce` continues a register kept from an earlier instruction and
is not supported. The doc's pseudocode mentions reverse0, which the signature does not have.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import (
    ARITH_BINARY,
    binary_step,
    f32,
    rows,
    scalar_or_column,
    stateless_reduce_cmd,
    streaming_cycles,
)
from neuronemu_isa.ops import alu
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

CUMULATIVE_IDENTITY = {
    "add": 0.0,
    "subtract": 0.0,
    "multiply": 1.0,
    "maximum": -np.inf,
    "minimum": np.inf,
}
# Doc: BF16, FP16, FP32, FP8, UINT8, UINT16, INT8, INT16 (no 32-bit integers).
CUMULATIVE_DTYPES = (
    "bfloat16",
    "float16",
    "float32",
    "float8_e4m3",
    "float8_e5m2",
    "float8_e4m3fn",
    "uint8",
    "uint16",
    "int8",
    "int16",
)


def semantics(src, imm0, imm1=None, *, op0, op1, reduce_cmd="reset_reduce"):
    x = rows(f32(src))
    start = imm1 if reduce_cmd == "load_reduce" else CUMULATIVE_IDENTITY[op1]
    reg = np.broadcast_to(scalar_or_column(start).reshape(-1), (x.shape[0],))
    out = np.empty_like(x)
    step = alu(op1)
    with np.errstate(all="ignore"):
        scaled = binary_step(op0, x, scalar_or_column(imm0), False)
        for i in range(x.shape[1]):
            reg = out[:, i] = step(scaled[:, i], reg)
    return out


def cost(c: Check) -> int:
    # Undocumented; inferred as tensor_scalar's one-input stream, max(MIN_II, N).
    src = c.tile("src")
    return streaming_cycles(c, src.free_size, src, c.tile("dst"))


def _imm1_with_load(c: Check) -> str | None:
    if c.attrs.get("reduce_cmd") == "load_reduce" and c.operands.get("imm1") is None:
        return "reduce_cmd is load_reduce but imm1 (the register's initial value) is not given"
    return None


SPEC = InstrSpec(
    name="tensor_scalar_cumulative",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP, dtypes=CUMULATIVE_DTYPES),
        In("src", *ON_CHIP, dtypes=CUMULATIVE_DTYPES),
        In("imm0", *ON_CHIP, dtypes=("float32",), scalar=True),
        In("imm1", *ON_CHIP, dtypes=("float32",), optional=True, scalar=True),
    ),
    attrs=(
        Attr("op0", choices=ARITH_BINARY),
        Attr("op1", choices=tuple(CUMULATIVE_IDENTITY)),
        Attr("reduce_cmd", "reset_reduce"),
    ),
    constraints=(
        same_partition_size("dst", "src"),
        same_free_size("dst", "src"),
        per_partition_or_scalar("imm0", "src"),
        per_partition_or_scalar("imm1", "src"),
        stateless_reduce_cmd(("reset_reduce", "load_reduce")),
        _imm1_with_load,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "op0", "op1", "imm0", "imm1", "reduce_cmd"),
)
