"""tensor_copy_predicated: dst = src where predicate (is nonzero), else dst keeps its value.

Ref: nki.isa.tensor_copy_predicated (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
nki/api/generated/nki.isa.tensor_copy_predicated.html). Vector engine; predicate uint8/16/32;
src (a tile of dst's dtype, or a number) and predicate not both in PSUM; `reverse_pred` copies
where the predicate is zero instead.
"""

from __future__ import annotations

import numpy as np

from neuronemu_isa.instructions._common import reads_dst_attr, rows, same_dtype, streaming_cycles
from neuronemu_isa.numerics import cast_to
from neuronemu_isa.spec import (
    ON_CHIP,
    PSUM,
    Attr,
    Check,
    Engine,
    In,
    InstrSpec,
    Out,
    not_both_psum,
    same_free_size,
    same_partition_size,
)

PREDICATE_DTYPES = ("uint8", "uint16", "uint32")


def semantics(src, predicate, dst, *, reverse_pred=False, reads_dst=True):
    old = rows(dst)
    take = (rows(predicate) != 0) != bool(reverse_pred)
    # A tile src has dst's dtype, so its bits pass through; a number is cast as on write.
    new = rows(src) if np.ndim(src) else cast_to(np.asarray([src], np.float32), old.dtype)
    return np.where(take, new, old)


def cost(c: Check) -> int:
    # ISA-old: max(MIN_II, N) when src and predicate are split between SBUF and PSUM,
    # otherwise max(MIN_II, 2N).
    src, pred = c.tile_or_none("src"), c.tile("predicate")
    n = pred.free_size
    split = src is not None and (src.buffer == PSUM) != (pred.buffer == PSUM)
    return streaming_cycles(c, n if split else 2 * n, src, pred, c.tile("dst"))


SPEC = InstrSpec(
    name="tensor_copy_predicated",
    engines=(Engine.VECTOR,),
    operands=(
        Out("dst", *ON_CHIP, reads_if="reads_dst"),
        In("src", *ON_CHIP, scalar=True),
        In("predicate", *ON_CHIP, dtypes=PREDICATE_DTYPES),
    ),
    attrs=(Attr("reverse_pred", False, (False, True)), reads_dst_attr()),
    constraints=(
        same_partition_size("dst", "src", "predicate"),
        same_free_size("dst", "src", "predicate"),
        same_dtype("src", "dst"),
        not_both_psum("src", "predicate"),
    ),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    positional=("dst", "src", "predicate", "reverse_pred"),
)
