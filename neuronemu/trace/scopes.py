"""`global` and `nonlocal`: a function's assignments to the names they list bind the
module's (or the enclosing function's) variables instead of new local ones. And a function's
local names, as CPython finds them before the function runs: a name it binds anywhere in its
body is local all through it (read before it is bound, an UnboundLocalError)."""

from __future__ import annotations

from typing import Any

from neuronemu.errors import KernelSyntaxError, KernelTypeError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.trace.state import TracerState

__all__ = ["Scopes", "UNBOUND", "local_names", "unbound"]


class _Unbound:
    """The value of a local name not bound yet."""

    def __repr__(self) -> str:
        return "<unbound>"


UNBOUND = _Unbound()


def unbound(name: str, local: bool, span: SourceSpan) -> KernelTypeError:
    """CPython 3.11's error for reading `name` before it is bound (in this function, or in the
    enclosing one a closure reads it from)."""
    if local:
        message = f"cannot access local variable {name!r} where it is not associated with a value"
        return KernelTypeError(message, span).as_python("UnboundLocalError", (message,))
    message = (
        f"cannot access free variable {name!r} where it is not associated with a value "
        "in enclosing scope"
    )
    return KernelTypeError(message, span).as_python("NameError", (message,))


def local_names(fn: A.FunctionDef) -> frozenset[str]:
    """The names `fn`'s own body binds (not a nested function's, class's or
    comprehension's), less those it declares `global` or `nonlocal`."""
    bound: set[str] = set()
    declared: set[str] = set()
    stack: list[Any] = list(fn.body)
    while stack:
        s = stack.pop()
        if isinstance(s, A.Assign):
            targets: list[Any] = list(s.targets)
        elif isinstance(s, A.Delete):  # (`del x` makes x local, as binding it does)
            targets = list(s.targets)
        elif isinstance(s, (A.AugAssign, A.AnnAssign, A.For)):
            targets = [s.target]
        elif isinstance(s, A.With):
            targets = [alias for _, alias in s.items if alias is not None]
        elif isinstance(s, (A.FunctionDef, A.ClassDef)):
            bound.add(s.name)
            continue
        elif isinstance(s, A.Import):
            bound.update(alias or dotted.split(".")[0] for dotted, alias in s.names)
            continue
        elif isinstance(s, A.ImportFrom):
            bound.update(alias or name for name, alias in s.names if name != "*")
            continue
        elif isinstance(s, (A.Global, A.Nonlocal)):
            declared.update(s.names)
            continue
        elif isinstance(s, A.Match):
            for case in s.cases:
                bound.update(A.pattern_names(case.pattern))
                stack.extend(case.body)
            continue
        else:
            targets = []
        while targets:
            t = targets.pop()
            if isinstance(t, A.Name):
                bound.add(t.id)
            elif isinstance(t, (A.TupleExpr, A.ListExpr)):
                targets.extend(t.elts)
            elif isinstance(t, A.Starred):
                targets.append(t.value)
        for name in ("body", "orelse", "finalbody"):
            stack.extend(getattr(s, name, ()))
        for handler in getattr(s, "handlers", ()):
            if handler.name is not None:
                bound.add(handler.name)
            stack.extend(handler.body)
    return frozenset(bound - declared)


class Scopes(TracerState):
    """`global` and `nonlocal` statements of the tracer (see tracer.py)."""

    def _module_env(self, env: Any) -> Any:
        """The module scope `env` sits in (the one just under the builtins)."""
        while env.parent is not None and env.parent is not self.builtins:
            env = env.parent
        return env

    def _s_Global(self, s: A.Global, env: Any) -> None:
        module = self._module_env(env)
        if env is module:
            return  # `global x` at module level: the names are the module's already
        for name in s.names:
            env.declared = env.declared or {}
            env.declared[name] = module

    def _s_Nonlocal(self, s: A.Nonlocal, env: Any) -> None:
        module = self._module_env(env)
        if env is module:
            raise KernelSyntaxError("nonlocal declaration not allowed at module level", s.span)
        for name in s.names:
            scope = env.parent
            while scope is not None and scope is not module and name not in scope.vars:
                scope = scope.parent
            if scope is None or scope is module:
                raise KernelSyntaxError(f"no binding for nonlocal {name!r} found", s.span)
            env.declared = env.declared or {}
            env.declared[name] = scope
