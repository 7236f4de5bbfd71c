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
    "LibraryContext",
    "Marker",
    "TypingName",
    "FieldSpec",
    "DATACLASS",
    "ENUM",
    "INT_ENUM",
    "IntEnumMember",
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
INT_ENUM = Marker("IntEnum")
NKI_OBJECT = Marker("NKIObject")
STATICMETHOD = Marker("staticmethod")
CLASSMETHOD = Marker("classmethod")
PROPERTY = Marker("property")
NAMED_TUPLE = Marker("NamedTuple")  # typing.NamedTuple: a frozen dataclass whose objects are tuples


@dataclass(frozen=True)
class TypingName:
    """A name of `typing` (`List`, `Optional`, `Generic`...): inert at trace time, as
    annotations are; `List[int]` is itself, and a class may derive from `Generic[T]`."""

    name: str

    def __getitem__(self, _: Any) -> TypingName:
        return self

    def __repr__(self) -> str:
        return f"typing.{self.name}"


@dataclass(frozen=True)
class FieldSpec:
    """`dataclasses.field(default=..., default_factory=...)`."""

    default: Any = None
    factory: Any = None
    has_default: bool = False
    init: bool = True  # a parameter of __init__


@dataclass(frozen=True)
class Wrapped:
    """A method under `@staticmethod`, `@classmethod` or `@property`."""

    kind: Marker
    func: Any
    setter: Any = None  # a property's, from `@name.setter`


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
    order_fields: bool = False  # @dataclass(order=True)
    int_enum: bool = False  # an IntEnum: its members are ints
    qualname: str = ""  # `Outer.Inner` for a class defined in another's body
    generic: bool = False  # derives from typing.Generic[...]: `Box[int]` is the class
    # How its special methods (`__add__`, `__lt__`, `__repr__`...) are run when Python's own
    # operators and builtins ask for them: `runner(method, args)` calls kernel code in the
    # tracer (metered as any call); None for a class no tracer made.
    runner: Any = field(default=None, repr=False)
    object_type: Any = field(default=None, repr=False)  # see new_object

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

    def new_object(self, attrs: dict[str, Any] | None = None) -> UserObject:
        """An object of this class (of the Python class that has its protocol methods)."""
        if self.object_type is None:
            self.object_type = object_type(self) if self.runner is not None else UserObject
        return self.object_type(self, {} if attrs is None else attrs)

    def __getitem__(self, name: Any) -> Any:
        """`Color["RED"]`: an Enum class's member by name (a KeyError otherwise)."""
        if self.generic or any(isinstance(b, UserClass) and b.generic for b in self.order()):
            return self
        if not self.enum:
            raise TypeError(f"type {self.name!r} is not subscriptable")
        return self.members[name]

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
    """An instance of a kernel class. Python's operators, builtins (`sorted`, `len`, `str`,
    `hash`, `in`...) and containers reach the class's special methods through the dunders
    below, which run the kernel's own method in the tracer; a method the class does not
    define behaves as on CPython's `object`."""

    cls: UserClass
    attrs: dict[str, Any] = field(default_factory=dict)
    # An exception class's object: its `args` (the constructor's, or what its
    # `super().__init__(...)` was given, as BaseException keeps them).
    exc_args: tuple[Any, ...] | None = None
    cause: Any = None  # an exception object's chain (see exceptions.KernelException)
    context: Any = None
    suppress_context: bool = False

    def _method(self, name: str) -> Any:
        """The kernel's own `name` method of this object's class, or None."""
        if self.cls.runner is None:
            return None
        found, member = self.cls.lookup(name)
        return member if found and member is not None else None

    def _run(self, method: Any, *args: Any) -> Any:
        return self.cls.runner(method, [self, *args])

    def _special(self, name: str, *args: Any) -> Any:
        method = self._method(name)
        return NotImplemented if method is None else self._run(method, *args)

    def __str__(self) -> str:
        method = self._method("__str__") or self._method("__repr__")
        if method is not None:
            return self._run(method)
        if self.exc_args is None:
            return repr(self)
        args = self.exc_args
        if len(args) == 1:  # (a KeyError shows its key's repr, as CPython's)
            return repr(args[0]) if _builtin_exception(self.cls, KeyError) else str(args[0])
        return str(args) if args else ""

    def __repr__(self) -> str:
        method = self._method("__repr__")
        if method is not None:
            return self._run(method)
        if self.exc_args is not None:
            return f"{self.cls.name}({', '.join(repr(a) for a in self.exc_args)})"
        if self.cls.dataclass:
            inner = ", ".join(f"{k}={shown(self.attrs.get(k))}" for k, _ in self.cls.all_fields())
            return f"{self.cls.name}({inner})"
        return f"<{self.cls.name} object>"

    def __format__(self, spec: str) -> str:
        method = self._method("__format__")
        if method is not None:
            return self._run(method, spec)
        if spec:
            raise TypeError(f"unsupported format string passed to {self.cls.name}.__format__")
        return str(self)

    def __eq__(self, other: object) -> Any:
        method = self._method("__eq__")
        if method is not None:
            return self._run(method, other)
        if self.cls.dataclass and isinstance(other, UserObject) and other.cls is self.cls:
            return self._fields() == other._fields()
        return True if self is other else NotImplemented

    def __ne__(self, other: object) -> Any:
        method = self._method("__ne__")
        if method is not None:
            return self._run(method, other)
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        method = self._method("__hash__")
        if method is not None:
            return self._run(method)
        if self._method("__eq__") is not None or (self.cls.dataclass and not self.cls.frozen):
            raise TypeError(f"unhashable type: {self.cls.name!r}")  # (__hash__ = None)
        if self.cls.dataclass:
            return hash(self._fields())
        return id(self)

    def _fields(self) -> tuple:
        return tuple(self.attrs.get(k) for k, _ in self.cls.all_fields())

    def _ordered(self, name: str, other: Any, compare: Any) -> Any:
        method = self._method(name)
        if method is not None:
            return self._run(method, other)
        if self.cls.order_fields and isinstance(other, UserObject) and other.cls is self.cls:
            return compare(self._fields(), other._fields())
        return NotImplemented

    def __lt__(self, other: Any) -> Any:
        return self._ordered("__lt__", other, lambda a, b: a < b)

    def __le__(self, other: Any) -> Any:
        return self._ordered("__le__", other, lambda a, b: a <= b)

    def __gt__(self, other: Any) -> Any:
        return self._ordered("__gt__", other, lambda a, b: a > b)

    def __ge__(self, other: Any) -> Any:
        return self._ordered("__ge__", other, lambda a, b: a >= b)

    def _unary(self, name: str, symbol: str) -> Any:
        method = self._method(name)
        if method is None:
            raise TypeError(f"bad operand type for {symbol}: {self.cls.name!r}")
        return self._run(method)

    def __neg__(self) -> Any:
        return self._unary("__neg__", "unary -")

    def __pos__(self) -> Any:
        return self._unary("__pos__", "unary +")

    def __invert__(self) -> Any:
        return self._unary("__invert__", "unary ~")

    def __abs__(self) -> Any:
        return self._unary("__abs__", "abs()")


