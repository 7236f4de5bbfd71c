"""Python's type machinery at trace time: `super()`, `type(x)` and named tuples
(`collections.namedtuple`, `typing.NamedTuple`). What `type(x)` gives is a trace value (a
kernel class, a builtin's own name, or a stand-in with only a `__name__`), never a host type."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Callable

from neuronemu.errors import KernelTypeError, SourceSpan, shown
from neuronemu.replay import journal
from neuronemu.trace import confine, nesting
from neuronemu.trace.exceptions import ExceptionClass, KernelException
from neuronemu.trace.generators import KernelGenerator
from neuronemu.trace.interpreter import _NO_DEFAULT
from neuronemu.trace.objects import (
    CLASSMETHOD,
    PROPERTY,
    BoundMethod,
    EnumMember,
    TupleObject,
    UserClass,
    UserObject,
    Wrapped,
)
from neuronemu.trace.state import Closure, Env, TracerState
from neuronemu.trace.values import Builtin, Namespace

__all__ = ["Super", "TypeName", "PyTypes", "SELF_KEY"]

# The env entry a method call keeps for a zero-argument `super()`: (defining class, first
# argument). Not an identifier, so no kernel name can read or bind it.
SELF_KEY = " super"
# Python types a kernel names through a builtin of the same name (`type(3) is int`).
_BUILTIN_TYPES = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    bytes: "bytes",
    tuple: "tuple",
    list: "list",
    dict: "dict",
    set: "set",
    range: "range",
    slice: "slice",
}


@dataclass(frozen=True, eq=False)
class Super:
    """`super()`: attribute lookup that starts after `cls` in `obj`'s class order."""

    cls: UserClass
    obj: Any

    def __repr__(self) -> str:
        return f"<super: <class {self.cls.name!r}>>"


# Class methods of builtin types and library classes a kernel may call on the type itself.
_CLASS_METHODS: dict[tuple[str, str], Callable[..., Any]] = {
    ("dict", "fromkeys"): dict.fromkeys,
    ("int", "from_bytes"): int.from_bytes,
    ("itertools.chain", "from_iterable"): itertools.chain.from_iterable,
}


@dataclass(frozen=True)
class TypeName:
    """`type(x)` of a value whose class a kernel cannot name: only its `__name__`."""

    name: str

    def __repr__(self) -> str:
        return f"<class {self.name!r}>"


_TYPE_NAMES: dict[str, TypeName] = {}  # one stand-in per name: `type(a) is type(b)` holds


def _type_name(name: str) -> TypeName:
    return _TYPE_NAMES.setdefault(name, TypeName(name))


def named_tuple_class(
    meter: Any, span: SourceSpan, typename: Any, field_names: Any, defaults: Any = None
) -> UserClass:
    """`collections.namedtuple(typename, field_names, defaults=...)`."""
    if isinstance(field_names, str):
        field_names = field_names.replace(",", " ").split()
    names = list(confine.materialize(meter, field_names, span))
    for n in [typename, *names]:
        if not isinstance(n, str) or not n.isidentifier() or n.startswith("_"):
            raise KernelTypeError(
                f"namedtuple(): names must be public identifiers, got {shown(n)}", span
            ).as_python("ValueError")
    if len(set(names)) != len(names):
        raise KernelTypeError("namedtuple(): a field name is repeated", span).as_python(
            "ValueError"
        )
    given = list(confine.materialize(meter, defaults, span)) if defaults is not None else []
    if len(given) > len(names):
        raise KernelTypeError("namedtuple(): more defaults than fields", span).as_python(
            "TypeError"
        )
    padded = [_NO_DEFAULT] * (len(names) - len(given)) + given
    return UserClass(
        typename,
        (),
        {"_fields": tuple(names)},
        tuple(zip(names, padded)),
        dataclass=True,
        frozen=True,
        named_tuple=True,
    )


