"""Evaluate a kernel's meta-program as the NKI compiler does: unroll, inline, emit instructions.

The tracer interprets the AST; nothing in the kernel file is imported or executed by Python.
Module-level host code is not run: imports, constants and definitions are bound, and a
module-level name whose definition fails is bound to its error, raised only if used.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import itertools
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from neuronemu_isa import Arch, Buffer
from neuronemu.errors import (BudgetError, KernelSyntaxError, KernelTypeError, NeuronEmuError,
                              SourceSpan, UsageError)
from neuronemu.frontend import ast as A
from neuronemu.frontend.parser import parse_expression
from neuronemu.limits import Meter
from neuronemu.trace import confine
from neuronemu.builder import Builder
from neuronemu.trace.legacy_index import MGRID, AffineIndex, MGrid, Predicate, mgrid_index
from neuronemu.trace.objects import (CLASSMETHOD, ENUM, NKI_OBJECT, PROPERTY, STATICMETHOD,
                                     BoundMethod, EnumMember, FieldSpec, Marker, UserClass,
                                     UserObject, Wrapped)
from neuronemu.ir import ALL_DTYPES, BUFFERS, DType, IndirectView, Tensor, View
from neuronemu.trace import tensor_api
from neuronemu.trace.legacy_index import AffineView
from neuronemu.trace.tensor_api import as_view
from neuronemu.trace.values import BlockTensor, Namespace, OpRef, Poison

__all__ = ["Tracer", "Closure", "Builtin"]

_NO_DEFAULT = object()  # a dataclass field without a default

MAX_CALL_DEPTH = 64


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Env:
    __slots__ = ("vars", "parent")

    def __init__(self, parent: Env | None = None):
        self.vars: dict[str, Any] = {}
        self.parent = parent

    def lookup(self, name: str) -> tuple[bool, Any]:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return True, env.vars[name]
            env = env.parent
        return False, None

    def visible(self) -> list[str]:
        names: list[str] = []
        env: Env | None = self
        while env is not None:
            names.extend(env.vars)
            env = env.parent
        return names


@dataclass
class Closure:
    """A kernel-file function, inlined at each call."""

    fn: A.FunctionDef
    env: Env

    def __repr__(self) -> str:
        return f"<function {self.fn.name}>"


_SIGNATURES: dict[Callable[..., Any], inspect.Signature | None] = {}
_UNKNOWN = object()


@dataclass
class Builtin:
    """A trace-time function implemented by neuronemu; `fn(span, *args, **kwargs)`."""

    name: str
    fn: Callable[..., Any]
    # `psum_tile += f(...)` (older dialect): `accumulate(span, dst_view, *args, **kwargs)`
    # writes f's result into the PSUM tile by accumulation instead of adding a new tile.
    accumulate: Callable[..., Any] | None = None
    # `t[...] = f(...)`: `into(span, dst_view, *args, **kwargs)` writes f's result straight
    # into the slice (as the compiler does) and returns True, or returns False (then f runs
    # as usual and its tile is copied in).
    into: Callable[..., bool] | None = None

    def check_arguments(self, span: SourceSpan, args: list[Any], kwargs: dict[str, Any]) -> None:
        """A call that does not fit the signature is the kernel's error, not a crash."""
        signature = _SIGNATURES.get(self.fn, _UNKNOWN)
        if signature is _UNKNOWN:
            try:
                signature = inspect.signature(self.fn)
            except (TypeError, ValueError):
                signature = None
            _SIGNATURES[self.fn] = signature
        if signature is None:
            return
        try:
            signature.bind(span, *args, **kwargs)
        except TypeError as exc:
            raise KernelTypeError(f"{self.name}(): {exc}", span) from None

    def __repr__(self) -> str:
        return f"<built-in {self.name}>"


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {  # also what `x op= y` means
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<<": operator.lshift,
    ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "@": operator.matmul,
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, ">": operator.gt, "==": operator.eq, "!=": operator.ne,
    "<=": operator.le, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}
# NkiTensor view methods, implemented on View (values.py).
# Python operators on tiles and the nl.* functions they mean (legacy NKI tile arithmetic).
_TILE_OPS = {
    "+": "add", "-": "subtract", "*": "multiply", "/": "divide", "**": "power",
    "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor", "<<": "left_shift",
    ">>": "right_shift", "<": "less", ">": "greater", "<=": "less_equal",
    ">=": "greater_equal", "==": "equal", "!=": "not_equal",
}


def _is_tensor(v: Any) -> bool:
    return isinstance(v, (Tensor, View, AffineView, BlockTensor))


