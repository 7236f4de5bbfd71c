"""The older dialect's assignment forms: `t[...] = value`, `t[...] = f(...)` written
straight into the slice, and `nl.loop_reduce`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import View
from neuronemu.trace.lib.emit import emit, through_sbuf
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import is_tensor_like
from neuronemu_isa import REGISTRY, Buffer

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


@dataclasses.dataclass(frozen=True)
class LoopReduce:
    """`nl.loop_reduce(x, op, loop_indices)`: the tile it is assigned to (a name bound to a
    tile, or a slice) becomes op(that tile, x), as nisa.tensor_tensor(data1=dst, data2=x)
    would make it (nki.language.loop_reduce: the destination is also an input)."""

    value: Any
    op: str
    mask: Any = None  # narrows the combine as a mask= narrows an instruction


def loop_reduce_into(ctx: Context, dst: Any, value: LoopReduce, span: SourceSpan) -> None:
    d = as_view(dst)
    if d is None:
        raise KernelTypeError(
            "nl.loop_reduce combines into the tile it is assigned to; bind "
            "that name to a tile first (e.g. b = nl.zeros(...))",
            span,
        )
    emit(
        ctx,
        REGISTRY["tensor_tensor"],
        span,
        {"dst": d, "data1": d, "data2": value.value, "op": value.op},
        mask=value.mask,
    )


# An nl.* call asked to write into a slice that its own tile would not match.
NO_FIT = object()


def into_of(call: Callable[..., Any]) -> Callable[..., bool]:
    """The `into` hook of an nl.* function: write the call's result straight into dst."""

    def into(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> bool:
        return call(span, *args, _into=dst, **kwargs) is not NO_FIT

    return into


def assign_slice(ctx: Context, dst: Any, value: Any, span: SourceSpan) -> None:
    """`t[...] = value` (older dialect): write `value` (a tile, a tensor or a number) into the
    view, with the instruction the memories call for: memset for a number, a DMA when either
    side is in HBM (through SBUF for a PSUM tile), else a tensor copy."""
    if isinstance(value, LoopReduce):
        loop_reduce_into(ctx, dst, value, span)
        return
    if not is_tensor_like(value):
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            emit(ctx, REGISTRY["memset"], span, {"dst": dst, "value": value})
            return
        raise KernelTypeError(
            f"cannot assign {type(value).__name__} {shown(value)} into a tensor "
            "slice; assign a tile or a number",
            span,
        )
    d, v = as_view(dst), as_view(value)
    if d is None or v is None:
        raise KernelTypeError(
            "assigning through an index pattern (nl.arange) is not "
            "supported yet; use nl.ds or slices",
            span,
        )
    if d.buffer == Buffer.HBM or v.buffer == Buffer.HBM:
        emit(ctx, REGISTRY["dma_copy"], span, {"dst": d, "src": through_sbuf(ctx, v, span)})
    else:
        emit(ctx, REGISTRY["tensor_copy"], span, {"dst": d, "src": v})
