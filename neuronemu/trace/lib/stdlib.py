"""The pure-computation standard modules a kernel may use at trace time: `functools`,
`itertools`, `collections`, `operator`, `contextlib`, and more of `typing`, `abc` and `copy`.

Each is built from neuronemu's own pieces or from the Python function behind it, metered like
every other builtin (lazy iterators charge a step per item as they are consumed; kernel
functions handed to them run in the tracer). Nothing here reaches the host: no I/O, and
`operator.attrgetter` reads attributes as `getattr` does (public names only).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING, Any, Callable

from neuronemu.errors import KernelTypeError, SourceSpan
from neuronemu.trace import confine, objects, pytypes, sizing
from neuronemu.trace.lib.host import py
from neuronemu.trace.values import Builtin, Namespace, Partial

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context

__all__ = ["namespaces"]

# operator's functions, as the tracer's binary operators (metered, tile-aware).
_OPERATOR_BINARY = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "lshift": "<<", "rshift": ">>", "and_": "&", "or_": "|", "xor": "^",
    "matmul": "@",
}  # fmt: skip
_OPERATOR_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ITERTOOLS = (
    "chain combinations combinations_with_replacement permutations product accumulate "
    "islice zip_longest starmap pairwise count cycle groupby filterfalse takewhile dropwhile "
    "compress"
).split()


def _passthrough(name: str) -> Builtin:
    """A decorator with or without arguments that changes nothing the tracer computes
    (`functools.lru_cache`, `functools.cache`, `functools.wraps(f)`, `abc.abstractmethod`)."""

    def deco(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if (
            len(args) == 1
            and not kwargs
            and not isinstance(args[0], (int, type(None)))
            and (name not in ("functools.wraps",))
        ):
            return args[0]
        return Builtin(name, lambda span, fn: fn)

    return Builtin(name, deco)


def namespaces(ctx: Context) -> dict[str, Namespace]:
    def call(func: Any, args: list[Any], kwargs: dict[str, Any], span: SourceSpan) -> Any:
        return ctx.call(func, args, kwargs, span)

    def reduce(span: SourceSpan, func: Any, iterable: Any, *initial: Any) -> Any:
        items = iter(confine.materialize(ctx.meter, iterable, span))
        if initial:
            total = initial[0]
        else:
            try:
                total = next(items)
            except StopIteration:
                raise KernelTypeError(
                    "functools.reduce() of an empty iterable with no initial value", span
                ) from None
        for item in items:
            total = call(func, [total, item], {}, span)
        return total

    def partial(span: SourceSpan, func: Any, *args: Any, **kwargs: Any) -> Partial:
        return Partial(func, args, kwargs)

    functools_ns = Namespace(
        "functools",
        {
            "reduce": Builtin("functools.reduce", reduce),
            "partial": Builtin("functools.partial", partial),
            "lru_cache": Builtin("functools.lru_cache", _memoize(ctx, "functools.lru_cache")),
            "cache": Builtin("functools.cache", _memoize(ctx, "functools.cache")),
            "wraps": Builtin("functools.wraps", _wraps),
            "cached_property": objects.PROPERTY,
            "cmp_to_key": Builtin(
                "functools.cmp_to_key", py(ctx, functools.cmp_to_key, "functools.cmp_to_key")
            ),
        },
    )

    def binary(symbol: str) -> Callable[..., Any]:
        return lambda span, a, b: ctx.binop(symbol, a, b, span)

    operator_ns = Namespace(
        "operator",
        {name: Builtin(f"operator.{name}", binary(op)) for name, op in _OPERATOR_BINARY.items()},
    )
    for name, op in _OPERATOR_COMPARE.items():
        operator_ns.members[name] = Builtin(
            f"operator.{name}", py(ctx, getattr(__import__("operator"), name), f"operator.{name}")
        )
    operator_ns.members["neg"] = Builtin(
        "operator.neg", lambda span, a: ctx.binop("*", a, -1, span)
    )
    for name in ("not_", "truth", "contains", "is_", "is_not", "concat", "abs", "index", "pos"):
        fn = getattr(__import__("operator"), name)
        operator_ns.members[name] = Builtin(f"operator.{name}", py(ctx, fn, f"operator.{name}"))

    def attrgetter(span: SourceSpan, *names: Any) -> Builtin:
        """`operator.attrgetter("a", "b.c")`: getattr's, with its rule (public names only)."""
        for name in names:
            parts = name.split(".") if isinstance(name, str) else [name]
            if not all(isinstance(p, str) and p.isidentifier() and p[0] != "_" for p in parts):
                raise KernelTypeError(
                    f"operator.attrgetter() takes public attribute names, got {name!r}", span
                )

        def get(span: SourceSpan, obj: Any) -> Any:
            got = []
            for name in names:
                value = obj
                for part in name.split("."):
                    value = ctx.getattr(value, part, span)
                got.append(value)
            return got[0] if len(got) == 1 else tuple(got)

        return Builtin("attrgetter", get)

    operator_ns.members["attrgetter"] = Builtin("operator.attrgetter", attrgetter)
    operator_ns.members["getitem"] = Builtin(
        "operator.getitem", py(ctx, lambda a, b: a[b], "operator.getitem")
    )
    operator_ns.members["itemgetter"] = Builtin(
        "operator.itemgetter",
        lambda span, *keys: Builtin(
            "itemgetter",
            py(ctx, (lambda x: x[keys[0]]) if len(keys) == 1 else
               (lambda x: tuple(x[k] for k in keys)), "itemgetter"),
        ),
    )  # fmt: skip

    itertools_ns = Namespace(
        "itertools",
        {n: Builtin(f"itertools.{n}", py(ctx, getattr(itertools, n), f"itertools.{n}"))
         for n in _ITERTOOLS if hasattr(itertools, n)},
    )  # fmt: skip
    itertools_ns.members["repeat"] = Builtin("itertools.repeat", _repeat(ctx))
    for name in ("product", "permutations", "combinations", "combinations_with_replacement"):
        itertools_ns.members[name] = Builtin(f"itertools.{name}", _combinatoric(ctx, name))

    collections_ns = Namespace(
        "collections",
        {
            n: Builtin(f"collections.{n}", py(ctx, getattr(collections, n), f"collections.{n}"))
            for n in ("deque", "Counter", "OrderedDict", "defaultdict", "ChainMap")
        },
    )
    collections_ns.members["namedtuple"] = Builtin(
        "collections.namedtuple", functools.partial(pytypes.named_tuple_class, ctx.meter)
    )
    typing_names = (
        "Any Optional Union List Tuple Dict Callable Sequence TYPE_CHECKING Iterable Iterator "
        "Mapping Set FrozenSet Type Literal Final ClassVar Generic Protocol Generator Hashable"
    ).split()
    typing_ns = Namespace("typing", {n: objects.TypingName(n) for n in typing_names})
    typing_ns.members["TYPE_CHECKING"] = False
    typing_ns.members["TypeVar"] = Builtin("typing.TypeVar", lambda span, *a, **k: None)
    typing_ns.members["cast"] = Builtin("typing.cast", lambda span, t, v: v)
    typing_ns.members["NamedTuple"] = objects.NAMED_TUPLE
    abc_ns = Namespace(
        "abc",
        {"ABC": None, "abstractmethod": _passthrough("abc.abstractmethod"),
         "ABCMeta": None},
    )  # fmt: skip
    copy_ns = Namespace(
        "copy",
        {
            "copy": Builtin(
                "copy.copy",
                py(ctx, _shallow_copy, "copy.copy"),
            ),
            "deepcopy": Builtin("copy.deepcopy", _deepcopy(ctx)),
        },
    )

    def contextmanager(span: SourceSpan, fn: Any) -> Builtin:
        def make(span: SourceSpan, *args: Any, **kwargs: Any) -> objects.LibraryContext:
            return objects.LibraryContext("generator", ctx.call(fn, list(args), kwargs, span))

        return Builtin(getattr(getattr(fn, "fn", None), "name", "contextmanager"), make)

    contextlib_ns = Namespace(
        "contextlib",
        {
            "contextmanager": Builtin("contextlib.contextmanager", contextmanager),
            "suppress": Builtin(
                "contextlib.suppress",
                lambda span, *classes: objects.LibraryContext("suppress", classes),
            ),
            "nullcontext": Builtin(
                "contextlib.nullcontext",
                lambda span, value=None: objects.LibraryContext("null", value),
            ),
        },
    )
    return {
        "contextlib": contextlib_ns,
        "functools": functools_ns,
        "operator": operator_ns,
        "itertools": itertools_ns,
        "collections": collections_ns,
        "typing": typing_ns,
        "abc": abc_ns,
        "copy": copy_ns,
    }