class Tracer:
    def __init__(self, module: A.Module, path: str, arch: Arch, builder: Builder,
                 print_fn: Callable[[str], None] = print, meter: Meter | None = None):
        from neuronemu.trace.library import builtins_env, import_module

        self.module = module
        self.path = path
        self.arch = arch
        self.builder = builder
        self.print_fn = print_fn
        self.meter = meter or builder.meter
        self.depth = 0
        self._name_counts: dict[str, int] = {}
        self.pending_name: str | None = None  # the variable an allocation is being bound to
        self._local_modules: dict[str, Namespace] = {}  # helper modules by resolved path
        self._fields: dict[tuple[str, SourceSpan], A.Node] = {}  # parsed f-string fields
        self.grid: tuple[int, ...] = (1,)  # the SPMD launch grid, and this instance's ids
        self.program_ids: tuple[int, ...] = (0,)
        self._import_module = lambda dotted, span, quiet=False: import_module(
            self, dotted, span, quiet)
        self.builtins = builtins_env(self)
        self.globals = Env(self.builtins)
        self._bind_module()

    # Module level --------------------------------------------------------------------------

    def _bind_module(self, module: A.Module | None = None, env: Env | None = None) -> None:
        """Bind a module's imports, definitions and constants; errors wait until a name is used."""
        module = module or self.module
        env = env or self.globals
        for stmt in module.body:
            if isinstance(stmt, (A.Import, A.ImportFrom, A.FunctionDef, A.ClassDef, A.Assign,
                                 A.AnnAssign)):
                try:
                    self.exec_stmt(stmt, env)
                except BudgetError:
                    raise  # a budget is spent whoever asks: never deferred
                except NeuronEmuError as err:
                    for name in _bound_names(stmt):
                        env.vars[name] = Poison(err)
            # Anything else at module level is host code (tests, `__main__` blocks): not run.

    def _local_module(self, parts: list[str], base: Path, span: SourceSpan) -> Any:
        """A helper module of the kernel's own (`base/a/b.py` or a package `base/a/b/`)."""
        target = base.joinpath(*parts) if parts else base
        for path in (target.with_suffix(".py"), target / "__init__.py"):
            if not path.is_file():
                continue
            key = str(path.resolve())
            cached = self._local_modules.get(key)
            if cached is not None:
                return cached
            from neuronemu.frontend import parse_file

            name = ".".join(parts) or path.parent.name
            namespace = Namespace(name, {})
            self._local_modules[key] = namespace  # before binding: import cycles terminate
            env = Env(self.builtins)
            env.vars["__file__"] = str(path)
            self._bind_module(parse_file(path, self.meter.limits), env)
            namespace.members.update({k: v for k, v in env.vars.items() if k != "__file__"})
            return namespace
        return None

    def _find_module(self, dotted: str, level: int, span: SourceSpan) -> Any:
        """nki/numpy/math, else a module next to the importing file (or the kernel file)."""
        if level == 0:
            known = self._import_module(dotted, span, quiet=True)
            if known is not None:
                return known
        here = Path(span.path).resolve().parent
        parts = dotted.split(".") if dotted else []
        if level:
            base = here.parents[level - 2] if level > 1 else here
            found = self._local_module(parts, base, span)
        else:
            found = None
            for base in dict.fromkeys((here, Path(self.path).resolve().parent)):
                found = self._local_module(parts, base, span)
                if found is not None:
                    break
        if found is None:
            if level:
                return Poison(KernelTypeError(
                    f"relative import: no module {'.' * level}{dotted} next to {span.path}", span))
            return self._import_module(dotted, span)  # the "not available" error, deferred
        return found

    def kernels(self) -> dict[str, A.FunctionDef]:
        """Module-level functions decorated with `jit` (`@nki.jit`, `@nki.jit(...)`, `@jit`),
        and module-level `name = kernel.with_schedule([...])` results."""
        found = {}
        for stmt in self.module.body:
            if isinstance(stmt, A.FunctionDef) and any(is_jit(d) for d in stmt.decorators):
                found[stmt.name] = stmt
        for name, value in self.globals.vars.items():
            if isinstance(value, ScheduledKernel):
                found[name] = value.fn
        return found

    def apply_schedule(self, kernel: str) -> None:
        """The `with_schedule` edges of a scheduled kernel, between `name=`d instructions."""
        value = self.globals.vars.get(kernel)
        if not isinstance(value, ScheduledKernel):
            return
        names = self.builder.names
        for consumer, producers, span in value.edges:
            for name in (consumer, *producers):
                if name not in names:
                    raise KernelTypeError(f"with_schedule names instruction {name!r}, but no "
                                          f"nisa call has name={name!r}", span)
            for producer in producers:
                self.builder.add_dependency(names[consumer], names[producer], span)

    def launch_grid(self, fn: A.FunctionDef) -> tuple[int, ...] | None:
        """The grid of a `kernel[gx, gy](...)` launch in the file's host code, if constant."""
        kernels = {id(k) for k in self.kernels().values()}
        host = tuple(s for s in self.module.body if id(s) not in kernels)
        for node in _walk(host):
            if isinstance(node, A.Subscript) and isinstance(node.value, A.Name) and \
                    node.value.id == fn.name:
                try:
                    grid = self.eval(node.index, self.globals)
                except NeuronEmuError:
                    continue
                grid = grid if isinstance(grid, tuple) else (grid,)
                if grid and all(isinstance(g, int) and not isinstance(g, bool) and g > 0
                                for g in grid):
                    return grid
        return None

    def call_kernel(self, fn: A.FunctionDef, inputs: dict[str, Any],
                    grid: tuple[int, ...] = (1,)) -> tuple[Any, dict]:
        """Bind inputs by parameter name (arrays become HBM tensors) and trace the kernel once
        per program instance of `grid`, in turn (instances share the HBM tensors)."""
        names = [p.name for p in fn.params if p.kind in ("normal", "kwonly")]
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise UsageError(f"kernel {fn.name!r} has no parameter {unknown[0]!r} "
                             f"(parameters: {', '.join(names) or 'none'})", fn.span)
        env = Env(self.globals)
        bound: dict[str, Any] = {}
        for p in fn.params:
            if p.kind == "varargs":
                env.vars[p.name] = ()
            elif p.kind == "kwargs":
                env.vars[p.name] = {}
            elif p.name in inputs:
                value = inputs[p.name]
                if isinstance(value, np.ndarray):
                    value = self.input_tensor(p.name, value, fn.span)
                env.vars[p.name] = bound[p.name] = value
            elif p.default is not None:
                env.vars[p.name] = bound[p.name] = self.eval(p.default, self.globals)
            else:
                raise UsageError(
                    f"kernel {fn.name!r} needs input {p.name!r}; pass it with -i {p.name}=SPEC "
                    "(e.g. -i {0}=float32[128,512])".format(p.name), fn.span)
        self.grid = grid
        instances = math.prod(grid)
        if instances > self.meter.limits.grid_instances:
            raise self.meter.over("grid_instances", f"the launch grid {list(grid)} has "
                                  f"{instances:,} program instances", fn.span)
        returned = None
        for n, pid in enumerate(itertools.product(*(range(g) for g in grid))):
            self.program_ids = pid
            self.builder.begin_instance(n)
            instance_env = Env(self.globals)
            instance_env.vars.update(env.vars)
            try:
                self.exec_body(fn.body, instance_env)
                result = None
            except _Return as r:
                result = r.value
            if n == 0:
                returned = result
        for t in self.builder.tensors:  # tiles never bound to a variable
            if t.name.startswith("%"):
                t.name = self._unique_name(t.label)
        return returned, bound

    def input_tensor(self, name: str, array: np.ndarray, span: SourceSpan) -> Tensor:
        from neuronemu_isa._numerics import dtype_name

        try:
            dt = ALL_DTYPES[dtype_name(array.dtype)]
        except KeyError:
            raise UsageError(f"input {name!r} has unsupported dtype {array.dtype}", span) from None
        shape = tuple(int(d) for d in array.shape) or (1,)
        t = Tensor(name, shape, dt, BUFFERS["hbm"], span, kind="input")
        self.builder.tensors.append(t)
        return t

    # Statements ----------------------------------------------------------------------------

    def exec_body(self, body: tuple[A.Node, ...], env: Env) -> None:
        for stmt in body:
            self.exec_stmt(stmt, env)

    def exec_stmt(self, s: A.Node, env: Env) -> None:
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise KernelSyntaxError(f"{_describe(s)} is not supported in NKI kernels", s.span)
        try:
            method(s, env)
        except RecursionError:  # the innermost statement names it; the stack is free again
            raise KernelSyntaxError(
                "nested too deeply to evaluate (an expression, data structure or chain of "
                "calls nests deeper than neuronemu follows)", s.span) from None
        except MemoryError:
            raise self.meter.over("memory_bytes", "the machine ran out of memory", s.span) \
                from None

    def _s_ExprStmt(self, s: A.ExprStmt, env: Env) -> None:
        if isinstance(s.value, A.Const):  # docstrings and bare constants
            return
        self.eval(s.value, env)

    def _s_Assign(self, s: A.Assign, env: Env) -> None:
        target = s.targets[0]
        if len(s.targets) == 1 and isinstance(target, A.Subscript) and \
                isinstance(s.value, A.Call) and self._assign_into(target, s.value, env):
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
        from neuronemu.trace.library import into_of

        if isinstance(func, Builtin):
            into = func.into
        elif isinstance(func, OpRef) and getattr(func.call, "takes_into", False):
            into = into_of(func.call)  # nl.exp, nl.add, ...
        else:
            into = None
        if into is None:
            return False
        view = as_view(self._subscript(container, self.eval(target.index, env), target.span))
        if view is None:
            return False
        args, kwargs = self._arguments(call, env)
        check = func.check_arguments if isinstance(func, Builtin) else None
        if self.library_call(_name_of(func), functools.partial(into, call.span, view),
                             call.span, args, kwargs, check):
            return True
        from neuronemu.trace.library import assign_slice

        assign_slice(self, view, self.call(func, args, kwargs, call.span), target.span)
        return True

    def _s_AnnAssign(self, s: A.AnnAssign, env: Env) -> None:
        if s.value is not None:
            self.assign(s.target, self.eval(s.value, env), env)

    def _s_AugAssign(self, s: A.AugAssign, env: Env) -> None:
        current = self.eval(s.target, env)
        if s.op == "+" and isinstance(s.value, A.Call) and _is_tensor(current) and \
                not isinstance(current, BlockTensor):
            target = as_view(current)
            func = self.eval(s.value.func, env)
            if target is not None and target.buffer == Buffer.PSUM and \
                    isinstance(func, Builtin) and func.accumulate is not None:
                args, kwargs = self._arguments(s.value, env)
                self.library_call(func.name, functools.partial(func.accumulate, s.value.span,
                                                               target),
                                  s.value.span, args, kwargs, func.check_arguments)
                return  # accumulated in place: the target names the same tile
        value = self.binop(s.op, current, self.eval(s.value, env), s.span)
        self.assign(s.target, value, env)

    def _s_Pass(self, s: A.Pass, env: Env) -> None:
        pass

    def _s_Break(self, s: A.Break, env: Env) -> None:
        raise _Break()

    def _s_Continue(self, s: A.Continue, env: Env) -> None:
        raise _Continue()

    def _s_Return(self, s: A.Return, env: Env) -> None:
        raise _Return(None if s.value is None else self.eval(s.value, env))

    def _s_If(self, s: A.If, env: Env) -> None:
        if self.truth(self.eval(s.test, env), s.test.span):
            self.exec_body(s.body, env)
        else:
            self.exec_body(s.orelse, env)

    def _s_For(self, s: A.For, env: Env) -> None:
        iterable = self.eval(s.iter, env)
        if _is_tensor(iterable):
            raise KernelTypeError("cannot iterate over a tensor at trace time", s.iter.span)
        try:
            items = iter(iterable)
        except TypeError:
            raise KernelTypeError(f"{type(iterable).__name__} is not iterable", s.iter.span) \
                from None
        for item in items:
            self.assign(s.target, item, env)
            if not self._iteration(s, env):
                return
        self.exec_body(s.orelse, env)

    def _s_While(self, s: A.While, env: Env) -> None:
        while self.truth(self.eval(s.test, env), s.test.span):
            if not self._iteration(s, env):
                return
        self.exec_body(s.orelse, env)

    def _iteration(self, loop: A.For | A.While, env: Env) -> bool:
        """One pass of a loop body; False when it breaks out."""
        self._count_iteration(loop.span)
        try:
            self.exec_body(loop.body, env)
        except _Break:
            return False
        except _Continue:
            pass
        return True

    def _count_iteration(self, span: SourceSpan) -> None:
        self.meter.step(span)

    def _s_Assert(self, s: A.Assert, env: Env) -> None:
        if not self.truth(self.eval(s.test, env), s.test.span):
            msg = "" if s.msg is None else str(self.eval(s.msg, env))
            raise KernelTypeError(f"assertion failed{': ' + msg if msg else ''}", s.span)

    def _s_With(self, s: A.With, env: Env) -> None:
        from neuronemu.trace.library import NO_REORDER

        for expr, alias in s.items:
            if self.eval(expr, env) is not NO_REORDER or alias is not None:
                raise KernelSyntaxError("'with' blocks are not supported in NKI kernels, except "
                                        "'with nl.no_reorder():'", s.span)
        # Dynamically scoped: everything traced under the block keeps program order.
        self.builder.no_reorder_depth += 1
        try:
            self.exec_body(s.body, env)
        finally:
            self.builder.no_reorder_depth -= 1

    def _s_FunctionDef(self, s: A.FunctionDef, env: Env) -> None:
        env.vars[s.name] = Closure(s, env)

    def _s_Import(self, s: A.Import, env: Env) -> None:
        for dotted, alias in s.names:
            if alias is not None:
                env.vars[alias] = self._find_module(dotted, 0, s.span)
            else:
                top = dotted.split(".")[0]
                env.vars[top] = self._find_module(top, 0, s.span)

    def _s_ImportFrom(self, s: A.ImportFrom, env: Env) -> None:
        module = self._find_module(s.module, s.level, s.span)
        if isinstance(module, Poison) and s.level and not s.module:
            module = Namespace("." * s.level, {})  # a directory without __init__.py
        for name, alias in s.names:
            if name == "*":
                if isinstance(module, Namespace):
                    env.vars.update(module.members)
                continue
            if isinstance(module, Poison):
                env.vars[alias or name] = module
                continue
            if name in module.members:
                env.vars[alias or name] = module.members[name]
                continue
            dotted = f"{s.module}.{name}" if s.module else name
            sub = self._find_module(dotted, s.level, s.span)
            env.vars[alias or name] = sub if not isinstance(sub, Poison) else Poison(
                KernelTypeError(f"cannot import {name!r} from {s.module or '.' * s.level}",
                                s.span))

    def _s_ClassDef(self, s: A.ClassDef, env: Env) -> None:
        if s.keywords:
            raise KernelSyntaxError("class keywords (metaclass=...) are not supported in NKI "
                                    "kernels", s.keywords[0].span)
        bases = tuple(self.eval(b, env) for b in s.bases)
        for base, node in zip(bases, s.bases):
            if not isinstance(base, UserClass) and base not in (ENUM, NKI_OBJECT) and \
                    base is not None:
                raise KernelTypeError(f"cannot subclass {base!r} in an NKI kernel", node.span)
        is_dataclass, frozen = False, False
        for node in s.decorators:
            deco = self.eval(node, env)
            if not (isinstance(deco, Marker) and deco.name == "dataclass"):
                raise KernelTypeError(f"class decorator {deco!r} is not supported (only "
                                      "@dataclass)", node.span)
            is_dataclass, frozen = True, dict(deco.options).get("frozen", False)
        body_env = Env(env)
        fields: list[tuple[str, Any]] = []
        # An nl.NKIObject dataclass takes its plain class attributes as fields too (inferred
        # from nki-library, whose NKIObject dataclasses are built from un-annotated defaults).
        nki_fields = is_dataclass and _derives_nki_object(bases)
        plain_fields: list[tuple[str, Any]] = []  # after the annotated ones
        for stmt in s.body:
            if isinstance(stmt, A.FunctionDef):
                func: Any = Closure(stmt, env)
                for node in stmt.decorators:
                    deco = self.eval(node, env)
                    if deco not in (STATICMETHOD, CLASSMETHOD, PROPERTY):
                        raise KernelTypeError(f"method decorator {deco!r} is not supported",
                                              node.span)
                    func = Wrapped(deco, func)
                body_env.vars[stmt.name] = func
            elif isinstance(stmt, (A.Assign, A.AnnAssign, A.Pass, A.ExprStmt, A.ClassDef)):
                self.exec_stmt(stmt, body_env)
                if isinstance(stmt, A.AnnAssign) and isinstance(stmt.target, A.Name):
                    name = stmt.target.id
                    fields.append((name, body_env.vars.pop(name, _NO_DEFAULT)
                                   if is_dataclass else body_env.vars.get(name, _NO_DEFAULT)))
                elif nki_fields and isinstance(stmt, A.Assign) and len(stmt.targets) == 1 and \
                        isinstance(stmt.targets[0], A.Name) and \
                        not stmt.targets[0].id.startswith("_"):
                    name = stmt.targets[0].id  # stays a class attribute too
                    plain_fields.append((name, body_env.vars.get(name, _NO_DEFAULT)))
            else:
                raise KernelSyntaxError(f"{_describe(stmt)} is not supported in a class body",
                                        stmt.span)
        annotated = {name for name, _ in fields}
        fields += [(n, d) for n, d in plain_fields if n not in annotated]
        is_enum = any(b is ENUM or (isinstance(b, UserClass) and b.enum) for b in bases)
        cls = UserClass(s.name, bases, body_env.vars, tuple(fields), is_dataclass, frozen,
                        is_enum)
        if is_enum:
            for name, value in list(body_env.vars.items()):
                if not name.startswith("_") and not isinstance(value, (Closure, Wrapped)):
                    cls.members[name] = EnumMember(cls, name, value)
        env.vars[s.name] = cls

    def instantiate(self, cls: UserClass, args: list[Any], kwargs: dict[str, Any],
                    span: SourceSpan) -> Any:
        if cls.enum:
            for member in cls.members.values():
                if args and member.value == args[0]:
                    return member
            raise KernelTypeError(f"{args[0] if args else None!r} is not a valid {cls.name}",
                                  span)
        obj = UserObject(cls)
        found, init = cls.lookup("__init__")
        if found and isinstance(init, Closure):
            self.call_closure(init, [obj, *args], kwargs, span)
            return obj
        fields = cls.all_fields() if cls.dataclass or any(
            isinstance(b, UserClass) and b.dataclass for b in cls.bases) else []
        if not fields and (args or kwargs):
            raise KernelTypeError(f"{cls.name}() takes no arguments", span)
        if len(args) > len(fields):
            raise KernelTypeError(f"{cls.name}() takes {len(fields)} positional arguments but "
                                  f"{len(args)} were given", span)
        values = dict(zip((name for name, _ in fields), args))
        for k, v in kwargs.items():
            if k in values or k not in dict(fields):
                raise KernelTypeError(f"{cls.name}() got an unexpected or repeated argument "
                                      f"{k!r}", span)
            values[k] = v
        for name, default in fields:
            if name in values:
                continue
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
        obj.attrs.update(values)
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
            found, member = value.cls.lookup(attr)
            if not found:
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
            if attr in value.members:
                return True, value.members[attr]
            found, member = value.lookup(attr)
            if isinstance(member, Wrapped):
                member = BoundMethod(member.func, value) if member.kind is CLASSMETHOD \
                    else member.func
            return found, member
        return False, None

    def _s_Unsupported(self, s: A.Unsupported, env: Env) -> None:
        raise KernelSyntaxError(f"{s.what} are not supported in NKI kernels"
                                if s.what.endswith("s") else
                                f"{s.what} is not supported in NKI kernels", s.span)

    # Assignment ----------------------------------------------------------------------------

    def assign(self, target: A.Node, value: Any, env: Env) -> None:
        from neuronemu.trace.library import LoopReduce, loop_reduce_into

        if isinstance(value, LoopReduce):  # combined into what the target holds (or is)
            holder = self.eval(target, env) if isinstance(target, A.Name) else None
            if isinstance(target, A.Subscript):
                container = self.eval(target.value, env)
                holder = self._subscript(container, self.eval(target.index, env), target.span)
            loop_reduce_into(self, holder, value, target.span)
            return
        if isinstance(target, A.Name):
            if isinstance(value, (Tensor, BlockTensor)) and value.name.startswith("%"):
                value.name = self._unique_name(target.id)
            env.vars[target.id] = value
        elif isinstance(target, (A.TupleExpr, A.ListExpr)):
            if _is_tensor(value):
                raise KernelTypeError("cannot unpack a tensor at trace time", target.span)
            try:
                items = list(value)
            except TypeError:
                raise KernelTypeError(f"cannot unpack {type(value).__name__}", target.span) \
                    from None
            stars = [i for i, t in enumerate(target.elts) if isinstance(t, A.Starred)]
            if stars:
                k = stars[0]
                after = len(target.elts) - k - 1
                if len(items) < len(target.elts) - 1:
                    raise KernelTypeError(f"not enough values to unpack (got {len(items)})",
                                          target.span)
                items = items[:k] + [items[k:len(items) - after]] + items[len(items) - after:]
            if len(items) != len(target.elts):
                raise KernelTypeError(
                    f"cannot unpack {len(items)} values into {len(target.elts)} targets",
                    target.span)
            for t, v in zip(target.elts, items):
                self.assign(t.value if isinstance(t, A.Starred) else t, v, env)
        elif isinstance(target, A.Subscript):
            container = self.eval(target.value, env)
            index = self.eval(target.index, env)
            if _is_tensor(container):
                from neuronemu.trace.library import assign_slice

                assign_slice(self, self._subscript(container, index, target.span), value,
                             target.span)
                return
            try:
                container[index] = value
            except Exception as exc:
                raise KernelTypeError(f"cannot assign item: {exc}", target.span) from None
        elif isinstance(target, A.Attribute):
            obj = self.eval(target.value, env)
            if not isinstance(obj, UserObject):
                raise KernelTypeError(f"cannot set attribute {target.attr!r} of "
                                      f"{type(obj).__name__}", target.span)
            if obj.cls.frozen:
                raise KernelTypeError(f"cannot assign to field {target.attr!r} of frozen "
                                      f"dataclass {obj.cls.name}", target.span)
            obj.attrs[target.attr] = value
        else:
            raise KernelSyntaxError(f"cannot assign to {_describe(target)}", target.span)

    def _unique_name(self, base: str) -> str:
        n = self._name_counts.get(base, 0)
        self._name_counts[base] = n + 1
        return base if n == 0 else f"{base}.{n}"

    # Expressions ---------------------------------------------------------------------------

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
            raise KernelTypeError(f"name {e.id!r} is not defined", e.span,
                                  hint=f"did you mean {close[0]!r}?" if close else None)
        if isinstance(value, Poison):
            raise value.error
        return value

    def _e_FString(self, e: A.FString, env: Env) -> str:
        out = []
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
            if conv == "r":
                value = repr(value)
            elif conv in ("s", "a"):
                value = str(value)
            out.append(confine.format_value(self.meter, value, spec, e.span))
        self.meter.items(sum(map(len, out)), "an f-string", e.span)
        return "".join(out)

    def _e_Attribute(self, e: A.Attribute, env: Env) -> Any:
        value = self.eval(e.value, env)
        return self.getattr(value, e.attr, e.span)

    def getattr(self, value: Any, attr: str, span: SourceSpan) -> Any:
        from neuronemu.trace.library import InstrHandle

        if isinstance(value, InstrHandle) and attr == "depends_on":
            return Builtin("depends_on", value.depends_on)
        if isinstance(value, Closure) and attr == "with_schedule":
            return Builtin("with_schedule",
                           lambda span, edges: ScheduledKernel(value.fn, _edges(edges, span)))
        if isinstance(value, (UserObject, UserClass, EnumMember)):
            found, got = self.object_attr(value, attr, span)
            if not found:
                name = value.cls.name if isinstance(value, (UserObject, EnumMember)) else \
                    value.name
                raise KernelTypeError(f"{name} has no attribute {attr!r}", span)
            return got
        if isinstance(value, Namespace):
            got = value.get(attr, span)
            if isinstance(got, Poison):
                raise got.error
            return got
        if isinstance(value, BlockTensor) and attr in ("shape", "dtype", "ndim", "buffer",
                                                       "name"):
            return {"shape": value.shape, "dtype": value.dtype, "ndim": len(value.shape),
                    "buffer": value.kind_of_buffer, "name": value.label}[attr]
        if isinstance(value, (Tensor, View)):
            tensor_attrs: dict[str, Callable[[], Any]] = {
                "shape": lambda: tuple(value.shape),
                "dtype": lambda: value.dtype,
                "ndim": lambda: len(value.shape),
                "buffer": lambda: (value.tensor if isinstance(value, View) else value)
                .kind_of_buffer,
                "name": lambda: (value.tensor if isinstance(value, View) else value).name,
            }
            if attr in tensor_attrs:
                return tensor_attrs[attr]()
            view = value.full() if isinstance(value, Tensor) else value
            if isinstance(view, IndirectView) and attr in tensor_api.VIEW_METHODS | {
                    "ap", "reshape", "view", "reinterpret_cast"}:
                raise KernelTypeError(f"an indirect view (addressed at run time) cannot be "
                                      f"re-viewed with .{attr}(); pass it to dma_copy as is",
                                      span)
            if attr == "ap":
                return Builtin("ap", functools.partial(tensor_api.access_pattern, self.builder,
                                                       view))
            if attr in ("view", "reinterpret_cast"):
                return Builtin(attr, functools.partial(tensor_api.view_as, self.builder, view))
            if attr == "reshape":
                return Builtin("reshape",
                               lambda span, *shape: tensor_api.reshape(view, shape, span))
            if attr in tensor_api.VIEW_METHODS:
                method = getattr(tensor_api, attr)
                return Builtin(attr, lambda span, *args, **kw: method(view, *args, **kw,
                                                                      span=span))
            raise KernelTypeError(f"tensor has no attribute {attr!r} (in neuronemu yet)", span)
        if isinstance(value, DType):
            if attr == "itemsize":
                return value.itemsize
            raise KernelTypeError(f"a dtype has no attribute {attr!r} (in neuronemu yet)",
                                  span)
        if isinstance(value, MGrid) and attr in ("p", "x"):
            return getattr(value, attr)
        if isinstance(value, np.ndarray) and attr == "dtype":  # as kernels see dtypes
            from neuronemu_isa._numerics import dtype_name

            try:
                return ALL_DTYPES[dtype_name(value.dtype)]
            except KeyError:  # int64, float64: no NKI dtype; its name is all a kernel needs
                return value.dtype.name
        return confine.attribute(self.meter, value, attr, span,
                                 lambda v, numpy: self.to_python(v, span, numpy))

    def to_python(self, value: Any, span: SourceSpan, numpy: bool = False) -> Any:
        """A trace-time value handed to Python code (a list method, sorted's key): kernel
        functions become plain callables, and for NumPy dtypes NumPy dtypes; the rest stays
        as it is."""
        if isinstance(value, (Closure, BoundMethod, Builtin, UserClass, confine.Method)):
            return confine.python_callable(
                lambda args, kwargs: self.call(value, args, kwargs, span))
        if numpy and isinstance(value, DType):
            return value.np
        return value

    def _e_Subscript(self, e: A.Subscript, env: Env) -> Any:
        return self._subscript(self.eval(e.value, env), self.eval(e.index, env), e.span,
                               e.index.span)

    def _subscript(self, value: Any, index: Any, span: SourceSpan,
                   index_span: SourceSpan | None = None) -> Any:
        if isinstance(value, AffineIndex):
            return value.expand(index, span)
        if value is MGRID:
            return mgrid_index(index, span)
        if isinstance(value, BlockTensor):
            tile, rest = value.split(index, span)
            return self._subscript(tile, rest, span, index_span) if rest else tile
        if isinstance(value, Tensor):
            value = value.full()
        if isinstance(value, View):
            if _is_tensor(index) or (isinstance(index, tuple) and any(map(_is_tensor, index))):
                raise KernelTypeError("indexing a tensor with a tensor is not supported yet",
                                      index_span or span)
            return tensor_api.subscript(value, index, span)
        try:
            return value[index]
        except (IndexError, KeyError, TypeError) as exc:
            raise KernelTypeError(f"{type(exc).__name__}: {exc}", span) from None

    def _e_Slice(self, e: A.Slice, env: Env) -> slice:
        def part(n: A.Node | None) -> Any:
            return None if n is None else self.eval(n, env)

        return slice(part(e.lower), part(e.upper), part(e.step))

    def _e_TupleExpr(self, e: A.TupleExpr, env: Env) -> tuple:
        return tuple(self._elements(e.elts, env))

    def _e_ListExpr(self, e: A.ListExpr, env: Env) -> list:
        return self._elements(e.elts, env)

    def _elements(self, elts: tuple[A.Node, ...], env: Env) -> list:
        out: list[Any] = []
        for x in elts:
            if isinstance(x, A.Starred):
                value = self.eval(x.value, env)
                if _is_tensor(value) or not hasattr(value, "__iter__"):
                    raise KernelTypeError(f"cannot unpack {type(value).__name__} with *",
                                          x.span)
                out.extend(value)
            else:
                out.append(self.eval(x, env))
        return out

    def _e_DictExpr(self, e: A.DictExpr, env: Env) -> dict:
        return {self.eval(k, env): self.eval(v, env) for k, v in zip(e.keys, e.values)}

    def _e_Comprehension(self, e: A.Comprehension, env: Env) -> Any:
        results: list[Any] = []
        local = Env(env)

        def loop(level: int) -> None:
            if level == len(e.iters):
                if e.kind == "dict":
                    results.append((self.eval(e.key, local), self.eval(e.elt, local)))
                else:
                    results.append(self.eval(e.elt, local))
                return
            for item in self.eval(e.iters[level], local):
                self._count_iteration(e.span)
                self.assign(e.targets[level], item, local)
                cond = e.conds[level]
                if cond is None or self.truth(self.eval(cond, local), cond.span):
                    loop(level + 1)

        loop(0)
        if e.kind == "dict":
            return dict(results)
        return tuple(results) if e.kind == "tuple" else results

    def _e_BinOp(self, e: A.BinOp, env: Env) -> Any:
        return self.binop(e.op, self.eval(e.left, env), self.eval(e.right, env), e.span)

    def binop(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
        if _is_tensor(a) or _is_tensor(b):
            return self.tile_op(op, a, b, span)
        confine.check_binop(self.meter, op, a, b, span)
        try:
            return _BINOPS[op](a, b)
        except ZeroDivisionError:
            raise KernelTypeError("division by zero", span) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise KernelTypeError(f"operator {op!r}: {exc}", span) from None

    def _e_UnaryOp(self, e: A.UnaryOp, env: Env) -> Any:
        v = self.eval(e.operand, env)
        if e.op == "not":
            return not self.truth(v, e.operand.span)
        if _is_tensor(v):
            if e.op == "+":
                return v
            if e.op == "-":
                return self.tile_op("*", v, -1.0, e.span)
            raise KernelTypeError(f"tile operator {e.op!r} is not supported yet", e.span)
        try:
            return {"-": operator.neg, "+": operator.pos, "~": operator.invert}[e.op](v)
        except TypeError as exc:
            raise KernelTypeError(f"operator {e.op!r}: {exc}", e.span) from None

    def tile_op(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
        """`a + b` on tiles is `nl.add(a, b)`: an elementwise instruction into a new tile."""
        name = _TILE_OPS.get(op)
        if name is None:
            raise KernelTypeError(f"operator {op!r} is not defined on tiles", span)
        fn = self._import_module("nki.language", span).members[name]
        return fn.call(span, a, b)

    def _e_BoolOp(self, e: A.BoolOp, env: Env) -> Any:
        value: Any = None
        for node in e.values:
            value = self.eval(node, env)
            truth = self.truth(value, node.span)
            if (e.op == "and" and not truth) or (e.op == "or" and truth):
                return value
        return value

    def _e_Compare(self, e: A.Compare, env: Env) -> bool:
        left = self.eval(e.left, env)
        for op, node in zip(e.ops, e.comparators):
            right = self.eval(node, env)
            if op not in ("is", "is not") and (_is_tensor(left) or _is_tensor(right)):
                if len(e.ops) == 1 and op in _TILE_OPS:
                    return self.tile_op(op, left, right, e.span)  # an elementwise compare
                raise KernelTypeError(
                    "a tensor value cannot be compared at trace time (its values exist only "
                    "when the kernel runs)", e.span)
            try:
                ok = _COMPARE[op](left, right)
            except TypeError as exc:
                raise KernelTypeError(f"comparison {op!r}: {exc}", e.span) from None
            if isinstance(ok, Predicate):
                if len(e.ops) != 1:
                    raise KernelTypeError("chained comparisons of nl.arange indices are not "
                                          "supported; combine conditions with &", e.span)
                return ok
            if not ok:
                return False
            left = right
        return True

    def _e_IfExp(self, e: A.IfExp, env: Env) -> Any:
        if self.truth(self.eval(e.test, env), e.test.span):
            return self.eval(e.body, env)
        return self.eval(e.orelse, env)

    def _e_Unsupported(self, e: A.Unsupported, env: Env) -> Any:
        self._s_Unsupported(e, env)

    def _e_Starred(self, e: A.Starred, env: Env) -> Any:
        raise KernelSyntaxError("starred expression is not allowed here", e.span)

    def truth(self, value: Any, span: SourceSpan) -> bool:
        if isinstance(value, (AffineIndex, Predicate)):
            raise KernelTypeError(
                "an nl.arange index expression is used in a compile-time condition; pass it "
                "as mask= instead", span)
        if _is_tensor(value):
            raise KernelTypeError(
                "a tensor value is used in a compile-time condition; its values exist only "
                "when the kernel runs", span)
        return bool(value)

    # Calls ---------------------------------------------------------------------------------

    def _e_Call(self, e: A.Call, env: Env) -> Any:
        # Only the outermost call of `x = f(g(...))` allocates the tile named `x`.
        pending, self.pending_name = self.pending_name, None
        func = self.eval(e.func, env)
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
                kwargs.update(value)
            elif kw.name in kwargs:
                raise KernelTypeError(f"keyword argument {kw.name!r} repeated", kw.span)
            else:
                kwargs[kw.name] = value
        return args, kwargs

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], span: SourceSpan) -> Any:
        if isinstance(func, Closure):
            return self.call_closure(func, args, kwargs, span)
        if isinstance(func, BoundMethod):
            return self.call(func.func, [func.obj, *args], kwargs, span)
        if isinstance(func, UserClass):
            return self.instantiate(func, args, kwargs, span)
        if isinstance(func, Marker) and func.name == "dataclass":
            if args and isinstance(args[0], UserClass):
                raise KernelTypeError("use @dataclass as a class decorator", span)
            return Marker("dataclass", tuple(sorted(kwargs.items())))
        if isinstance(func, Builtin):
            return self.library_call(func.name, functools.partial(func.fn, span), span, args,
                                     kwargs, func.check_arguments)
        if isinstance(func, OpRef):
            if func.call is None:
                raise KernelTypeError(f"nl.{func.name} cannot be called directly yet", span)
            return self.library_call(f"nl.{func.name}", functools.partial(func.call, span),
                                     span, args, kwargs)
        if isinstance(func, DType):
            # np.float32(2.5): a number rounded through the dtype, still a trace-time number.
            if len(args) == 1 and not kwargs and isinstance(args[0], (int, float)):
                value = func.np.type(args[0])
                return value.item() if hasattr(value, "item") else float(value)
            raise KernelTypeError(f"{func!r} converts one number at trace time; got "
                                  f"{args!r}", span)
        if isinstance(func, confine.Method):
            # A method of a trace-time Python value: list.append, dict.get, str.format...
            if any(_is_tensor(a) for a in (*args, *kwargs.values())) and not \
                    func.name.startswith(("list.", "dict.", "tuple.")):
                raise KernelTypeError(f"{func.name}() cannot take a tensor", span)
            return func.fn(span, *args, **kwargs)
        raise KernelTypeError(f"{type(func).__name__} object is not callable", span)

    @staticmethod
    def library_call(name: str, fn: Callable[..., Any], span: SourceSpan, args: list[Any],
                     kwargs: dict[str, Any],
                     check: Callable[[SourceSpan, list[Any], dict[str, Any]], None] | None = None
                     ) -> Any:
        """Call a function of neuronemu's library (nl.*, nisa.*, builtins) for the kernel.

        A call that does not fit the signature is the kernel's error, and so is an argument
        value the function cannot take (NaN for a size, an axis of 10**23): each becomes a
        located error naming the function (`--debug` shows where it was raised inside)."""
        try:
            return fn(*args, **kwargs)
        except TypeError as exc:
            if check is not None:
                check(span, args, kwargs)
            raise KernelTypeError(f"{name}(): invalid argument: {exc}", span) from exc
        except (ValueError, OverflowError, ZeroDivisionError, IndexError, KeyError,
                AttributeError) as exc:
            raise KernelTypeError(f"{name}(): invalid argument ({type(exc).__name__}: "
                                  f"{exc})", span) from exc

    def call_closure(self, func: Closure, args: list[Any], kwargs: dict[str, Any],
                     span: SourceSpan) -> Any:
        fn = func.fn
        env = Env(func.env)
        params = list(fn.params)
        positional = [p for p in params if p.kind == "normal"]
        args = list(args)
        for p in positional:
            if args:
                if p.name in kwargs:
                    raise KernelTypeError(f"{fn.name}() got multiple values for {p.name!r}", span)
                env.vars[p.name] = args.pop(0)
        varargs = next((p for p in params if p.kind == "varargs"), None)
        if args:
            if varargs is None:
                raise KernelTypeError(
                    f"{fn.name}() takes {len(positional)} positional arguments but "
                    f"{len(positional) + len(args)} were given", span)
            env.vars[varargs.name] = tuple(args)
        elif varargs is not None:
            env.vars[varargs.name] = ()
        varkw = next((p for p in params if p.kind == "kwargs"), None)
        extra: dict[str, Any] = {}
        for k, v in kwargs.items():
            if any(p.name == k and p.kind in ("normal", "kwonly") for p in params):
                env.vars[k] = v
            elif varkw is not None:
                extra[k] = v
            else:
                raise KernelTypeError(f"{fn.name}() got an unexpected keyword argument {k!r}",
                                      span)
        if varkw is not None:
            env.vars[varkw.name] = extra
        for p in params:
            if p.kind in ("normal", "kwonly") and p.name not in env.vars:
                if p.default is None:
                    raise KernelTypeError(f"{fn.name}() missing argument {p.name!r}", span)
                env.vars[p.name] = self.eval(p.default, func.env)
        if self.depth >= MAX_CALL_DEPTH:
            raise KernelTypeError(
                f"calls nested deeper than {MAX_CALL_DEPTH} (recursion is not allowed in NKI)",
                span)
        self.depth += 1
        try:
            self.exec_body(fn.body, env)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        return None


