"""Statements, assignment and calls of the kernel's meta-program, evaluated as the NKI
compiler does: loops unrolled, functions inlined, `nl`/`nisa` calls emitting instructions."""

from __future__ import annotations

import collections
import functools
from typing import Any, Callable

from neuronemu.errors import (
    BudgetError,
    KernelSyntaxError,
    KernelTypeError,
    NeuronEmuError,
    SourceSpan,
    shown,
)
from neuronemu.frontend import ast as A
from neuronemu.ir import DType, Tensor, View
from neuronemu.replay import journal, templates
from neuronemu.replay.lazy_tiles import numbered
from neuronemu.trace import confine, generators, nesting
from neuronemu.trace.exceptions import ExceptionClass, KernelException, builtin_base
from neuronemu.trace.flow import Flow
from neuronemu.trace.flow import Return as _Return
from neuronemu.trace.legacy_index import AffineView
from neuronemu.trace.lib import assign as lib_assign
from neuronemu.trace.objects import (
    CLASSMETHOD,
    PROPERTY,
    STATICMETHOD,
    BoundMethod,
    Marker,
    UserClass,
    UserObject,
    Wrapped,
)
from neuronemu.trace.scopes import UNBOUND, local_names, unbound
from neuronemu.trace.state import Closure, Env
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import (
    BlockTensor,
    Builtin,
    GridLaunch,
    OpRef,
    Partial,
)

_NO_DEFAULT = object()  # a dataclass field without a default
# The functions neuronemu implements for the NKI namespaces (their own errors are deliberate
# located ones; a failed lookup inside them is a neuronemu bug).
_NKI_LIBRARY = ("nl.", "nisa.", "nki.")


MAX_CALL_DEPTH = 64
# Calls whose results keep the marks of a loop recorded (journal.made_by): NKI's, type tests,
# divmod (its ints are `//` and `%`'s, marked as those are: neuronemu.trace.lib.host).
_MARK_KEEPING = (*_NKI_LIBRARY, "isinstance", "type", "divmod")


def _name_of(func: Any) -> str:
    return func.name if isinstance(func, Builtin) else f"nl.{getattr(func, 'name', func)}"


def _type_name(value: Any) -> str:
    """The type name CPython's messages give a value (a kernel object's class name)."""
    cls = getattr(value, "cls", None)
    return cls.name if isinstance(cls, UserClass) else type(value).__name__


def _describe(node: A.Node) -> str:
    if isinstance(node, A.Unsupported):
        return node.what
    return {
        "Starred": "a starred expression",
    }.get(type(node).__name__, type(node).__name__)


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (Tensor, View, AffineView, BlockTensor))


