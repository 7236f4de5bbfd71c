"""The host-side names a kernel sees at trace time: Python builtins and the allowed parts
of `numpy` and `math`, each metered (see trace/confine.py)."""

from __future__ import annotations

import builtins
import collections
import inspect
import math
from typing import TYPE_CHECKING, Any, Callable, Sized, cast

import numpy as np

from neuronemu.errors import BudgetError, KernelTypeError, NeuronEmuError, SourceSpan, shown
from neuronemu.frontend import ast as A
from neuronemu.ir import ALL_DTYPES, DType
from neuronemu.replay import journal
from neuronemu.trace import confine, nesting, objects, sizing
from neuronemu.trace.exceptions import (
    BUILTIN_EXCEPTIONS,
    ExceptionClass,
    builtin_base,
    is_exception,
)
from neuronemu.trace.lib.emit import builtin
from neuronemu.trace.objects import EnumMember, TupleObject, UserClass, UserObject
from neuronemu.trace.tensor_api import as_dtype
from neuronemu.trace.values import Builtin, Namespace, OpRef, Partial, is_tensor_like
from neuronemu_isa.ops import ALU_BINARY

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


# Builtins whose result, given a value that moves with a loop's iteration, moves with it or
# is compared exactly (a float, a string, a range; a slice, with its bounds): the loops'
# replays check them.
_MOVES_WITH_ITS_ARGUMENT = frozenset(
    "int float str repr range slice nl.affine_range nl.sequential_range nl.static_range "
    "nl.dynamic_range".split()
)