def _memoize(ctx: Context, name: str) -> Callable[..., Any]:
    """`@functools.lru_cache` (with or without arguments) and `@functools.cache`: the function
    called once per distinct arguments, as CPython's cache does (a recursive definition that
    relies on it would otherwise take exponential time); unhashable arguments are CPython's
    TypeError."""

    def cached(fn: Any) -> Builtin:
        results: dict[Any, Any] = {}

        def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            try:
                hash(key)
            except TypeError as exc:
                raise KernelTypeError(f"{name}: {exc}", span).as_python("TypeError") from None
            if key not in results:
                results[key] = ctx.call(fn, list(args), kwargs, span)
                ctx.meter.items(len(results), f"the entries of {name}", span)
            return results[key]

        return Builtin(getattr(getattr(fn, "fn", None), "name", name), call)

    def deco(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and not isinstance(args[0], (int, type(None))):
            return cached(args[0])  # @lru_cache
        return Builtin(name, lambda span, fn: cached(fn))  # @lru_cache(maxsize=...)

    return deco


def _wraps(span: SourceSpan, wrapped: Any, *args: Any, **kwargs: Any) -> Builtin:
    """`@functools.wraps(f)`: the wrapper takes `f`'s name."""

    def apply(span: SourceSpan, wrapper: Any) -> Any:
        name = getattr(getattr(wrapped, "fn", None), "name", None)
        inner = getattr(wrapper, "fn", None)
        if name is None or inner is None or not dataclasses.is_dataclass(wrapper):
            return wrapper
        if isinstance(wrapper, type):  # (kernel values are no Python classes)
            return wrapper
        return dataclasses.replace(wrapper, fn=dataclasses.replace(inner, name=name))

    return Builtin("functools.wraps", apply)


def _repeat(ctx: Context) -> Callable[..., Any]:
    def repeat(span: SourceSpan, value: Any, times: Any = None) -> Any:
        if times is None:  # endless: each item a metered step as it is consumed
            return ctx.meter.counted(itertools.repeat(value), span)
        return py(ctx, itertools.repeat, "itertools.repeat")(span, value, times)

    return repeat


def _combinatoric(ctx: Context, name: str) -> Callable[..., Any]:
    """itertools' combinatoric iterators, whose C code allocates `r` (or every pool times
    `repeat`) slots before yielding anything: those sizes are checked first."""
    fn = py(ctx, getattr(itertools, name), f"itertools.{name}")

    def combinatoric(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if name == "product":
            repeat = kwargs.get("repeat", 1)
            if isinstance(repeat, int) and repeat > 0:
                slots = max(len(args), 1) * repeat
                ctx.meter.items(slots, f"itertools.product(repeat={repeat:,})", span)
        else:
            r = kwargs.get("r", args[1] if len(args) > 1 else None)
            if isinstance(r, int) and r > 0:
                ctx.meter.items(r, f"itertools.{name}(r={r:,})", span)
        return fn(span, *args, **kwargs)

    return combinatoric


def _shallow_copy(v: Any) -> Any:
    """copy.copy: a new list, dict, set or kernel object holding the same values."""
    if isinstance(v, (list, dict, set)):
        return copy.copy(v)
    if isinstance(v, objects.UserObject) and v.exc_args is None:
        return v.cls.new_object(dict(v.attrs))
    return v


def _deepcopy(ctx: Context) -> Callable[..., Any]:
    """copy.deepcopy of containers (lists, tuples, dicts, sets) and of kernel objects, down
    to their other values, which are shared (a tensor is not duplicated by copying a list of
    it); a value reached twice is copied once, as CPython's memo does."""

    def deepcopy(span: SourceSpan, value: Any) -> Any:
        confine.check_deep_size(ctx.meter, value, span)
        memo: dict[int, Any] = {}

        def walk(v: Any) -> Any:
            if id(v) in memo:
                return memo[id(v)]
            if isinstance(v, objects.UserObject) and v.exc_args is None:
                obj = memo[id(v)] = v.cls.new_object()
                obj.attrs.update({k: walk(x) for k, x in v.attrs.items()})
                sizing.made(ctx.meter, obj.attrs, span)
                return obj
            # A mutable container is in the memo before its items are copied, so that
            # one holding itself copies to one holding its copy (CPython's memo).
            if isinstance(v, (list, dict, collections.deque)):
                made: Any = copy.copy(v)  # (its type, a deque's maxlen, a default_factory)
                made.clear()
                memo[id(v)] = made
                if isinstance(v, dict):
                    made.update((k, walk(x)) for k, x in v.items())
                else:
                    made.extend(walk(x) for x in v)
            elif isinstance(v, tuple):
                made = tuple(walk(x) for x in v)
            elif isinstance(v, (set, frozenset)):
                made = type(v)(walk(x) for x in v)
            elif isinstance(v, slice):
                made = slice(walk(v.start), walk(v.stop), walk(v.step))
            else:
                return v
            sizing.made(ctx.meter, made, span)  # each container copied is work, as any copy
            memo[id(v)] = made
            return made

        return walk(value)

    return deepcopy
