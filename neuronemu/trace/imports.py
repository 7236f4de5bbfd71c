"""What a kernel file imports: the NKI and host namespaces (lib/modules.py) and helper
modules next to the kernel, parsed and interpreted the same way (never imported by Python).
Module-level host code is not run; a name whose definition fails is bound to its error.

Helper modules are read only as regular files inside the kernel's tree (its folder, or the
top folder of the package it is in), reached through no link that leads out of it: a kernel
from a pull request cannot read a host file by a symlink or by climbing with dots."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from neuronemu.errors import BudgetError, KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.trace.interpreter import Env
from neuronemu.trace.lib.modules import import_module
from neuronemu.trace.values import Namespace, Poison


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
    if isinstance(stmt, A.Try):  # what any of its blocks binds
        blocks = [stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)]
        return [n for block in blocks for inner in block for n in _bound_names(inner)]
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


def kernel_tree(kernel_path: str) -> Path:
    """The folder helper modules may come from: the kernel's own, or, where that is a
    package (an `__init__.py`), the top folder of the package (`from ..utils import f`)."""
    root = Path(os.path.abspath(kernel_path)).parent.resolve()
    try:
        while (root / "__init__.py").is_file() and (root.parent / "__init__.py").is_file():
            root = root.parent
    except OSError:
        pass
    return root


def _inside(path: Path, root: Path) -> bool | None:
    """Is `path` a regular file inside `root` once every link is followed? None: no file."""
    try:
        real = path.resolve(strict=True)
        mode = os.stat(real).st_mode
    except (OSError, ValueError, RuntimeError):  # (missing, a name too long, a link loop)
        return None
    if stat.S_ISDIR(mode):
        return None
    return stat.S_ISREG(mode) and real.is_relative_to(root)


class Imports:
    """Module binding and imports of the tracer (see tracer.py)."""

    def _bind_module(self, module: A.Module | None = None, env: Env | None = None) -> None:
        """Bind a module's imports, definitions and constants; errors wait until a name is used."""
        module = module or self.module
        env = env or self.globals
        for stmt in module.body:
            if isinstance(
                stmt,
                (A.Import, A.ImportFrom, A.FunctionDef, A.ClassDef, A.Assign, A.AnnAssign, A.Try),
            ):
                try:
                    self.exec_stmt(stmt, env)
                except BudgetError:
                    raise  # a budget is spent whoever asks: never deferred
                except NeuronEmuError as err:
                    for name in _bound_names(stmt):
                        env.vars[name] = Poison(err)

    def _local_module(self, parts: list[str], base: Path, span: SourceSpan) -> Any:
        """A helper module of the kernel's own (`base/a/b.py` or a package `base/a/b/`)."""
        target = base.joinpath(*parts) if parts else base
        for path in (target.with_suffix(".py"), target / "__init__.py"):
            inside = _inside(path, self.tree)
            if inside is None:
                continue
            if not inside:  # (its text is never read: no line of it is quoted)
                name = ".".join(parts) or path.parent.name
                return Poison(
                    KernelTypeError(
                        f"helper module {name!r} is not a regular file inside the kernel's "
                        f"folder {str(self.tree)!r} (a link out of it, or a device)",
                        span,
                        hint="copy the module next to the kernel; neuronemu follows no link "
                        "out of the kernel's folder",
                    )
                )
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
            known = import_module(self, dotted, span, quiet=True)
            if known is not None:
                return known
        here = Path(span.path).resolve().parent
        parts = dotted.split(".") if dotted else []
        if level:
            base = here
            for _ in range(level - 1):
                base = base.parent
            if level - 1 > len(here.parents) or not base.is_relative_to(self.tree):
                return Poison(
                    KernelTypeError(
                        f"attempted relative import beyond top-level package: "
                        f"{'.' * level}{dotted} climbs out of {str(self.tree)!r}",
                        span,
                        hint="helper modules come from the kernel's folder, or the package "
                        "it is in (folders with __init__.py)",
                    )
                )
            found = self._local_module(parts, base, span)
        else:
            found = None
            for base in dict.fromkeys((here, Path(os.path.abspath(self.path)).parent.resolve())):
                found = self._local_module(parts, base, span)
                if found is not None:
                    break
        if found is None:
            if level:
                return Poison(
                    KernelTypeError(
                        f"relative import: no module {'.' * level}{dotted} next to {span.path}",
                        span,
                    )
                )
            return import_module(self, dotted, span)  # the "not available" error, deferred
        return found

    def _s_Import(self, s: A.Import, env: Env) -> None:
        for dotted, alias in s.names:
            if alias is not None:
                env.vars[alias] = self._find_module(dotted, 0, s.span)
            else:
                top = dotted.split(".")[0]
                env.vars[top] = self._find_module(top, 0, s.span)
        self._raise_in_try(s, env)

    def _raise_in_try(self, s: A.Import | A.ImportFrom, env: Env) -> None:
        """A failed import is deferred to the name's first use, except inside `try`, where
        it is an ImportError now (`try: import x` / `except ImportError:`)."""
        if not self.trying:
            return
        for name in _bound_names(s):
            value = env.vars.get(name)
            if isinstance(value, Poison) and isinstance(value.error, NeuronEmuError):
                del env.vars[name]
                raise value.error.as_python("ModuleNotFoundError")

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
            env.vars[alias or name] = (
                sub
                if not isinstance(sub, Poison)
                else Poison(
                    KernelTypeError(
                        f"cannot import {name!r} from {s.module or '.' * s.level}", s.span
                    )
                )
            )
        self._raise_in_try(s, env)
