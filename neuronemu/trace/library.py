"""The names a kernel sees at trace time: Python builtins and the `nki`, `nki.language`,
`nki.isa`, `numpy` and `math` modules, with `nl.*` calls lowered to ISA instructions."""

from __future__ import annotations

import builtins
import dataclasses
import os
import sys
import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from neuronemu_isa import REGISTRY, Buffer, Engine, InstrSpec
from neuronemu.program import Instr
from neuronemu.pseudo import DEVICE_PRINT
from neuronemu_isa._ops import ACTIVATIONS, ALU_BINARY, ALU_UNARY
from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan
from neuronemu.trace import confine, legacy_index as index, objects
from neuronemu.allocator import partition_offset
from neuronemu.trace.legacy_index import Predicate
from neuronemu.ir.dtypes import MX_DTYPES
from neuronemu.ir import (ALL_DTYPES, BUFFERS, BufferKind, DType, PatternView, Tensor, View,
                          restrict)
from neuronemu.trace import tensor_api
from neuronemu.trace.tensor_api import as_dtype, as_view
from neuronemu.trace.values import (BlockTensor, DirectAlloc, EnumValue, Namespace, OpRef,
                                    ParDim, Poison, is_tensor_like)
from neuronemu.verify import operand_info

if TYPE_CHECKING:
    from neuronemu.trace.tracer import Tracer

__all__ = ["builtins_env", "import_module"]

# nki.isa names neuronemu knows of but does not model yet: a clear error beats "no attribute".
_NOT_YET_ISA = (
    "dma_transpose dma_compute tensor_copy_predicated iota nc_transpose scalar_tensor_tensor "
    "tensor_reduce tensor_partition_reduce activation_reduce activate2 tensor_tensor_scan "
    "tensor_scalar_cumulative tensor_scalar_reduce bn_stats bn_aggr reciprocal exponential "
    "affine_select range_select select_reduce max8 nc_find_index8 nc_match_replace8 "
    "local_gather nc_stream_shuffle rng rand2 rand_get_state rand_set_state "
    "set_rng_seed dropout sendrecv core_barrier quantize_mx nc_matmul_mx topk sequence_bounds "
    "register_alloc register_move register_load register_store"
).split()
_NOT_YET_NL = (
    "gather_flattened dropout rand load_transpose2d "
    "fori_loop while_loop"
).split()

_ENUMS = {
    "engine": ("unknown", "tensor", "vector", "scalar", "gpsimd", "sync", "dma"),
    "reduce_cmd": ("idle", "reset", "reduce", "reset_reduce", "load_reduce"),
    "dge_mode": ("unknown", "swdge", "hwdge", "none"),
    "oob_mode": ("error", "skip"),
    "matmul_perf_mode": ("none", "double_row", "double_row_gen3"),
}


