"""`nki.language`: the names a kernel reaches as `nl.*`, each lowered by a function of the
`nl_*` modules (taking the tracer's Context first)."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable

import ml_dtypes
import numpy as np

from neuronemu.errors import KernelTypeError, SourceSpan
from neuronemu.ir import ALL_DTYPES, BUFFERS, DType
from neuronemu.ir.dtypes import MX_DTYPES
from neuronemu.replay import journal
from neuronemu.trace import legacy_index, objects
from neuronemu.trace.lib import (
    nl_composite,
    nl_control,
    nl_elementwise,
    nl_memory,
    nl_reductions,
    nl_spmd,
    nl_tensors,
)
from neuronemu.trace.lib.emit import NO_REORDER, not_yet
from neuronemu.trace.tensor_api import as_dtype
from neuronemu.trace.values import Builtin, Namespace, OpRef, ParDim
from neuronemu_isa.ops import ACTIVATIONS, ALU_BINARY, ALU_UNARY

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context

__all__ = ["namespace"]

# nki.language names neuronemu knows of but does not model yet: a clear error beats
# "no attribute".
_NOT_YET = "gather_flattened rand".split()
# ALU-only ops that are also nki.language functions (lowered to a Vector tensor_scalar).
_ALU_FUNCTIONS = ("floor", "ceil", "trunc")


def _bound(fn: Callable[..., Any], ctx: Context) -> Callable[..., Any]:
    """`fn(ctx, span, ...)` as the tracer calls builtins, `call(span, ...)`."""
    call = functools.partial(fn, ctx)
    call.takes_into = getattr(fn, "takes_into", False)  # type: ignore[attr-defined]
    return call


def namespace(ctx: Context) -> Namespace:
    members: dict[str, Any] = dict(ALL_DTYPES)
    members.update(BUFFERS)
    members["tfloat32"] = ALL_DTYPES["float32"]  # storage is fp32; tf32 affects matmul only
    members.update({name: DType(name) for name in MX_DTYPES})
    members["bool"] = ALL_DTYPES["bool_"]
    functions: dict[str, Callable[..., Any]] = {
        "ndarray": nl_tensors.ndarray,
        "zeros": nl_tensors.filled(0),
        "ones": nl_tensors.filled(1),
        "full": nl_tensors.full,
        "empty_like": nl_tensors.like(None),
        "zeros_like": nl_tensors.like(0),
        "ones_like": nl_tensors.like(1),
        "shared_constant": nl_tensors.shared_constant,
        "shared_identity_matrix": nl_tensors.shared_identity_matrix,
        "load": nl_memory.load,
        "load_transpose2d": nl_memory.load_transpose2d,
        "store": nl_memory.store,
        "device_print": nl_memory.device_print,
        "program_id": nl_spmd.program_id,
        "num_programs": nl_spmd.num_programs,
        "program_ndim": lambda ctx, span: len(ctx.grid),
        "nc": nl_spmd.nc,
        "spmd_dim": nl_spmd.spmd_dim,
        "dynamic_range": nl_spmd.dynamic_range,
        "transpose": nl_composite.transpose,
        "matmul": nl_composite.matmul,
        "softmax": nl_composite.softmax,
        "broadcast_to": nl_composite.broadcast_to,
        "rms_norm": nl_composite.rms_norm,
        "var": nl_reductions.var,
        "loop_reduce": nl_reductions.loop_reduce,
        "where": nl_elementwise.where,
        "dropout": nl_elementwise.dropout,
    }
    functions.update(nl_control.language_members())
    for name in ("affine_range", "sequential_range", "static_range"):
        functions[name] = nl_spmd.loop_range(name)
    for name, fn in functions.items():
        members[name] = Builtin(f"nl.{name}", _bound(fn, ctx))
    members["par_dim"] = Builtin("nl.par_dim", lambda span, x: ParDim(x))
    members["arange"] = Builtin("nl.arange", legacy_index.arange)
    members["ds"] = Builtin("nl.ds", functools.partial(_ds, ctx))
    members["no_reorder"] = Builtin("nl.no_reorder", lambda span: NO_REORDER)
    members["matmul"] = dataclasses.replace(
        members["matmul"],
        accumulate=lambda span, dst, *a, **k: nl_composite.matmul(ctx, span, *a, _dst=dst, **k),
    )
    members["load"] = dataclasses.replace(members["load"], into=_bound(nl_memory.load_into, ctx))
    # Reductions are also operators: `op=nl.max` names the maximum in tensor_reduce and kin.
    for name, op in (
        ("sum", "add"),
        ("max", "maximum"),
        ("min", "minimum"),
        ("prod", "multiply"),
        ("mean", "mean"),
        ("all", "logical_and"),
    ):
        members[name] = OpRef(
            op, _bound(nl_reductions.reduce(name, "add" if name == "mean" else op), ctx)
        )
    for name in _NOT_YET:
        members[name] = not_yet(f"nki.language.{name}")
    for op in ALU_BINARY:
        members[op] = OpRef(op, _bound(nl_elementwise.binary(op), ctx))
    for op in ALU_UNARY:
        callable_ = op in ACTIVATIONS or op in _ALU_FUNCTIONS
        members[op] = OpRef(op, _bound(nl_elementwise.unary(op), ctx) if callable_ else None)
    for op in ACTIVATIONS:
        members.setdefault(op, OpRef(op, _bound(nl_elementwise.unary(op), ctx)))
    members["negative"] = Builtin("nl.negative", _bound(nl_elementwise.negative, ctx))
    # nki.language.fp32: "FP32 Constants"; min is the bit pattern 0xff7fffff, the most
    # negative finite fp32 (nki.language.fp32 docs).
    members["fp32"] = Namespace("nl.fp32", {"min": float(np.finfo(np.float32).min)})
    members["finfo"] = Builtin("nl.finfo", _finfo)
    members["mgrid"] = legacy_index.MGRID
    members["NKIObject"] = objects.NKI_OBJECT
    members["tile_size"] = Namespace(
        "nl.tile_size",
        {
            "pmax": ctx.arch.tile_pmax,
            "psum_fmax": ctx.arch.tile_psum_fmax,
            "psum_bank_fmax": ctx.arch.tile_psum_fmax,
            "gemm_stationary_fmax": ctx.arch.tile_gemm_stationary_fmax,
            "gemm_moving_fmax": ctx.arch.tile_gemm_moving_fmax,
            "psum_num_banks": ctx.arch.psum_banks,
            "bn_stats_fmax": ctx.arch.tile_bn_stats_fmax,
            # Bytes of SBUF per partition a kernel may use (nki.language.tile_size; deprecated
            # in NKI 0.4 but read by nki-library's SBUF manager).
            "total_available_sbuf_size": ctx.arch.sbuf_usable_bytes_per_partition,
        },
    )
    return Namespace("nki.language", members)


def _finfo(span: SourceSpan, dtype: Any) -> Namespace:
    """`nl.finfo(dtype)`: NumPy's finfo of a float dtype (bfloat16 and fp8 through ml_dtypes)."""
    dt = as_dtype(dtype, span)
    try:
        info = ml_dtypes.finfo(dt.np)
    except ValueError:
        raise KernelTypeError(f"nl.finfo() takes a float dtype, got {dt}", span) from None
    fields = ("min", "max", "eps", "tiny", "smallest_normal", "resolution")
    values = {f: float(getattr(info, f)) for f in fields}
    return Namespace(f"nl.finfo({dt.name})", {**values, "bits": int(info.bits), "dtype": dt})


def _ds(ctx: Context, span: SourceSpan, start: Any, size: Any) -> slice:
    """`nl.ds(start, size)`: start:start + size, its end marked as its start is (it moves
    with the loop variable as the start does: neuronemu.replay.journal.derive)."""
    return slice(start, journal.derive(ctx.meter, "+", start, size, start + size))
