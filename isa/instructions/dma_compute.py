"""dma_compute: dst = srcs[0] + srcs[1] + ... in fp32 inside the DMA engines.

Ref: nki.isa.dma_compute (docs 2.33). Up to 16 sources, each in HBM or SBUF, with dst's element
count; reduce_op add only and every scale 1.0 (the only values the docs allow). The engines
cast each source to fp32, add them in order, and cast the sum to dst's dtype. The
read-modify-write forms with a vector_offset (scatter/gather) are not modelled (neuronemu
supports indirect views in dma_copy only).
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa import dma as _dma
from neuronemu_isa.spec import HBM, SBUF, Attr, Check, Engine, In, InstrSpec, Out

# nki.isa.dma_compute: at most 16 source tensors.
MAX_SOURCES = 16
SOURCES = tuple(f"src{i}" for i in range(MAX_SOURCES))


def semantics(
    *, srcs=None, reduce_op="add", scales=None, unique_indices=True, oob_mode=None, **sources
):
    values = [sources[name] for name in SOURCES if sources.get(name) is not None]
    total = np.asarray(values[0], dtype=np.float32).reshape(-1).copy()
    for v in values[1:]:
        total = total + np.asarray(v, dtype=np.float32).reshape(-1)
    return total


def _sources(c: Check) -> list:
    return [t for t in (c.tile_or_none(n) for n in SOURCES) if t is not None]


def cost(c: Check) -> int:
    """As dma_copy moving every source's bytes (the engines read them all; inferred)."""
    dst = c.tile("dst")
    srcs = _sources(c)
    engines = max(_dma.engines_used(c.arch, s, dst) for s in srcs)
    moved = sum(s.nbytes for s in srcs)
    move_ns = moved / engines / c.arch.dma_bytes_per_ns_per_engine
    hbm = sum(t.nbytes for t in (*srcs, dst) if t.buffer == HBM)
    hbm_ns = hbm / c.arch.dma_hbm_bytes_per_ns
    return int(math.ceil(c.arch.dma_descriptor_ns + max(move_ns, hbm_ns)))


def _counts(c: Check) -> str | None:
    dst = c.tile("dst")
    srcs = _sources(c)
    if not srcs:
        return "srcs is empty; give 1 to 16 source tensors"
    for s in srcs:
        if math.prod(s.shape) != math.prod(dst.shape):
            return (
                f"{s.name} has {math.prod(s.shape)} elements and dst "
                f"{math.prod(dst.shape)}; they must be equal"
            )
    return None


def _only_add(c: Check) -> str | None:
    scales = c.attrs.get("scales")
    if scales is None:
        return None
    if not isinstance(scales, (list, tuple)) or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in scales
    ):
        return f"scales is {scales!r}; it must be a list of numbers (each 1.0)"
    if any(float(s) != 1.0 for s in scales):
        return f"scales are {list(scales)}; every scale must be 1.0"
    if len(scales) != len(_sources(c)):
        return f"{len(scales)} scales for {len(_sources(c))} sources"
    return None


SPEC = InstrSpec(
    name="dma_compute",
    engines=(Engine.DMA,),
    operands=(
        Out("dst", HBM, SBUF),
        *(In(name, HBM, SBUF, optional=i > 0) for i, name in enumerate(SOURCES)),
    ),
    # `srcs` names the list parameter; the library binds its tensors to src0, src1, ...
    attrs=(
        Attr("srcs", None, (None,)),
        Attr("reduce_op", "add", ("add",)),
        Attr("scales", None),
        Attr("unique_indices", True, (True,)),
        Attr("oob_mode", None, choices=(None, "error", "skip")),
    ),
    constraints=(_counts, _only_add),
    semantics=semantics,
    cost=cost,
    doc=__doc__,
    # srcs=[...] binds src0, src1, ... (the library expands it); they may also be named.
    positional=("dst", "srcs", "reduce_op", "scales", "unique_indices", "oob_mode", *SOURCES),
)