def py(ctx: Context, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A Python function run at trace time, metered (see confine.call_python); kernel
    functions passed to it (`key=`) become callables; its exceptions become located errors."""

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        for a in list(args) + list(kwargs.values()):
            if is_tensor_like(a):
                raise KernelTypeError(f"{name}() cannot take a tensor at trace time", span)
        if name in _ITERATING:  # `list(Color)`: an Enum class's members
            args = tuple(_members(a, span) for a in args)
        args = tuple(ctx.to_python(a, span) for a in args)
        kwargs = {k: ctx.to_python(v, span) for k, v in kwargs.items()}
        if not ctx.meter.journals:
            return confine.call_python(ctx.meter, fn, name, args, kwargs, span)
        for a in (*args, *kwargs.values()):
            journal.iterate(ctx.meter, a)
        kind = journal.marked(*args, *kwargs.values())
        # (`min(i * 128, n)`: the argument picked, the conditions that picked it noted)
        choice = name in ("min", "max") and len(args) > 1 and not kwargs
        choice = choice and all(journal.is_int(a) for a in args)
        copy = journal.copies(name, args, kwargs)  # (`tuple(shape)`: its items, marks and all)
        if kind is not None and name not in _MOVES_WITH_ITS_ARGUMENT and not (choice or copy):
            journal.refuse(ctx.meter, f"{name}() of the loop variable")
        result = confine.call_python(ctx.meter, fn, name, args, kwargs, span)
        if kind is not None and choice:
            return journal.chosen(ctx.meter, name, args)
        if kind is not None and name == "int" and isinstance(result, int):
            result = kind(result)  # int(i) moves as i does
        journal.create(ctx.meter, result)  # list(), sorted(), dict()...
        if hasattr(result, "__next__"):
            journal.made(ctx.meter, result)
        return result

    return call


_ITERATING = frozenset(
    "list tuple set frozenset sorted enumerate zip min max any all dict reversed".split()
)


def _members(value: Any, span: SourceSpan) -> Any:
    if isinstance(value, UserClass) and value.enum:
        return list(objects.iterate(value, span))
    return value


def builtin_names(ctx: Context) -> dict[str, Any]:
    """Python's builtins as a kernel sees them (metered; the rest of them do not exist)."""
    names: dict[str, Any] = {}
    for name in (
        "range len min max abs int float bool tuple list dict enumerate zip "
        "any all round sorted reversed set slice next iter"
    ).split():
        names[name] = Builtin(name, py(ctx, getattr(builtins, name), name))
    for name, conversion in (("str", "s"), ("repr", "r")):

        def text(span: SourceSpan, *args: Any, _conversion: str = conversion, **kw: Any) -> Any:
            if len(args) == 1 and not kw:  # str(x), repr(x): bounded by the deep size
                return confine.text(ctx.meter, args[0], span, _conversion)
            return py(ctx, str, "str")(span, *args, **kw)  # str(b, "utf-8"), str()

        names[name] = Builtin(name, text)

    def pow_(span: SourceSpan, base: Any, exp: Any, mod: Any = None) -> Any:
        if mod is None:
            return ctx.binop("**", base, exp, span)
        return py(ctx, pow, "pow")(span, base, exp, mod)  # modular: bounded by mod's size

    def sum_(span: SourceSpan, iterable: Any, start: Any = 0) -> Any:
        total = start
        for item in confine.materialize(ctx.meter, iterable, span):
            total = ctx.binop("+", total, item, span)
        return total

    def bytes_(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if args and type(args[0]) is int:  # bytes(n): n zero bytes, sized first
            ctx.meter.items(args[0], "bytes()", span)
        return py(ctx, bytes, "bytes")(span, *args, **kwargs)

    def divmod_(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        # divmod(i, n) of ints, in an iteration being recorded: `i // n` and `i % n` (the
        # very ints, as Python defines divmod), each replayed as the operator is; any other
        # call (keywords, a count of arguments, a zero divisor) as Python's, errors and all
        if ctx.meter.journals and len(args) == 2 and not kwargs:
            a, b = args
            if journal.marked(a, b) and journal.is_int(a) and journal.is_int(b) and b != 0:
                return (ctx.binop("//", a, b, span), ctx.binop("%", a, b, span))
        return plain_divmod(span, *args, **kwargs)

    plain_divmod = py(ctx, divmod, "divmod")
    names["divmod"] = Builtin("divmod", divmod_)
    names["bytes"] = Builtin("bytes", bytes_)
    names["pow"] = Builtin("pow", pow_)
    names["sum"] = Builtin("sum", sum_)

    def isinstance_(span: SourceSpan, obj: Any, classes: Any) -> bool:
        for cls in classes if isinstance(classes, tuple) else (classes,):
            if isinstance(cls, UserClass):
                owner = obj.cls if isinstance(obj, (UserObject, EnumMember, TupleObject)) else None
                if owner is not None and owner.is_subclass(cls):
                    return True
            elif isinstance(cls, ExceptionClass):
                base = builtin_base(obj.cls) if is_exception(obj) else None
                if base is not None and issubclass(base.py, cls.py):
                    return True
            elif isinstance(cls, Builtin) and cls.name in _PY_TYPES:
                if isinstance(obj, _PY_TYPES[cls.name]):  # (True is an int, as in CPython)
                    return True
        return False

    names["isinstance"] = Builtin("isinstance", isinstance_)
    names["type"] = Builtin("type", ctx.type_of)
    names["super"] = Builtin("super", ctx.make_super)
    names["staticmethod"] = objects.STATICMETHOD
    names["classmethod"] = objects.CLASSMETHOD
    names["property"] = objects.PROPERTY
    names["object"] = None
    names["print"] = Builtin("print", _print(ctx))
    names["__name__"] = "__nki_kernel__"
    names["None"] = None
    names.update(BUILTIN_EXCEPTIONS)  # ValueError, KeyError...: raised and caught by kernels

    def getattr_(span: SourceSpan, value: Any, name: Any, *default: Any) -> Any:
        """`getattr(x, "name"[, default])`: `x.name`, with the same allow-list (so no
        dunder or private name); a missing one gives the default, as in Python."""
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise KernelTypeError(
                f"getattr() takes a public attribute name, got {shown(name)}", span
            )
        try:
            return ctx.getattr(value, name, span)
        except NeuronEmuError as err:
            budget = isinstance(err, BudgetError)
            if default and not budget and err.python_error in (None, "AttributeError"):
                return default[0]
            raise

    def hasattr_(span: SourceSpan, value: Any, name: Any) -> bool:
        marker = object()
        return getattr_(span, value, name, marker) is not marker

    names["getattr"] = Builtin("getattr", getattr_)
    names["hasattr"] = Builtin("hasattr", hasattr_)
    _more_builtins(ctx, names)
    return names


def _more_builtins(ctx: Context, names: dict[str, Any]) -> None:
    """The rest of the pure builtins: conversions, `map`/`filter` (lazy, as CPython's: the
    kernel function runs as each item is taken), `callable`, `issubclass`, `setattr`,
    `vars`, `format`, and `len`/`reversed` that take a range or a dict view as it is."""
    for name in "ord chr bin hex oct hash frozenset".split():
        names[name] = Builtin(name, py(ctx, getattr(builtins, name), name))
    names["NotImplemented"] = NotImplemented
    plain_len, plain_reversed = names["len"].fn, names["reversed"].fn

    def len_(span: SourceSpan, value: Any) -> int:
        if isinstance(value, UserClass) and value.enum:  # its members, an alias once
            return len(list(objects.iterate(value, span)))
        if isinstance(value, (range, _DICT_VIEWS, UserObject, collections.deque)):
            try:  # (a kernel object has __len__ if its class defines it; else TypeError)
                return len(cast(Sized, value))
            except (TypeError, OverflowError) as exc:
                raise KernelTypeError(f"len(): {exc}", span).as_python(type(exc).__name__) from None
        return plain_len(span, value)

    def reversed_(span: SourceSpan, value: Any) -> Any:
        if isinstance(value, (range, dict, _DICT_VIEWS)):
            return reversed(value)  # (lazy: each item is a step as it is consumed)
        return plain_reversed(span, value)

    def map_(span: SourceSpan, func: Any, *iterables: Any) -> Any:
        if not iterables:
            raise KernelTypeError("map() must have at least two arguments.", span).as_python(
                "TypeError"
            )
        items = zip(*(confine.materialize(ctx.meter, it, span) for it in iterables))
        made = (ctx.call(func, list(args), {}, span) for args in items)
        nesting.check_chained(ctx.meter, made, iterables, span, "map()")
        return made

    def filter_(span: SourceSpan, func: Any, iterable: Any) -> Any:
        items = confine.materialize(ctx.meter, iterable, span)
        if func is None:
            made = (x for x in items if x)
        else:
            made = (x for x in items if ctx.call(func, [x], {}, span))
        nesting.check_chained(ctx.meter, made, (iterable,), span, "filter()")
        return made

    def callable_(span: SourceSpan, value: Any) -> bool:
        if isinstance(value, UserObject):
            return value.cls.lookup("__call__")[0]
        if isinstance(getattr(value, "fn", None), A.FunctionDef):
            return True  # a kernel function (the tracer's Closure)
        return isinstance(
            value, (Builtin, OpRef, UserClass, ExceptionClass, objects.BoundMethod, Partial)
        )

    def issubclass_(span: SourceSpan, cls: Any, classes: Any) -> bool:
        if not isinstance(cls, (UserClass, ExceptionClass, Builtin)):
            raise KernelTypeError("issubclass() arg 1 must be a class", span).as_python("TypeError")
        for other in classes if isinstance(classes, tuple) else (classes,):
            if cls is other or (
                isinstance(cls, UserClass)
                and isinstance(other, UserClass)
                and cls.is_subclass(other)
            ):
                return True
            if isinstance(other, ExceptionClass):
                base = builtin_base(cls)
                if base is not None and issubclass(base.py, other.py):
                    return True
        return False

    def setattr_(span: SourceSpan, obj: Any, name: Any, value: Any) -> None:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise KernelTypeError(
                f"setattr() takes a public attribute name, got {shown(name)}", span
            )
        ctx.set_attribute(obj, name, value, span)  # type: ignore[attr-defined]

    def vars_(span: SourceSpan, obj: Any) -> Any:
        if isinstance(obj, UserObject):
            return obj.attrs
        raise KernelTypeError("vars() argument must have __dict__ attribute", span).as_python(
            "TypeError"
        )

    def format_(span: SourceSpan, value: Any, spec: Any = "") -> str:
        return confine.format_value(ctx.meter, value, spec, span)

    def next_(span: SourceSpan, iterator: Any, *default: Any) -> Any:
        ctx.meter.step(span)
        if not hasattr(iterator, "__next__"):
            raise KernelTypeError(
                f"next(): {type(iterator).__name__!r} object is not an iterator", span
            ).as_python("TypeError")
        try:
            return next(iterator)  # (a generator's StopIteration keeps its return value)
        except StopIteration as stop:
            if default:
                return default[0]
            raise KernelTypeError("next(): StopIteration", span).as_python(
                "StopIteration", stop.args
            ) from None

    for name, fn in (
        ("next", next_),
        ("len", len_),
        ("reversed", reversed_),
        ("map", map_),
        ("filter", filter_),
        ("callable", callable_),
        ("issubclass", issubclass_),
        ("setattr", setattr_),
        ("vars", vars_),
        ("format", format_),
    ):
        names[name] = Builtin(name, fn)


_DICT_VIEWS: tuple[type[Any], ...] = (type({}.keys()), type({}.values()), type({}.items()))


def _print(ctx: Context) -> Callable[..., None]:
    def print_(span: SourceSpan, *args: Any, sep: Any = " ", end: Any = "\n", **_: Any) -> None:
        """print(): the line's length (every argument's text, `sep` between them, `end`)
        checked as it grows, before the line is joined."""
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        for name, value in (("sep", sep), ("end", end)):
            if not isinstance(value, str):
                raise KernelTypeError(
                    f"print(): {name} must be None or a string, not {type(value).__name__}", span
                ).as_python("TypeError")
        texts, total = [], len(end) - len(sep)
        for x in args:
            texts.append(confine.text(ctx.meter, x, span))
            total += len(texts[-1]) + len(sep)
            ctx.meter.items(total, "the line print() writes", span)
        line = sep.join(texts)
        sizing.copy_work(ctx.meter, len(line), span)
        ctx.print_fn(line + ("" if end == "\n" else end))

    return print_


_PY_TYPES = {
    "set": set,
    "frozenset": frozenset,
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "tuple": tuple,
    "list": list,
    "dict": dict,
    "bytes": bytes,
}


def numpy_namespace(ctx: Context) -> Namespace:
    members: dict[str, Any] = {n: d for n, d in ALL_DTYPES.items()}
    members["bool"] = ALL_DTYPES["bool_"]
    members["dtype"] = builtin("np.dtype", lambda span, x: as_dtype(x, span))

    def scalar_op(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        return py(ctx, lambda *a: _checked(ctx, op, fn, a), f"np.{op}")

    for op in ALU_BINARY:
        if hasattr(np, op):
            members[op] = OpRef(op, scalar_op(op, lambda *a, _f=getattr(np, op): _item(_f(*a))))
    for op in ("exp", "log", "sqrt", "tanh", "abs", "square", "sin", "arctan", "sign"):
        members[op] = OpRef(op, scalar_op(op, lambda *a, _f=getattr(np, op): _item(_f(*a))))
    members["copy"] = OpRef("copy", py(ctx, lambda a: _item(_sized(ctx, np.copy, a)), "np.copy"))
    for fn in ("prod", "ceil", "floor", "log2", "sum", "max", "min"):
        members[fn] = builtin(
            f"np.{fn}",
            py(ctx, lambda *a, _f=getattr(np, fn): _item(_sized(ctx, _f, *a)), f"np.{fn}"),
        )
    # Reductions also name the ALU operator they reduce with (`op=np.max` in tensor_reduce).
    for fn, op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"), ("prod", "multiply")):
        members[fn] = OpRef(op, members[fn].fn)
    for fn in (
        "identity",
        "eye",
        "zeros",
        "ones",
        "full",
        "arange",
        "array",
        "tril",
        "triu",
        "concatenate",
        "stack",
        "reshape",
        "transpose",
        *_NUMPY_MORE,
    ):
        members[fn] = builtin(f"np.{fn}", _numpy_maker(ctx, fn))
    members.update({"pi": math.pi, "inf": math.inf, "e": math.e, "nan": math.nan, "newaxis": None})
    return Namespace("numpy", members)


def _checked(ctx: Context, op: str, fn: Callable[..., Any], args: tuple) -> Any:
    """An elementwise NumPy function: its broadcast result is bounded before it runs."""
    items = confine.check_broadcast(ctx.meter, args, f"np.{op}", None)
    width = confine.result_width(args, op)
    sizing.fits(ctx.meter, (items or 0) * max(width or 0, 8), f"np.{op}", None)
    return fn(*args)


def _sized(ctx: Context, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(array, ...)`, which makes an array at most as large as its first argument (a
    copy, or an elementwise result in float64), refused first if the run could not hold it."""
    if args and isinstance(args[0], np.ndarray):
        nbytes = max(sizing.array_bytes(args[0]), args[0].size * 8)
        sizing.fits(ctx.meter, nbytes, f"np.{fn.__name__}()", None)
    return fn(*args)


def _numpy_maker(ctx: Context, name: str) -> Callable[..., Any]:
    """`np.zeros`, `np.arange`, ...: the array's size is known from the arguments and checked
    against the budgets before NumPy makes it."""
    fn = getattr(np, name)

    def call(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if name == "diff":  # (NumPy takes n differences one after another, in Python)
            n = kwargs.get("n", args[1] if len(args) > 1 else 1)
            if isinstance(n, int) and n > 1:
                ctx.meter.step(span, n)
        if name in ("concatenate", "stack", "vstack", "hstack") and args:
            if isinstance(args[0], (list, tuple)):  # (each array is a step, many in Python)
                ctx.meter.step(span, len(args[0]))
        items = _numpy_items(name, args, kwargs)
        args = tuple(a.np if isinstance(a, DType) else a for a in args)
        kwargs = {k: v.np if isinstance(v, DType) else v for k, v in kwargs.items()}
        if items is not None:
            ctx.meter.items(items, f"np.{name}()", span)
            width = _numpy_itemsize(name, args, kwargs)
            sizing.fits(ctx.meter, items * width, f"np.{name}()", span)
        elif args and isinstance(args[0], np.ndarray):  # (at most its input's size: a copy)
            sizing.fits(ctx.meter, sizing.array_bytes(args[0]), f"np.{name}()", span)
        # (the array made is counted against memory_bytes with the call's result)
        return py(ctx, fn, f"np.{name}")(span, *args, **kwargs)

    return call


def _numpy_items(name: str, args: tuple, kwargs: dict[str, Any]) -> int | None:
    """How many elements a NumPy maker would make, from its arguments as NumPy binds them
    (by position or by name; None: unknown yet, or not larger than its inputs)."""
    try:
        p = inspect.signature(getattr(np, name)).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return None  # NumPy will say what is wrong with the arguments

    size = _elements

    try:
        if name in ("zeros", "ones", "full"):
            shape = p["shape"]
            shape = shape if isinstance(shape, (tuple, list)) else (shape,)
            return math.prod(max(int(d), 0) for d in shape)
        if name == "identity":
            return int(p["n"]) ** 2
        if name == "eye":
            n, m = int(p["N"]), p.get("M")
            return n * (n if m is None else int(m))
        if name == "arange":
            first, stop = p["start_or_stop"], p.get("stop")
            start, stop = (0, first) if stop is None else (first, stop)
            return max(0, math.ceil((stop - start) / p.get("step", 1)))
        if name in ("concatenate", "stack", "vstack", "hstack"):
            seq = p.get("arrays", p.get("tup", ()))
            return sum(size(a) for a in seq)
        if name == "repeat":
            reps = np.asarray(p["repeats"])
            if reps.ndim == 0:
                return size(p["a"]) * max(int(reps), 0)
            return int(np.sum(reps)) * (size(p["a"]) // max(reps.size, 1) or 1)
        if name == "tile":
            reps = np.asarray(p["reps"]).ravel()
            return size(p["A"]) * math.prod(max(int(r), 0) for r in reps)
        if name == "outer":
            return size(p["a"]) * size(p["b"])
        if name == "linspace":
            return int(p.get("num", 50)) * max(size(p["start"]), size(p["stop"]))
        if name == "meshgrid":
            xi = p.get("xi", ())
            return math.prod(size(a) for a in xi) * len(xi)
        if name == "indices":
            dims = p["dimensions"]
            return math.prod(int(d) for d in dims) * len(dims)
        if name in ("tril", "triu"):
            m = np.asarray(p["m"])
            return m.size**2 if m.ndim == 1 else m.size  # (a 1-d input makes n x n)
        if name in ("where", "clip") and len(p) > 1:
            shapes = [np.shape(v) for v in p.values() if isinstance(v, (np.ndarray, list, tuple))]
            return math.prod(np.broadcast_shapes(*shapes)) if shapes else None
        if name == "array":
            data = p["object"]
            return size(data) if isinstance(data, (range, np.ndarray, list, tuple)) else None
    except (TypeError, ValueError, OverflowError, KeyError, IndexError, ZeroDivisionError):
        return None  # NumPy will say what is wrong with the arguments
    return None


def _elements(x: Any) -> int:
    """How many elements NumPy makes of `x` (found without making them: a list of long
    strings would be as large as the array): the shape it finds from the first items."""
    if isinstance(x, (np.ndarray, np.generic)):
        return int(x.size)
    if isinstance(x, range):
        return len(x)
    items, level = 1, x
    while isinstance(level, (list, tuple)) and level:
        items *= len(level)
        level = level[0]
    return items * (int(level.size) if isinstance(level, np.ndarray) else 1)


# NumPy functions kernels use on trace-time arrays (index tables, masks, constants), each
# made no larger than `_numpy_items` says (the rest make at most their inputs' size).
_NUMPY_MORE = (
    "repeat tile outer linspace meshgrid indices where vstack hstack cumsum cumprod diff "
    "sort argsort unique array_equal clip round any all mean argmax argmin flip cos"
).split()

# Where each maker takes its dtype positionally (after the shape, the fill value...).
_DTYPE_AT = {"zeros": 1, "ones": 1, "full": 2, "identity": 1, "eye": 3, "array": 1}


def _numpy_itemsize(name: str, args: tuple, kwargs: dict[str, Any]) -> int:
    """Bytes per element of the array a NumPy maker will make, from its arguments (the
    widest string among them for a string array)."""
    at = _DTYPE_AT.get(name)
    dtype = kwargs.get("dtype", args[at] if at is not None and len(args) > at else None)
    if name == "array" and dtype is None and args and isinstance(args[0], np.ndarray):
        dtype = args[0].dtype  # (a copy, as wide as it is)
    try:
        if dtype is not None:
            return sizing.itemsize(dtype)
        if name in ("concatenate", "stack", "vstack", "hstack"):
            seq = args[0] if args else kwargs.get("arrays", kwargs.get("tup", ()))
            widths = [
                sizing.itemsize(a.dtype) if hasattr(a, "dtype") else 4 * _widest_text(a, 0)
                for a in seq
            ]  # (strings among them: the array is as wide as the widest)
            return max([8, *widths])
        if name != "array" and any(isinstance(a, (np.ndarray, str, bytes)) for a in args):
            # (`np.where(mask, x, y)`, `np.repeat(x, n)`: as wide as the widest input)
            widths = [sizing.itemsize(np.asarray(a).dtype) for a in args if _is_data(a)]
            return max([8, *widths])
        data = args[1] if name == "full" and len(args) > 1 else kwargs.get("fill_value")
        data = args[0] if name == "array" and args else data
        chars = _widest_text(data, 0)
        return max(chars, 32) * 4 if chars else 8
    except (TypeError, ValueError, OverflowError):
        return 8  # NumPy will say what is wrong with the dtype


def _is_data(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic, str, bytes))


def _widest_text(value: Any, depth: int) -> int:
    """The longest string or bytes in `value` and the lists and tuples nested in it (NumPy
    makes every element of a string array that wide)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, np.ndarray):
        return value.dtype.itemsize // (4 if value.dtype.kind == "U" else 1)
    if not isinstance(value, (list, tuple)) or not value or depth > 64:
        return 0
    kinds = set(map(type, value))
    if kinds <= {str, bytes}:
        return max(map(len, value))
    if not kinds & {str, bytes, list, tuple, np.ndarray}:
        return 0
    return max(_widest_text(x, depth + 1) for x in value)


def _item(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def math_namespace(ctx: Context) -> Namespace:
    members: dict[str, Any] = {}
    for name in (
        "ceil floor sqrt log log2 log10 exp isqrt gcd lcm pow fabs trunc sin cos tan asin acos "
        "atan atan2 sinh cosh tanh asinh acosh atanh degrees radians hypot isfinite isinf isnan "
        "isclose copysign fsum modf fmod frexp ldexp expm1 log1p erf erfc gamma lgamma "
        "remainder dist"
    ).split():
        members[name] = builtin(f"math.{name}", py(ctx, getattr(math, name), f"math.{name}"))

    def factorial(span: SourceSpan, n: Any) -> Any:
        if isinstance(n, int) and n > 1:  # log2(n!) from the log-gamma function, first
            bits = int(math.lgamma(n + 1) / math.log(2)) + 1
            ctx.meter.int_bits(bits, f"math.factorial({n})", span)
        return py(ctx, math.factorial, "math.factorial")(span, n)

    members["factorial"] = builtin("math.factorial", factorial)

    def prod(span: SourceSpan, iterable: Any, *, start: Any = 1) -> Any:
        total = start
        for item in confine.materialize(ctx.meter, iterable, span):
            total = ctx.binop("*", total, item, span)
        return total

    def counting(name: str) -> Callable[..., Any]:
        def call(span: SourceSpan, n: Any, k: Any = None) -> Any:
            # log2 of comb/perm from the log-gamma function, before the big integer is made
            # (`math.perm(n)` is n!, all n of them)
            r = n if name == "perm" and k is None else k
            if isinstance(n, int) and isinstance(r, int) and 0 <= r <= n:
                bits = (
                    math.lgamma(n + 1)
                    - math.lgamma(n - r + 1)
                    - (math.lgamma(r + 1) if name == "comb" else 0)
                ) / math.log(2)
                shown_args = f"{n}" if k is None else f"{n}, {k}"
                ctx.meter.int_bits(int(bits) + 1, f"math.{name}({shown_args})", span)
            return py(ctx, getattr(math, name), f"math.{name}")(
                span, n, *(() if k is None else (k,))
            )

        return call

    def lcm(span: SourceSpan, *ints: Any) -> Any:
        """math.lcm of many: one pair at a time, each a step, its size in int_bits as it
        grows (the C loop over 900,000 arguments grew a number no budget saw)."""
        total: Any = 1
        for x in ints:
            ctx.meter.step(span)
            if type(total) is int and type(x) is int:  # (two ints: at most their bits)
                total = math.lcm(total, x)
                ctx.meter.int_bits(total.bit_length(), "math.lcm of these integers", span)
            else:  # (what Python refuses, it refuses located)
                total = py(ctx, math.lcm, "math.lcm")(span, total, x)
        return total

    members["lcm"] = builtin("math.lcm", lcm)
    members["prod"] = builtin("math.prod", prod)
    members["comb"] = builtin("math.comb", counting("comb"))
    members["perm"] = builtin("math.perm", counting("perm"))
    members.update({"pi": math.pi, "inf": math.inf, "e": math.e, "nan": math.nan, "tau": math.tau})
    return Namespace("math", members)
