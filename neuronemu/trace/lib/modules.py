"""The modules a kernel can import: `nki` (and the older `neuronxcc.nki`), `numpy`, `math`,
`dataclasses`, `enum`, `typing`, and the parts of `os` and `sys` kernels read."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any

from neuronemu.errors import KernelTypeError, SourceSpan
from neuronemu.trace import objects
from neuronemu.trace.exceptions import FROZEN_INSTANCE_ERROR
from neuronemu.trace.lib import compiler, host, isa, language, nl_control, stdlib
from neuronemu.trace.tensor_api import as_dtype
from neuronemu.trace.values import Builtin, Namespace, Poison

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context

__all__ = ["KERNEL_DECORATORS", "import_module", "namespaces"]


# Decorators that make a function an NKI kernel (nki.jit and its run-mode variants); the
# nki namespace offers each of them as a pass-through decorator.
KERNEL_DECORATORS = ("jit", "baremetal", "benchmark", "profile", "trace", "simulate_kernel")

# Environment variables a kernel can read at trace time (the Neuron tools' settings).
_VISIBLE_ENVIRON = ("NEURON_", "NKI_", "XLA_")


def import_module(ctx: Context, dotted: str, span: SourceSpan, quiet: bool = False) -> Any:
    """The module `dotted` names (`neuronxcc.nki...` is `nki...`); else None (`quiet`) or a
    deferred "not available" error."""
    if dotted.startswith("neuronxcc.nki"):
        dotted = dotted[len("neuronxcc.") :]
    if dotted in ctx.modules:
        return ctx.modules[dotted]
    if quiet:
        return None
    return Poison(
        KernelTypeError(
            f"module {dotted!r} is not available inside NKI kernels (only nki, numpy and math are)",
            span,
        )
    )


def namespaces(ctx: Context) -> dict[str, Any]:
    """Every module a kernel can import, by dotted name."""
    nl = language.namespace(ctx)
    nisa = isa.namespace(ctx)
    ncc = compiler.namespace(ctx)
    # The kernel's copy of the Neuron settings in the environment: what it sets, getenv
    # sees; nothing else of the host's environment (which may hold credentials).
    environ = {k: v for k, v in os.environ.items() if k.startswith(_VISIBLE_ENVIRON)}
    lnc = Namespace(
        "nki.lnc",
        {
            name: Builtin(f"nki.lnc.{name}", functools.partial(fn, ctx))
            for name, fn in nl_control.lnc_members().items()
        },
    )
    nki = Namespace("nki", {"language": nl, "isa": nisa, "compiler": ncc, "lnc": lnc})
    for deco in KERNEL_DECORATORS:
        nki.members[deco] = compiler.decorator(deco)
    constants = Namespace(
        "nki.language.constants",
        {"sizeinbytes": Builtin("sizeinbytes", lambda span, dtype: as_dtype(dtype, span).itemsize)},
    )
    # nki.isa.constants: the ISA's enums (dge_mode, oob_mode, ...) as their own module, as
    # nki-library imports them (`from nki.isa.constants import dge_mode`).
    isa_constants = Namespace(
        "nki.isa.constants",
        {k: v for k, v in nisa.members.items() if isinstance(v, Namespace) and k in isa.ENUMS},
    )
    nisa.members.setdefault("constants", isa_constants)
    return {
        "nki.language.constants": constants,
        "nki.isa.constants": isa_constants,
        **stdlib.namespaces(ctx),
        "nki": nki,
        "nki.language": nl,
        "nki.isa": nisa,
        "nki.lnc": lnc,
        "nki.compiler": ncc,
        "nki.typing": Namespace("nki.typing", {"tensor": None, "mutable_tensor": None}),
        "neuronxcc": Namespace("neuronxcc", {"nki": nki}),
        "numpy": host.numpy_namespace(ctx),
        "math": host.math_namespace(ctx),
        "dataclasses": Namespace(
            "dataclasses",
            {
                "dataclass": objects.DATACLASS,
                "field": Builtin("dataclasses.field", _field),
                "FrozenInstanceError": FROZEN_INSTANCE_ERROR,
                **_dataclass_functions(ctx),
            },
        ),
        "enum": Namespace(
            "enum",
            {
                "Enum": objects.ENUM,
                "IntEnum": objects.INT_ENUM,
                "auto": Builtin("enum.auto", lambda span: objects.Marker("auto")),
            },
        ),
        # Kernels read settings from the environment at trace time, as under the NKI
        # compiler (nki-library's logging does); print(file=sys.stderr) prints.
        "os": Namespace(
            "os",
            {
                "environ": environ,
                "getenv": Builtin(
                    "os.getenv", lambda span, key, default=None: environ.get(key, default)
                ),
                "sep": os.sep,
            },
        ),
        "sys": Namespace(
            "sys", {"stderr": "<stderr>", "stdout": "<stdout>", "maxsize": sys.maxsize}
        ),
    }


def _field(
    span: SourceSpan,
    *,
    default: Any = objects.FieldSpec,
    default_factory: Any = None,
    init: Any = True,
    **_: Any,
) -> objects.FieldSpec:
    has_default = default is not objects.FieldSpec
    return objects.FieldSpec(
        default if has_default else None, default_factory, has_default, bool(init)
    )


def _dataclass_functions(ctx: Context) -> dict[str, Builtin]:
    """`dataclasses.fields`, `replace`, `asdict`, `astuple` and `is_dataclass` of kernel
    dataclass objects (and classes, for `fields`)."""

    def instance(value: Any, what: str, span: SourceSpan) -> objects.UserObject:
        if isinstance(value, objects.UserObject) and value.cls.dataclass:
            return value
        raise KernelTypeError(f"{what}() should be called on dataclass instances", span).as_python(
            "TypeError"
        )

    def fields(span: SourceSpan, value: Any) -> tuple:
        cls = value if isinstance(value, objects.UserClass) else getattr(value, "cls", None)
        if not isinstance(cls, objects.UserClass) or not cls.dataclass:
            raise KernelTypeError(
                "must be called with a dataclass type or instance", span
            ).as_python("TypeError")
        return tuple(Namespace(f"Field({name!r})", {"name": name}) for name, _ in cls.all_fields())

    def replace(span: SourceSpan, value: Any, **changes: Any) -> Any:
        obj = instance(value, "replace", span)
        values = {name: obj.attrs.get(name) for name, _ in obj.cls.all_fields()}
        return ctx.call(obj.cls, [], {**values, **changes}, span)

    def asdict(span: SourceSpan, value: Any) -> dict:
        obj = instance(value, "asdict", span)
        return {name: _plain(obj.attrs.get(name), dict) for name, _ in obj.cls.all_fields()}

    def astuple(span: SourceSpan, value: Any) -> tuple:
        obj = instance(value, "astuple", span)
        return tuple(_plain(obj.attrs.get(name), tuple) for name, _ in obj.cls.all_fields())

    def is_dataclass(span: SourceSpan, value: Any) -> bool:
        cls = value if isinstance(value, objects.UserClass) else getattr(value, "cls", None)
        return isinstance(cls, objects.UserClass) and cls.dataclass

    return {
        name: Builtin(f"dataclasses.{name}", fn)
        for name, fn in (
            ("fields", fields),
            ("replace", replace),
            ("asdict", asdict),
            ("astuple", astuple),
            ("is_dataclass", is_dataclass),
        )
    }


def _plain(value: Any, kind: type) -> Any:
    """A field's value as asdict/astuple give it: nested dataclass objects as `kind` too."""
    if isinstance(value, objects.UserObject) and value.cls.dataclass:
        items = [(n, _plain(value.attrs.get(n), kind)) for n, _ in value.cls.all_fields()]
        return dict(items) if kind is dict else tuple(v for _, v in items)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v, kind) for v in value)
    return value