def _name_of(func: Any) -> str:
    return func.name if isinstance(func, Builtin) else f"nl.{getattr(func, 'name', func)}"


def _derives_nki_object(bases: Any) -> bool:
    return any(b is NKI_OBJECT or (isinstance(b, UserClass) and _derives_nki_object(b.bases))
               for b in bases)


# Decorators that make a function an NKI kernel (nki.jit and its run-mode variants); the
# nki namespace offers each of them as a pass-through decorator.
KERNEL_DECORATORS = ("jit", "baremetal", "benchmark", "profile", "trace", "simulate_kernel")
_KERNEL_DECORATORS = frozenset(KERNEL_DECORATORS)


def is_jit(d: A.Node) -> bool:
    """Is this decorator `jit`, `nki.jit` (or nki.baremetal, ...) or a call of one?"""
    if isinstance(d, A.Call):
        d = d.func
    return (isinstance(d, A.Name) and d.id in _KERNEL_DECORATORS) or (
        isinstance(d, A.Attribute) and d.attr in _KERNEL_DECORATORS)


@dataclass
class ScheduledKernel:
    """`kernel.with_schedule([(consumer, producer or [producers]), ...])`."""

    fn: A.FunctionDef
    edges: list[tuple[str, tuple[str, ...], SourceSpan]]