def _py(tr: Tracer, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A Python function run at trace time, metered (see confine.call_python); kernel
    functions passed to it (`key=`) become callables; its exceptions become located errors."""

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        for a in list(args) + list(kwargs.values()):
            if is_tensor_like(a):
                raise KernelTypeError(f"{name}() cannot take a tensor at trace time", span)
        args = tuple(tr.to_python(a, span) for a in args)
        kwargs = {k: tr.to_python(v, span) for k, v in kwargs.items()}
        return confine.call_python(tr.meter, fn, name, args, kwargs, span)

    return call


def builtins_env(tr: Tracer) -> Any:
    from neuronemu.trace.tracer import Builtin, Env

    env = Env()
    for name in ("range len min max abs int float bool str tuple list dict enumerate zip "
                 "any all round divmod sorted reversed set slice repr").split():
        env.vars[name] = Builtin(name, _py(tr, getattr(builtins, name), name))

    def pow_(span: SourceSpan, base: Any, exp: Any, mod: Any = None) -> Any:
        if mod is None:
            return tr.binop("**", base, exp, span)
        return _py(tr, pow, "pow")(span, base, exp, mod)  # modular: bounded by mod's size

    def sum_(span: SourceSpan, iterable: Any, start: Any = 0) -> Any:
        total = start
        for item in confine.materialize(tr.meter, iterable, span):
            total = tr.binop("+", total, item, span)
        return total

    env.vars["pow"] = Builtin("pow", pow_)
    env.vars["sum"] = Builtin("sum", sum_)
    def isinstance_(span: SourceSpan, obj: Any, classes: Any) -> bool:
        from neuronemu.trace.objects import EnumMember, UserClass, UserObject

        for cls in classes if isinstance(classes, tuple) else (classes,):
            if isinstance(cls, UserClass):
                owner = obj.cls if isinstance(obj, (UserObject, EnumMember)) else None
                if owner is not None and owner.is_subclass(cls):
                    return True
            elif isinstance(cls, Builtin) and cls.name in _PY_TYPES:
                if isinstance(obj, _PY_TYPES[cls.name]) and not (
                        cls.name == "int" and isinstance(obj, bool)):
                    return True
        return False

    env.vars["isinstance"] = Builtin("isinstance", isinstance_)
    env.vars["staticmethod"] = objects.STATICMETHOD
    env.vars["classmethod"] = objects.CLASSMETHOD
    env.vars["property"] = objects.PROPERTY
    env.vars["object"] = None
    env.vars["print"] = Builtin(
        "print", lambda span, *a, sep=" ", end="\n", **_: tr.print_fn(
            sep.join(str(x) for x in a) + ("" if end == "\n" else end)))
    env.vars["__name__"] = "__nki_kernel__"
    env.vars["None"] = None
    return env


# Environment variables a kernel can read at trace time (the Neuron tools' settings).
_VISIBLE_ENVIRON = ("NEURON_", "NKI_", "XLA_")

_PY_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple,
             "list": list, "dict": dict}


def import_module(tr: Tracer, dotted: str, span: SourceSpan, quiet: bool = False) -> Any:
    mods = _modules(tr)
    for prefix in ("neuronxcc.",):
        if dotted.startswith(prefix + "nki"):
            dotted = dotted[len(prefix):]
    if dotted in mods:
        return mods[dotted]
    if quiet:
        return None
    return Poison(KernelTypeError(
        f"module {dotted!r} is not available inside NKI kernels (only nki, numpy and math are)",
        span))


def _modules(tr: Tracer) -> dict[str, Any]:
    cached = getattr(tr, "_modules_cache", None)
    if cached is None:
        nl = _language(tr)
        nisa = _isa(tr)
        ncc = _compiler(tr)
        # The kernel's copy of the Neuron settings in the environment: what it sets, getenv
        # sees; nothing else of the host's environment (which may hold credentials).
        environ = {k: v for k, v in os.environ.items() if k.startswith(_VISIBLE_ENVIRON)}
        nki = Namespace("nki", {"language": nl, "isa": nisa, "compiler": ncc})
        from neuronemu.trace.tracer import KERNEL_DECORATORS

        for deco in KERNEL_DECORATORS:
            nki.members[deco] = _decorator(deco)
        cached = {
            "nki": nki,
            "nki.language": nl,
            "nki.isa": nisa,
            "nki.compiler": ncc,
            "nki.typing": Namespace("nki.typing", {"tensor": None, "mutable_tensor": None}),
            "neuronxcc": Namespace("neuronxcc", {"nki": nki}),
            "numpy": _numpy(tr),
            "math": _math(tr),
            "dataclasses": Namespace("dataclasses", {
                "dataclass": objects.DATACLASS, "field": _builtin("dataclasses.field", _field)}),
            "enum": Namespace("enum", {"Enum": objects.ENUM, "IntEnum": objects.ENUM}),
            "typing": Namespace("typing", {n: None for n in (
                "Any Optional Union List Tuple Dict Callable Sequence TYPE_CHECKING").split()}),
            # Kernels read settings from the environment at trace time, as under the NKI
            # compiler (nki-library's logging does); print(file=sys.stderr) prints.
            "os": Namespace("os", {
                "environ": environ,
                "getenv": _builtin("os.getenv",
                                   lambda span, key, default=None: environ.get(key, default)),
                "sep": os.sep}),
            "sys": Namespace("sys", {"stderr": "<stderr>", "stdout": "<stdout>",
                                     "maxsize": sys.maxsize}),
        }
        tr._modules_cache = cached  # type: ignore[attr-defined]
    return cached


def _field(span: SourceSpan, *, default: Any = objects.FieldSpec, default_factory: Any = None,
           **_: Any) -> objects.FieldSpec:
    has_default = default is not objects.FieldSpec
    return objects.FieldSpec(default if has_default else None, default_factory, has_default)


def _decorator(name: str) -> Any:
    from neuronemu.trace.tracer import Builtin

    def deco(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return args[0]
        return Builtin(f"nki.{name}", lambda span, fn: fn)

    return Builtin(f"nki.{name}", deco)


# nki.isa -----------------------------------------------------------------------------------


def _attr_value(v: Any) -> Any:
    if isinstance(v, (OpRef, EnumValue)):
        return v.name
    if isinstance(v, DType):
        return v.name
    if isinstance(v, np.generic):
        return v.item()
    return v


def _engine_named(value: Any) -> bool:
    return not (value is None or (isinstance(value, EnumValue) and value.name == "unknown"))


def _engine_of(spec: InstrSpec, value: Any, span: SourceSpan) -> Engine:
    if not _engine_named(value):
        return spec.engines[0]
    name = value.name if isinstance(value, EnumValue) else value
    try:
        return Engine(name)
    except ValueError:
        raise KernelTypeError(f"{spec.name}: unknown engine {value!r}", span) from None


def emit(tr: Tracer, spec: InstrSpec, span: SourceSpan, bound: dict[str, Any],
         engine: Any = None, mask: Any = None) -> Instr | None:
    """Emit one instruction; `mask=` (older dialect) narrows every tile operand first."""
    ranges = _mask_ranges(mask, span)
    engine_value = _engine_of(spec, engine, span)
    bound = _bind_registers(tr, spec, engine_value, bound, span)
    operand_names = {o.name for o in spec.operands}
    operands: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for k, v in bound.items():
        if k in operand_names:
            if is_tensor_like(v):
                view = as_view(v, ranges)
                if view is None:
                    return None  # the mask leaves nothing to do
                operands[k] = view
            elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
                operands[k] = _immediate(spec, k, v, span)
            else:
                operands[k] = v
        else:
            attrs[k] = _attr_value(v)
    if spec.default_engine is not None and not _engine_named(engine):
        infos = {k: operand_info(k, v) if isinstance(v, View) else v
                 for k, v in operands.items()}
        engine_value = spec.default_engine(infos, attrs)
    return tr.builder.emit(spec, engine_value, operands, attrs, span)


def _immediate(spec: InstrSpec, name: str, value: Any, span: SourceSpan) -> float:
    """A number passed as an operand: an fp32 immediate; one no float can hold is an error."""
    try:
        return float(value)
    except OverflowError:
        digits = len(str(abs(int(value))))
        raise KernelTypeError(f"{spec.name}: {name} is a {digits}-digit integer, too large "
                              f"for a float immediate", span) from None


def _bind_registers(tr: Tracer, spec: InstrSpec, engine: Engine, bound: dict[str, Any],
                    span: SourceSpan) -> dict[str, Any]:
    """Engine-register operands (activation's reduce_regs) are implicit in a kernel: bind them
    to the engine's register tensor when the instruction uses its reduce form."""
    reduces = _attr_value(bound.get("reduce_cmd", "idle")) not in (None, "idle") or \
        bound.get("reduce_res") is not None
    out = dict(bound)
    for op in spec.operands:
        if Buffer.REG not in op.buffers or op.name in out:
            continue
        if op.name == "reduce_regs" and not reduces:
            continue
        shape, dtype = _REGISTER_FILES[op.name](tr.arch.tile_pmax, engine)
        regs = tr.builder.registers(engine, op.name, shape, dtype, span)
        # Per-lane registers follow the tile's partitions; the PRNG state is the whole file.
        lanes = next((v.shape[0] for v in bound.values() if is_tensor_like(v)), 1)
        out[op.name] = regs.full().subscript(slice(0, lanes), span) \
            if op.name == "reduce_regs" else regs.full()
    return out


# Engine register files a kernel uses implicitly: (shape, dtype) by lanes and engine.
_REGISTER_FILES: dict[str, Callable[[int, Engine], tuple[tuple[int, int], str]]] = {
    "reduce_regs": lambda lanes, engine: ((lanes, 1), "float32"),
    "rng_state": lambda lanes, engine: ((lanes, 24 if engine == Engine.VECTOR else 6), "uint32"),
}


class InstrHandle:
    """What a `nisa.*` call returns (nki.isa.NkiInstruction): `.depends_on(*producers)`."""

    def __init__(self, tr: Tracer, instr: Instr):
        self._tr = tr
        self.instr = instr

    def depends_on(self, span: SourceSpan, *producers: Any, kind: Any = None) -> InstrHandle:
        for p in producers:
            if not isinstance(p, InstrHandle):
                raise KernelTypeError(f"depends_on() takes instructions returned by nisa calls, "
                                      f"got {p!r}", span)
            self._tr.builder.add_dependency(self.instr, p.instr, span)
        return self

    def __repr__(self) -> str:
        return f"<instruction #{self.instr.index} {self.instr.spec.name}>"


NO_REORDER = EnumValue("nl", "no_reorder")


def _mask_ranges(mask: Any, span: SourceSpan) -> dict[int, tuple[int, int]] | None:
    if mask is None:
        return None
    if isinstance(mask, Predicate):
        return mask.ranges(span)
    if mask is True:
        return None
    raise KernelTypeError(f"mask= must be a condition on nl.arange indices (e.g. i_p < n), "
                          f"got {mask!r}", span)


def _isa_builtin(tr: Tracer, spec: InstrSpec) -> Any:
    from neuronemu.trace.tracer import Builtin

    accumulate = None
    if spec.name == "nc_matmul":
        def accumulate(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> None:
            """`psum += nisa.nc_matmul(stationary, moving)`: accumulate into psum (where
            nothing was written yet, the first product overwrites, nki.isa.nc_matmul)."""
            bound, mask, _, engine = _legacy_binding(spec, args, kwargs, span)
            emit(tr, spec, span, bound | {"dst": dst, "accumulate": None}, engine, mask)

    names = spec.param_names
    accepted = set(names) | {o.name for o in spec.operands} | {a.name for a in spec.attrs}

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if "srcs" in spec.param_names:  # dma_compute: a list of sources, src0, src1, ...
            args, kwargs = _expand_sources(spec, args, kwargs, span)
        if _is_legacy_call(spec, args, kwargs):
            return _legacy_isa_call(tr, spec, span, args, kwargs)
        if len(args) > len(names):
            raise KernelTypeError(f"nisa.{spec.name}() takes at most {len(names)} positional "
                                  f"arguments ({len(args)} given)", span)
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in bound:
                raise KernelTypeError(f"nisa.{spec.name}() got multiple values for {k!r}", span)
            bound[k] = v
        name = bound.pop("name", None)
        engine = bound.pop("engine", None)
        for k in bound:
            if k not in accepted:
                import difflib

                close = difflib.get_close_matches(k, sorted(accepted), n=1)
                raise KernelTypeError(
                    f"nisa.{spec.name}() got an unexpected keyword argument {k!r}", span,
                    hint=f"did you mean {close[0]!r}?" if close else None)
        ins = emit(tr, spec, span, {k: v for k, v in bound.items() if v is not None or k in
                                    {a.name for a in spec.attrs}}, engine)
        if ins is None:
            return None
        if isinstance(name, str) and name:
            tr.builder.names[name] = ins
        return InstrHandle(tr, ins)

    dst_op = next((o for o in spec.outputs if o.name == "dst"), None)

    def into(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> bool:
        """`t[...] = nisa.f(...)` (a value-returning call): write f's dst straight into the
        slice when it can hold f's result as is (buffer, shape, dtype)."""
        if dst_op is None or not _is_legacy_call(spec, args, kwargs) or \
                dst.buffer not in dst_op.buffers:
            return False
        bound, mask, dtype, engine = _legacy_binding(spec, args, kwargs, span)
        found = _legacy_result(spec, bound, _engine_of(spec, engine, span), dtype, span)
        if found is None:
            return False
        shape, natural, kind = found
        # Writing straight in must land where, and round as, the call's own tile would.
        if tuple(shape) != tuple(dst.shape) or natural != dst.dtype or \
                kind.buffer != dst.buffer:
            return False
        if spec.name == "nc_matmul":
            bound.setdefault("accumulate", False)  # an assignment overwrites
        emit(tr, spec, span, bound | {"dst": dst}, engine, mask)
        return True

    return Builtin(f"nisa.{spec.name}", call, accumulate, into)


def _expand_sources(spec: InstrSpec, args: tuple, kwargs: dict[str, Any], span: SourceSpan
                    ) -> tuple[tuple, dict[str, Any]]:
    """`srcs=[a, b, ...]` as the operands src0, src1, ... (all bound by keyword)."""
    bound = dict(zip(spec.param_names, args)) | kwargs
    srcs = bound.pop("srcs", None)
    if not isinstance(srcs, (list, tuple)) or not all(is_tensor_like(x) for x in srcs):
        raise KernelTypeError(f"nisa.{spec.name}(): srcs must be a list of tensors, got "
                              f"{srcs!r}", span)
    slots = [o.name for o in spec.inputs]
    if not 1 <= len(srcs) <= len(slots):
        raise KernelTypeError(f"nisa.{spec.name}(): give 1 to {len(slots)} srcs, got "
                              f"{len(srcs)}", span)
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
    names = spec.param_names
    current = dict(zip(names, args)) | kwargs
    if not _missing(spec, current) and _consistent(spec, current) and \
            "dtype" not in kwargs and "mask" not in kwargs:
        return False
    legacy = dict(zip([n for n in names if n != "dst"], args)) | kwargs
    return not _missing(spec, legacy, skip=("dst",)) and _consistent(spec, legacy)


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


def _legacy_isa_call(tr: Tracer, spec: InstrSpec, span: SourceSpan, args: tuple,
                     kwargs: dict[str, Any]) -> Tensor:
    bound, mask, dtype, engine = _legacy_binding(spec, args, kwargs, span)
    found = _legacy_result(spec, bound, _engine_of(spec, engine, span), dtype, span)
    if found is None:
        raise KernelTypeError(f"nisa.{spec.name}() without dst= needs a tile input", span)
    shape, dt, kind = found
    out = tr.builder.alloc(_tile_name(tr, None), tuple(shape), dt, kind, span)
    emit(tr, spec, span, bound | {"dst": out}, engine, mask)
    return out


def _legacy_binding(spec: InstrSpec, args: tuple, kwargs: dict[str, Any], span: SourceSpan
                    ) -> tuple[dict[str, Any], Any, Any, Any]:
    """An older-API call's arguments (no dst) by parameter, without the unset ones; and its
    mask=, dtype= and engine= (name= is dropped)."""
    kwargs = dict(kwargs)
    mask, dtype, engine = (kwargs.pop(k, None) for k in ("mask", "dtype", "engine"))
    kwargs.pop("name", None)
    accepted = set(spec.param_names) | {o.name for o in spec.operands} | \
        {a.name for a in spec.attrs}
    for k in kwargs:
        if k not in accepted:
            raise KernelTypeError(f"nisa.{spec.name}() got an unexpected keyword argument "
                                  f"{k!r}", span)
    bound = dict(zip([n for n in spec.param_names if n != "dst"], args)) | kwargs
    return {k: v for k, v in bound.items() if v is not None}, mask, dtype, engine


def _legacy_result(spec: InstrSpec, bound: dict[str, Any], engine: Engine, dtype: Any,
                   span: SourceSpan) -> tuple[tuple[int, ...], DType, BufferKind] | None:
    """The tile an older-API call returns: shape, dtype (`dtype=` if given) and buffer of
    its dst (each instruction's doc gives its dst's shape; by default the shape of its first
    input); None when it has no tile input to shape it by."""
    found = _natural_result(spec, bound, engine)
    if found is None:
        return None
    shape, dt, kind = found
    return shape, (as_dtype(dtype, span) if dtype is not None else dt), kind


def _natural_result(spec: InstrSpec, bound: dict[str, Any], engine: Engine
                    ) -> tuple[tuple[int, ...], DType, BufferKind] | None:
    if spec.name == "nc_matmul":
        stat, mov = bound["stationary"], bound["moving"]
        k = stat.shape[0]
        # A transpose through the PE array writes stationary's dtype (nki.isa.nc_matmul).
        dt = stat.dtype if _attr_value(bound.get("is_transpose", False)) else \
            ALL_DTYPES["float32"]
        return (stat.size // k, mov.size // k), dt, BUFFERS["psum"]
    first = next((bound[o.name] for o in spec.inputs if is_tensor_like(bound.get(o.name))),
                 None)
    if first is None:
        return None
    parts, free = first.shape[0], first.size // max(first.shape[0], 1)
    shape, dt, kind = tuple(first.shape), first.dtype, BUFFERS["sbuf"]
    if spec.name == "nc_transpose":
        shape = (free, parts)
        kind = BUFFERS["psum"] if engine == Engine.TENSOR else kind
    elif spec.name == "tensor_reduce":
        axis = bound.get("axis")
        axes = {a % len(first.shape) for a in (axis if isinstance(axis, (list, tuple))
                                               else (axis,)) if isinstance(a, int)}
        keep = bool(_attr_value(bound.get("keepdims", False)))
        shape = tuple(1 if i in axes else d for i, d in enumerate(first.shape)
                      if keep or i not in axes)
        shape = shape if len(shape) > 1 else (parts, 1)
    elif spec.name in ("bn_stats", "bn_aggr", "max8", "nc_find_index8"):
        width = {"bn_stats": 6, "bn_aggr": 2, "max8": 8, "nc_find_index8": 8}[spec.name]
        shape = (parts, width)
        dt = ALL_DTYPES["uint32"] if spec.name == "nc_find_index8" else ALL_DTYPES["float32"]
    elif spec.name == "tensor_partition_reduce":
        shape = (1, *first.shape[1:])
    if len(shape) < 2:  # a tile keeps a free dim: [P] is [P, 1]
        shape = (*shape, 1)
    return shape, dt, kind


@dataclasses.dataclass(frozen=True)
class LoopReduce:
    """`nl.loop_reduce(x, op, loop_indices)`: the tile it is assigned to (a name bound to a
    tile, or a slice) becomes op(that tile, x), as nisa.tensor_tensor(data1=dst, data2=x)
    would make it (nki.language.loop_reduce: the destination is also an input)."""

    value: Any
    op: str


def loop_reduce_into(tr: Tracer, dst: Any, value: LoopReduce, span: SourceSpan) -> None:
    d = as_view(dst)
    if d is None:
        raise KernelTypeError("nl.loop_reduce combines into the tile it is assigned to; bind "
                              "that name to a tile first (e.g. b = nl.zeros(...))", span)
    emit(tr, REGISTRY["tensor_tensor"], span,
         {"dst": d, "data1": d, "data2": value.value, "op": value.op})


# An nl.* call asked to write into a slice that its own tile would not match.
_NO_FIT = object()


def into_of(call: Callable[..., Any]) -> Callable[..., bool]:
    """The `into` hook of an nl.* function: write the call's result straight into dst."""
    def into(span: SourceSpan, dst: View, *args: Any, **kwargs: Any) -> bool:
        return call(span, *args, _into=dst, **kwargs) is not _NO_FIT

    return into


def _through_sbuf(tr: Tracer, v: Any, span: SourceSpan, mask: Any = None) -> Any:
    """A PSUM tile where only SBUF will do (a DMA source, a Tensor-engine input): copied to
    a new SBUF tile first, as the compiler does; anything else as it is."""
    if v.buffer != Buffer.PSUM:
        return v
    tmp = tr.builder.alloc(_tile_name(tr, None), tuple(v.shape), v.dtype, BUFFERS["sbuf"],
                           span)
    emit(tr, REGISTRY["tensor_copy"], span, {"dst": tmp, "src": v}, mask=mask)
    return tmp


def assign_slice(tr: Tracer, dst: Any, value: Any, span: SourceSpan) -> None:
    """`t[...] = value` (older dialect): write `value` (a tile, a tensor or a number) into the
    view, with the instruction the memories call for: memset for a number, a DMA when either
    side is in HBM (through SBUF for a PSUM tile), else a tensor copy."""
    if isinstance(value, LoopReduce):
        loop_reduce_into(tr, dst, value, span)
        return
    if not is_tensor_like(value):
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            emit(tr, REGISTRY["memset"], span, {"dst": dst, "value": value})
            return
        raise KernelTypeError(f"cannot assign {type(value).__name__} {value!r} into a tensor "
                              "slice; assign a tile or a number", span)
    d, v = as_view(dst), as_view(value)
    if d is None or v is None:
        raise KernelTypeError("assigning through an index pattern (nl.arange) is not "
                              "supported yet; use nl.ds or slices", span)
    if d.buffer == Buffer.HBM or v.buffer == Buffer.HBM:
        emit(tr, REGISTRY["dma_copy"], span, {"dst": d, "src": _through_sbuf(tr, v, span)})
    else:
        emit(tr, REGISTRY["tensor_copy"], span, {"dst": d, "src": v})


def _isa(tr: Tracer) -> Namespace:
    members: dict[str, Any] = {name: _isa_builtin(tr, spec) for name, spec in REGISTRY.items()}
    for name in _NOT_YET_ISA:
        if name not in members:
            members[name] = _not_yet(f"nki.isa.{name}")
    for group, values in _ENUMS.items():
        members[group] = Namespace(f"nki.isa.{group}",
                                   {v: EnumValue(group, v) for v in values})
    for e in ("tensor", "vector", "scalar", "gpsimd", "unknown"):  # older names
        members[f"{e}_engine"] = EnumValue("engine", e)
    members["nc_version"] = Namespace("nki.isa.nc_version", {
        "gen2": 2, "gen3": 3, "gen4": 4})
    members["get_nc_version"] = _builtin("get_nc_version", lambda span: tr.arch.nc_version)
    return Namespace("nki.isa", members, kind="instruction")


def _builtin(name: str, fn: Callable[..., Any]) -> Any:
    from neuronemu.trace.tracer import Builtin

    return Builtin(name, fn)


def _not_yet(qualname: str) -> Any:
    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        raise KernelTypeError(f"{qualname} is not supported by neuronemu yet", span)

    return _builtin(qualname, call)


# nki.language ------------------------------------------------------------------------------



def _buffer(value: Any, span: SourceSpan) -> BufferKind:
    if value is None:
        return BUFFERS["sbuf"]
    if isinstance(value, BufferKind):
        return value
    if isinstance(value, Namespace) and value.name in ("nki.compiler.sbuf",
                                                       "nki.compiler.psum"):
        return BUFFERS[value.name.rsplit(".", 1)[1]]  # an alias of auto_alloc()
    raise KernelTypeError(f"buffer must be nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm, got "
                          f"{value!r}", span)


def _directly_placed(tr: Tracer, span: SourceSpan, shape: tuple, at: int, dt: DType,
                     kind: DirectAlloc, name: str) -> Any:
    """A tensor whose tiles the kernel places (nki direct allocation): each block's tile gets
    the address the allocation function gives for its block index."""
    tile_shape = tuple(int(d) for d in shape[at:])
    plain = BUFFERS[kind.name]

    def make(label: str, index: tuple[int, ...]) -> Tensor:
        t = tr.builder.alloc(label, tile_shape, dt, plain, span)
        free_bytes = t.bytes_per_partition
        got = tr.call(kind.func, [index, tile_shape[0], free_bytes], {}, span)
        want = 3 if kind.name == "psum" else 2
        if not (isinstance(got, (tuple, list)) and len(got) == want and
                all(isinstance(g, int) and not isinstance(g, bool) for g in got)):
            what = "(bank, partition, byte offset)" if want == 3 else "(partition, byte offset)"
            raise KernelTypeError(f"the allocation function of {label!r} must return {what} "
                                  f"ints, got {got!r}", span)
        partition, offset = got[-2], got[-1]
        if offset < 0:
            raise ConstraintError(f"the allocation function puts {label!r} at byte offset "
                                  f"{offset}; offsets are >= 0", span)
        if want == 3:
            if not 0 <= got[0] < tr.arch.psum_banks or not 0 <= offset < tr.arch.psum_bank_bytes:
                raise ConstraintError(f"{label!r}: PSUM bank {got[0]} offset {offset} is not in "
                                      f"{tr.arch.psum_banks} banks of "
                                      f"{tr.arch.psum_bank_bytes} bytes", span)
            offset += got[0] * tr.arch.psum_bank_bytes
        t.partition_offset = partition_offset(partition, t, tr.arch, span)
        t.address = offset
        return t

    if not at:
        return make(name, ())
    return BlockTensor(name, tuple(int(d) for d in shape[:at]), tile_shape, dt, plain, span,
                       make)


def _compiler(tr: Tracer) -> Namespace:
    """`nki.compiler`: direct allocation (sbuf/psum alloc, mod_alloc, auto_alloc) and the
    kernel decorators and directives, which do not change what the emulator runs."""

    def modulo(base: int, shape: Any, scale: int, index: tuple[int, ...]) -> int:
        shape = tuple(shape) if shape else (1,) * len(index)
        flat = 0
        for i, n in zip(index, shape):
            flat = flat * n + i % n
        for n in shape[len(index):]:
            flat *= n
        return base + flat * scale

    def allocator(buffer: str) -> Namespace:
        def alloc(span, func, **_):
            return DirectAlloc(buffer, func)

        def mod_alloc(span, base_addr=0, *, base_bank=0, num_bank_tiles=(), base_partition=0,
                      num_par_tiles=(), num_free_tiles=(), **_):
            for name, value in (("base_addr", base_addr), ("base_bank", base_bank),
                                ("base_partition", base_partition)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise KernelTypeError(f"mod_alloc: {name} must be an int >= 0, got "
                                          f"{value!r}", span)
            for name, value in (("num_bank_tiles", num_bank_tiles),
                                ("num_par_tiles", num_par_tiles),
                                ("num_free_tiles", num_free_tiles)):
                if not isinstance(value, (tuple, list)) or not all(
                        isinstance(n, int) and not isinstance(n, bool) and n > 0
                        for n in value):
                    raise KernelTypeError(f"mod_alloc: {name} must be a tuple of ints > 0, "
                                          f"got {value!r}", span)
            def place(span2, index, pdim_size, fdim_size):
                index = tuple(index)
                where = (modulo(base_partition, num_par_tiles, pdim_size, index),
                         modulo(base_addr, num_free_tiles, fdim_size, index))
                if buffer == "psum":
                    return (modulo(base_bank, num_bank_tiles, 1, index), *where)
                return where

            return DirectAlloc(buffer, _builtin(f"nki.compiler.{buffer}.mod_alloc", place))

        return Namespace(f"nki.compiler.{buffer}", {
            "alloc": _builtin(f"nki.compiler.{buffer}.alloc", alloc),
            "mod_alloc": _builtin(f"nki.compiler.{buffer}.mod_alloc", mod_alloc),
            "auto_alloc": _builtin(f"nki.compiler.{buffer}.auto_alloc",
                                   lambda span, **_: BUFFERS[buffer])})

    members: dict[str, Any] = {"sbuf": allocator("sbuf"), "psum": allocator("psum")}
    for deco in ("skip_middle_end_transformations", "enable_stack_allocator",
                 "force_auto_alloc"):
        members[deco] = _decorator(deco)
    members["no_reorder"] = _builtin("nki.compiler.no_reorder", lambda span: NO_REORDER)
    members["multi_buffer"] = _builtin("nki.compiler.multi_buffer",
                                       lambda span, factor=2: EnumValue("multi_buffer",
                                                                        str(factor)))
    return Namespace("nki.compiler", members)


def _tile_name(tr: Tracer, name: Any) -> str:
    """An explicit name=, else a placeholder renamed when the tile is bound to a variable."""
    return name if isinstance(name, str) and name else "%" + (tr.pending_name or "")


def _promote(a: DType, b: DType) -> DType:
    """Legacy nl.* result dtype: float beats int, wider wins, fp16 + bf16 -> fp32."""
    if a == b:
        return a
    fa, fb = a.np.kind == "f" or "float" in a.name, b.np.kind == "f" or "float" in b.name
    if fa != fb:
        return a if fa else b
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return ALL_DTYPES["float32"]
    return a if a.itemsize >= b.itemsize else b


def _language(tr: Tracer) -> Namespace:
    b = tr.builder

    def ndarray(span, shape, dtype, buffer=None, name="", address=None, **_):
        kind = _buffer(buffer, span)
        at = next((i for i, d in enumerate(shape) if isinstance(d, ParDim)), 0) \
            if isinstance(shape, (tuple, list)) else 0
        if isinstance(kind, DirectAlloc):
            return _directly_placed(tr, span, tuple(shape), at, as_dtype(dtype, span), kind,
                                    _tile_name(tr, name))
        if at and kind.buffer != Buffer.HBM:
            if address is not None:
                raise KernelTypeError("address= with block dims is not supported; use "
                                      "nki.compiler allocation or one tile per block", span)
            dt = as_dtype(dtype, span)
            tile_shape = tuple(int(d) for d in shape[at:])
            return BlockTensor(
                _tile_name(tr, name), tuple(int(d) for d in shape[:at]), tile_shape, dt, kind,
                span, lambda label, _index: b.alloc(label, tile_shape, dt, kind, span))
        t = b.alloc(_tile_name(tr, name), shape, as_dtype(dtype, span), kind, span)
        if address is not None:
            # nl.ndarray(address=(partition_offset, free_offset)) on SBUF/PSUM.
            if not t.on_chip:
                raise KernelTypeError("address= places SBUF or PSUM tensors only", span)
            if not (isinstance(address, tuple) and len(address) == 2 and
                    all(isinstance(a, int) and a >= 0 for a in address)):
                raise KernelTypeError(f"address must be (partition_offset, free_offset) "
                                      f"ints, got {address!r}", span)
            t.partition_offset = partition_offset(address[0], t, tr.arch, span)
            t.address = address[1]
        return t

    def filled(value: float) -> Callable[..., Tensor]:
        def make(span, shape, dtype, buffer=None, name="", **_):
            t = ndarray(span, shape, dtype, buffer, name)
            if isinstance(t, BlockTensor):  # every block, now
                for index in np.ndindex(*t.blocks):
                    emit(tr, REGISTRY["memset"], span, {"dst": t.block(index), "value": value})
                return t
            emit(tr, REGISTRY["memset"], span, {"dst": t, "value": value})
            return t

        return make

    def full(span, shape, fill_value, dtype, buffer=None, name="", **_):
        return filled(fill_value)(span, shape, dtype, buffer, name)

    def like(value: float | None) -> Callable[..., Tensor]:
        def make(span, x, dtype=None, buffer=None, name="", **_):
            v = _tensor_arg(x, "x", span)
            dt = as_dtype(dtype, span) if dtype is not None else v.dtype
            kind = buffer if buffer is not None else v.tensor.kind_of_buffer
            if value is None:
                return ndarray(span, v.shape, dt, kind, name)
            return filled(value)(span, v.shape, dt, kind, name)

        return make

    def load(span, src, dtype=None, mask=None, **_):
        v = _tensor_arg(src, "src", span)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        shape = tuple(v.shape) if len(v.shape) >= 2 else (1, *v.shape)
        t = b.alloc(_tile_name(tr, None), shape, dt, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["dma_copy"], span, {"dst": t, "src": v}, mask=mask)
        return t

    def store(span, dst, value, mask=None, **_):
        d = _tensor_arg(dst, "dst", span)
        v = _through_sbuf(tr, _tensor_arg(value, "value", span), span, mask)
        emit(tr, REGISTRY["dma_copy"], span, {"dst": d, "src": v}, mask=mask)

    def result(span, shape, dt, into):
        """The tile an nl.* call writes: `into` (the slice `t[...] = nl.f(...)` assigns) when
        it has the call's own tile's shape and dtype, else a new SBUF tile; NO_FIT when
        `into` was given and does not fit (the caller then copies the call's tile in)."""
        if into is None:
            return b.alloc(_tile_name(tr, None), tuple(shape), dt, BUFFERS["sbuf"], span)
        if tuple(into.shape) == tuple(shape) and into.dtype == dt and \
                into.buffer != Buffer.HBM:
            return into
        return _NO_FIT

    def binary(op: str) -> Callable[..., Tensor]:
        def call(span, x, y, dtype=None, mask=None, _into=None, **_):
            tx, ty = is_tensor_like(x), is_tensor_like(y)
            if not tx and not ty:
                raise KernelTypeError(f"nl.{op} needs at least one tile argument", span)
            if tx and ty and tuple(x.shape) == tuple(y.shape):
                dt = as_dtype(dtype, span) if dtype is not None else _promote(x.dtype, y.dtype)
                out = result(span, x.shape, dt, _into)
                if out is _NO_FIT:
                    return out
                emit(tr, REGISTRY["tensor_tensor"], span,
                     {"dst": out, "data1": x, "data2": y, "op": op}, mask=mask)
                return out
            # One full tile and one scalar or [P, 1] column: tensor_scalar, reversed if needed.
            wide = tx and (not ty or x.size >= y.size)
            data, other, reverse = (x, y, False) if wide else (y, x, True)
            if is_tensor_like(other):
                if not (other.shape[0] == data.shape[0] and other.size == other.shape[0]):
                    raise KernelTypeError(
                        f"nl.{op}: shapes {list(x.shape)} and {list(y.shape)} do not broadcast "
                        "(supported: equal shapes, a scalar, or a [P, 1] column)", span)
                other_dtype = other.dtype
            elif isinstance(other, (int, float)) and not isinstance(other, bool):
                other_dtype = ALL_DTYPES["float32"] if isinstance(other, float) else data.dtype
            else:
                raise KernelTypeError(f"nl.{op}: unsupported operand {other!r}", span)
            dt = as_dtype(dtype, span) if dtype is not None else _promote(data.dtype, other_dtype)
            out = result(span, data.shape, dt, _into)
            if out is _NO_FIT:
                return out
            emit(tr, REGISTRY["tensor_scalar"], span,
                 {"dst": out, "data": data, "op0": op, "operand0": other, "reverse0": reverse},
                 mask=mask)
            return out

        call.takes_into = True  # type: ignore[attr-defined]
        return call

    def unary(op: str) -> Callable[..., Tensor]:
        def call(span, x, dtype=None, mask=None, _into=None, **_):
            v = _tensor_arg(x, "x", span)
            dt = as_dtype(dtype, span) if dtype is not None else v.dtype
            out = result(span, v.shape, dt, _into)
            if out is _NO_FIT:
                return out
            if op == "copy":
                emit(tr, REGISTRY["tensor_copy"], span, {"dst": out, "src": v}, mask=mask)
            else:
                emit(tr, REGISTRY["activation"], span, {"dst": out, "data": v, "op": op},
                     mask=mask)
            return out

        call.takes_into = True  # type: ignore[attr-defined]
        return call

    def program_id(span, axis=0):
        if not isinstance(axis, int) or not 0 <= axis < len(tr.grid):
            raise KernelTypeError(f"nl.program_id({axis!r}): the launch grid {list(tr.grid)} has "
                                  f"{len(tr.grid)} axes", span)
        return tr.program_ids[axis]

    def num_programs(span, axes=None):
        if axes is None:
            return math.prod(tr.grid)
        for a in axes if isinstance(axes, (tuple, list)) else (axes,):
            if not isinstance(a, int) or not 0 <= a < len(tr.grid):
                raise KernelTypeError(f"nl.num_programs({axes!r}): the launch grid "
                                      f"{list(tr.grid)} has {len(tr.grid)} axes", span)
        if isinstance(axes, (tuple, list)):
            return math.prod(tr.grid[a] for a in axes)
        return tr.grid[axes]

    def constant(span, value: Any, dtype: Any, name: str) -> Tensor:
        """A tensor whose contents are known at trace time (loaded with the model): an SBUF
        tile when it fits the partitions, else HBM."""
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            array = None
        if array is None or array.dtype.kind not in "biuf" or array.ndim == 0:
            raise KernelTypeError(f"a constant must be a numeric array (e.g. np.identity(128)), "
                                  f"got {value!r}", span)
        if array.ndim == 1:
            array = array[:, None]
        dt = as_dtype(dtype, span) if dtype is not None else ALL_DTYPES.get(
            {"b": "uint8", "i": "int32", "u": "uint32", "f": "float32"}[array.dtype.kind])
        kind = "sbuf" if array.shape[0] <= tr.arch.tile_pmax else "shared_hbm"
        t = b.alloc(_tile_name(tr, name), tuple(int(d) for d in array.shape), dt,
                    BUFFERS[kind], span, kind="constant")
        t.data = array.astype(np.float64).astype(dt.np) if array.dtype.kind == "b" \
            else array.astype(dt.np)
        return t

    def device_print(span, prefix, x, mask=None, **_):
        """Print x's values when the kernel runs (not at trace time, unlike print)."""
        if not isinstance(prefix, str):
            raise KernelTypeError(f"nl.device_print(prefix, x): prefix must be a string, got "
                                  f"{prefix!r}", span)
        emit(tr, DEVICE_PRINT, span, {"src": _tensor_arg(x, "x", span), "prefix": prefix},
             mask=mask)

    def shared_constant(span, constant, dtype=None, name="", **_):
        return constant_tensor(span, constant, dtype, name)

    def shared_identity_matrix(span, n, dtype="uint8", name="", **_):
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise KernelTypeError(f"n must be a positive int, got {n!r}", span)
        return constant_tensor(span, np.identity(n), dtype, name)

    constant_tensor = constant

    def transpose(span, x, dtype=None, mask=None, **_):
        """[P, F] -> [F, P] on the Tensor engine; the result lands in PSUM (nki.language)."""
        v = _tensor_arg(x, "x", span)
        if len(v.shape) != 2:
            raise KernelTypeError(f"nl.transpose takes a 2-d tile, got shape {list(v.shape)}",
                                  span)
        out = b.alloc(_tile_name(tr, None), (v.shape[1], v.shape[0]),
                      as_dtype(dtype, span) if dtype is not None else v.dtype, BUFFERS["psum"],
                      span)
        emit(tr, REGISTRY["nc_transpose"], span, {"dst": out, "data": v}, Engine.TENSOR, mask)
        return out

    def matmul(span, x, y, transpose_x=False, mask=None, _dst=None, **_):
        """x @ y into PSUM (fp32); with transpose_x=False x is [M, K] and is transposed first
        (an extra nc_transpose, as nki.language.matmul documents). `_dst`: accumulate into
        this PSUM view instead (`psum += nl.matmul(...)`)."""
        vx, vy = _tensor_arg(x, "x", span), _tensor_arg(y, "y", span)
        if transpose_x:
            stationary = _through_sbuf(tr, vx, span, mask)
        else:
            xt = transpose(span, vx, mask=mask)
            stationary = b.alloc(_tile_name(tr, None), tuple(xt.shape), vx.dtype,
                                 BUFFERS["sbuf"], span)
            emit(tr, REGISTRY["tensor_copy"], span, {"dst": stationary, "src": xt})
        moving = _through_sbuf(tr, vy, span, mask)
        if (stationary.dtype.name == "float32") != (moving.dtype.name == "float32"):
            # The PE array takes fp32 on both sides or neither: widen the other one (exact;
            # inferred: the docs do not say which way the compiler converts).
            def widen(v):
                if v.dtype.name == "float32":
                    return v
                w = b.alloc(_tile_name(tr, None), tuple(v.shape), ALL_DTYPES["float32"],
                            BUFFERS["sbuf"], span)
                emit(tr, REGISTRY["tensor_copy"], span, {"dst": w, "src": v}, mask=mask)
                return w

            stationary, moving = widen(stationary), widen(moving)
        k = stationary.shape[0]
        if _dst is not None:
            emit(tr, REGISTRY["nc_matmul"], span, {"dst": _dst, "stationary": stationary,
                                                   "moving": moving, "accumulate": None},
                 mask=mask)
            return _dst
        out = b.alloc(_tile_name(tr, None), (stationary.size // k, moving.size // moving.shape[0]),
                      ALL_DTYPES["float32"], BUFFERS["psum"], span)
        emit(tr, REGISTRY["nc_matmul"], span,
             {"dst": out, "stationary": stationary, "moving": moving}, mask=mask)
        return out

    def reduce(name: str, op: str) -> Callable[..., Tensor]:
        def call(span, x, axis, dtype=None, keepdims=False, mask=None, **_):
            v = _tensor_arg(x, "x", span)
            axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
            rank = len(v.shape)
            axes = tuple(a + rank if isinstance(a, int) and a < 0 else a for a in axes)
            if 0 in axes:
                raise KernelTypeError(
                    f"nl.{name}: axis 0 is the partition axis; only free axes can be reduced",
                    span, hint="transpose first (nl.transpose), or reduce across partitions "
                               "with a matmul against a ones vector")
            kept = [d for i, d in enumerate(v.shape) if i not in axes]
            shape = tuple(1 if i in axes else d for i, d in enumerate(v.shape)) if keepdims \
                else tuple(kept)
            if len(shape) < 2:  # a tile keeps a free dim: [P] is [P, 1]
                shape = (*shape, 1)
            dt = as_dtype(dtype, span) if dtype is not None else v.dtype
            out = b.alloc(_tile_name(tr, None), shape, dt, BUFFERS["sbuf"], span)
            data, dst, trailing = v, out, list(axes)
            if all(isinstance(a, int) for a in axes) and \
                    sorted(axes) != list(range(rank - len(axes), rank)):
                # tensor_reduce takes trailing axes: a permuted pattern walks the others
                # first. The mask narrows data and dst by the original positions, as it does
                # when the reduced axes are the last ones.
                ranges = _mask_ranges(mask, span) or {}
                data = as_view(v, ranges)
                if data is None:
                    return out
                order = [i for i in range(rank) if i not in axes] + sorted(axes)
                offset, pairs = data.as_pattern()
                data = PatternView.build(data.tensor, offset, [list(pairs[i]) for i in order],
                                         span, internal=True)
                kept_pos = [i for i in range(rank) if i not in axes]
                dst = restrict(out.full(), {k: ranges[p] for k, p in enumerate(kept_pos)
                                            if p in ranges}) if not keepdims else \
                    restrict(out.full(), {p: r for p, r in ranges.items() if p not in axes})
                if dst is None:
                    return out
                if keepdims:  # dst keeps size-1 reduced dims: walk it in data's order too
                    d_off, d_pairs = dst.as_pattern()
                    dst = PatternView.build(out, d_off, [list(d_pairs[i]) for i in order],
                                            span, internal=True)
                trailing, mask = list(range(rank - len(axes), rank)), None
            emit(tr, REGISTRY["tensor_reduce"], span,
                 {"dst": dst, "data": data, "op": op, "axis": trailing, "keepdims": keepdims},
                 mask=mask)
            if name == "mean":
                count = math.prod(v.shape[a] for a in axes if isinstance(a, int))
                emit(tr, REGISTRY["tensor_scalar"], span,
                     {"dst": out, "data": out, "op0": "multiply", "operand0": 1.0 / count},
                     mask=mask)
            return out

        return call

    def loop_reduce(span, x, op, loop_indices, dtype=None, mask=None, **_):
        """Only as the value assigned to a tile (`b = ...` or `b[...] = ...`); the loop
        indices are a hint to the compiler's loop optimizations, the loops being unrolled."""
        v = _tensor_arg(x, "x", span)
        if mask is not None:
            raise KernelTypeError("nl.loop_reduce with mask= is not supported yet", span)
        return LoopReduce(v, str(_attr_value(op)))

    def softmax(span, x, axis=-1, dtype=None, mask=None, **_):
        """exp(x - max) / sum(exp(x - max)) along the free axis: max and sum on Vector, the
        exponential on Scalar with the row max as its bias (one pass)."""
        v = _tensor_arg(x, "x", span)
        if len(v.shape) != 2 or axis not in (1, -1):
            raise KernelTypeError("nl.softmax supports 2-d tiles along axis 1 (the free axis) "
                                  "for now", span)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        f32 = ALL_DTYPES["float32"]
        col = (v.shape[0], 1)
        neg_max = b.alloc(_tile_name(tr, None), col, f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_reduce"], span,
             {"dst": neg_max, "data": v, "op": "maximum", "axis": [1], "negate": True}, mask=mask)
        e = b.alloc(_tile_name(tr, None), tuple(v.shape), f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["activation"], span, {"dst": e, "op": "exp", "data": v,
                                                 "bias": neg_max}, mask=mask)
        total = b.alloc(_tile_name(tr, None), col, f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_reduce"], span,
             {"dst": total, "data": e, "op": "add", "axis": [1]}, mask=mask)
        emit(tr, REGISTRY["reciprocal"], span, {"dst": total, "data": total}, mask=mask)
        out = b.alloc(_tile_name(tr, None), tuple(v.shape), dt, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_scalar"], span,
             {"dst": out, "data": e, "op0": "multiply", "operand0": total}, mask=mask)
        return out

    def var(span, x, axis, dtype=None, keepdims=False, mask=None, **_):
        """Population variance over the last free axes (nki.language.var: axis is [1], [1, 2],
        ...; the result always has the keepdims shape). Two passes, in fp32: the row mean on
        Vector, then square(x - mean) on Scalar with the negated mean as its bias, summed on
        Vector and scaled by 1/n (lowering inferred; the docs give only the math)."""
        v = _tensor_arg(x, "x", span)
        rank = len(v.shape)
        axes = sorted(a + rank if a < 0 else a for a in
                      (axis if isinstance(axis, (list, tuple)) else (axis,))
                      if isinstance(a, int) and not isinstance(a, bool))
        if not axes or axes != list(range(axes[0], rank)) or axes[0] != 1:
            raise KernelTypeError(f"nl.var: axis must be the last free dims of the tile "
                                  f"([1], [1, 2], ...), got {axis!r} for shape {list(v.shape)}",
                                  span)
        n = math.prod(v.shape[1:])
        flat = tensor_api.reshape(v, (v.shape[0], n), span) if rank > 2 else v
        f32 = ALL_DTYPES["float32"]
        col = (v.shape[0], 1)
        neg_mean = b.alloc(_tile_name(tr, None), col, f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_reduce"], span,
             {"dst": neg_mean, "data": flat, "op": "add", "axis": [1]}, mask=mask)
        emit(tr, REGISTRY["tensor_scalar"], span,
             {"dst": neg_mean, "data": neg_mean, "op0": "multiply", "operand0": -1.0 / n},
             mask=mask)
        squares = b.alloc(_tile_name(tr, None), tuple(flat.shape), f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["activation"], span,
             {"dst": squares, "op": "square", "data": flat, "bias": neg_mean}, mask=mask)
        total = b.alloc(_tile_name(tr, None), col, f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_reduce"], span,
             {"dst": total, "data": squares, "op": "add", "axis": [1]}, mask=mask)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        out = b.alloc(_tile_name(tr, None), (v.shape[0],) + (1,) * (rank - 1), dt,
                      BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_scalar"], span,
             {"dst": tensor_api.reshape(out.full(), col, span), "data": total, "op0": "multiply",
              "operand0": 1.0 / n}, mask=mask)
        return out

    def where(span, condition, x, y, dtype=None, mask=None, **_):
        """x where condition is nonzero, else y (nki.language.where: condition holds 1.0/0.0).
        Lowered to a uint8 predicate (condition != 0), y copied into the result, then
        tensor_copy_predicated of x over it (lowering inferred)."""
        cond = _tensor_arg(condition, "condition", span)
        shape = tuple(cond.shape)
        for name, val in (("x", x), ("y", y)):
            if is_tensor_like(val) and tuple(val.shape) != shape:
                raise KernelTypeError(f"nl.where: {name} has shape {list(val.shape)}, the "
                                      f"condition {list(shape)}; they must be equal", span)
            if not is_tensor_like(val) and (isinstance(val, bool)
                                            or not isinstance(val, (int, float))):
                raise KernelTypeError(f"nl.where: {name} must be a tile or a number, got "
                                      f"{val!r}", span)
        if dtype is not None:
            dt = as_dtype(dtype, span)
        elif is_tensor_like(x):
            dt = x.dtype
        else:
            dt = y.dtype if is_tensor_like(y) else ALL_DTYPES["float32"]
        pred = b.alloc(_tile_name(tr, None), shape, ALL_DTYPES["uint8"], BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_scalar"], span,
             {"dst": pred, "data": cond, "op0": "not_equal", "operand0": 0.0}, mask=mask)
        out = b.alloc(_tile_name(tr, None), shape, dt, BUFFERS["sbuf"], span)
        if is_tensor_like(y):
            emit(tr, REGISTRY["tensor_copy"], span, {"dst": out, "src": y}, mask=mask)
        else:
            emit(tr, REGISTRY["memset"], span, {"dst": out, "value": y}, mask=mask)
        src = x
        if is_tensor_like(x) and x.dtype != dt:  # the predicated copy moves dst's dtype only
            src = b.alloc(_tile_name(tr, None), shape, dt, BUFFERS["sbuf"], span)
            emit(tr, REGISTRY["tensor_copy"], span, {"dst": src, "src": x}, mask=mask)
        emit(tr, REGISTRY["tensor_copy_predicated"], span,
             {"dst": out, "src": src, "predicate": pred}, mask=mask)
        return out

    def broadcast_to(span, x, shape, dtype=None, **_):
        """x repeated along its size-1 dims to `shape` (same rank), as a new SBUF tile. Free
        dims are read through a stride-0 view by a Vector copy; a size-1 partition dim is
        spread by a matmul with a ones row (an engine reads lane i from partition i only, and
        an access pattern cannot repeat a partition). Lowering inferred."""
        v = _tensor_arg(x, "x", span)
        if v.buffer == Buffer.HBM:
            raise KernelTypeError("nl.broadcast_to takes a tile in SBUF or PSUM; load it first",
                                  span)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        src_shape = tuple(v.shape)
        if len(shape) != len(src_shape) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 and m in (1, n)
                for m, n in zip(src_shape, shape)):
            raise KernelTypeError(f"nl.broadcast_to: cannot broadcast {list(src_shape)} to "
                                  f"{shape!r}; give the same rank, each dim equal or from 1",
                                  span)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        if shape == src_shape and dt == v.dtype:
            return v
        if shape[0] > tr.arch.tile_pmax:
            raise KernelTypeError(f"nl.broadcast_to: partition dim {shape[0]} exceeds "
                                  f"{tr.arch.tile_pmax}", span)
        offset, pairs = v.as_pattern()
        stretched = [pairs[0]] + [(0 if m == 1 and n > 1 else stride, n)
                                  for (stride, m), n in zip(pairs[1:], shape[1:])]
        src = PatternView.build(v.tensor, offset, stretched, span)
        out = b.alloc(_tile_name(tr, None), shape, dt, BUFFERS["sbuf"], span)
        if shape[0] == src_shape[0]:
            emit(tr, REGISTRY["tensor_copy"], span, {"dst": out, "src": src})
            return out
        # Across partitions: ones[1, P].T @ row[1, N] on the Tensor engine, by PSUM banks.
        if len(shape) != 2:
            raise KernelTypeError("nl.broadcast_to across partitions supports 2-d tiles for "
                                  "now", span)
        matmul_dtypes = REGISTRY["nc_matmul"].operand("moving").dtypes or frozenset()
        if v.dtype.name not in matmul_dtypes:
            raise KernelTypeError(
                f"nl.broadcast_to across partitions runs as a Tensor-engine matmul, which "
                f"does not take {v.dtype.name} tiles", span,
                hint="broadcast a float tile, or copy the row into each partition with "
                     "nisa.dma_copy")
        ones = constant(span, np.ones((1, shape[0])), v.dtype, "")
        bank = tr.arch.tile_psum_fmax
        for c0 in range(0, shape[1], bank):
            n = min(bank, shape[1] - c0)
            acc = b.alloc(_tile_name(tr, None), (shape[0], n), ALL_DTYPES["float32"],
                          BUFFERS["psum"], span)
            emit(tr, REGISTRY["nc_matmul"], span,
                 {"dst": acc, "stationary": ones.full(),
                  "moving": src.subscript((slice(None), slice(c0, c0 + n)), span)})
            emit(tr, REGISTRY["tensor_copy"], span,
                 {"dst": out.full().subscript((slice(None), slice(c0, c0 + n)), span),
                  "src": acc})
        return out

    def rms_norm(span, x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None,
                 mask=None, **_):
        """x / sqrt(sum(x^2) / n + epsilon) * w along the free axis of a 2-d tile (nki.language
        .rms_norm), in fp32: squares on Scalar, the row sum on Vector, rsqrt on Scalar, then
        one scalar_tensor_tensor for x * rinv * w (lowering inferred; compute_dtype ignored,
        the engines compute in fp32)."""
        v, vw = _tensor_arg(x, "x", span), _tensor_arg(w, "w", span)
        if len(v.shape) != 2 or axis not in (1, -1):
            raise KernelTypeError("nl.rms_norm supports 2-d tiles along axis 1 (the free axis) "
                                  "for now", span)
        if tuple(vw.shape) != tuple(v.shape):
            raise KernelTypeError(f"nl.rms_norm: w has shape {list(vw.shape)}, x "
                                  f"{list(v.shape)}; they must be equal", span)
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise KernelTypeError(f"nl.rms_norm: n must be a positive int, got {n!r}", span)
        f32 = ALL_DTYPES["float32"]
        col = (v.shape[0], 1)
        squares = b.alloc(_tile_name(tr, None), tuple(v.shape), f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["activation"], span, {"dst": squares, "op": "square", "data": v},
             mask=mask)
        rinv = b.alloc(_tile_name(tr, None), col, f32, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["tensor_reduce"], span,
             {"dst": rinv, "data": squares, "op": "add", "axis": [1]}, mask=mask)
        emit(tr, REGISTRY["tensor_scalar"], span,
             {"dst": rinv, "data": rinv, "op0": "multiply", "operand0": 1.0 / n,
              "op1": "add", "operand1": float(epsilon)}, mask=mask)
        emit(tr, REGISTRY["activation"], span, {"dst": rinv, "op": "rsqrt", "data": rinv},
             mask=mask)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        out = b.alloc(_tile_name(tr, None), tuple(v.shape), dt, BUFFERS["sbuf"], span)
        emit(tr, REGISTRY["scalar_tensor_tensor"], span,
             {"dst": out, "data": v, "op0": "multiply", "operand0": rinv, "op1": "multiply",
              "operand1": vw}, mask=mask)
        return out

    def loop_range(name: str) -> Callable[..., range]:
        def call(span, start, stop=None, step=1, **_hints):
            return _py(tr, range, f"nl.{name}")(
                span, *((start,) if stop is None else (start, stop)),
                *(() if stop is None else (step,)))

        return call

    members: dict[str, Any] = dict(ALL_DTYPES)
    members.update(BUFFERS)
    members["tfloat32"] = ALL_DTYPES["float32"]  # storage is fp32; tf32 affects matmul only
    members.update({name: DType(name) for name in MX_DTYPES})
    members["bool"] = ALL_DTYPES["bool_"]
    for name, fn in {
        "ndarray": ndarray, "zeros": filled(0), "ones": filled(1), "full": full,
        "empty_like": like(None), "zeros_like": like(0), "ones_like": like(1),
        "load": load, "store": store,
        "program_id": program_id, "num_programs": num_programs,
        "program_ndim": lambda span: len(tr.grid), "par_dim": lambda span, x: ParDim(x),
        "arange": index.arange, "ds": lambda span, start, size: slice(start, start + size),
        "no_reorder": lambda span: NO_REORDER,
        "transpose": transpose, "matmul": matmul, "softmax": softmax, "var": var,
        "loop_reduce": loop_reduce,
        "where": where, "broadcast_to": broadcast_to, "rms_norm": rms_norm,
        "shared_constant": shared_constant, "shared_identity_matrix": shared_identity_matrix,
        "device_print": device_print,

    }.items():
        members[name] = _builtin(f"nl.{name}", fn)
    members["matmul"] = dataclasses.replace(
        members["matmul"], accumulate=lambda span, dst, *a, **k: matmul(span, *a, _dst=dst, **k))

    def load_into(span, dst, src, dtype=None, mask=None, **_):
        """`t[...] = nl.load(src)`: the DMA writes the slice itself when the load's own tile
        would have its shape and dtype (else the tile is copied in)."""
        v = _tensor_arg(src, "src", span)
        shape = tuple(v.shape) if len(v.shape) >= 2 else (1, *v.shape)
        dt = as_dtype(dtype, span) if dtype is not None else v.dtype
        if dst.buffer != Buffer.SBUF or tuple(dst.shape) != shape or dt != dst.dtype:
            return False
        emit(tr, REGISTRY["dma_copy"], span, {"dst": dst, "src": v}, mask=mask)
        return True

    members["load"] = dataclasses.replace(members["load"], into=load_into)
    # Reductions are also operators: `op=nl.max` names the maximum in tensor_reduce and kin.
    for name, op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"),
                     ("prod", "multiply"), ("mean", "mean"), ("all", "logical_and")):
        members[name] = OpRef(op, reduce(name, "add" if name == "mean" else op))
    for name in ("affine_range", "sequential_range", "static_range"):
        members[name] = _builtin(f"nl.{name}", loop_range(name))

    def dynamic_range(span, start, stop=None, step=1, **hints):
        """A loop the device runs with run-time bounds: with bounds known when tracing,
        neuronemu unrolls it like the others (its loop overhead is not modelled)."""
        if not all(isinstance(v, int) and not isinstance(v, bool)
                   for v in (start, step) + (() if stop is None else (stop,))):
            raise KernelTypeError("nl.dynamic_range with run-time bounds (registers) is not "
                                  "supported by neuronemu yet; give int bounds", span)
        return loop_range("dynamic_range")(span, start, stop, step, **hints)

    members["dynamic_range"] = _builtin("nl.dynamic_range", dynamic_range)
    for name in _NOT_YET_NL:
        members[name] = _not_yet(f"nki.language.{name}")
    for op in ALU_BINARY:
        members[op] = OpRef(op, binary(op))
    for op in ALU_UNARY:
        members[op] = OpRef(op, unary(op) if op in ACTIVATIONS else None)
    for op in ACTIVATIONS:
        members.setdefault(op, OpRef(op, unary(op)))
    members["mgrid"] = index.MGRID
    members["NKIObject"] = objects.NKI_OBJECT
    members["tile_size"] = Namespace("nl.tile_size", {
        "pmax": tr.arch.tile_pmax,
        "psum_fmax": tr.arch.tile_psum_fmax,
        "psum_bank_fmax": tr.arch.tile_psum_fmax,
        "gemm_stationary_fmax": tr.arch.tile_gemm_stationary_fmax,
        "gemm_moving_fmax": tr.arch.tile_gemm_moving_fmax,
        "psum_num_banks": tr.arch.psum_banks,
    })
    return Namespace("nki.language", members)


def _tensor_arg(x: Any, what: str, span: SourceSpan) -> Any:
    if not is_tensor_like(x):
        raise KernelTypeError(f"{what} must be a tensor, got {type(x).__name__} {x!r}", span)
    return x.full() if isinstance(x, Tensor) else x


# numpy and math ----------------------------------------------------------------------------


def _numpy(tr: Tracer) -> Namespace:
    members: dict[str, Any] = {n: d for n, d in ALL_DTYPES.items()}
    members["bool"] = ALL_DTYPES["bool_"]
    members["dtype"] = _builtin("np.dtype", lambda span, x: as_dtype(x, span))

    def scalar_op(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        return _py(tr, lambda *a: _checked(tr, op, fn, a), f"np.{op}")

    for op in ALU_BINARY:
        if hasattr(np, op):
            members[op] = OpRef(op, scalar_op(op, lambda *a, _f=getattr(np, op): _f(*a).item()))
    for op in ("exp", "log", "sqrt", "tanh", "abs", "square", "sin", "arctan", "sign"):
        members[op] = OpRef(op, scalar_op(op, lambda *a, _f=getattr(np, op): _f(*a).item()))
    members["copy"] = OpRef("copy", _py(tr, lambda a: _item(np.copy(a)), "np.copy"))
    for fn in ("prod", "ceil", "floor", "log2", "sum", "max", "min"):
        members[fn] = _builtin(f"np.{fn}", _py(tr, lambda *a, _f=getattr(np, fn): _item(_f(*a)),
                                              f"np.{fn}"))
    # Reductions also name the ALU operator they reduce with (`op=np.max` in tensor_reduce).
    for fn, op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"), ("prod", "multiply")):
        members[fn] = OpRef(op, members[fn].fn)
    for fn in ("identity", "eye", "zeros", "ones", "full", "arange", "array", "tril", "triu",
               "concatenate", "stack", "reshape", "transpose"):
        members[fn] = _builtin(f"np.{fn}", _numpy_maker(tr, fn))
    members.update({"pi": math.pi, "inf": math.inf, "e": math.e, "nan": math.nan,
                    "newaxis": None})
    return Namespace("numpy", members)


def _checked(tr: Tracer, op: str, fn: Callable[..., Any], args: tuple) -> Any:
    """An elementwise NumPy function: its broadcast result is bounded before it runs."""
    confine.check_broadcast(tr.meter, args, f"np.{op}", None)
    return fn(*args)


def _numpy_maker(tr: Tracer, name: str) -> Callable[..., Any]:
    """`np.zeros`, `np.arange`, ...: the array's size is known from the arguments and checked
    against the budgets before NumPy makes it."""
    fn = getattr(np, name)

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        items = _numpy_items(name, args, kwargs)
        if items is not None:
            tr.meter.items(items, f"np.{name}()", span)
        args = tuple(a.np if isinstance(a, DType) else a for a in args)
        kwargs = {k: v.np if isinstance(v, DType) else v for k, v in kwargs.items()}
        result = _py(tr, fn, f"np.{name}")(span, *args, **kwargs)
        if isinstance(result, np.ndarray):
            tr.meter.allocate(result.nbytes, f"np.{name}()", span)
        return result

    return call


def _numpy_items(name: str, args: tuple, kwargs: dict[str, Any]) -> int | None:
    """How many elements a NumPy maker would make, from its arguments (None: unknown yet, or
    not larger than its inputs)."""
    try:
        if name in ("zeros", "ones", "full"):
            shape = args[0] if args else kwargs.get("shape")
            shape = shape if isinstance(shape, (tuple, list)) else (shape,)
            return math.prod(max(int(d), 0) for d in shape)
        if name == "identity":
            return int(args[0]) ** 2
        if name == "eye":
            n = int(args[0] if args else kwargs["N"])
            m = args[1] if len(args) > 1 else kwargs.get("M")
            return n * (n if m is None else int(m))
        if name == "arange":
            start, stop = (0, args[0]) if len(args) == 1 else args[:2]
            step = args[2] if len(args) > 2 else kwargs.get("step", 1)
            return max(0, math.ceil((stop - start) / step))
        if name in ("concatenate", "stack"):
            seq = args[0] if args else kwargs.get("arrays", ())
            return sum(int(np.size(a)) for a in seq)
        if name == "array" and args and isinstance(args[0], range):
            return len(args[0])
    except (TypeError, ValueError, OverflowError, KeyError, IndexError, ZeroDivisionError):
        return None  # NumPy will say what is wrong with the arguments
    return None


def _item(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _math(tr: Tracer) -> Namespace:
    members: dict[str, Any] = {}
    for name in ("ceil floor sqrt log log2 log10 exp isqrt gcd lcm pow fabs trunc").split():
        members[name] = _builtin(f"math.{name}", _py(tr, getattr(math, name), f"math.{name}"))

    def prod(span: SourceSpan, iterable: Any, *, start: Any = 1) -> Any:
        total = start
        for item in confine.materialize(tr.meter, iterable, span):
            total = tr.binop("*", total, item, span)
        return total

    def counting(name: str) -> Callable[..., Any]:
        def call(span: SourceSpan, n: Any, k: Any = None) -> Any:
            # log2 of comb/perm from the log-gamma function, before the big integer is made
            if isinstance(n, int) and isinstance(k, int) and 0 <= k <= n:
                bits = (math.lgamma(n + 1) - math.lgamma(n - k + 1) -
                        (math.lgamma(k + 1) if name == "comb" else 0)) / math.log(2)
                tr.meter.int_bits(int(bits) + 1, f"math.{name}({n}, {k})", span)
            return _py(tr, getattr(math, name), f"math.{name}")(
                span, n, *(() if k is None else (k,)))

        return call

    members["prod"] = _builtin("math.prod", prod)
    members["comb"] = _builtin("math.comb", counting("comb"))
    members["perm"] = _builtin("math.perm", counting("perm"))
    members.update({"pi": math.pi, "inf": math.inf, "e": math.e, "nan": math.nan})
    return Namespace("math", members)
