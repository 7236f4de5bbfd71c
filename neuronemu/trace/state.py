"""The tracer's shared state: the scopes (`Env`) and closures it evaluates with, and what the
parts of the Tracer (tracer.py) know of one another, declared once for the type checker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from neuronemu.build.builder import Builder
from neuronemu.errors import SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.limits import Meter
from neuronemu.trace.objects import UserClass
from neuronemu_isa import Arch

__all__ = ["Closure", "ComprehensionEnv", "Env", "TracerState"]


class Env:
    __slots__ = ("vars", "parent", "declared")

    def __init__(self, parent: Env | None = None):
        self.vars: dict[str, Any] = {}
        self.parent = parent
        # Names a `global`/`nonlocal` statement bound to another scope: where they bind.
        self.declared: dict[str, Env] | None = None

    def lookup(self, name: str) -> tuple[bool, Any]:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return True, env.vars[name]
            env = env.parent
        return False, None

    def bind(self, name: str, value: Any) -> None:
        """`name = value` in this scope, or where `global`/`nonlocal` sent the name."""
        scope = self.declared.get(name, self) if self.declared else self
        scope.vars[name] = value

    def visible(self) -> list[str]:
        names: list[str] = []
        env: Env | None = self
        while env is not None:
            names.extend(env.vars)
            env = env.parent
        return names


class ComprehensionEnv(Env):
    """The scope of a comprehension's own names (an `x := ...` in it binds around it)."""

    __slots__ = ()


@dataclass
class Closure:
    """A kernel-file function, inlined at each call."""

    fn: A.FunctionDef
    env: Env
    # Default values, evaluated where the function is defined (as Python does).
    defaults: dict[str, Any] = field(default_factory=dict)
    owner: Any = None  # the class whose body defined it (a zero-argument `super()`)
    attrs: dict[str, Any] = field(default_factory=dict)  # `fn.calls = []`: its own attributes

    def __repr__(self) -> str:
        return f"<function {self.fn.name}>"


class TracerState:
    """The base of every part of the Tracer: the fields more than one part uses (Tracer.__init__
    sets them) and the methods one part calls on another. A field or method only one part
    uses is declared in that part. It is also the `Context` lib/ sees (lib/context.py)."""

    module: A.Module
    path: str
    arch: Arch
    builder: Builder
    meter: Meter
    print_fn: Callable[[str], None]
    dialect: str | None  # which NKI the file imports: "nki", "neuronxcc.nki" or None
    modules: dict[str, Any]  # the modules a kernel can import, by dotted name
    kernel_values: dict[str, Any]  # the kernel's inputs that are no array
    traced_once: dict[int, range]  # older NKI's one-pass ranges made lately (loops.py)
    grid: tuple[int, ...]  # the SPMD launch grid, and this instance's ids in it
    program_ids: tuple[int, ...]
    pending_name: str | None  # the variable an allocation is being bound to
    builtins: Env
    globals: Env
    handling: list[Exception]  # exceptions being handled (`raise` re-raises)
    trying: int  # `try` blocks being run

    if TYPE_CHECKING:  # the methods one part calls on another, defined where the comment says
        # expressions.py
        def eval(self, e: A.Node, env: Env) -> Any: ...
        def getattr(self, value: Any, attr: str, span: SourceSpan) -> Any: ...
        def to_python(self, value: Any, span: SourceSpan, numpy: bool = False) -> Any: ...
        def binop(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any: ...
        def truth(self, value: Any, span: SourceSpan) -> bool: ...
        def compare(self, op: str, left: Any, right: Any, span: SourceSpan, alone: bool) -> Any: ...
        def _subscript(
            self, value: Any, index: Any, span: SourceSpan, index_span: SourceSpan | None = None
        ) -> Any: ...
        def _elements(self, elts: tuple[A.Node, ...], env: Env) -> list[Any]: ...

        # interpreter.py
        def exec_body(self, body: tuple[A.Node, ...], env: Env) -> None: ...
        def exec_stmt(self, s: A.Node, env: Env) -> None: ...
        def _s_Unsupported(self, s: A.Unsupported, env: Env) -> None: ...
        def assign(self, target: A.Node, value: Any, env: Env) -> None: ...
        def set_item(self, container: Any, index: Any, value: Any, span: SourceSpan) -> None: ...
        def unique_name(self, base: str) -> str: ...
        def _unique_name(self, base: str) -> str: ...
        def closure(self, fn: A.FunctionDef, env: Env) -> Closure: ...
        def _arguments(self, e: A.Call, env: Env) -> tuple[list[Any], dict[str, Any]]: ...
        def call(
            self, func: Any, args: list[Any], kwargs: dict[str, Any], span: SourceSpan
        ) -> Any: ...
        def call_closure(
            self, func: Closure, args: list[Any], kwargs: dict[str, Any], span: SourceSpan
        ) -> Any: ...
        @staticmethod
        def library_call(
            name: str,
            fn: Callable[..., Any],
            span: SourceSpan,
            args: list[Any],
            kwargs: dict[str, Any],
            check: Callable[[SourceSpan, list[Any], dict[str, Any]], None] | None = None,
        ) -> Any: ...

        # loops.py
        def note_one_pass(self, made: range) -> None: ...
        def _iteration(self, loop: A.For | A.While, env: Env) -> bool: ...
        def _count_iteration(self, span: SourceSpan) -> None: ...

        # classes.py
        def instantiate(
            self, cls: UserClass, args: list[Any], kwargs: dict[str, Any], span: SourceSpan
        ) -> Any: ...
        def set_attribute(self, obj: Any, attr: str, value: Any, span: SourceSpan) -> None: ...
        def object_attr(self, value: Any, attr: str, span: SourceSpan) -> tuple[bool, Any]: ...

        # pytypes.py
        def python_attr(self, value: Any, attr: str, span: SourceSpan) -> tuple[bool, Any]: ...
        def make_super(self, span: SourceSpan, cls: Any = None, obj: Any = None) -> Any: ...
        def zero_arg_super(self, env: Env, span: SourceSpan) -> Any: ...
        def type_of(self, span: SourceSpan, value: Any, *rest: Any) -> Any: ...

        # contexts.py, templates.py, kernel.py, tracer.py
        def with_items(self, s: A.With, i: int, env: Any) -> None: ...
        def _templated(self, loop: Any, env: Any, r: range) -> bool: ...
        def launch(self, grid: tuple[int, ...], instance: Any, span: SourceSpan) -> Any: ...
        def abort_generators(self) -> None: ...
