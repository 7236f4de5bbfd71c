"""`nki.isa`: one builtin per instruction spec, in both API styles (`dst=` and the older
value-returning calls), plus the enums and the names not modelled yet."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.ir import ALL_DTYPES, BUFFERS, BufferKind, DType, Tensor, View
from neuronemu.program.verify import operand_info
from neuronemu.replay import journal
from neuronemu.trace.legacy_index import (
    AffineIndex,
    AffineView,
    Predicate,
    affine_pattern_attrs,
    predicate_select_attrs,
)
from neuronemu.trace.lib import nl_control
from neuronemu.trace.lib.emit import (
    InstrHandle,
    attr_value,
    builtin,
    emit,
    engine_of,
    not_yet,
    through_sbuf,
    tile_name,
)
from neuronemu.trace.tensor_api import as_dtype, as_view
from neuronemu.trace.values import CURRENT_NKI, Builtin, EnumValue, Namespace, is_tensor_like
from neuronemu_isa import REGISTRY, Buffer, Engine, InstrSpec
from neuronemu_isa import catalog as _catalog
from neuronemu_isa.spec import Check

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


ENUMS = {
    "engine": ("unknown", "tensor", "vector", "scalar", "gpsimd", "sync", "dma"),
    "reduce_cmd": ("idle", "reset", "reduce", "reset_reduce", "load_reduce"),
    "dge_mode": ("unknown", "swdge", "hwdge", "none"),
    "oob_mode": ("error", "skip"),
    "matmul_perf_mode": ("none", "double_row", "double_row_gen3"),
}


def _isa_builtin(ctx: Context, spec: InstrSpec) -> Any:

    accumulate = None
    accumulates = any(a.name == "accumulate" for a in spec.attrs)
    if accumulates:

        def accumulate(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> None:
            """`psum += nisa.nc_matmul(stationary, moving)`: accumulate into psum (where
            nothing was written yet, the first product overwrites, nki.isa.nc_matmul)."""
            bound, mask, _, engine = legacy_binding(spec, args, kwargs, span, _older_dialect(ctx))
            _psum_inputs_through_sbuf(ctx, spec, bound, span)
            emit(ctx, spec, span, bound | {"dst": dst, "accumulate": None}, engine, mask)

    names = spec.param_names
    accepted = set(names) | {o.name for o in spec.operands} | {a.name for a in spec.attrs}

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if "srcs" in spec.param_names:  # dma_compute: a list of sources, src0, src1, ...
            args, kwargs = _expand_sources(spec, args, kwargs, span)
        if _is_legacy_call(spec, args, kwargs):
            return _legacy_isa_call(ctx, spec, span, args, kwargs)
        if len(args) > len(names):
            raise KernelTypeError(
                f"nisa.{spec.name}() takes at most {len(names)} positional "
                f"arguments ({len(args)} given)",
                span,
            )
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in bound:
                raise KernelTypeError(f"nisa.{spec.name}() got multiple values for {k!r}", span)
            bound[k] = v
        name = bound.pop("name", None)
        engine = bound.pop("engine", None)
        # `mask=` beside `dst=` (older dialect: `nisa.dma_copy(src=..., dst=..., mask=...)`).
        mask = bound.pop("mask", None) if "mask" not in accepted else None
        if "dtype" in bound and "dtype" not in accepted and is_tensor_like(bound.get("dst")):
            # `dtype=` beside `dst=` (NKI 0.x tutorials: `tensor_copy(dst=t, src=s,
            # dtype=...)`): the engine casts to dst's dtype (nki.isa.tensor_copy: "casting
            # from FP32 to dst.dtype"), so it cannot change what is written.
            bound.pop("dtype")
        for k in bound:
            if k not in accepted:
                import difflib

                close = difflib.get_close_matches(k, sorted(accepted), n=1)
                raise KernelTypeError(
                    f"nisa.{spec.name}() got an unexpected keyword argument {k!r}",
                    span,
                    hint=f"did you mean {shown(close[0])}?" if close else None,
                )
        ins = emit(
            ctx,
            spec,
            span,
            {k: v for k, v in bound.items() if v is not None or k in {a.name for a in spec.attrs}},
            engine,
            mask,
        )
        if ins is None:
            return None
        if isinstance(name, str) and name:
            journal.refuse(ctx.meter, "a named instruction")
            ctx.builder.names[name] = ins
        return InstrHandle(ctx, ins)

    dst_op = next((o for o in spec.outputs if o.name == "dst"), None)

    def into(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> bool:
        """`t[...] = nisa.f(...)` (a value-returning call): write f's dst straight into the
        slice when it can hold f's result as is (buffer, shape, dtype)."""
        if (
            dst_op is None
            or not _is_legacy_call(spec, args, kwargs)
            or dst.buffer not in dst_op.buffers
        ):
            return False
        bound, mask, dtype, engine = legacy_binding(spec, args, kwargs, span, _older_dialect(ctx))
        if _older_call(spec, bound)[0] is not spec:
            return False  # another instruction: its own tile, then a copy
        found = legacy_result(ctx, spec, bound, engine_of(spec, engine, span), dtype, span)
        if found is None:
            return False
        shape, natural, kind = found
        # Writing straight in must land where, and round as, the call's own tile would.
        if tuple(shape) != tuple(dst.shape) or natural != dst.dtype or kind.buffer != dst.buffer:
            return False
        if accumulates:
            bound.setdefault("accumulate", False)  # an assignment overwrites
        _psum_inputs_through_sbuf(ctx, spec, bound, span)
        emit(ctx, spec, span, bound | {"dst": dst}, engine, mask)
        return True

    return Builtin(f"nisa.{spec.name}", call, accumulate, into)