def _edges(edges: Any, span: SourceSpan) -> list[tuple[str, tuple[str, ...], SourceSpan]]:
    out = []
    for edge in edges if isinstance(edges, (list, tuple)) else [None]:
        if not (isinstance(edge, (tuple, list)) and len(edge) == 2 and isinstance(edge[0], str)):
            raise KernelTypeError("with_schedule takes a list of (consumer, producer) name "
                                  "pairs", span)
        producers = edge[1] if isinstance(edge[1], (list, tuple)) else (edge[1],)
        if not all(isinstance(p, str) for p in producers):
            raise KernelTypeError("with_schedule producers must be instruction names", span)
        out.append((edge[0], tuple(producers), span))
    return out


def _walk(node: Any):
    """Every AST node under `node`, depth first."""
    if isinstance(node, A.Node):
        yield node
        for f in dataclasses.fields(node):
            if f.name != "span":
                yield from _walk(getattr(node, f.name))
    elif isinstance(node, tuple):
        for item in node:
            yield from _walk(item)


def _bound_names(stmt: A.Node) -> list[str]:
    """The names a module-level statement binds."""
    if isinstance(stmt, A.Assign):
        return _target_names(stmt.targets)
    if isinstance(stmt, A.AnnAssign):
        return _target_names((stmt.target,))
    if isinstance(stmt, (A.FunctionDef, A.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, A.Import):
        return [alias or dotted.split(".")[0] for dotted, alias in stmt.names]
    if isinstance(stmt, A.ImportFrom):
        return [alias or name for name, alias in stmt.names if name != "*"]
    return []


def _target_names(targets: tuple[A.Node, ...]) -> list[str]:
    names: list[str] = []
    for t in targets:
        if isinstance(t, A.Name):
            names.append(t.id)
        elif isinstance(t, (A.TupleExpr, A.ListExpr)):
            names.extend(_target_names(t.elts))
        elif isinstance(t, A.Starred):
            names.extend(_target_names((t.value,)))
    return names


def _describe(node: A.Node) -> str:
    if isinstance(node, A.Unsupported):
        return node.what
    return {
        "Starred": "a starred expression",
    }.get(type(node).__name__, type(node).__name__)
