"""nc_transpose: dst[F, P] = data[P, F].T (free axes flattened), on the Tensor or Vector engine.

Ref: nki.isa.nc_transpose (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
generated/nki.isa.nc_transpose.html). Tensor engine: up to [128, 128], SBUF -> PSUM; Vector
engine: up to [32, 32], SBUF/PSUM either side. dst has data's dtype; the copy is bit-exact
(NC-v2's Tensor-engine NaN/Inf inexactness is not modelled).
"""

from __future__ import annotations

from neuronemu_isa.instructions._common import rows, same_dtype, streaming_cycles
from neuronemu_isa.spec import ON_CHIP, PSUM, SBUF, Check, Engine, In, InstrSpec, Out, Result


def semantics(data):
    # Raw values, no fp32 detour: the output dtype equals the input's, so the bits move as-is.
    return rows(data).T


def validity(data):
    """Each element moves alone: dst[j, i] is written when data[i, j] was."""
    return rows(data).T


def cost(c: Check) -> int:
    data = c.tile("data")
    if c.engine == Engine.TENSOR:
        # ISA-old: max(P, min(64, F)) back to back (a matmul of data against an identity).
        return int(max(data.partition_size, min(c.arch.cost_min_ii_cycles, data.free_size)))
    return streaming_cycles(c, data.free_size, data, c.tile("dst"))


def _dst_shape(c: Check) -> str | None:
    data, dst = c.tile("data"), c.tile("dst")
    if dst.partition_size != data.free_size or dst.free_size != data.partition_size:
        return (
            f"dst has shape {list(dst.shape)}; transposing data {list(data.shape)} gives "
            f"[{data.free_size}, {data.partition_size}]"
        )
    return None


def _engine_limits(c: Check) -> str | None:
    data, dst = c.tile("data"), c.tile("dst")
    key = "tile_transpose_tensor_max" if c.engine == Engine.TENSOR else "tile_transpose_vector_max"
    limit = c.arch[key]
    if data.partition_size > limit or data.free_size > limit:
        return (
            f"data is [{data.partition_size}, {data.free_size}]; the {c.engine.value} "
            f"engine transposes at most [{limit}, {limit}] ({key})"
        )
    if c.engine == Engine.TENSOR and (data.buffer != SBUF or dst.buffer != PSUM):
        return (
            f"the Tensor engine reads data from SBUF and writes dst to PSUM; data is in "
            f"{data.buffer.value.upper()} and dst in {dst.buffer.value.upper()}"
        )
    return None


def result(c: Check) -> Result:
    """[P, F] -> [F, P]: in PSUM from the Tensor engine, in SBUF from the Vector engine."""
    data = c.tile("data")
    return (
        (data.free_size, data.partition_size),
        data.dtype,
        PSUM if c.engine == Engine.TENSOR else SBUF,
    )


SPEC = InstrSpec(
    name="nc_transpose",
    engines=(Engine.TENSOR, Engine.VECTOR),
    operands=(Out("dst", *ON_CHIP), In("data", *ON_CHIP)),
    constraints=(same_dtype("dst", "data"), _dst_shape, _engine_limits),
    semantics=semantics,
    validity=validity,
    cost=cost,
    doc=__doc__,
    positional=("dst", "data", "engine"),
    result=result,
)