def _expand_sources(
    spec: InstrSpec, args: tuple, kwargs: dict[str, Any], span: SourceSpan
) -> tuple[tuple, dict[str, Any]]:
    """`srcs=[a, b, ...]` as the operands src0, src1, ... (all bound by keyword)."""
    bound = dict(zip(spec.param_names, args)) | kwargs
    srcs = bound.pop("srcs", None)
    if not isinstance(srcs, (list, tuple)) or not all(is_tensor_like(x) for x in srcs):
        raise KernelTypeError(
            f"nisa.{spec.name}(): srcs must be a list of tensors, got {shown(srcs)}", span
        )
    slots = [o.name for o in spec.inputs]
    if not 1 <= len(srcs) <= len(slots):
        raise KernelTypeError(
            f"nisa.{spec.name}(): give 1 to {len(slots)} srcs, got {len(srcs)}", span
        )
    if isinstance(bound.get("scales"), (list, tuple)):
        bound["scales"] = tuple(float(x) for x in bound["scales"])
    return (), bound | dict(zip(slots, srcs))


def _missing(spec: InstrSpec, bound: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    required = [o.name for o in spec.operands if not o.optional and o.name not in skip]
    required += [a.name for a in spec.attrs if a.required]
    return [n for n in required if bound.get(n) is None]


def _is_legacy_call(spec: InstrSpec, args: tuple, kwargs: dict[str, Any]) -> bool:
    """The older API: no `dst`; the instruction returns a new tile (`t = nisa.exp(...)`)."""
    if "dst" in kwargs or not any(o.name == "dst" for o in spec.outputs):
        return False
    if isinstance(kwargs.get("pred"), Predicate):  # affine_select(pred=(iy < ix), ...)
        return True
    names = spec.param_names
    current = dict(zip(names, args)) | kwargs
    if (
        not _missing(spec, current)
        and _consistent(spec, current)
        and "dtype" not in kwargs
        and "mask" not in kwargs
    ):
        return False
    legacy = dict(zip([n for n in names if n != "dst"], args)) | kwargs
    if not _missing(spec, legacy, skip=("dst",)) and _consistent(spec, legacy):
        return True
    renames: dict[str, str] = dict(spec.older_params)  # (`nisa.iota(expr=..., dtype=...)`)
    given: dict[str, Any] = dict(zip(renames, args)) | kwargs
    older = {renames.get(k, k): v for k, v in given.items()}
    return bool(renames) and not _missing(spec, older, skip=("dst",)) and _consistent(spec, older)


def _consistent(spec: InstrSpec, bound: dict[str, Any]) -> bool:
    """Do the arguments fit their parameters' kinds: tiles for tensor operands, no tiles
    for attributes? (Tells `nisa.f(data, op, x)` of the older API from `nisa.f(dst, data,
    ...)`.)"""
    operands = {o.name: o for o in spec.operands}
    for name, value in bound.items():
        if value is None:
            continue
        op = operands.get(name)
        if op is None:
            if name in {a.name for a in spec.attrs} and is_tensor_like(value):
                return False
        elif not op.scalar and Buffer.REG not in op.buffers and not is_tensor_like(value):
            return False
    return True


def _legacy_isa_call(
    ctx: Context, spec: InstrSpec, span: SourceSpan, args: tuple, kwargs: dict[str, Any]
) -> Tensor:
    bound, mask, dtype, engine = legacy_binding(spec, args, kwargs, span, _older_dialect(ctx))
    spec, bound = _older_call(spec, bound)
    if "shape" in bound:  # `t = nisa.memset(shape, value, dtype)`: a new SBUF tile
        shape = _older_shape(spec, bound.pop("shape"), span)
        if dtype is None:
            raise KernelTypeError(f"nisa.{spec.name}(shape, ...) needs a dtype", span)
        out = ctx.builder.alloc(
            tile_name(ctx, None), shape, as_dtype(dtype, span), BUFFERS["sbuf"], span
        )
        emit(ctx, spec, span, bound | {"dst": out}, engine, mask)
        return out
    constant = bound.get("pattern")
    if type(constant) is int and ("expr", "pattern") in spec.older_params:
        # `nisa.iota(head_id, dtype=...)`: an expression with no index in it is a [1, 1] tile
        # of its value (vLLM's paged attention makes its program id a tile so)
        bound["pattern"] = AffineIndex((), constant, 2)
    if isinstance(bound.get("pattern"), AffineIndex):  # `nisa.iota(i_p * 4 + i_f, dtype=...)`
        expr = bound["pattern"]
        bound |= affine_pattern_attrs(expr)
        dt = as_dtype(dtype, span) if dtype is not None else ALL_DTYPES["int32"]
        out = ctx.builder.alloc(tile_name(ctx, None), expr.dense_shape, dt, BUFFERS["sbuf"], span)
        emit(ctx, spec, span, bound | {"dst": out}, engine_of(spec, engine, span), mask)
        return out
    found = legacy_result(ctx, spec, bound, engine_of(spec, engine, span), dtype, span)
    if found is None:
        raise KernelTypeError(f"nisa.{spec.name}() without dst= needs a tile input", span)
    shape, dt, kind = found
    _psum_inputs_through_sbuf(ctx, spec, bound, span)
    out = ctx.builder.alloc(tile_name(ctx, None), tuple(shape), dt, kind, span)
    emit(ctx, spec, span, bound | {"dst": out}, engine, mask)
    return out


def _older_dialect(ctx: Context) -> bool:
    """Is the kernel written against the older dialect (or imports neither)?"""
    return ctx.dialect != CURRENT_NKI


def _older_shape(spec: InstrSpec, shape: Any, span: SourceSpan) -> tuple[int, ...]:
    """The shape of an older value-returning call's tile: ints, partition dim first (the older
    nki.isa.memset "ignores nl.par_dim() and always treats the first dimension as the
    partition dimension")."""
    if not (
        isinstance(shape, (tuple, list))
        and len(shape) >= 1
        and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    ):
        raise KernelTypeError(
            f"nisa.{spec.name}(): shape must be a tuple of positive ints, got {shown(shape)}",
            span,
        )
    return tuple(int(d) for d in shape) if len(shape) >= 2 else (int(shape[0]), 1)


def _older_call(spec: InstrSpec, bound: dict[str, Any]) -> tuple[InstrSpec, dict[str, Any]]:
    """The instruction an older-form call stands for (`InstrSpec.older_call`)."""
    if spec.older_call is not None:
        got = spec.older_call(bound)
        if got is not None:
            return REGISTRY[got[0]], got[1]
    return spec, bound


def _psum_inputs_through_sbuf(
    ctx: Context, spec: InstrSpec, bound: dict[str, Any], span: SourceSpan
) -> None:
    """The older compiler copied a PSUM tile given to an SBUF-only input to SBUF first
    (inferred: AWS's legacy flash attention passes a PSUM tile to affine_select)."""
    for op in spec.operands:
        v = bound.get(op.name)
        if op.role == "in" and Buffer.PSUM not in op.buffers and Buffer.SBUF in op.buffers:
            if is_tensor_like(v) and v.buffer == Buffer.PSUM:
                bound[op.name] = through_sbuf(ctx, v, span)


def legacy_binding(
    spec: InstrSpec, args: tuple, kwargs: dict[str, Any], span: SourceSpan, older: bool
) -> tuple[dict[str, Any], Any, Any, Any]:
    """An older-API call's arguments (no dst) by parameter, without the unset ones; and its
    mask=, dtype= and engine= (name= is dropped). In a file of the older dialect (`older`), a
    spec's `older_params` order and name the arguments (`nisa.memset(shape, value, dtype)`)."""
    kwargs = dict(kwargs)
    mask, dtype, engine = (kwargs.pop(k, None) for k in ("mask", "dtype", "engine"))
    kwargs.pop("name", None)
    pred = kwargs.pop("pred", None) if {"pattern", "cmp_op"} <= _attr_names(spec) else None
    renames = dict(spec.older_params) if older else {}
    accepted = (
        set(spec.param_names)
        | {o.name for o in spec.operands}
        | {a.name for a in spec.attrs}
        | set(renames)
    )
    for k in kwargs:
        if k not in accepted:
            hint = None
            if k in dict(spec.older_params):
                hint = (
                    f"{k}= belongs to the older neuronxcc.nki form of nisa.{spec.name}, which "
                    "returns a new tile; this file imports nki: allocate the tile with "
                    f"nl.ndarray and pass it as dst= (nki.isa.{spec.name})"
                )
            raise KernelTypeError(
                f"nisa.{spec.name}() got an unexpected keyword argument {k!r}", span, hint=hint
            )
    names = list(renames) or [n for n in spec.param_names if n != "dst"]
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound:
            raise KernelTypeError(f"nisa.{spec.name}() got multiple values for {k!r}", span)
        bound[k] = v
    bound = {renames.get(k, k): v for k, v in bound.items()}
    if "dtype" in bound:  # given by position (`nisa.iota(expr, nl.float32)`)
        if dtype is not None:
            raise KernelTypeError(f"nisa.{spec.name}() got multiple values for 'dtype'", span)
        dtype = bound.pop("dtype")
    bound = {k: v for k, v in bound.items() if v is not None}
    if pred is not None:  # `nisa.affine_select(pred=(iy < ix), on_true_tile=..., ...)`
        tile = next((v for v in bound.values() if is_tensor_like(v)), None)
        if tile is None:
            raise KernelTypeError(f"nisa.{spec.name}(pred=...) needs a tile input", span)
        view = as_view(tile)
        assert view is not None  # (a tensor-like value, unmasked: a view)
        bound |= predicate_select_attrs(pred, tuple(view.shape), span)
    return bound, mask, dtype, engine


def legacy_result(
    ctx: Context,
    spec: InstrSpec,
    bound: dict[str, Any],
    engine: Engine,
    dtype: Any,
    span: SourceSpan,
) -> tuple[tuple[int, ...], DType, BufferKind] | None:
    """The tile an older-API call returns: shape, dtype (`dtype=` if given) and buffer of
    its dst (each instruction's doc gives its dst's shape; by default the shape of its first
    input); None when it has no tile input to shape it by."""
    found = _natural_result(ctx, spec, bound, engine)
    if found is None:
        return None
    shape, dt, kind = found
    return shape, (as_dtype(dtype, span) if dtype is not None else dt), kind


def _natural_result(
    ctx: Context, spec: InstrSpec, bound: dict[str, Any], engine: Engine
) -> tuple[tuple[int, ...], DType, BufferKind] | None:
    """The dst the spec says a value-returning call makes from these inputs."""
    infos: dict[str, Any] = {}
    for op in spec.inputs:
        value = bound.get(op.name)
        if not is_tensor_like(value):
            continue
        if isinstance(value, AffineView):
            # An older-dialect index expression: the result has the expression's whole
            # shape (a mask narrows what is computed, not the tile), and its bounds are
            # checked when the instruction is emitted, with its mask.
            # Resolved at each position's first index only: its dtype and buffer, not bounds.
            view = value.resolve({p: (0, 1) for p in range(len(value.shape))})
            if view is None:
                continue
            info = operand_info(op.name, view)
            full = tuple(value.shape) if len(value.shape) >= 2 else (*value.shape, 1)
            infos[op.name] = dataclasses.replace(info, shape=full)
            continue
        view = as_view(value)
        if view is not None:
            infos[op.name] = operand_info(op.name, view)
    attrs = {k: attr_value(v) for k, v in bound.items() if k not in infos}
    found = spec.result(Check(ctx.arch, engine, infos, attrs))
    if found is None:
        return None
    shape, dtype, buffer = found
    return tuple(shape), ALL_DTYPES[dtype], BUFFERS[buffer.value]


def namespace(ctx: Context) -> Namespace:
    members: dict[str, Any] = {name: _isa_builtin(ctx, spec) for name, spec in REGISTRY.items()}
    for name, fn in nl_control.isa_members().items():
        members[name] = builtin(f"nki.isa.{name}", functools.partial(fn, ctx))
    for name in _catalog.not_yet(REGISTRY):
        if name not in members:
            members[name] = not_yet(f"nki.isa.{name}")
    for group, values in ENUMS.items():
        members[group] = Namespace(f"nki.isa.{group}", {v: EnumValue(group, v) for v in values})
    for e in ("tensor", "vector", "scalar", "gpsimd", "unknown"):  # older names
        members[f"{e}_engine"] = EnumValue("engine", e)
    members["nc_version"] = Namespace("nki.isa.nc_version", {"gen2": 2, "gen3": 3, "gen4": 4})
    members["get_nc_version"] = builtin("get_nc_version", lambda span: ctx.arch.nc_version)
    return Namespace("nki.isa", members, kind="instruction")


def _attr_names(spec: InstrSpec) -> set[str]:
    return {a.name for a in spec.attrs}
