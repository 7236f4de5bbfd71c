"""The kernel's own classes at trace time: plain classes, `@dataclass`, `Enum` and
`nl.NKIObject` subclasses, their instances and attributes."""

from __future__ import annotations

import sys
from typing import Any

from neuronemu.errors import KernelSyntaxError, KernelTypeError, NeuronEmuError, SourceSpan, shown
from neuronemu.frontend import ast as A
from neuronemu.replay import journal
from neuronemu.trace import nesting
from neuronemu.trace.exceptions import (
    BUILTIN_EXCEPTIONS,
    FROZEN_INSTANCE_ERROR,
    ExceptionClass,
    KernelException,
    Raised,
    builtin_base,
    caught,
    exception_attr,
)
from neuronemu.trace.interpreter import _NO_DEFAULT, _describe
from neuronemu.trace.objects import (
    CLASSMETHOD,
    ENUM,
    INT_ENUM,
    NAMED_TUPLE,
    NKI_OBJECT,
    PROPERTY,
    STATICMETHOD,
    BoundMethod,
    EnumMember,
    FieldSpec,
    IntEnumMember,
    Marker,
    TupleObject,
    TypingName,
    UserClass,
    UserObject,
    Wrapped,
)
from neuronemu.trace.pytypes import _type_name
from neuronemu.trace.state import Closure, Env, TracerState
from neuronemu.trace.values import Builtin, Partial

OBJECT_NAME = _type_name("object")  # the end of every class's __mro__
_STOP = BUILTIN_EXCEPTIONS["StopIteration"]
_INDEX = BUILTIN_EXCEPTIONS["IndexError"]


def value_args(value: Any) -> tuple:
    """An exception value's args (a builtin one's, or a kernel class object's)."""
    return (value.exc_args or ()) if isinstance(value, UserObject) else value.args


# Decorators of methods that are called with the function, as CPython does.
_CALLABLE_DECORATORS = (Builtin, Closure, BoundMethod, Partial, UserClass, UserObject)


def _derives_nki_object(bases: Any) -> bool:
    return any(
        b is NKI_OBJECT
        or (isinstance(b, UserClass) and any(NKI_OBJECT in c.bases for c in b.order()))
        for b in bases
    )


