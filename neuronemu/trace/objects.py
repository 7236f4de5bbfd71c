"""Trace-time classes of kernel files: plain classes, `@dataclass`, `Enum`, `nl.NKIObject`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronemu.errors import KernelTypeError, SourceSpan, shown

__all__ = [
    "UserClass",
    "UserObject",
    "TupleObject",
    "BoundMethod",
    "EnumMember",
    "Marker",
    "FieldSpec",
    "DATACLASS",
    "ENUM",
    "NKI_OBJECT",
    "STATICMETHOD",
    "CLASSMETHOD",
    "PROPERTY",
    "iterate",
]


@dataclass(frozen=True)
class Marker:
    """A name with a meaning to class definitions: `dataclass`, `Enum`, `staticmethod`..."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def __repr__(self) -> str:
        return f"<{self.name}>"


DATACLASS = Marker("dataclass")
ENUM = Marker("Enum")
NKI_OBJECT = Marker("NKIObject")
STATICMETHOD = Marker("staticmethod")
CLASSMETHOD = Marker("classmethod")
PROPERTY = Marker("property")
NAMED_TUPLE = Marker("NamedTuple")  # typing.NamedTuple: a frozen dataclass whose objects are tuples


@dataclass(frozen=True)
class FieldSpec:
    """`dataclasses.field(default=..., default_factory=...)`."""

    default: Any = None
    factory: Any = None
    has_default: bool = False


@dataclass(frozen=True)
class Wrapped:
    """A method under `@staticmethod`, `@classmethod` or `@property`."""

    kind: Marker
    func: Any


@dataclass(eq=False)
class UserClass:
    name: str
    bases: tuple[Any, ...]
    attrs: dict[str, Any]
    fields: tuple[tuple[str, Any], ...] = ()  # dataclass fields: (name, default or FieldSpec)
    dataclass: bool = False
    frozen: bool = False
    enum: bool = False
    named_tuple: bool = False  # its instances are TupleObjects (pytypes.py)
    members: dict[str, EnumMember] = field(default_factory=dict)
    # Its method resolution order once worked out: bases never change.
    mro: tuple[UserClass, ...] | None = field(default=None, repr=False)

    def order(self, span: SourceSpan | None = None) -> tuple[UserClass, ...]:
        """The method resolution order (C3, as CPython's) of the kernel's own classes; kept,
        so that each class's is merged once (a lattice of diamonds would otherwise cost
        exponential time)."""
        if self.mro is None:
            self.mro = tuple(_c3(self, span))
        return self.mro

    def lookup(self, name: str) -> tuple[bool, Any]:
        for cls in self.order():
            if name in cls.attrs:
                return True, cls.attrs[name]
        return False, None

    def all_fields(self) -> list[tuple[str, Any]]:
        out: dict[str, Any] = {}
        for cls in reversed(self.order()):  # as dataclasses collects them: reverse MRO
            out.update(cls.fields)
        return list(out.items())

    def is_subclass(self, other: UserClass) -> bool:
        return other in self.order()

    def __repr__(self) -> str:
        return f"<class {self.name}>"


def _c3(cls: UserClass, span: SourceSpan | None) -> list[UserClass]:
    bases = [b for b in cls.bases if isinstance(b, UserClass)]
    seqs = [[cls], *(list(b.order(span)) for b in bases), list(bases)]
    out: list[UserClass] = []
    while True:
        seqs = [s for s in seqs if s]
        if not seqs:
            return out
        head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
        if head is None:
            raise KernelTypeError(
                f"cannot create a consistent method resolution order for {cls.name}", span
            ).as_python("TypeError")
        out.append(head)
        for s in seqs:
            if s[0] is head:
                del s[0]


@dataclass(eq=False)
class UserObject:
    cls: UserClass
    attrs: dict[str, Any] = field(default_factory=dict)
    # An exception class's object: its `args` (the constructor's, or what its
    # `super().__init__(...)` was given, as BaseException keeps them).
    exc_args: tuple[Any, ...] | None = None

    def __str__(self) -> str:
        if self.exc_args is None:
            return repr(self)
        args = self.exc_args
        return str(args[0]) if len(args) == 1 else str(args) if args else ""

    def __repr__(self) -> str:
        if self.exc_args is not None:
            return f"{self.cls.name}({', '.join(repr(a) for a in self.exc_args)})"
        if self.cls.dataclass:
            inner = ", ".join(f"{k}={shown(self.attrs.get(k))}" for k, _ in self.cls.all_fields())
            return f"{self.cls.name}({inner})"
        return f"<{self.cls.name} object>"

    def __eq__(self, other: object) -> bool:
        if self.cls.dataclass and isinstance(other, UserObject) and other.cls is self.cls:
            return self.attrs == other.attrs
        return self is other

    def __hash__(self) -> int:
        return id(self)


class TupleObject(tuple):
    """An instance of a named-tuple class: a tuple (indexing, unpacking, equality and hashing
    as the plain tuple of its fields) that knows its kernel class."""

    cls: UserClass

    def __new__(cls, owner: UserClass, values: tuple) -> TupleObject:
        made = super().__new__(cls, values)
        made.cls = owner
        return made

    def __repr__(self) -> str:
        names = [n for n, _ in self.cls.all_fields()]
        return f"{self.cls.name}({', '.join(f'{n}={v!r}' for n, v in zip(names, self))})"


@dataclass(frozen=True)
class BoundMethod:
    func: Any
    obj: Any


@dataclass(frozen=True, eq=False)
class EnumMember:
    cls: UserClass
    name: str
    value: Any

    def __repr__(self) -> str:
        return f"{self.cls.name}.{self.name}"


def iterate(value: Any, span: SourceSpan) -> Iterator[Any]:
    """`iter(value)` as CPython gives it to a `for` or a comprehension: an Enum class yields
    its members (an alias, a second name of a value, once); what is not iterable is the
    kernel's located TypeError."""
    if isinstance(value, UserClass):
        if value.enum:
            members: list[EnumMember] = []
            for m in value.members.values():
                if not any(m.value is k.value or m.value == k.value for k in members):
                    members.append(m)
            return iter(members)
        raise KernelTypeError(f"type object {value.name!r} is not iterable", span).as_python(
            "TypeError"
        )
    try:
        return iter(value)
    except TypeError:
        kind = value.cls.name if isinstance(value, (UserObject, EnumMember)) else None
        name = kind or type(value).__name__
        raise KernelTypeError(f"{name!r} object is not iterable", span).as_python(
            "TypeError"
        ) from None
