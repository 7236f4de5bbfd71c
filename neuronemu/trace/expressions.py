"""Expressions of the kernel's meta-program: names, attributes, subscripts, operators,
comparisons, comprehensions, f-strings."""

from __future__ import annotations

import collections
import difflib
import functools
import operator
import re
from typing import Any, Callable

import numpy as np

from neuronemu.errors import KernelSyntaxError, KernelTypeError, NeuronEmuError, SourceSpan, shown
from neuronemu.frontend import ast as A
from neuronemu.frontend.parser import parse_expression
from neuronemu.ir import ALL_DTYPES, DType, IndirectView, Tensor, View
from neuronemu.replay import journal, moving
from neuronemu.trace import confine, generators, nesting, sizing, tensor_api
from neuronemu.trace.exceptions import KernelException, exception_attr
from neuronemu.trace.interpreter import _describe, _is_tensor
from neuronemu.trace.kernel import ScheduledKernel, is_jit, launch_grid, schedule_edges
from neuronemu.trace.legacy_index import (
    MGRID,
    AffineIndex,
    AffineView,
    MGrid,
    Predicate,
    marked_index,
    mgrid_index,
)
from neuronemu.trace.lib import nl_control
from neuronemu.trace.lib.emit import InstrHandle
from neuronemu.trace.lib.modules import import_module
from neuronemu.trace.objects import BoundMethod, EnumMember, UserClass, UserObject, iterate
from neuronemu.trace.scopes import UNBOUND, unbound
from neuronemu.trace.state import Closure, ComprehensionEnv, Env, TracerState
from neuronemu.trace.values import (
    BlockTensor,
    Builtin,
    GridLaunch,
    Namespace,
    Partial,
    Poison,
    Scalar,
)

_BINOPS: dict[str, Callable[[Any, Any], Any]] = {  # also what `x op= y` means
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "@": operator.matmul,
}


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    **journal.TESTS,  # (<, <=, >, >=, ==, !=)
    "is": operator.is_,
    "is not": operator.is_not,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


# NkiTensor view methods, implemented on View (values.py).
# Python operators on tiles and the nl.* functions they mean (legacy NKI tile arithmetic).
_TILE_OPS = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
    "**": "power",
    "&": "bitwise_and",
    "|": "bitwise_or",
    "^": "bitwise_xor",
    "<<": "left_shift",
    ">>": "right_shift",
    "<": "less",
    ">": "greater",
    "<=": "less_equal",
    ">=": "greater_equal",
    "==": "equal",
    "!=": "not_equal",
}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "-": operator.neg,
    "+": operator.pos,
    "~": operator.invert,
}


