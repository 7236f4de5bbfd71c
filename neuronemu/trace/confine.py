"""What a kernel may touch of Python and NumPy at trace time, and what each touch may cost.

A kernel is interpreted, never run by Python; the only Python objects it handles are values
(numbers, strings, containers, NumPy arrays). Their attributes are an allow-list: anything else
(`arr.tofile`, `arr.dump`, dunder attributes, format-field attribute walks) is a located
"not available in NKI kernels" error. Operations that run in C get their result size checked
against the run's budgets before they run, and iteration that C would do is done item by item
through the meter, so that no single step can hang or exhaust the machine.
"""

from __future__ import annotations

import _string  # the format-string parser behind str.format (no evaluation of its own)
import collections
import math
import re
import string
import sys
from typing import Any, Callable

import numpy as np

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan, neutral, shown
from neuronemu.limits import Meter
from neuronemu.trace import nesting, sizing

__all__ = [
    "text",
    "check_deep_size",
    "Method",
    "attribute",
    "check_binop",
    "check_subscript",
    "format_value",
    "call_python",
    "check_result",
    "counted_len",
    "materialize",
    "not_available",
    "python_callable",
    "refuse_objects",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STR = _names(
    "capitalize casefold count endswith find index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isspace istitle isupper lower "
    "lstrip partition removeprefix removesuffix rfind rindex rpartition rsplit "
    "rstrip split splitlines startswith strip swapcase title upper join replace "
    "center ljust rjust zfill format format_map encode"
)
_BYTES = _names(
    "count endswith find index isalnum isalpha isascii isdigit islower isspace "
    "istitle isupper lower lstrip partition removeprefix removesuffix rfind rindex "
    "rpartition rsplit rstrip split splitlines startswith strip upper join replace "
    "decode hex"
)
# The reading protocol as bound methods (`sorted(r, key=seq.__getitem__)`): they only read
# the container's own elements. No other dunder attribute is reachable.
_READING = "__getitem__ __len__ __contains__"
_ALLOWED: dict[type, frozenset[str]] = {
    str: _STR,
    bytes: _BYTES,
    list: _names("append extend insert pop remove index count sort reverse copy clear " + _READING),
    tuple: _names("count index " + _READING),
    collections.deque: _names(
        "append appendleft extend extendleft pop popleft rotate clear copy count index "
        "remove reverse insert maxlen"
    ),
    dict: _names("get keys values items pop popitem setdefault update copy clear " + _READING),
    collections.Counter: _names(
        "get keys values items pop popitem setdefault update copy clear most_common elements "
        "subtract total " + _READING
    ),
    collections.OrderedDict: _names(
        "get keys values items pop popitem setdefault update copy clear move_to_end " + _READING
    ),
    set: _names(
        "add discard remove pop union intersection difference symmetric_difference "
        "issubset issuperset isdisjoint update copy clear intersection_update "
        "difference_update symmetric_difference_update"
    ),
    frozenset: _names(
        "union intersection difference symmetric_difference issubset issuperset isdisjoint copy"
    ),
    bool: _names("real imag conjugate"),
    int: _names(
        "bit_length bit_count conjugate real imag numerator denominator as_integer_ratio to_bytes"
    ),
    float: _names("is_integer as_integer_ratio conjugate real imag hex"),
    range: _names("start stop step count index " + _READING),
    slice: _names("start stop step indices"),
    np.ndarray: _names(
        "shape ndim size itemsize nbytes T astype reshape transpose copy sum "
        "max min mean prod any all tolist item flatten ravel cumsum cumprod "
        "argmax argmin squeeze clip round std var swapaxes real imag conj sort "
        "argsort fill nonzero repeat"
    ),
    np.generic: _names(
        "item astype shape ndim size itemsize real imag tolist as_integer_ratio is_integer"
    ),
}
# Methods whose result can be much larger than their inputs: their sizes are checked first.
_GROWING = {
    "center",
    "ljust",
    "rjust",
    "zfill",
    "replace",
    "join",
    "format",
    "format_map",
    "extend",
    "extendleft",
    "update",
    "astype",
    "reshape",
    "tolist",
    "insert",
    "append",
    "appendleft",
    "add",
    "to_bytes",
    "elements",
}


def _kind(value: Any) -> type | None:
    for cls in type(value).__mro__:
        if cls in _ALLOWED:
            return cls
    return None


def not_available(what: str, span: SourceSpan) -> KernelTypeError:
    return KernelTypeError(
        f"{what} is not available in NKI kernels",
        span,
        hint="kernels reach NKI, trace-time values and a safe part of "
        "NumPy and Python; nothing of the host",
    )


def attribute(
    meter: Meter, value: Any, attr: str, span: SourceSpan, to_python: Callable[[Any, bool], Any]
) -> Any:
    """`value.attr` of a trace-time Python value, if the allow-list has it (methods come back
    wrapped, with their costs checked); `to_python(x, numpy)` turns kernel functions into
    callables (and, for NumPy methods, dtypes into NumPy dtypes)."""
    kind = _kind(value)
    if kind is None or attr not in _ALLOWED[kind]:
        raise not_available(f"{type(value).__name__}.{attr}", span)
    got = getattr(value, attr)
    if not callable(got):
        return got
    name = f"{type(value).__name__}.{attr}"

    numpy = kind in (np.ndarray, np.generic)

    def method(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        _check_method(meter, value, attr, args, kwargs, span)
        args = tuple(to_python(a, numpy) for a in args)
        kwargs = {k: to_python(v, numpy) for k, v in kwargs.items()}
        if numpy:
            sizing.array_method(meter, value, attr, args, kwargs, span)
        elif kind in (str, bytes) and attr == "join" and len(args) == 1 and not kwargs:
            args = (sizing.join_parts(meter, value, args[0], _lazy(args[0]), span),)
        elif kind in (str, bytes):
            sizing.text_method(meter, value, attr, args, kwargs, span)
        if kind in (str,) and attr in ("format", "format_map"):
            mapping = args[0] if attr == "format_map" and args else kwargs
            return _format(meter, value, args if attr == "format" else (), mapping, span)
        return call_python(meter, got, name, args, kwargs, span)

    return Method(name, method, value)


class Method:
    """A bound method of a trace-time value, as the tracer calls builtins: fn(span, ...)."""

    __slots__ = ("name", "fn", "obj")

    def __init__(self, name: str, fn: Callable[..., Any], obj: Any = None):
        self.name = name
        self.fn = fn
        self.obj = obj  # the value it is a method of

    def __repr__(self) -> str:
        return f"<method {self.name}>"


def _check_method(
    meter: Meter, value: Any, attr: str, args: tuple, kwargs: dict, span: SourceSpan
) -> None:
    if attr not in _GROWING:
        return
    if attr in ("center", "ljust", "rjust", "zfill") and args and _is_int(args[0]):
        meter.items(args[0], f"str.{attr}()", span)
    elif (
        attr == "replace"
        and len(args) >= 2
        and isinstance(value, (str, bytes))
        and all(isinstance(a, type(value)) for a in args[:2])
    ):  # (mismatched types: the call itself raises the kernel's TypeError)
        old, new = args[0], args[1]
        count = value.count(old) if old else len(value) + 1
        if len(args) >= 3 and _is_int(args[2]) and args[2] >= 0:
            count = min(count, args[2])
        meter.items(len(value) + count * max(0, len(new) - len(old)), "str.replace()", span)
    elif attr in ("extend", "extendleft", "update") and args:
        meter.items(len(value) + counted_len(meter, args[0], span), f"{attr}()", span)
    elif attr in ("append", "appendleft", "insert", "add"):
        meter.items(len(value) + 1, f"{attr}()", span)
    elif attr == "to_bytes":  # (its length, 1 by default, is the bytes made)
        length = args[0] if args else kwargs.get("length", 1)
        if _is_int(length):
            meter.items(length, "int.to_bytes()", span)
    elif attr == "elements" and isinstance(value, collections.Counter):
        total = sum(n for n in value.values() if _is_int(n) and n > 0)
        meter.items(total, "Counter.elements()", span)  # (as many as the counts say)


def counted_len(meter: Meter, value: Any, span: SourceSpan) -> int:
    """The length of a container (charged as steps), or 0 for an iterator (charged as it is
    consumed, by `materialize`)."""
    try:
        n = len(value)
    except (TypeError, OverflowError):
        return 0
    meter.step(span, n)
    return n


def materialize(meter: Meter, iterable: Any, span: SourceSpan) -> Any:
    """An argument a C builtin will iterate: containers as they are (their length charged),
    anything lazy (ranges, zips, generators) wrapped to charge one step per item."""
    if isinstance(iterable, (str, bytes, list, tuple, dict, set, frozenset, np.ndarray)):
        counted_len(meter, iterable, span)
        return iterable
    if isinstance(iterable, range):
        return meter.counted(iterable, span)
    try:
        it = iter(iterable)
    except TypeError:
        return iterable
    return meter.counted(it, span)


def call_python(
    meter: Meter, fn: Callable[..., Any], name: str, args: tuple, kwargs: dict, span: SourceSpan
) -> Any:
    """Call a Python function at trace time: lazy arguments are metered, the result's size
    is checked, and its exceptions become located kernel errors."""
    given = args
    args = tuple(materialize(meter, a, span) if _lazy(a) else a for a in args)
    _walks(meter, (*args, *kwargs.values()), span)
    if name in _COMPARING or name.rpartition(".")[2] in _COMPARING_METHODS:
        owner = getattr(fn, "__self__", None)
        nesting.check_compared(meter, (owner, *args, *kwargs.values()), span)
    try:
        result = fn(*args, **kwargs)
    except (NeuronEmuError, RecursionError):
        raise  # (a RecursionError is located by the statement that nests too deeply)
    except ZeroDivisionError:
        raise KernelTypeError(f"{name}(): division by zero", span).as_python(
            "ZeroDivisionError"
        ) from None
    except _PYTHON_ERRORS as exc:
        raise KernelTypeError(f"{name}(): {exc}", span).as_python(
            _python_name(exc), exc.args
        ) from None
    inputs = (getattr(fn, "__self__", None), *args, *kwargs.values())
    check_result(meter, result, name, span, inputs)
    # (a lazy argument is taken through a metering generator: the chain is the given one's)
    nesting.check_chained(meter, result, (*inputs, *given), span, f"{name}()")
    return result


# Calls whose C code compares their arguments' items (deeply, for containers).
_COMPARING = frozenset(
    "max min sorted operator.eq operator.ne operator.lt operator.le operator.gt operator.ge "
    "operator.contains operator.countOf operator.indexOf".split()
)
_COMPARING_METHODS = frozenset("index count remove sort".split())
_WALKED = (str, bytes, bytearray, list, tuple, dict, set, frozenset, collections.deque)
_ITEMS_PER_TICK = 4096  # (as Meter.items: items C may walk, per unit of clock polling)


def _walks(meter: Meter, args: tuple, span: SourceSpan) -> None:
    """The items a call's arguments hold, which its C code may walk (`dict.fromkeys(big)`
    walks 4M bytes to make a 1-item dict) as work that reads the clocks: many such calls
    end on trace_seconds when the budget runs out, not calls later."""
    n = sum(len(a) for a in args if isinstance(a, _WALKED))
    n += sum(a.size for a in args if isinstance(a, np.ndarray))
    if n >= _ITEMS_PER_TICK:
        meter.tick(span, n // _ITEMS_PER_TICK)


# What a Python or NumPy call may raise for bad arguments: the kernel's own, catchable error
# (a UnicodeError and NumPy's AxisError are ValueErrors; LookupError an unknown codec;
# RuntimeError a container changed while C code iterates it; StopIteration from next()).
_PYTHON_ERRORS = (
    TypeError,
    ValueError,
    OverflowError,
    LookupError,
    AttributeError,
    ArithmeticError,
    RuntimeError,
    StopIteration,
)


def _python_name(exc: BaseException) -> str:
    """The builtin exception a kernel's `except` sees for `exc` (NumPy's own classes, such
    as AxisError, as the builtin they derive from)."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return "Exception"


def _lazy(value: Any) -> bool:
    return not isinstance(
        value,
        (str, bytes, list, tuple, dict, set, frozenset, np.ndarray, int, float, bool, type(None))
        + (collections.ChainMap,),  # (its maps are measured as a container's items are)
    ) and hasattr(value, "__iter__")


def check_result(
    meter: Meter, result: Any, what: str, span: SourceSpan, inputs: tuple = ()
) -> None:
    """A result Python or NumPy has made, within budget; what it made is counted: an array's
    bytes (unless it is a view of one of the `inputs`), a container's copy as work."""
    if isinstance(result, int) and not isinstance(result, bool):
        meter.int_bits(result.bit_length(), f"the result of {what}", span)
    elif isinstance(result, (slice, collections.ChainMap)):  # (`x = slice(x)` nests)
        nesting.check_made(meter, result, span, f"the result of {what}")
    elif isinstance(result, (str, bytes, list, tuple, dict, set, frozenset, collections.deque)):
        meter.items(len(result), f"the result of {what}", span)
        sizing.made(meter, result, span)
        nesting.check_made(meter, result, span, f"the result of {what}")
    elif isinstance(result, np.ndarray):
        refuse_objects(result, what, span)
        meter.items(result.size, f"the result of {what}", span)
        sizing.charge_array(meter, result, inputs, f"the result of {what}", span)


def refuse_objects(result: Any, what: str, span: SourceSpan | None) -> None:
    """An array of Python objects is refused where it is made: NumPy runs its elements'
    own operators in C (a big int's product, a list's repeat, an array that holds itself
    compared or printed), where no budget or nesting bound reaches. Trace-time arrays hold
    numbers, booleans or text, as the arrays a kernel's index tables and masks are."""
    if isinstance(result, np.ndarray) and result.dtype.kind == "O":
        raise KernelTypeError(
            f"{what}: an array of Python objects (dtype=object) is not supported; trace-time"
            " arrays hold numbers, booleans or text (NumPy falls back to objects for an int"
            " past 64 bits, or for lists of mixed kinds)",
            span,
        ).as_python("TypeError")


# Operators -------------------------------------------------------------------------------

_SEQUENCES = (str, bytes, list, tuple, collections.deque)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def check_binop(meter: Meter, op: str, a: Any, b: Any, span: SourceSpan) -> None:
    """Refuse, before it runs, an operator whose result would be over budget."""
    if op == "**" and _is_int(a) and _is_int(b) and b > 0:
        bits = max(int(abs(a)).bit_length() - 1, 0) * int(b)
        if abs(a) > 1:
            meter.int_bits(
                bits + 1, f"{shown(a)} ** {shown(b)}" if bits < 10_000 else "a power", span
            )
    elif op == "<<" and _is_int(a) and _is_int(b) and b > 0 and a:
        meter.int_bits(int(abs(a)).bit_length() + int(b), "a left shift", span)
    elif op == "*":
        if _is_int(a) and _is_int(b):
            meter.int_bits(int(abs(a)).bit_length() + int(abs(b)).bit_length(), "a product", span)
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, _SEQUENCES) and _is_int(n) and n > 0:
                total = len(seq) * int(n)
                meter.items(total, f"a repeated {type(seq).__name__}", span)
                sizing.copy_work(meter, sys.getsizeof(seq) * int(n), span)  # the copy is work
    elif op == "+" and isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        total = len(a) + len(b)
        meter.items(total, f"a concatenated {type(a).__name__}", span)
        sizing.copy_work(meter, sys.getsizeof(a) + sys.getsizeof(b), span)
    elif op == "%" and isinstance(a, (str, bytes)):
        _check_percent(meter, a, b, span)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        _check_array_op(meter, op, a, b, span)


def check_subscript(meter: Meter, value: Any, index: Any, span: SourceSpan) -> None:
    """`value[index]` of a trace-time value, before it is made: a slice of a sequence is a
    copy (work, as any copy), an array indexed by arrays a new array (its bytes)."""
    sizing.subscript(meter, value, index, span)


def _check_array_op(meter: Meter, op: str, a: Any, b: Any, span: SourceSpan) -> None:
    if op != "@":
        items = check_broadcast(meter, (a, b), f"an array operator {shown(op)}", span)
        _array_result(meter, op, a, b, items, span)
        return
    sa, sb = np.shape(a), np.shape(b)
    if len(sa) < 1 or len(sb) < 1:
        return
    try:
        shape = (*np.broadcast_shapes(sa[:-2], sb[:-2]), *sa[-2:-1], *sb[-1:])
    except ValueError:
        return  # NumPy reports the mismatch itself
    meter.items(math.prod(shape), "an array product '@'", span)
    meter.step(span, math.prod(shape) * sa[-1] // 65536)  # the multiply-adds are work too
    _array_result(meter, op, a, b, math.prod(shape), span)


def _array_result(meter: Meter, op: str, a: Any, b: Any, items: int | None, span: Any) -> None:
    """The array `a op b` will make counts its bytes against memory_bytes, before it is made
    (two strings added make one as wide as both)."""
    if items is None:
        return
    width = result_width((a, b), op)
    if width is not None:
        meter.allocate(items * width, f"an array operator {shown(op)}", span)


def result_width(args: tuple, op: str = "") -> int | None:
    """Bytes per element of NumPy's elementwise result of `args` (None: NumPy will refuse
    them): text and lists as the arrays NumPy makes of them first, and two strings added
    (`+`, np.add) as wide as both."""
    operands = [np.asarray(x) if isinstance(x, (str, bytes, list, tuple)) else x for x in args]
    try:
        dtype = np.result_type(*operands)
    except (TypeError, ValueError):
        return None  # NumPy reports what cannot combine
    if dtype.kind in "SU" and op in ("+", "add"):
        return sum(np.asarray(x).dtype.itemsize for x in operands)
    return max(sizing.itemsize(dtype), 8 if op in ("/", "true_divide", "divide") else 0)


def check_broadcast(meter: Meter, args: Any, what: str, span: SourceSpan | None) -> int | None:
    """The broadcast result of elementwise NumPy arguments, bounded before NumPy makes it
    (its number of elements, or None if NumPy will refuse the shapes)."""
    shapes = []
    for a in args:
        if isinstance(a, (list, tuple)):  # NumPy makes it an array first: what it would be
            try:
                a = np.asarray(a)
            except (ValueError, TypeError, OverflowError, RecursionError):
                return None  # NumPy reports what it cannot convert itself
            refuse_objects(a, what, span)
        if isinstance(a, (np.ndarray, np.generic, int, float)):
            shapes.append(np.shape(a))
    try:
        shape = np.broadcast_shapes(*shapes)
    except (ValueError, TypeError):
        return None  # NumPy reports the mismatch itself
    meter.items(math.prod(shape), what, span)
    return math.prod(shape)


# A conversion's flags, width, precision and length after its `%` (and its mapping key).
_PERCENT = re.compile(r"[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?")


def _percent_fields(text: str) -> list[tuple[str, str]]:
    """The (width, precision) of each conversion of a %-format, read as CPython reads it: a
    mapping key `%(...)` ends at its matching parenthesis (keys may hold nested ones)."""
    fields = []
    i = text.find("%")
    while i != -1:
        i += 1
        if i < len(text) and text[i] == "(":
            depth, i = 1, i + 1
            while i < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
        m = _PERCENT.match(text, i)
        if m is not None:
            fields.append((m[1] or "", m[2] or ""))
            i = m.end()
        i = text.find("%", i + 1 if i < len(text) and text[i] == "%" else i)
    return fields


def _check_percent(meter: Meter, fmt: str | bytes, args: Any, span: SourceSpan) -> None:
    check_deep_size(meter, args, span)
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    for width, precision in _percent_fields(text):
        for part in (width, precision):
            if part == "*":  # the width is an argument: every int argument bounds it
                for a in args if isinstance(args, tuple) else (args,):
                    if _is_int(a):
                        meter.items(abs(int(a)), "a '%*' format width", span)
            elif part:
                meter.items(int(part) if len(part) <= 18 else 10**18, "a '%' format width", span)


# Formatting ------------------------------------------------------------------------------


def text(meter: Meter, value: Any, span: SourceSpan, conversion: str = "s") -> str:
    """`str(value)` (or `repr`, conversion "r") for the kernel: a container is first walked,
    element by element, up to the sequence_items budget, since lists that hold one list many
    times over print as their whole deep size."""
    check_deep_size(meter, value, span)
    made = neutral(repr(value) if conversion == "r" else str(value))  # (no host address)
    sizing.made(meter, made, span)
    return made


def check_deep_size(meter: Meter, value: Any, span: SourceSpan) -> None:
    nesting.check_text(meter, value, span)


def format_value(meter: Meter, value: Any, spec: str, span: SourceSpan) -> str:
    """`format(value, spec)` with the width and precision bounded first."""
    check_deep_size(meter, value, span)
    # Every run of digits may be the width or the precision (a fill may be any character,
    # a newline or a digit too): each is bounded, whatever form the rest of the spec has.
    for part in re.findall(r"\d+", spec) if isinstance(spec, str) else ():
        meter.items(int(part) if len(part) <= 18 else 10**18, "a format width or precision", span)
    try:
        return neutral(format(value, spec))
    except (ValueError, TypeError, OverflowError) as exc:
        raise KernelTypeError(f"format {shown(spec)}: {exc}", span).as_python(
            type(exc).__name__, exc.args
        ) from None


class _Formatter(string.Formatter):
    """str.format without attribute walks: a field is an argument, optionally indexed."""

    def __init__(self, meter: Meter, span: SourceSpan):
        self.meter = meter
        self.span = span

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            if is_attribute:
                raise not_available(f"reading the attribute {key!r} in a format field", self.span)
            if not isinstance(obj, (list, tuple, dict)):
                raise KernelTypeError(
                    f"format field [{key!r}] of a {type(obj).__name__}", self.span
                )
            obj = obj[key]
        return obj, first

    def format_field(self, value: Any, format_spec: str) -> Any:
        return format_value(self.meter, value, format_spec, self.span)


def _format(meter: Meter, template: str, args: tuple, kwargs: Any, span: SourceSpan) -> str:
    try:
        result = _Formatter(meter, span).vformat(template, args, kwargs)
    except NeuronEmuError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise KernelTypeError(f"str.format(): {type(exc).__name__}: {exc}", span) from None
    meter.items(len(result), "the result of str.format()", span)
    return result


# Kernel functions handed to Python (sorted(key=...), max(key=...)) -----------------------


def python_callable(
    call: Callable[[list[Any], dict[str, Any]], Any], value: Any
) -> Callable[..., Any]:
    """A kernel function (`value`) as a plain Python callable (for the `key=` of sorted, min,
    max), shown as the kernel value it is."""
    return _KernelCallable(call, value)


class _KernelCallable:
    __slots__ = ("_call", "_value")

    def __init__(self, call: Callable[[list[Any], dict[str, Any]], Any], value: Any):
        self._call = call
        self._value = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(list(args), kwargs)

    def __repr__(self) -> str:
        return shown(self._value)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)