class PyTypes(TracerState):
    """`super`, `type` and named-tuple attributes of the tracer (see tracer.py)."""

    def zero_arg_super(self, env: Env, span: SourceSpan) -> Super:
        found, frame = env.lookup(SELF_KEY)
        if not found:
            raise KernelTypeError("super(): no arguments (call it in a method)", span).as_python(
                "RuntimeError"
            )
        return self.make_super(span, *frame)

    def make_super(self, span: SourceSpan, cls: Any = None, obj: Any = None) -> Super:
        owner = obj if isinstance(obj, UserClass) else getattr(obj, "cls", None)
        if not isinstance(cls, UserClass) or not isinstance(owner, UserClass):
            raise KernelTypeError(
                f"super() takes a kernel class and its instance, got {shown(cls)}", span
            ).as_python("TypeError")
        if cls not in owner.order(span):
            raise KernelTypeError(
                "super(type, obj): obj must be an instance or subtype of type", span
            ).as_python("TypeError")
        return Super(cls, obj)

    def type_of(self, span: SourceSpan, value: Any, *rest: Any) -> Any:
        """`type(x)`: the kernel class of its instances; `int`, `list`... as the builtins of
        those names; otherwise a stand-in that has only a `__name__`."""
        if rest:
            raise KernelTypeError(
                "type() with three arguments (making a class) is not supported", span
            )
        if isinstance(value, journal.Marked):  # (an int the loop being recorded marked)
            value = int(value)
        elif isinstance(value, journal.Text):  # (... and a string made of such ints)
            value = str(value)
        if isinstance(value, (UserObject, TupleObject, EnumMember, KernelException)):
            return value.cls
        builtins = self.builtins.vars
        if isinstance(value, (UserClass, ExceptionClass, TypeName)) or (
            isinstance(value, Builtin) and value.name in (*_BUILTIN_TYPES.values(), "type")
        ):
            return builtins["type"]
        builtin = _BUILTIN_TYPES.get(type(value))
        if builtin is not None:
            return builtins[builtin]
        if value is None:
            return _type_name("NoneType")
        if isinstance(value, Closure):
            return _type_name("function")
        if isinstance(value, Builtin):
            return _type_name("builtin_function_or_method")
        if isinstance(value, BoundMethod):
            return _type_name("method")
        if isinstance(value, KernelGenerator):
            return _type_name("generator")
        if isinstance(value, Namespace):
            return _type_name("module")
        return _type_name(type(value).__name__)

    def python_attr(self, value: Any, attr: str, span: SourceSpan) -> tuple[bool, Any]:
        """Attributes of the values this module makes, `__name__` of what has one, and a
        generator's `send`; (False, None) when `value.attr` is someone else's."""
        if attr == "__name__":
            name = _name_of(value)
            if name is not None:
                return True, name
        if isinstance(value, Super):
            return True, self._super_attr(value, attr, span)
        if isinstance(value, Closure) and attr in value.attrs:
            return True, value.attrs[attr]
        if isinstance(value, Builtin) and (value.name, attr) in _CLASS_METHODS:
            fn = _CLASS_METHODS[value.name, attr]  # `dict.fromkeys(...)`: a type's own maker
            name = f"{value.name}.{attr}"
            meter = self.meter
            return True, Builtin(
                name, lambda span, *a, **k: confine.call_python(meter, fn, name, a, k, span)
            )
        if isinstance(value, Wrapped) and value.kind is PROPERTY and attr == "setter":
            prop = value  # `@name.setter` in a class body
            return True, Builtin(
                "property.setter", lambda span, fn: Wrapped(PROPERTY, prop.func, setter=fn)
            )
        if isinstance(value, TupleObject):
            return True, self._tuple_attr(value, attr, span)
        if isinstance(value, TypeName):
            raise KernelTypeError(f"type object {value.name!r} has no attribute {attr!r}", span)
        if isinstance(value, KernelGenerator) and attr in ("send", "close", "throw"):
            meter = self.meter
            method = getattr(value, attr)
            if attr == "close":
                method = functools.partial(value.close, called=True)
            return True, Builtin(
                f"generator.{attr}",
                lambda span, *args: confine.call_python(
                    meter, method, f"generator.{attr}", args, {}, span
                ),
            )
        return False, None

    def _bind(self, member: Any, obj: Any, cls: UserClass, span: SourceSpan) -> Any:
        if isinstance(member, Closure):
            return BoundMethod(member, obj)
        if isinstance(member, Wrapped):
            if member.kind is PROPERTY:
                return self.call_closure(member.func, [obj], {}, span)
            if member.kind is CLASSMETHOD:
                return BoundMethod(member.func, cls)
            return member.func
        return member

    def _super_attr(self, sup: Super, attr: str, span: SourceSpan) -> Any:
        owner = sup.obj if isinstance(sup.obj, UserClass) else sup.obj.cls
        order = owner.order(span)
        for cls in order[order.index(sup.cls) + 1 :]:
            if attr in cls.attrs:
                return self._bind(cls.attrs[attr], sup.obj, owner, span)
        if attr == "__init__" and isinstance(sup.obj, UserObject) and sup.obj.exc_args is not None:
            obj = sup.obj  # a builtin exception's __init__: it keeps its arguments as `args`

            def keep(span: SourceSpan, *args: Any) -> None:
                obj.exc_args = args

            return Builtin("BaseException.__init__", keep)
        if attr == "__init__":  # object.__init__: nothing to do
            return Builtin("object.__init__", lambda span, *a, **k: None)
        raise KernelTypeError(f"'super' object has no attribute {attr!r}", span).as_python(
            "AttributeError"
        )

    def _tuple_attr(self, obj: TupleObject, attr: str, span: SourceSpan) -> Any:
        names = [n for n, _ in obj.cls.all_fields()]
        if attr in names:
            return obj[names.index(attr)]
        if attr == "_replace":
            return Builtin("_replace", lambda span, **kw: self._replace(obj, names, kw, span))
        if attr == "_asdict":
            return Builtin("_asdict", lambda span: dict(zip(names, obj)))
        found, member = obj.cls.lookup(attr)
        if found:
            return self._bind(member, obj, obj.cls, span)
        return confine.attribute(  # count, index
            self.meter,
            tuple(obj),
            attr,
            span,
            lambda v, numpy: self.to_python(v, span, numpy),
        )

    def _replace(
        self, obj: TupleObject, names: list[str], changes: dict[str, Any], span: SourceSpan
    ) -> TupleObject:
        unknown = [k for k in changes if k not in names]
        if unknown:
            raise KernelTypeError(f"got unexpected field names: {unknown!r}", span).as_python(
                "ValueError"
            )
        made = TupleObject(obj.cls, tuple(changes.get(n, v) for n, v in zip(names, obj)))
        return nesting.check_made(self.meter, made, span)


def _name_of(value: Any) -> str | None:
    if isinstance(value, (UserClass, ExceptionClass, TypeName)):
        return value.name
    if isinstance(value, Builtin):
        return value.name.rsplit(".", 1)[-1]
    if isinstance(value, Closure):
        return value.fn.name
    return None
