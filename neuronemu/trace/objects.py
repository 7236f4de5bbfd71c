"""Trace-time classes of kernel files: plain classes, `@dataclass`, `Enum`, `nl.NKIObject`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from neuronemu.errors import KernelTypeError, SourceSpan, shown

__all__ = [
    "UserClass",
    "UserObject",
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
NAMED_TUPLE = Marker("NamedTuple")  # typing.NamedTuple: a frozen dataclass, iterable


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
    members: dict[str, EnumMember] = field(default_factory=dict)

    def lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.attrs:
            return True, self.attrs[name]
        for base in self.bases:
            if isinstance(base, UserClass):
                found, value = base.lookup(name)
                if found:
                    return True, value
        return False, None

    def all_fields(self) -> list[tuple[str, Any]]:
        out: dict[str, Any] = {}
        for base in reversed(self.bases):
            if isinstance(base, UserClass):
                out.update(base.all_fields())
        out.update(self.fields)
        return list(out.items())

    def is_subclass(self, other: UserClass) -> bool:
        return self is other or any(
            isinstance(b, UserClass) and b.is_subclass(other) for b in self.bases
        )

    def __repr__(self) -> str:
        return f"<class {self.name}>"


@dataclass(eq=False)
class UserObject:
    cls: UserClass
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
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