class Classes(TracerState):
    """Class definitions and instances of the tracer (see tracer.py)."""

    def _s_ClassDef(self, s: A.ClassDef, env: Env) -> None:
        if s.keywords:
            raise KernelSyntaxError(
                "class keywords (metaclass=...) are not supported in NKI kernels",
                s.keywords[0].span,
            )
        bases = tuple(self.eval(b, env) for b in s.bases)
        generic = any(isinstance(b, TypingName) for b in bases)  # Generic[T], Protocol
        bases = tuple(b for b in bases if not isinstance(b, TypingName))
        for base, node in zip(bases, s.bases):
            if (
                not isinstance(base, UserClass)
                and base not in (ENUM, INT_ENUM, NKI_OBJECT, NAMED_TUPLE)
                and not isinstance(base, ExceptionClass)
                and base is not None
            ):
                raise KernelTypeError(f"cannot subclass {shown(base)} in an NKI kernel", node.span)
        # A typing.NamedTuple class is a frozen dataclass whose instances are tuples.
        named_tuple = any(
            b is NAMED_TUPLE or (isinstance(b, UserClass) and b.named_tuple) for b in bases
        )
        is_dataclass = frozen = any(b is NAMED_TUPLE for b in bases)
        ordered = False
        bases = tuple(b for b in bases if b is not NAMED_TUPLE)
        for node in s.decorators:
            deco = self.eval(node, env)
            if not (isinstance(deco, Marker) and deco.name == "dataclass"):
                raise KernelTypeError(
                    f"class decorator {shown(deco)} is not supported (only @dataclass)", node.span
                )
            is_dataclass, frozen = True, dict(deco.options).get("frozen", False)
            ordered = dict(deco.options).get("order", False)
        body_env = Env(env)
        fields: list[tuple[str, Any]] = []
        # An nl.NKIObject dataclass takes its plain class attributes as fields too (inferred
        # from nki-library, whose NKIObject dataclasses are built from un-annotated defaults).
        nki_fields = is_dataclass and _derives_nki_object(bases)
        plain_fields: list[tuple[str, Any]] = []  # after the annotated ones
        methods: list[Closure] = []  # defined in this body: their `super()` starts here
        outer = getattr(self, "class_path", ())  # the classes whose bodies hold this one
        self.class_path = (*outer, s.name)
        try:
            for stmt in s.body:
                if isinstance(stmt, A.FunctionDef):
                    func: Any = self.closure(stmt, env)
                    methods.append(func)
                    for node in reversed(stmt.decorators):  # the nearest applies first
                        deco = self.eval(node, body_env)  # (in the class namespace: @x.setter)
                        if deco in (STATICMETHOD, CLASSMETHOD, PROPERTY):
                            func = Wrapped(deco, func)
                        elif isinstance(deco, _CALLABLE_DECORATORS):  # @x.setter, @cache, @own
                            func = self.call(deco, [func], {}, node.span)
                        else:
                            raise KernelTypeError(
                                f"method decorator {shown(deco)} is not supported", node.span
                            )
                    body_env.vars[stmt.name] = func
                elif isinstance(stmt, (A.Assign, A.AnnAssign, A.Pass, A.ExprStmt, A.ClassDef)):
                    self.exec_stmt(stmt, body_env)
                    if isinstance(stmt, A.AnnAssign) and isinstance(stmt.target, A.Name):
                        name = stmt.target.id
                        fields.append(
                            (
                                name,
                                body_env.vars.pop(name, _NO_DEFAULT)
                                if is_dataclass
                                else body_env.vars.get(name, _NO_DEFAULT),
                            )
                        )
                    elif (
                        nki_fields
                        and isinstance(stmt, A.Assign)
                        and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], A.Name)
                        and not stmt.targets[0].id.startswith("_")
                    ):
                        name = stmt.targets[0].id  # stays a class attribute too
                        plain_fields.append((name, body_env.vars.get(name, _NO_DEFAULT)))
                else:
                    raise KernelSyntaxError(
                        f"{_describe(stmt)} is not supported in a class body", stmt.span
                    )
        finally:
            self.class_path = outer
        annotated = {name for name, _ in fields}
        fields += [(n, d) for n, d in plain_fields if n not in annotated]
        is_enum = any(b in (ENUM, INT_ENUM) or (isinstance(b, UserClass) and b.enum) for b in bases)
        int_enum = any(b is INT_ENUM or (isinstance(b, UserClass) and b.int_enum) for b in bases)
        cls = UserClass(
            s.name,
            bases,
            body_env.vars,
            tuple(fields),
            is_dataclass,
            frozen,
            is_enum,
            named_tuple=named_tuple,
        )
        cls.order_fields, cls.generic, cls.int_enum = ordered, generic, int_enum
        cls.qualname = ".".join((*outer, s.name))
        cls.runner = self._special_runner(s.span)
        cls.order(s.span)  # an inconsistent order is an error where the class is made
        for method in methods:
            method.owner = cls
        if named_tuple:
            body_env.vars.setdefault("_fields", tuple(n for n, _ in cls.all_fields()))
        if is_enum:
            last = 0
            for name, value in list(body_env.vars.items()):
                if not name.startswith("_") and not isinstance(value, (Closure, Wrapped)):
                    if isinstance(value, Marker) and value.name == "auto":
                        value = body_env.vars[name] = last + 1  # enum.auto(): the next int
                    last = value if isinstance(value, int) else last
                    member = IntEnumMember if int_enum else EnumMember
                    cls.members[name] = member(cls, name, value)
        env.bind(s.name, cls)

    def _special_runner(self, span: SourceSpan) -> Any:
        """How Python's operators and builtins run a special method of the class."""

        def run(method: Any, args: list[Any]) -> Any:
            if isinstance(method, Wrapped):
                method = method.func
            try:
                result = self.call(method, list(args), {}, span)
            except NeuronEmuError as err:  # the protocols' own ends: Python's exceptions
                value = caught(err)
                base = None if value is None else builtin_base(value.cls)
                if base is _STOP:  # `raise StopIteration` in __next__
                    raise StopIteration(*value_args(value)) from None
                if (
                    base is _INDEX
                    and getattr(method, "fn", None)
                    and method.fn.name == "__getitem__"
                ):
                    raise IndexError(*value_args(value)) from None  # (ends iteration by index)
                raise
            fn = getattr(method, "fn", None)
            _check_protocol_result(getattr(fn, "name", ""), result, span)
            return result

        return run

    def set_attribute(self, obj: Any, attr: str, value: Any, span: SourceSpan) -> None:
        """`obj.attr = value` on a kernel object (a property's setter, if it has one) or a
        kernel class."""
        if isinstance(obj, (UserClass, Closure)):  # a class's, or a function's own
            nesting.check_item(self.meter, value, span, f"attribute {attr!r}")
            obj.attrs[attr] = value
            return
        if not isinstance(obj, UserObject):
            raise KernelTypeError(
                f"cannot set attribute {attr!r} of {type(obj).__name__}", span
            ).as_python("AttributeError")
        found, member = obj.cls.lookup(attr)
        if found and isinstance(member, Wrapped) and member.kind is PROPERTY:
            if member.setter is None:
                raise KernelTypeError(
                    f"property {attr!r} of {obj.cls.name!r} object has no setter", span
                ).as_python("AttributeError")
            self.call(member.setter, [obj, value], {}, span)
            return
        if obj.cls.frozen:  # dataclasses.FrozenInstanceError, as CPython raises it
            error = KernelException(FROZEN_INSTANCE_ERROR, (f"cannot assign to field {attr!r}",))
            raise Raised(error, span)
        nesting.check_item(self.meter, value, span, f"field {attr!r}")
        nesting.mutated(self.meter, obj)
        obj.attrs[attr] = value

    def instantiate(
        self, cls: UserClass, args: list[Any], kwargs: dict[str, Any], span: SourceSpan
    ) -> Any:
        if cls.enum:
            for member in cls.members.values():
                if args and member.value == args[0]:
                    return member
            raise KernelTypeError(
                f"{shown(args[0] if args else None)} is not a valid {cls.name}", span
            )
        obj = cls.new_object()
        if self.meter.journals:  # (its own attributes are the iteration's to set)
            journal.made_object(self.meter, obj)
        if builtin_base(cls) is not None:
            obj.exc_args = tuple(args)
        found, init = cls.lookup("__init__")
        if found and isinstance(init, Closure):
            self.call_closure(init, [obj, *args], kwargs, span)
            return obj
        fields = (
            cls.all_fields()
            if cls.dataclass or any(isinstance(b, UserClass) and b.dataclass for b in cls.bases)
            else []
        )
        params = [(n, d) for n, d in fields if not (isinstance(d, FieldSpec) and not d.init)]
        if not fields and (args or kwargs):
            raise KernelTypeError(f"{cls.name}() takes no arguments", span)
        if len(args) > len(params):
            raise KernelTypeError(
                f"{cls.name}() takes {len(params)} positional arguments but {len(args)} were given",
                span,
            ).as_python("TypeError")
        values = dict(zip((name for name, _ in params), args))
        for k, v in kwargs.items():
            if k in values or k not in dict(params):
                raise KernelTypeError(
                    f"{cls.name}() got an unexpected or repeated argument {k!r}", span
                )
            values[k] = v
        for name, default in fields:
            if name in values:
                continue
            if isinstance(default, FieldSpec) and not default.init:
                if default.factory is not None:
                    values[name] = self.call(default.factory, [], {}, span)
                elif default.has_default:
                    values[name] = default.default
                continue  # (set by __post_init__, as a rule)
            if isinstance(default, FieldSpec):
                if default.factory is not None:
                    values[name] = self.call(default.factory, [], {}, span)
                    continue
                if default.has_default:
                    values[name] = default.default
                    continue
            elif default is not _NO_DEFAULT:
                values[name] = default
                continue
            raise KernelTypeError(f"{cls.name}() missing argument {name!r}", span)
        if cls.named_tuple:
            made = TupleObject(cls, tuple(values[name] for name, _ in fields))
            return nesting.check_made(self.meter, made, span, f"a {cls.name}")
        obj.attrs.update(values)
        nesting.check_made(self.meter, obj, span, f"a {cls.name}")
        found, post = cls.lookup("__post_init__")
        if found and isinstance(post, Closure):
            self.call_closure(post, [obj], {}, span)
        return obj

    def object_attr(self, value: Any, attr: str, span: SourceSpan) -> tuple[bool, Any]:
        """Attributes of instances, classes and enum members of the kernel's own classes."""
        if isinstance(value, EnumMember):
            if attr in ("name", "value"):
                return True, getattr(value, attr)
            value = UserObject(value.cls, {"name": value.name, "value": value.value})
        if isinstance(value, UserObject):
            if attr in value.attrs:
                return True, value.attrs[attr]
            if attr == "args" and value.exc_args is not None:
                return True, value.exc_args
            if value.exc_args is not None and exception_attr(value, attr)[0]:
                return exception_attr(value, attr)

            found, member = value.cls.lookup(attr)
            if not found:
                if attr == "__class__":
                    return True, value.cls
                found, fallback = value.cls.lookup("__getattr__")
                if found and not attr.startswith("__"):
                    return True, self.call(fallback, [value, attr], {}, span)
                return False, None
            if isinstance(member, Closure):
                return True, BoundMethod(member, value)
            if isinstance(member, Wrapped):
                if member.kind is PROPERTY:
                    return True, self.call_closure(member.func, [value], {}, span)
                if member.kind is CLASSMETHOD:
                    return True, BoundMethod(member.func, value.cls)
                return True, member.func
            return True, member
        if isinstance(value, UserClass):
            if attr in ("__name__", "__qualname__"):
                return True, value.qualname if attr == "__qualname__" else value.name
            if attr == "_make" and value.named_tuple:
                cls = value
                return True, Builtin(
                    "_make", lambda span, items: self.instantiate(cls, list(items), {}, span)
                )
            if attr == "__mro__":
                return True, (*value.order(span), OBJECT_NAME)
            if attr == "mro":
                cls = value
                return True, Builtin("mro", lambda span: [*cls.order(span), OBJECT_NAME])
            if attr in value.members:
                return True, value.members[attr]
            found, member = value.lookup(attr)
            if isinstance(member, Wrapped):
                member = (
                    BoundMethod(member.func, value) if member.kind is CLASSMETHOD else member.func
                )
            return found, member
        return False, None