def _builtin_exception(cls: UserClass, kind: type[BaseException]) -> bool:
    """Does the builtin exception class `cls` derives from (the first along its resolution
    order, as exceptions.builtin_base finds it) derive from `kind`?"""
    for c in cls.order():
        for base in c.bases:
            py = getattr(base, "py", None)  # (an exceptions.ExceptionClass)
            if isinstance(py, type) and issubclass(py, BaseException):
                return issubclass(py, kind)
    return False


# Special methods whose presence Python's own protocols test (iteration, `in`, len(), truth,
# subscription, calls to int()/float()/index()): an object has them only if its kernel class
# defines them, so each kernel class's objects are of a Python subclass of UserObject made
# with exactly those (UserClass.new_object). CPython's fallbacks then follow by themselves:
# iteration by __getitem__, `in` by iteration, truth by __len__.
def _protocol_method(name: str) -> Any:
    def special(self: UserObject, *args: Any) -> Any:
        result = self._run(self._method(name), *args)
        if name == "__contains__":
            return bool(result)
        return result

    special.__name__ = name
    return special


_PROTOCOL = (
    "__bool__ __len__ __iter__ __next__ __contains__ __getitem__ __setitem__ __delitem__ "
    "__index__ __int__ __float__"
).split()


def object_type(cls: UserClass) -> type:
    """The Python class of `cls`'s objects: UserObject with the protocol methods `cls`
    defines (found along its resolution order)."""
    present = {n: _protocol_method(n) for n in _PROTOCOL if cls.lookup(n)[0]}
    return type(cls.name, (UserObject,), present)  # (named so: Python's messages say 'V')


# The binary operators' special methods on UserObject: `__add__`, its reflected `__radd__`
# and in-place `__iadd__`, and so on, each running the class's method of that name if it has
# one, else NotImplemented (Python then tries the other operand, or raises its TypeError).
def _binary_special(name: str) -> Any:
    def special(self: UserObject, other: Any) -> Any:
        return self._special(name, other)

    special.__name__ = name
    return special


for _op in "add sub mul matmul truediv floordiv mod pow lshift rshift and or xor divmod".split():
    for _name in (f"__{_op}__", f"__r{_op}__", f"__i{_op}__"):
        if _name != "__idivmod__":
            setattr(UserObject, _name, _binary_special(_name))


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


@dataclass(eq=False)
class LibraryContext:
    """A context manager of `contextlib`: a `@contextmanager` function's generator
    ("generator"), `suppress(*classes)` ("suppress") or `nullcontext(value)` ("null")."""

    kind: str
    value: Any

    def __repr__(self) -> str:
        return f"<contextlib {self.kind} context>"


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
        return f"<{self.cls.name}.{self.name}: {self.value!r}>"

    def __str__(self) -> str:
        return f"{self.cls.name}.{self.name}"


class IntEnumMember(int, EnumMember):
    """A member of an IntEnum class: an int (arithmetic, comparisons, indexing, hashing as
    its value) that is also an enum member (its `name`, `value`, class)."""

    def __new__(cls, owner: UserClass, name: str, value: Any) -> IntEnumMember:
        made = int.__new__(cls, value)
        for key, item in (("cls", owner), ("name", name), ("value", value)):
            object.__setattr__(made, key, item)
        return made

    def __init__(self, *_: Any) -> None:
        pass

    __eq__ = int.__eq__
    __hash__ = int.__hash__
    __str__ = int.__repr__  # (3.11: an IntEnum member prints as its int)
    __format__ = int.__format__

    def __repr__(self) -> str:
        return f"<{self.cls.name}.{self.name}: {int(self)!r}>"


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
