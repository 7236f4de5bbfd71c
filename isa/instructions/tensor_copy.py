"""tensor_copy: dst = src within SBUF/PSUM, cast through fp32 when dtypes differ.

Ref: nki.isa.tensor_copy. Same dtype is a bit-exact copy; engines: Vector, Scalar (NC-v3+,
bit-accurate like Vector: trainium2_arch.rst), GpSimd (SBUF only). Different dtypes, integers
of one width included, go through fp32 ("intermediate FP32 cast when input and output data
types differ"). On NC-v2 the Scalar engine copies with activation(op=nl.copy), always via
fp32, so int32 values over 2**24 round even between equal dtypes.
"""

from __future__ import annotations

from neuronemu_isa.instructions._common import no_gpsimd_psum, streaming_cycles
from neuronemu_isa.spec import (
    ON_CHIP,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    same_free_size,
    same_partition_size,
)


def semantics(src):
    # Same dtype: the bits pass through; otherwise the write cast (via fp32) does the rounding.
    return src


def cost(c: Check) -> int:
    src = c.tile("src")
    return streaming_cycles(c, src.free_size, src, c.tile("dst"))


def _scalar_needs_v3(c: Check) -> str | None:
    if c.engine == Engine.SCALAR and c.arch.nc_version < 3:
        return "the Scalar engine has no tensor_copy on NC-v2; use activation(op=nl.copy)"
    return None


SPEC = InstrSpec(
    name="tensor_copy",
    engines=(Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD),
    operands=(Out("dst", *ON_CHIP), In("src", *ON_CHIP)),
    attrs=(),
    constraints=(
        same_partition_size("dst", "src"),
        same_free_size("dst", "src"),
        no_gpsimd_psum("dst", "src"),
        _scalar_needs_v3,
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    packed="copy",
    positional=("dst", "src", "engine"),
)