class Interpreter(Flow):
    """The statements, assignment and calls of the tracer (see tracer.py); loops are
    loops.py's."""

    depth: int  # calls being run (MAX_CALL_DEPTH)
    _name_counts: dict[str, int]  # tensor names given so far, by base name
    live_generators: list[Any]  # suspended generators, closed when tracing ends
    generator_functions: dict[int, tuple[Any, bool]]
    local_name_sets: dict[int, tuple[Any, frozenset[str]]]

    def exec_body(self, body: tuple[A.Node, ...], env: Env) -> None:
        for stmt in body:
            self.exec_stmt(stmt, env)

    def exec_stmt(self, s: A.Node, env: Env) -> None:
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise KernelSyntaxError(f"{_describe(s)} is not supported in NKI kernels", s.span)
        try:
            method(s, env)
        except NeuronEmuError as err:
            if err.span is None or not err.span.line:  # a construct with no place of its own
                err.span = s.span
            raise
        except RecursionError:  # the innermost statement names it; the stack is free again
            raise KernelSyntaxError(
                "nested too deeply to evaluate (an expression, data structure or chain of "
                "calls nests deeper than neuronemu follows)",
                s.span,
            ) from None
        except MemoryError:
            raise self.meter.over("memory_bytes", "the machine ran out of memory", s.span) from None

    def _s_ExprStmt(self, s: A.ExprStmt, env: Env) -> None:
        if isinstance(s.value, A.Const):  # docstrings and bare constants
            return
        self.eval(s.value, env)

    def _s_Assign(self, s: A.Assign, env: Env) -> None:
        target = s.targets[0]
        if (
            len(s.targets) == 1
            and isinstance(target, A.Subscript)
            and isinstance(s.value, A.Call)
            and self._assign_into(target, s.value, env)
        ):
            return
        self.pending_name = target.id if isinstance(target, A.Name) else None
        try:
            value = self.eval(s.value, env)
        finally:
            self.pending_name = None
        for target in s.targets:
            self.assign(target, value, env)

    def _assign_into(self, target: A.Subscript, call: A.Call, env: Env) -> bool:
        """`t[...] = f(...)` where f can write into the slice itself: do so."""
        container = self.eval(target.value, env)
        if not _is_tensor(container):
            return False
        func = self.eval(call.func, env)
        if isinstance(func, Builtin):
            into = func.into
        elif (
            isinstance(func, OpRef)
            and func.call is not None
            and getattr(func.call, "takes_into", False)
        ):
            into = lib_assign.into_of(func.call)  # nl.exp, nl.add, ...
        else:
            into = None
        if into is None:
            return False
        view = as_view(self._subscript(container, self.eval(target.index, env), target.span))
        if view is None:
            return False
        args, kwargs = self._arguments(call, env)
        check = func.check_arguments if isinstance(func, Builtin) else None
        if self.library_call(
            _name_of(func), functools.partial(into, call.span, view), call.span, args, kwargs, check
        ):
            return True
        lib_assign.assign_slice(self, view, self.call(func, args, kwargs, call.span), target.span)
        return True

    def _s_AnnAssign(self, s: A.AnnAssign, env: Env) -> None:
        if s.value is not None:
            self.assign(s.target, self.eval(s.value, env), env)

    def _s_Pass(self, s: A.Pass, env: Env) -> None:
        pass

    def _s_Delete(self, s: A.Delete, env: Env) -> None:
        for target in s.targets:
            if isinstance(target, A.Name):
                scope = env.declared.get(target.id, env) if env.declared else env
                if target.id in scope.vars and scope.vars[target.id] is UNBOUND:
                    raise unbound(target.id, True, target.span)
                if target.id not in scope.vars:
                    message = f"name {target.id!r} is not defined"
                    raise KernelTypeError(message, target.span).as_python("NameError", (message,))
                scope.vars[target.id] = UNBOUND  # (read again: CPython's unbound error)
            elif isinstance(target, A.Subscript):
                container = self.eval(target.value, env)
                index = self.eval(target.index, env)
                if _is_tensor(container) or not isinstance(
                    container, (list, dict, collections.deque, bytearray)
                ):
                    message = f"'{_type_name(container)}' object doesn't support item deletion"
                    raise KernelTypeError(message, target.span).as_python("TypeError", (message,))
                journal.refuse(self.meter, "a del")
                nesting.mutated(self.meter, container)
                try:
                    del container[index]
                except (IndexError, KeyError, TypeError, ValueError) as exc:
                    raise KernelTypeError(f"{type(exc).__name__}: {exc}", target.span).as_python(
                        type(exc).__name__, exc.args
                    ) from None
            elif isinstance(target, A.Attribute):
                obj = self.eval(target.value, env)
                attrs = obj.attrs if isinstance(obj, (UserObject, UserClass, Closure)) else None
                if attrs is None or target.attr not in attrs or getattr(obj.cls, "frozen", False):
                    message = f"{_type_name(obj)!r} object has no attribute {target.attr!r}"
                    raise KernelTypeError(message, target.span).as_python(
                        "AttributeError", (message,)
                    )
                journal.refuse(self.meter, "a del")
                nesting.mutated(self.meter, obj)
                del attrs[target.attr]
            else:
                raise KernelSyntaxError(f"cannot delete {_describe(target)}", target.span)

    def _s_If(self, s: A.If, env: Env) -> None:
        if self.truth(self.eval(s.test, env), s.test.span):
            self.exec_body(s.body, env)
        else:
            self.exec_body(s.orelse, env)

    def _s_With(self, s: A.With, env: Env) -> None:
        self.with_items(s, 0, env)  # contexts.py

    def _s_FunctionDef(self, s: A.FunctionDef, env: Env) -> None:
        journal.refuse(self.meter, "a function defined in the loop")
        func: Any = self.closure(s, env)
        for node in reversed(s.decorators):  # the nearest decorator applies first
            func = self._decorate(node, func, env)
        env.bind(s.name, func)

    def _decorate(self, node: A.Node, func: Any, env: Env) -> Any:
        """`@deco` over a function: the kernel's own decorators (functions, classes, objects
        with `__call__`) and `functools`' are called with it, as CPython does; NKI's (`nki.jit`
        and kin, `nki.compiler.*`), markers and a decorator neuronemu does not know leave the
        function as it is (kernels are found by their `def`)."""
        try:
            deco = self.eval(node, env)
        except BudgetError:
            raise
        except NeuronEmuError:
            return func  # (a decorator of a library neuronemu does not model)
        if isinstance(deco, (Closure, BoundMethod, Partial, UserClass, UserObject)) or (
            isinstance(deco, Builtin) and deco.name.startswith(("functools.", "contextlib."))
        ):
            return self.call(deco, [func], {}, node.span)
        return func

    def closure(self, fn: A.FunctionDef, env: Env) -> Closure:
        """The function `fn` defined in `env`, its default values evaluated now."""
        defaults = {p.name: self.eval(p.default, env) for p in fn.params if p.default is not None}
        return Closure(fn, env, defaults)

    def _s_Unsupported(self, s: A.Unsupported, env: Env) -> None:
        raise KernelSyntaxError(
            f"{s.what} are not supported in NKI kernels"
            if s.what.endswith("s")
            else f"{s.what} is not supported in NKI kernels",
            s.span,
        )

    def assign(self, target: A.Node, value: Any, env: Env) -> None:
        if isinstance(value, lib_assign.LoopReduce):  # combined into what the target holds (or is)
            holder = self.eval(target, env) if isinstance(target, A.Name) else None
            if isinstance(target, A.Subscript):
                container = self.eval(target.value, env)
                holder = self._subscript(container, self.eval(target.index, env), target.span)
            lib_assign.loop_reduce_into(self, holder, value, target.span)
            return
        if isinstance(target, A.Name):
            if isinstance(value, (Tensor, BlockTensor)) and value.name.startswith("%"):
                value.name = self._unique_name(target.id)
                if self.meter.journals:  # (a block tensor's: its block tiles named after it)
                    journal.record(self.meter, ("name", value, target.id))
            if self.meter.journals and target.id in (env.declared or ()):  # (not watched)
                journal.refuse(self.meter, "a global or nonlocal changed")
            env.bind(target.id, value)
        elif isinstance(target, (A.TupleExpr, A.ListExpr)):
            if _is_tensor(value):
                raise KernelTypeError("cannot unpack a tensor at trace time", target.span)
            if self.meter.journals:
                journal.read(self.meter, value)
            try:
                items = list(
                    value  # (an iterator's items are each a step, as in a loop)
                    if isinstance(value, (list, tuple))
                    else confine.materialize(self.meter, value, target.span)
                )
            except TypeError:
                raise KernelTypeError(
                    f"cannot unpack non-iterable {type(value).__name__} object", target.span
                ).as_python("TypeError") from None
            stars = [i for i, t in enumerate(target.elts) if isinstance(t, A.Starred)]
            if stars:
                k = stars[0]
                after = len(target.elts) - k - 1
                if len(items) < len(target.elts) - 1:
                    raise KernelTypeError(
                        f"not enough values to unpack (expected at least "
                        f"{len(target.elts) - 1}, got {len(items)})",
                        target.span,
                    ).as_python("ValueError")
                items = items[:k] + [items[k : len(items) - after]] + items[len(items) - after :]
            if len(items) != len(target.elts):  # (CPython's messages)
                raise KernelTypeError(
                    f"too many values to unpack (expected {len(target.elts)})"
                    if len(items) > len(target.elts)
                    else f"not enough values to unpack (expected {len(target.elts)}, "
                    f"got {len(items)})",
                    target.span,
                ).as_python("ValueError")
            for t, v in zip(target.elts, items):
                self.assign(t.value if isinstance(t, A.Starred) else t, v, env)
        elif isinstance(target, A.Subscript):
            container = self.eval(target.value, env)
            index = self.eval(target.index, env)
            if _is_tensor(container):
                lib_assign.assign_slice(
                    self, self._subscript(container, index, target.span), value, target.span
                )
                return
            self.set_item(container, index, value, target.span)
        elif isinstance(target, A.Attribute):
            obj = self.eval(target.value, env)
            journal.attribute_set(self.meter, obj)
            self.set_attribute(obj, target.attr, value, target.span)
        else:
            raise KernelSyntaxError(f"cannot assign to {_describe(target)}", target.span)

    def set_item(self, container: Any, index: Any, value: Any, span: SourceSpan) -> None:
        """`container[index] = value` for a trace-time Python container."""
        nesting.check_item(self.meter, value, span, f"a {type(container).__name__} item")
        nesting.mutated(self.meter, container)
        try:
            container[index] = value
        except NeuronEmuError:
            raise
        except Exception as exc:
            raise KernelTypeError(f"cannot assign item: {exc}", span).as_python(
                _builtin_name(exc), exc.args
            ) from None
        if self.meter.journals:
            event: tuple = ("setitem", container, "setitem", (index, value), {}, span)
            journal.change(self.meter, container, event)

    def unique_name(self, base: str) -> str:
        """`base`, or `base.N` when a tensor of the kernel already has that name."""
        journal.refuse(self.meter, "a register name")
        return self._unique_name(base)

    def _unique_name(self, base: str) -> str:
        n = self._name_counts.get(base, 0)
        self._name_counts[base] = n + 1
        return numbered(base, n)

    def _e_Call(self, e: A.Call, env: Env) -> Any:
        # Only the outermost call of `x = f(g(...))` allocates the tile named `x`.
        pending, self.pending_name = self.pending_name, None
        func = self.eval(e.func, env)
        if isinstance(func, Builtin) and func.name == "super" and not e.args and not e.keywords:
            return self.zero_arg_super(env, e.span)
        args, kwargs = self._arguments(e, env)
        self.pending_name = None if isinstance(func, Closure) else pending
        try:
            return self.call(func, args, kwargs, e.span)
        finally:
            self.pending_name = None

    def _arguments(self, e: A.Call, env: Env) -> tuple[list[Any], dict[str, Any]]:
        args = self._elements(e.args, env)
        kwargs: dict[str, Any] = {}
        for kw in e.keywords:
            value = self.eval(kw.value, env)
            if kw.name is None:
                if not isinstance(value, dict):
                    raise KernelTypeError("** argument must be a dict", kw.span)
                for key in value:  # (as CPython: names, each given once)
                    if not isinstance(key, str):
                        raise KernelTypeError("keywords must be strings", kw.span).as_python(
                            "TypeError"
                        )
                    if key in kwargs:
                        raise KernelTypeError(
                            f"got multiple values for keyword argument {key!r}", kw.span
                        ).as_python("TypeError")
                kwargs.update(value)
            elif kw.name in kwargs:
                raise KernelTypeError(f"keyword argument {kw.name!r} repeated", kw.span)
            else:
                kwargs[kw.name] = value
        return args, kwargs

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], span: SourceSpan) -> Any:
        self.meter.tick(span)  # a call tree with no loop in it is work too
        if isinstance(func, Closure):
            return self.call_closure(func, args, kwargs, span)
        if isinstance(func, BoundMethod):
            return self.call(func.func, [func.obj, *args], kwargs, span)
        if isinstance(func, ExceptionClass):
            if kwargs:
                raise KernelTypeError(f"{func.name}() takes no keyword arguments", span)
            return nesting.check_made(self.meter, KernelException(func, tuple(args)), span)
        if isinstance(func, UserClass):  # (made in a recorded iteration: journal.made_object)
            if builtin_base(func) is not None and not func.lookup("__init__")[0]:
                made = KernelException(func, tuple(args))  # class MyError(ValueError): pass
                return nesting.check_made(self.meter, made, span)
            return self.instantiate(func, args, kwargs, span)
        if isinstance(func, Marker) and func.name == "dataclass":
            if args and isinstance(args[0], UserClass):
                raise KernelTypeError("use @dataclass as a class decorator", span)
            return Marker("dataclass", tuple(sorted(kwargs.items())))
        if isinstance(func, Partial):
            return self.call(func.func, [*func.args, *args], {**func.kwargs, **kwargs}, span)
        if isinstance(func, GridLaunch):
            journal.refuse(self.meter, "a kernel launch")
            launched = func
            return self.launch(
                launched.grid,
                lambda: self.call_closure(launched.kernel, list(args), dict(kwargs), span),
                span,
            )
        if isinstance(func, Builtin):
            if self.meter.journals and func.name in templates.SIDE_EFFECTS:
                journal.refuse(self.meter, func.name)
            if self.meter.journals and func.name.startswith(_NKI_LIBRARY):
                # (a string made of the loop variable is only a name: anywhere else, the
                # library reads it)
                for v in (*args, *(v for k, v in kwargs.items() if k != "name")):
                    if isinstance(v, journal.Text):
                        journal.read(self.meter, v)
            result = self.library_call(
                func.name,
                functools.partial(func.fn, span),
                span,
                args,
                kwargs,
                func.check_arguments,
            )
            if self.meter.journals and not func.name.startswith(_MARK_KEEPING):
                if func.name in ("min", "max") and any(result is a for a in args):
                    return result  # (an argument, its mark kept: journal.chosen)
                if func.name == "ap" and journal.marked(*args, *kwargs.values()) is journal.Affine:
                    return result  # (a view at an offset that moves: plans._view checks)
                return journal.made_by(self.meter, f"{func.name}()", args, kwargs, result)
            return result
        if isinstance(func, OpRef):
            if func.call is None:
                raise KernelTypeError(f"nl.{func.name} cannot be called directly yet", span)
            return self.library_call(
                f"nl.{func.name}", functools.partial(func.call, span), span, args, kwargs
            )
        if isinstance(func, DType):
            # np.float32(2.5): a number rounded through the dtype, still a trace-time number.
            if len(args) == 1 and not kwargs and isinstance(args[0], (int, float)):
                # (out of the dtype's range: an OverflowError, as NumPy raises it)
                value = self.library_call(shown(func), func.np.type, span, args, {})
                value = value.item() if hasattr(value, "item") else float(value)
                return journal.made_by(self.meter, f"{shown(func)}()", args, {}, value)
            raise KernelTypeError(
                f"{shown(func)} converts one number at trace time; got {shown(args)}", span
            )
        if isinstance(func, confine.Method):
            # A method of a trace-time Python value: list.append, dict.get, str.format...
            if any(_is_tensor(a) for a in (*args, *kwargs.values())) and not func.name.startswith(
                ("list.", "dict.", "tuple.")
            ):
                raise KernelTypeError(f"{func.name}() cannot take a tensor", span)
            for arg in (*args, *kwargs.values()):  # what it may store, or compare in C
                nesting.check_item(self.meter, arg, span, f"an argument of {func.name}()")
            nesting.mutated(self.meter, func.obj)
            result = func.fn(span, *args, **kwargs)
            if self.meter.journals:
                templates.method_called(self.meter, func, args, kwargs, span)
                journal.create(self.meter, result)  # list.copy(), dict.copy()...
                inputs = [func.obj, *args]
                return journal.made_by(self.meter, f"{func.name}()", inputs, kwargs, result)
            return result
        if isinstance(func, Marker) and func in (STATICMETHOD, CLASSMETHOD, PROPERTY) and args:
            return Wrapped(func, args[0])  # `f = staticmethod(lambda x: ...)` in a class body
        if type(func).__name__ == "_KernelCallable":  # confine.python_callable's wrapper:
            return self.call(func._value, args, kwargs, span)  # a list method stored it
        if isinstance(func, UserObject) and func.cls.lookup("__call__")[0]:
            return self.call(func.cls.lookup("__call__")[1], [func, *args], kwargs, span)
        kind = func.cls.name if isinstance(func, UserObject) else type(func).__name__
        raise KernelTypeError(f"{kind!r} object is not callable", span).as_python("TypeError")

    @staticmethod
    def library_call(
        name: str,
        fn: Callable[..., Any],
        span: SourceSpan,
        args: list[Any],
        kwargs: dict[str, Any],
        check: Callable[[SourceSpan, list[Any], dict[str, Any]], None] | None = None,
    ) -> Any:
        """Call a function of neuronemu's library (nl.*, nisa.*, builtins) for the kernel.
        A call that does not fit the signature, or an argument value Python's conversions
        refuse (NaN for a size: ValueError, OverflowError, ...), is a located error naming the
        function. A failed lookup inside an NKI function (a missing machine constant) is
        neuronemu's bug: an internal error; Python mirrors (`math.*`...) raise it as CPython."""
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            if check is not None:
                check(span, args, kwargs)
            raise KernelTypeError(f"{name}(): invalid argument: {exc}", span).as_python(
                "TypeError"
            ) from exc
        except (ValueError, OverflowError, ZeroDivisionError) as exc:
            raise KernelTypeError(
                f"{name}(): invalid argument ({type(exc).__name__}: {exc})", span
            ).as_python(type(exc).__name__) from exc
        except (IndexError, KeyError, AttributeError) as exc:
            if name.startswith(_NKI_LIBRARY) and not _too_large(exc):
                raise
            raise KernelTypeError(
                f"{name}(): invalid argument ({type(exc).__name__}: {exc})", span
            ).as_python(type(exc).__name__) from exc

    def call_closure(
        self, func: Closure, args: list[Any], kwargs: dict[str, Any], span: SourceSpan
    ) -> Any:
        fn = func.fn
        env = Env(func.env)
        params = list(fn.params)
        positional = [p for p in params if p.kind == "normal"]
        args = list(args)
        if func.owner is not None and args:  # a method: what `super()` needs
            env.vars[" super"] = (func.owner, args[0])
        for p in positional:
            if args:
                if p.name in kwargs and not p.positional_only:
                    raise KernelTypeError(
                        f"{fn.name}() got multiple values for {p.name!r}", span
                    ).as_python("TypeError")
                env.vars[p.name] = args.pop(0)
        varargs = next((p for p in params if p.kind == "varargs"), None)
        if args:
            if varargs is None:
                raise KernelTypeError(
                    f"{fn.name}() takes {len(positional)} positional arguments but "
                    f"{len(positional) + len(args)} were given",
                    span,
                ).as_python("TypeError")
            env.vars[varargs.name] = nesting.check_made(self.meter, tuple(args), span)
        elif varargs is not None:
            env.vars[varargs.name] = ()
        varkw = next((p for p in params if p.kind == "kwargs"), None)
        extra: dict[str, Any] = {}
        for k, v in kwargs.items():
            if any(
                p.name == k and p.kind in ("normal", "kwonly") and not p.positional_only
                for p in params
            ):
                env.vars[k] = v
            elif varkw is not None:
                extra[k] = v
            elif any(p.name == k and p.positional_only for p in params):
                raise KernelTypeError(
                    f"{fn.name}() got some positional-only arguments passed as keyword "
                    f"arguments: {k!r}",
                    span,
                ).as_python("TypeError")
            else:
                raise KernelTypeError(
                    f"{fn.name}() got an unexpected keyword argument {k!r}", span
                ).as_python("TypeError")
        if varkw is not None:
            env.vars[varkw.name] = nesting.check_made(self.meter, extra, span)
        for p in params:
            if p.kind in ("normal", "kwonly") and p.name not in env.vars:
                if p.name not in func.defaults:
                    raise KernelTypeError(
                        f"{fn.name}() missing argument {p.name!r}", span
                    ).as_python("TypeError")
                env.vars[p.name] = func.defaults[p.name]
        for name in self._locals_of(fn):  # bound later in the body: unbound until then
            env.vars.setdefault(name, UNBOUND)
        if self._is_generator(fn):  # its body runs as it is iterated
            journal.refuse(self.meter, "a generator")
            return generators.KernelGenerator(
                fn.name,
                lambda: self._run_body(fn, env, None),  # (resumed elsewhere than made)
                self.live_generators,
                lambda n: self.meter.step(span, n),
                span,
            )
        return self._run_body(fn, env, span)

    def _locals_of(self, fn: A.FunctionDef) -> frozenset[str]:
        known = self.local_name_sets.get(id(fn))
        if known is None or known[0] is not fn:
            known = self.local_name_sets[id(fn)] = (fn, local_names(fn))
        return known[1]

    def _is_generator(self, fn: A.FunctionDef) -> bool:
        known = self.generator_functions.get(id(fn))
        if known is None or known[0] is not fn:
            known = self.generator_functions[id(fn)] = (fn, generators.is_generator_function(fn))
        return known[1]

    def _run_body(self, fn: A.FunctionDef, env: Env, span: SourceSpan | None) -> Any:
        """`fn`'s body, called at `span` (None: a generator's, resumed where it is iterated;
        an error leaving it notes no call)."""
        if self.depth >= MAX_CALL_DEPTH:
            raise KernelTypeError(
                f"calls nested deeper than {MAX_CALL_DEPTH} (recursion is not allowed in NKI)", span
            )
        self.depth += 1
        try:
            self.exec_body(fn.body, env)
        except _Return as r:
            return r.value
        except NeuronEmuError as err:
            if span is not None:
                err.add_caller(span)
            raise
        finally:
            self.depth -= 1
        return None


def _builtin_name(exc: BaseException) -> str:
    """The builtin exception class a kernel's `except` sees for `exc`."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return "Exception"


def _too_large(exc: BaseException) -> bool:
    """Python's IndexError for an int past the index range (an axis of 10**23): bad input."""
    return isinstance(exc, IndexError) and "cannot fit 'int' into an index-sized" in str(exc)
