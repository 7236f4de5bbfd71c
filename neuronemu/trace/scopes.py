"""`global` and `nonlocal`: a function's assignments to the names they list bind the
module's (or the enclosing function's) variables instead of new local ones."""

from __future__ import annotations

from typing import Any

from neuronemu.errors import KernelSyntaxError
from neuronemu.frontend import ast as A

__all__ = ["Scopes"]


class Scopes:
    """`global` and `nonlocal` statements of the tracer (see tracer.py)."""

    def _module_env(self, env: Any) -> Any:
        """The module scope `env` sits in (the one just under the builtins)."""
        while env.parent is not None and env.parent is not self.builtins:  # type: ignore[attr-defined]
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