# What Python's protocols require of a special method's result, checked where the kernel's
# method returns (CPython's own checks would raise from inside C code, unlocated): the
# kernel's TypeError, ValueError or OverflowError, as CPython's message says it.
_INT_RESULT = {"__index__": "__index__", "__int__": "__int__", "__len__": "__len__"}


def _check_protocol_result(name: str, result: Any, span: SourceSpan) -> None:
    kind = type(result).__name__
    problem: tuple[str, str] | None = None
    if name == "__iter__" and not hasattr(type(result), "__next__"):
        problem = ("TypeError", f"iter() returned non-iterator of type {kind!r}")
    elif name == "__bool__" and not isinstance(result, bool):
        problem = ("TypeError", f"__bool__ should return bool, returned {kind}")
    elif name == "__float__" and not isinstance(result, float):
        problem = ("TypeError", f"__float__ returned non-float (type {kind})")
    elif name in _INT_RESULT and not isinstance(result, int):
        problem = ("TypeError", f"{name} returned non-int (type {kind})")
    elif name == "__len__" and result < 0:
        problem = ("ValueError", "__len__() should return >= 0")
    elif name == "__len__" and result > sys.maxsize:
        problem = ("OverflowError", "cannot fit 'int' into an index-sized integer")
    if problem is not None:
        raise KernelTypeError(problem[1], span).as_python(problem[0])