class Expressions(TracerState):
    """Expression evaluation of the tracer (see tracer.py)."""

    _fields: dict[tuple[str, SourceSpan], A.Node]  # parsed f-string fields

    def eval(self, e: A.Node, env: Env) -> Any:
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            raise KernelSyntaxError(f"{_describe(e)} is not supported in NKI kernels", e.span)
        return method(e, env)

    def _e_Const(self, e: A.Const, env: Env) -> Any:
        return e.value

    def _e_Name(self, e: A.Name, env: Env) -> Any:
        found, value = env.lookup(e.id)
        if not found:
            close = difflib.get_close_matches(e.id, env.visible(), n=1)
            raise KernelTypeError(
                f"name {shown(e.id)} is not defined",
                e.span,
                hint=f"did you mean {shown(close[0])}?" if close else None,
            ).as_python("NameError", (f"name {e.id!r} is not defined",))
        if isinstance(value, Poison):
            raise _deferred(value.error)
        if value is UNBOUND:  # a local of the function, read before it is bound
            raise unbound(e.id, e.id in env.vars, e.span)
        return value

    def _e_FString(self, e: A.FString, env: Env) -> str:
        out: list = []
        for part in e.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            text, conv, spec = part
            key = (text, e.span)
            node = self._fields.get(key)
            if node is None:
                node = self._fields[key] = parse_expression(text, e.span, self.meter.limits)
            value = self.eval(node, env)
            if self.meter.journals and journal.marked(value):  # (the text moves with the loop)
                if journal.text_field(value, conv, spec):  # (a replay makes it again)
                    if not isinstance(value, journal.Text):  # (checked as any field is)
                        confine.format_value(self.meter, int(value), spec, e.span)
                    out.append(value if isinstance(value, journal.Text) else (value, spec))
                    continue
                journal.refuse(self.meter, "an f-string of the loop variable")
            if conv in ("r", "s", "a"):
                value = confine.text(self.meter, value, e.span, "s" if conv == "s" else "r")
                if conv == "a":  # ascii(): repr with non-ASCII characters escaped
                    value = value.encode("ascii", "backslashreplace").decode("ascii")
            if "{" in spec:  # nested fields of the spec: `{v:{width}.{prec}f}`
                spec = _NESTED.sub(lambda m: self._spec_field(m.group(1), e.span, env), spec)
            out.append(confine.format_value(self.meter, value, spec, e.span))
        made = journal.text(out)  # (a journal.Text where a field moves with the loop)
        self.meter.items(len(made), "an f-string", e.span)
        return made

    def _spec_field(self, text: str, span: SourceSpan, env: Env) -> str:
        node = self._fields.get((text, span))
        if node is None:
            node = self._fields[(text, span)] = parse_expression(text, span, self.meter.limits)
        return confine.format_value(self.meter, self.eval(node, env), "", span)

    def _e_Attribute(self, e: A.Attribute, env: Env) -> Any:
        value = self.eval(e.value, env)
        try:
            return self.getattr(value, e.attr, e.span)
        except KernelTypeError as err:
            name = e.value.id if isinstance(e.value, A.Name) else None
            wanted = self.kernel_values
            if name in wanted and wanted[name] is value and e.attr in _TENSOR_ATTRS:
                kind = type(value).__name__
                article = "an" if kind[0] in "aeiou" else "a"
                raise KernelTypeError(
                    f"kernel input {name!r} is {shown(value)} ({article} {kind}), but "
                    f"the kernel uses {name}.{e.attr} as a tensor's",
                    e.span,
                    hint=f"pass an array for it: -i {name}=float32[128,512] on the command "
                    f"line, a NumPy array in inputs={{{name!r}: ...}}",
                ) from err
            raise

    def getattr(self, value: Any, attr: str, span: SourceSpan) -> Any:
        found, got = self.python_attr(value, attr, span)  # pytypes.py
        if found:
            return got
        if isinstance(value, InstrHandle) and attr == "depends_on":
            return Builtin("depends_on", value.depends_on)
        if isinstance(value, Closure) and attr == "with_schedule":
            return Builtin(
                "with_schedule",
                lambda span, edges: ScheduledKernel(value.fn, schedule_edges(edges, span)),
            )
        if isinstance(value, UserObject) and attr == "__dict__":
            return value.attrs  # a kernel object's own attribute dict, live, as in Python
        if isinstance(value, (UserObject, UserClass, EnumMember)):
            found, got = self.object_attr(value, attr, span)
            if not found:  # (CPython's message, an AttributeError; a dunder one CPython's
                # objects may have, `__doc__`, is a refusal kernel code cannot catch)
                cls = value if isinstance(value, UserClass) else value.cls
                owner = f"type object {cls.name!r}" if cls is value else f"{cls.name!r} object"
                err = KernelTypeError(f"{owner} has no attribute {attr!r}", span)
                raise err if attr[:2] == attr[-2:] == "__" else err.as_python("AttributeError")
            return got
        if isinstance(value, Namespace):
            got = value.get(attr, span)
            if isinstance(got, Poison):
                raise _deferred(got.error)
            return got
        if isinstance(value, BlockTensor) and attr in ("shape", "dtype", "ndim", "buffer", "name"):
            return {
                "shape": value.shape,
                "dtype": value.dtype,
                "ndim": len(value.shape),
                "buffer": value.kind_of_buffer,
                "name": value.label,
            }[attr]
        if isinstance(value, AffineView) and attr in ("shape", "dtype", "ndim"):
            return {"shape": value.shape, "dtype": value.dtype, "ndim": len(value.shape)}[attr]
        if isinstance(value, Scalar) and attr == "dtype":
            return value.dtype
        if isinstance(value, KernelException) and attr == "args":
            return value.args
        if isinstance(value, KernelException) and exception_attr(value, attr)[0]:
            return exception_attr(value, attr)[1]
        if isinstance(value, AffineView) and attr == "broadcast_to":
            return self._broadcast_to(tensor_api.as_view(value), span)
        if isinstance(value, (Tensor, View)):
            tensor_attrs: dict[str, Callable[[], Any]] = {
                "shape": lambda: tuple(value.shape),
                "dtype": lambda: value.dtype,
                "ndim": lambda: len(value.shape),
                "buffer": lambda: (
                    (value.tensor if isinstance(value, View) else value).kind_of_buffer
                ),
                "name": lambda: (value.tensor if isinstance(value, View) else value).name,
            }
            if attr in tensor_attrs:
                return tensor_attrs[attr]()
            view = value.full() if isinstance(value, Tensor) else value
            if isinstance(view, IndirectView) and attr in tensor_api.VIEW_METHODS | {
                "ap",
                "reshape",
                "view",
                "reinterpret_cast",
            }:
                raise KernelTypeError(
                    f"an indirect view (addressed at run time) cannot be "
                    f"re-viewed with .{attr}(); pass it to dma_copy as is",
                    span,
                )
            if attr == "ap":
                return Builtin(
                    "ap", functools.partial(tensor_api.access_pattern, self.builder, view)
                )
            if attr in ("view", "reinterpret_cast"):
                return Builtin(attr, functools.partial(tensor_api.view_as, self.builder, view))
            if attr == "reshape":
                return Builtin("reshape", functools.partial(tensor_api.reshape_call, view))
            if attr == "broadcast_to":
                return self._broadcast_to(view, span)
            if attr in tensor_api.VIEW_METHODS:
                method = getattr(tensor_api, attr)
                return Builtin(attr, lambda span, *args, **kw: method(view, *args, **kw, span=span))
            raise KernelTypeError(f"tensor has no attribute {attr!r} (in neuronemu yet)", span)
        if isinstance(value, DType):
            if attr in ("itemsize", "name", "type"):  # (np.dtype(x).type: np.float32, a DType)
                return value if attr == "type" else getattr(value, attr)
            raise KernelTypeError(f"a dtype has no attribute {attr!r} (in neuronemu yet)", span)
        if isinstance(value, MGrid) and attr in ("p", "x", "y", "z"):
            axis = value.axis(attr)
            if axis is None:
                raise KernelTypeError(f"a {len(value)}-d nl.mgrid has no .{attr}", span)
            return axis
        if isinstance(value, np.ndarray) and attr == "dtype":  # as kernels see dtypes
            from neuronemu_isa.numerics import dtype_name

            try:
                return ALL_DTYPES[dtype_name(value.dtype)]
            except KeyError:  # int64, float64: no NKI dtype; its name is all a kernel needs
                return value.dtype.name
        if isinstance(value, _PLAIN) and not hasattr(value, attr):  # (CPython's error)
            raise KernelTypeError(
                f"{type(value).__name__!r} object has no attribute {attr!r}", span
            ).as_python("AttributeError")
        got = confine.attribute(
            self.meter, value, attr, span, lambda v, numpy: self.to_python(v, span, numpy)
        )  # (`i.numerator` of a marked int: marked, or the replay refused)
        if callable(got) or isinstance(got, confine.Method):  # (its call is watched)
            return got
        return journal.made_by(self.meter, f".{attr}", [value], {}, got)

    def to_python(self, value: Any, span: SourceSpan, numpy: bool = False) -> Any:
        """A trace-time value handed to Python code (a list method, sorted's key): kernel
        functions become plain callables, and for NumPy dtypes NumPy dtypes; the rest stays
        as it is."""
        if numpy and isinstance(value, Builtin) and value.name in ("int", "float", "bool"):
            return {"int": int, "float": float, "bool": bool}[value.name]  # `.astype(int)`
        if isinstance(value, (Closure, BoundMethod, Builtin, UserClass, confine.Method, Partial)):
            return confine.python_callable(
                lambda args, kwargs: self.call(value, args, kwargs, span), value
            )
        if numpy and isinstance(value, DType):
            return value.np
        return value

    def _e_Subscript(self, e: A.Subscript, env: Env) -> Any:
        return self._subscript(
            self.eval(e.value, env), self.eval(e.index, env), e.span, e.index.span
        )

    def _subscript(
        self, value: Any, index: Any, span: SourceSpan, index_span: SourceSpan | None = None
    ) -> Any:
        picking = False
        if self.meter.journals:
            journal.read(self.meter, value)
            kind = journal.marked(index)
            if kind is not journal.Opaque and journal.pickable(self.meter, value, index):
                picking = True  # a tile (or a list) from a list, at a moving index
            elif kind is journal.Opaque or (kind and not _is_tensor(value)):
                why = "an index that does not move by a constant step"
                # (for the loops whose values make it move so, not for those nested since)
                journal.refuse(self.meter, why, journal.level_of(index, kind=kind))
        if isinstance(value, AffineIndex):
            return value.expand(index, span)
        if isinstance(value, Closure) and any(is_jit(d) for d in value.fn.decorators):
            return GridLaunch(value, launch_grid(index, span))  # kernel[gx, gy](...)
        if value is MGRID:
            return mgrid_index(index, span)
        if isinstance(value, BlockTensor):
            if self.meter.journals:
                tile, rest = moving.recorded_block(self.meter, value, index, span)
            else:
                tile, rest = value.split(index, span)
            return self._subscript(tile, rest, span, index_span) if rest else tile
        if isinstance(value, Tensor):
            value = value.full()
        if isinstance(value, View):  # (an index tile in it: a gather, gather_index.py)
            return tensor_api.subscript(value, index, span)
        confine.check_subscript(self.meter, value, index, span)
        if picking:
            item = value[index]
            if not isinstance(item, (Tensor, list)) and isinstance(index, journal.Affine):
                return journal.lookup(self.meter, value, index, item)
            journal.pick(self.meter, value, index, item)
            return item
        try:
            return value[index]
        except (IndexError, KeyError, TypeError) as exc:
            raise KernelTypeError(f"{type(exc).__name__}: {exc}", span).as_python(
                type(exc).__name__, exc.args
            ) from None

    def _e_Slice(self, e: A.Slice, env: Env) -> slice:
        def part(n: A.Node | None) -> Any:
            value = None if n is None else self.eval(n, env)
            # A NumPy integer bound (`np.int32(3)`, from trace-time arithmetic on arrays) is
            # an int, as for Python's own slicing.
            return int(value) if isinstance(value, np.integer) else value

        made = slice(part(e.lower), part(e.upper), part(e.step))
        if all(p is None or type(p) is int for p in (made.start, made.stop, made.step)):
            return made  # (the common case, an index: nothing nests)
        return nesting.check_made(self.meter, made, e.span)

    def _e_TupleExpr(self, e: A.TupleExpr, env: Env) -> tuple:
        return nesting.check_made(self.meter, tuple(self._elements(e.elts, env)), e.span)

    def _e_SetExpr(self, e: A.SetExpr, env: Env) -> set:
        made = confine.call_python(
            self.meter, set, "set", (self._elements(e.elts, env),), {}, e.span
        )
        nesting.check_made(self.meter, made, e.span)
        return journal.create(self.meter, made) if self.meter.journals else made

    def _e_ListExpr(self, e: A.ListExpr, env: Env) -> list:
        made = nesting.check_made(self.meter, self._elements(e.elts, env), e.span)
        return journal.create(self.meter, made) if self.meter.journals else made

    def _elements(self, elts: tuple[A.Node, ...], env: Env) -> list:
        out: list[Any] = []
        for x in elts:
            if isinstance(x, A.Starred):
                value = self.eval(x.value, env)
                if _is_tensor(value) or not hasattr(value, "__iter__"):
                    raise KernelTypeError(f"cannot unpack {type(value).__name__} with *", x.span)
                if not isinstance(value, (list, tuple)):  # an iterator: a step per item
                    value = confine.materialize(self.meter, value, x.span)
                out.extend(value)
                self.meter.items(len(out), "the items unpacked with *", x.span)
            else:
                out.append(self.eval(x, env))
        return out

    def _e_NamedExpr(self, e: A.NamedExpr, env: Env) -> Any:
        value = self.eval(e.value, env)
        scope = env
        while isinstance(scope, ComprehensionEnv) and scope.parent is not None:
            scope = scope.parent
        scope.bind(e.target, value)
        return value

    def _e_DictExpr(self, e: A.DictExpr, env: Env) -> dict:
        pairs: list[tuple[Any, Any]] = []
        for k, v in zip(e.keys, e.values):
            if not isinstance(k, A.DictUnpack):
                pairs.append((self.eval(k, env), self.eval(v, env)))
                continue
            mapping = self.eval(v, env)  # `**m`: its items in order, as dict.update takes them
            if not isinstance(mapping, (dict, collections.ChainMap)):
                kind = getattr(getattr(mapping, "cls", None), "name", type(mapping).__name__)
                text = f"'{kind}' object is not a mapping"
                raise KernelTypeError(text, k.span).as_python("TypeError", (text,))
            confine.counted_len(self.meter, mapping, k.span)
            pairs.extend(mapping.items())
        made = confine.call_python(self.meter, dict, "dict", (pairs,), {}, e.span)
        nesting.check_made(self.meter, made, e.span)
        return journal.create(self.meter, made) if self.meter.journals else made

    def _e_Comprehension(self, e: A.Comprehension, env: Env) -> Any:
        if e.kind == "tuple" and not self.meter.journals:
            return generators.expression(self, e, ComprehensionEnv(env))
        results: list[Any] = []
        local = ComprehensionEnv(env)

        def loop(level: int) -> None:
            if level == len(e.iters):
                if e.kind == "dict":
                    assert e.key is not None  # (the parser gives a dict comprehension its key)
                    results.append((self.eval(e.key, local), self.eval(e.elt, local)))
                else:
                    results.append(self.eval(e.elt, local))
                return
            iterable = self.eval(e.iters[level], local)
            if self.meter.journals:
                journal.iterate(self.meter, iterable)
            for item in iterate(iterable, e.iters[level].span):
                self._count_iteration(e.span)
                self.assign(e.targets[level], item, local)
                cond = e.conds[level]
                if cond is None or self.truth(self.eval(cond, local), cond.span):
                    loop(level + 1)

        loop(0)
        if e.kind == "dict":  # (an unhashable key: CPython's TypeError, located)
            made: Any = confine.call_python(self.meter, dict, "dict", (results,), {}, e.span)
        elif e.kind == "set":
            made = confine.call_python(self.meter, set, "set", (results,), {}, e.span)
        else:
            made = tuple(results) if e.kind == "tuple" else results
        nesting.check_made(self.meter, made, e.span)
        return journal.create(self.meter, made) if self.meter.journals else made

    def _e_BinOp(self, e: A.BinOp, env: Env) -> Any:
        return self.binop(e.op, self.eval(e.left, env), self.eval(e.right, env), e.span)

    def binop(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
        if _is_tensor(a) or _is_tensor(b):
            return self.tile_op(op, a, b, span)
        if isinstance(a, Scalar) or isinstance(b, Scalar):
            return nl_control.scalar_binop(self, op, a, b, span)
        confine.check_binop(self.meter, op, a, b, span)
        if self.meter.journals:
            journal.operands(self.meter, op, a, b)
        try:
            result = _BINOPS[op](a, b)
            if op == "%" and isinstance(a, (str, bytes)):  # (the text made is work: a `%s` of
                sizing.made(self.meter, result, span)  # a 4M-item list, 12 MB, 0.3 s)
            if self.meter.journals and not isinstance(result, AffineIndex):  # (recorded for
                result = journal.derive(self.meter, op, a, b, result)  # replay; an index: below)
        except ZeroDivisionError:
            raise KernelTypeError("division by zero", span).as_python("ZeroDivisionError") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise KernelTypeError(f"operator {shown(op)}: {exc}", span).as_python(
                type(exc).__name__, exc.args
            ) from None
        if self.meter.journals and isinstance(result, AffineIndex):
            return marked_index(self.meter, op, a, b, result)
        return _checked_result(self.meter, a, b, result, span)

    def _e_UnaryOp(self, e: A.UnaryOp, env: Env) -> Any:
        v = self.eval(e.operand, env)
        if e.op == "not":
            return not self.truth(v, e.operand.span)
        if isinstance(v, Scalar) and e.op in "+-":
            return v if e.op == "+" else nl_control.scalar_negate(self, v, e.span)
        if _is_tensor(v):
            if e.op == "+":
                return v
            if e.op == "-":
                return self.tile_op("*", v, -1.0, e.span)
            raise KernelTypeError(f"tile operator {shown(e.op)} is not supported yet", e.span)
        try:
            result = _UNARY[e.op](v)
            if self.meter.journals:  # -i moves as i does; ~i does not
                return journal.derive(self.meter, "-" if e.op in "+-" else "~", 0, v, result)
            return result
        except TypeError as exc:
            raise KernelTypeError(f"operator {shown(e.op)}: {exc}", e.span).as_python(
                "TypeError"
            ) from None

    def tile_op(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
        """`a + b` on tiles is `nl.add(a, b)`: an elementwise instruction into a new tile."""
        name = _TILE_OPS.get(op)
        if name is None:
            raise KernelTypeError(f"operator {shown(op)} is not defined on tiles", span)
        fn = import_module(self, "nki.language", span).members[name]
        return fn.call(span, a, b)

    def _e_BoolOp(self, e: A.BoolOp, env: Env) -> Any:
        value: Any = None
        for node in e.values:
            value = self.eval(node, env)
            truth = self.truth(value, node.span)
            if (e.op == "and" and not truth) or (e.op == "or" and truth):
                return value
        return value

    def _e_Compare(self, e: A.Compare, env: Env) -> Any:
        left = self.eval(e.left, env)
        for op, node in zip(e.ops, e.comparators):
            right = self.eval(node, env)
            ok = self.compare(op, left, right, e.span, len(e.ops) == 1)
            if _is_tensor(ok) or isinstance(ok, Scalar):
                if isinstance(ok, Scalar) and len(e.ops) != 1:
                    raise KernelTypeError(
                        "chained comparisons of NkiScalars are not supported; compare twice "
                        "and combine the results with scalar arithmetic",
                        e.span,
                    )
                return ok  # an elementwise compare of tiles, or a register 0 or 1
            if isinstance(ok, Predicate):
                if len(e.ops) != 1:
                    raise KernelTypeError(
                        "chained comparisons of nl.arange indices are not "
                        "supported; combine conditions with &",
                        e.span,
                    )
                return ok
            if isinstance(ok, np.ndarray) and ok.size != 1 and len(e.ops) == 1:
                return ok  # NumPy's elementwise answer, as CPython gives it
            if not self.truth(ok, e.span):  # (a chain asks each answer's truth, as CPython)
                return False
            left = right
        return True

    def compare(self, op: str, left: Any, right: Any, span: SourceSpan, alone: bool) -> Any:
        """`left op right` at trace time; on tiles (and alone in its expression) an
        elementwise compare instruction."""
        if self.meter.journals:
            journal.read(self.meter, left)
            journal.read(self.meter, right)
            index = isinstance(left, AffineIndex) or isinstance(right, AffineIndex)
            if journal.marked(left, right) and not index:  # (an index's: a mask that moves)
                outcome = journal.compared(self.meter, op, left, right)  # (ints: checked on)
                if outcome is not None:
                    return outcome
        if op in ("==", "!=") and (left is None or right is None):
            return (left is right) == (op == "==")  # `t != None`: a test, not a tile op
        if op in ("is", "is not"):  # (a marked int is the int it stands for)
            left, right = journal.plain(left), journal.plain(right)
        if op not in ("is", "is not") and (_is_tensor(left) or _is_tensor(right)):
            if alone and op in _TILE_OPS:
                return self.tile_op(op, left, right, span)
            raise KernelTypeError(
                "a tensor value cannot be compared at trace time (its values exist only "
                "when the kernel runs)",
                span,
            )
        if op in _SCALAR_COMPARE and (isinstance(left, Scalar) or isinstance(right, Scalar)):
            return nl_control.scalar_binop(self, op, left, right, span)  # a register 0 or 1
        if op in ("in", "not in") and isinstance(right, UserClass) and right.enum:
            members = [m for m in right.members.values() if isinstance(m, EnumMember)]
            found = any(left is m or (not isinstance(left, EnumMember) and m.value == left)
                        for m in members)  # fmt: skip
            return found == (op == "in")  # `x in Color`: a member, or (3.12) a member's value
        nesting.check_compare(self.meter, op, left, right, span)
        if op in ("in", "not in") and _lazy(right):  # `x in itertools.count()`: metered
            right = confine.materialize(self.meter, right, span)
            found = any(left is item or left == item for item in right)
            return found == (op == "in")
        try:
            return _COMPARE[op](left, right)
        except (TypeError, ValueError) as exc:  # (NumPy: arrays that do not broadcast)
            raise KernelTypeError(f"comparison {shown(op)}: {exc}", span).as_python(
                type(exc).__name__
            ) from None

    def _broadcast_to(self, view: Any, span: SourceSpan) -> Builtin:
        """`tile.broadcast_to(shape)` is `nl.broadcast_to(tile, shape)`."""
        nl = import_module(self, "nki.language", span).members["broadcast_to"]
        return Builtin("broadcast_to", lambda span, *a, **kw: nl.fn(span, view, *a, **kw))

    def _e_Yield(self, e: A.Yield, env: Env) -> Any:
        journal.refuse(self.meter, "a generator")
        gen = generators.current()
        if gen is None:
            raise generators.not_in_generator(e.span)
        return gen.suspend(None if e.value is None else self.eval(e.value, env))

    def _e_YieldFrom(self, e: A.YieldFrom, env: Env) -> Any:
        journal.refuse(self.meter, "a generator")
        gen = generators.current()
        if gen is None:
            raise generators.not_in_generator(e.span)
        inner = iterate(self.eval(e.value, env), e.value.span)
        return gen.delegate(inner, lambda: self.meter.step(e.span))

    def _e_Lambda(self, e: A.Lambda, env: Env) -> Closure:
        journal.refuse(self.meter, "a lambda made in the loop")
        body = (A.Return(e.body.span, e.body),)
        return self.closure(A.FunctionDef(e.span, "<lambda>", e.params, body, ()), env)

    def _e_IfExp(self, e: A.IfExp, env: Env) -> Any:
        if self.truth(self.eval(e.test, env), e.test.span):
            return self.eval(e.body, env)
        return self.eval(e.orelse, env)

    def _e_Unsupported(self, e: A.Unsupported, env: Env) -> Any:
        self._s_Unsupported(e, env)

    def _e_Starred(self, e: A.Starred, env: Env) -> Any:
        raise KernelSyntaxError("starred expression is not allowed here", e.span)

    def truth(self, value: Any, span: SourceSpan) -> bool:
        if isinstance(value, journal.Text):  # (never empty: its ints have digits)
            return True
        if self.meter.journals:
            journal.read(self.meter, value)
            if isinstance(value, journal.Marked):  # (`if i:` is `if i != 0:`)
                journal.guard(self.meter, "!=", value, 0, value != 0)
        if isinstance(value, (AffineIndex, Predicate)):
            raise KernelTypeError(
                "an nl.arange index expression is used in a compile-time condition; pass it "
                "as mask= instead",
                span,
            )
        if _is_tensor(value):
            raise KernelTypeError(
                "a tensor value is used in a compile-time condition; its values exist only "
                "when the kernel runs",
                span,
            )
        if isinstance(value, Scalar):
            raise KernelTypeError(
                f"{value!r} is used in a compile-time condition; its value exists only when the "
                "kernel runs",
                span,
                hint="branch on the device with nl.if_else(cond, then_fn, else_fn), or loop "
                "with nl.while_loop",
            )
        try:
            return bool(value)
        except (ValueError, TypeError) as exc:  # (an array of many elements: CPython's error)
            raise KernelTypeError(str(exc), span).as_python(type(exc).__name__) from None


_NESTED = re.compile(r"\{([^{}]*)\}")  # a replacement field inside a format spec
_SCALAR_COMPARE = frozenset(("<", "<=", ">", ">=", "==", "!="))
# What only a tensor has: a kernel input given as a plain value and used so was meant as one.
_TENSOR_ATTRS = frozenset(("shape", "dtype", "ndim", "reshape", "ap", "view", "buffer"))
_CONTAINERS = (list, tuple, dict, set, frozenset)
# Values whose missing attribute is CPython's AttributeError (one they have but the trust
# rules keep from kernels stays a refusal no kernel code can catch).
_PLAIN = (int, float, str, bytes, type(None), *_CONTAINERS)


def _deferred(err: Exception) -> Exception:
    """A module-level name's deferred error (Poison), to raise at this use of the name."""
    return err.raised_again() if isinstance(err, NeuronEmuError) else err


def _checked_result(meter: Any, a: Any, b: Any, result: Any, span: SourceSpan) -> Any:
    """A container an operator made of containers (`t + t`, `[x] * n`, `d | e`): within the
    nesting and item budgets; no array of Python objects (`np.ones(2) + [10**30]`)."""
    confine.refuse_objects(result, "an operator", span)
    if isinstance(result, _CONTAINERS) and (
        isinstance(a, _CONTAINERS) or isinstance(b, _CONTAINERS)
    ):
        nesting.check_made(meter, result, span)
    return result


def _lazy(value: Any) -> bool:
    """An iterator `in` would consume in C (a generator of the kernel's is metered already)."""
    return hasattr(value, "__next__") and not isinstance(value, generators.KernelGenerator)
