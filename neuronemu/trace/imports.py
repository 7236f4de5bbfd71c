"""What a kernel file imports: the NKI and host namespaces (lib/modules.py) and helper
modules from the kernel's tree, its package root and the import path (`--path`,
`NEURONEMU_PATH`), parsed and interpreted the same way (never imported by Python).
Module-level host code is not run; a name whose definition fails is bound to its error.

Helper modules are read only as regular files inside a declared root (the kernel's tree:
its folder, or the top folder of the package it is in; or an import path folder), reached
through no link that leads out of it: a kernel from a pull request cannot read a host file
by a symlink or by climbing with dots."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronemu.errors import BudgetError, KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.trace.lib.modules import import_module
from neuronemu.trace.state import Env, TracerState
from neuronemu.trace.values import Namespace, Poison

# Source trees of other packages, after the `--path` folders: os.pathsep-separated folders,
# as PYTHONPATH is (empty entries skipped).
PATH_VARIABLE = "NEURONEMU_PATH"

KERNEL_TREE = "the kernel's folder"  # what each kind of root is called in errors
PACKAGE_ROOT = "the kernel's package"


@dataclass(frozen=True)
class Root:
    """A folder modules may come from: a module file must lie inside `folder` once every
    link is followed. `origin` says who declared it (in errors)."""

    folder: Path
    origin: str


def import_roots(import_path: Sequence[str | os.PathLike[str]] = ()) -> tuple[Root, ...]:
    """The import path's roots in resolution order: `import_path` (`--path`, `path=`),
    then the folders of NEURONEMU_PATH; each once, resolved."""
    given = [(p, "--path") for p in import_path]
    given += [(p, PATH_VARIABLE) for p in os.environ.get(PATH_VARIABLE, "").split(os.pathsep) if p]
    roots: dict[Path, Root] = {}
    for folder, origin in given:
        resolved = Path(os.path.abspath(folder)).resolve()
        roots.setdefault(resolved, Root(resolved, origin))
    return tuple(roots.values())


@dataclass(frozen=True)
class _Base:
    """Where one import is looked for: `folder/a/b.py` or `folder/a/b/__init__.py`, read only
    if it lies inside `root.folder` (a package root looks from the folder above it)."""

    folder: Path
    root: Root
    what: str  # what the folder is, in the error of a module found nowhere
    only: str | None = None  # a package looked for by its own name: only that name

    def shown(self) -> tuple[Path, str]:
        """The folder searched (a package looked for by its name: the package) and what it is."""
        folder = self.folder / self.only if self.only else self.folder
        return folder, f"{str(folder)!r} ({self.what})"


# The module-level statements `_bind_module` runs.
_MODULE_RUNS = (
    A.Import,
    A.ImportFrom,
    A.FunctionDef,
    A.ClassDef,
    A.Assign,
    A.AnnAssign,
    A.Try,
    A.If,
    A.For,
    A.While,
    A.Match,
)


def _bound_names(stmt: A.Node) -> list[str]:
    """The names a module-level statement binds."""
    if isinstance(stmt, A.Assign):
        return _target_names(stmt.targets)
    if isinstance(stmt, (A.AnnAssign, A.AugAssign)):
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
    if isinstance(stmt, (A.If, A.For, A.While)):  # what either branch binds, and the target
        own = _target_names((stmt.target,)) if isinstance(stmt, A.For) else []
        return own + [
            n for block in (stmt.body, stmt.orelse) for s in block for n in _bound_names(s)
        ]
    if isinstance(stmt, A.Match):  # what any case's pattern or block binds
        return [
            n
            for case in stmt.cases
            for n in A.pattern_names(case.pattern) + [m for s in case.body for m in _bound_names(s)]
        ]
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
    return _top_package(Path(os.path.abspath(kernel_path)).parent.resolve())


def _top_package(folder: Path) -> Path:
    """`folder`, or the top folder of the package it is in (walking up `__init__.py` files)."""
    try:
        while (folder / "__init__.py").is_file() and (folder.parent / "__init__.py").is_file():
            folder = folder.parent
    except OSError:
        pass
    return folder


def _is_package(folder: Path) -> bool:
    try:
        return (folder / "__init__.py").is_file()
    except OSError:
        return False


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


class Imports(TracerState):
    """Module binding and imports of the tracer (see tracer.py). The tracer sets `tree` (the
    kernel's tree) and `import_path` (the roots of `import_roots`)."""

    tree: Path
    import_path: tuple[Root, ...]
    _module_roots: dict[str, tuple[Root, Path]]  # a module file -> its root and top folder
    _local_modules: dict[str, Namespace]  # helper modules by resolved path

    def _bind_module(self, module: A.Module | None = None, env: Env | None = None) -> None:
        """Bind a module's imports, definitions and constants, running its statements that
        bind names (`if`, `for` and `while` too: a table built in a loop, a tile size chosen
        by a flag); errors wait until a name is used. Other statements (a call at module
        level, `if __name__ == "__main__":` blocks: a kernel's `__name__` is not "__main__")
        bind nothing a kernel can use, and are not run."""
        module = module or self.module
        env = env or self.globals
        for stmt in module.body:
            if isinstance(stmt, _MODULE_RUNS):
                try:
                    self.exec_stmt(stmt, env)
                except BudgetError:
                    raise  # a budget is spent whoever asks: never deferred
                except NeuronEmuError as err:
                    for name in _bound_names(stmt):
                        env.vars[name] = Poison(err)

    def _kernel_root(self) -> Root:
        return Root(self.tree, KERNEL_TREE)

    def _root_of(self, file: Path) -> tuple[Root, Path]:
        """The root a module file was read from, and the folder its relative imports may
        climb to (the top of its package inside that root)."""
        found = self._module_roots.get(str(file))
        return found if found is not None else (self._kernel_root(), self.tree)

    def _absolute(self, parts: list[str], base: _Base, span: SourceSpan) -> Any:
        """`import a.b.c` from `base`, as Python imports it: the package `a` (a folder
        without `__init__.py` is an empty namespace package), then `a.b` inside it, then
        `a.b.c`, each bound as an attribute of its package. None: not in `base`."""
        if base.only is not None and parts[:1] != [base.only]:
            return None
        module = None
        folder = base.folder
        for n, part in enumerate(parts):
            here = _Base(folder, base.root, base.what)
            found = self._local_module([part], here, span, ".".join(parts[: n + 1]))
            if found is None:
                found = self._namespace_package(folder / part, base.root, parts[: n + 1])
            if found is None or isinstance(found, Poison):
                return found
            if module is not None:
                module.members.setdefault(part, found)
            module = found
            folder = folder / part
        return module

    def _namespace_package(self, folder: Path, root: Root, parts: list[str]) -> Any:
        """A folder inside `root` without `__init__.py`: a namespace package (None if none;
        its modules are checked one by one as they are imported)."""
        try:
            if not (folder.is_relative_to(root.folder) and folder.is_dir()):
                return None
            key = str(folder.resolve()) + os.sep
        except (OSError, ValueError, RuntimeError):
            return None
        if key not in self._local_modules:
            self._local_modules[key] = Namespace(".".join(parts), {})
        return self._local_modules[key]

    def _local_module(
        self, parts: list[str], base: _Base, span: SourceSpan, dotted: str | None = None
    ) -> Any:
        """A helper module (`base/a/b.py` or a package `base/a/b/`) if it is there."""
        root = base.root
        target = base.folder.joinpath(*parts) if parts else base.folder
        for path in (target.with_suffix(".py"), target / "__init__.py"):
            if not path.is_relative_to(root.folder):
                continue  # (beside a package root, not in it)
            inside = _inside(path, root.folder)
            if inside is None:
                continue
            name = dotted or ".".join(parts) or path.parent.name
            if not inside:  # (its text is never read: no line of it is quoted)
                return Poison(
                    KernelTypeError(
                        f"helper module {name!r} is not a regular file inside {root.origin} "
                        f"{str(root.folder)!r} (a link out of it, or a device)",
                        span,
                        hint=f"copy the module into {root.origin}; neuronemu follows no link "
                        "out of a folder modules come from",
                    )
                )
            key = str(path.resolve())
            cached = self._local_modules.get(key)
            if cached is not None:
                return cached
            from neuronemu.frontend import parse_file

            namespace = Namespace(name, {})
            self._local_modules[key] = namespace  # before binding: import cycles terminate
            top = self.tree
            if root.origin != KERNEL_TREE and root.origin != PACKAGE_ROOT:
                top = _top_package(Path(key).parent)
                top = top if top.is_relative_to(root.folder) else root.folder
            self._module_roots[key] = (root, top)
            env = Env(self.builtins)
            env.vars["__file__"] = str(path)
            self._bind_module(parse_file(path, self.meter.limits, "helper module"), env)
            namespace.members.update({k: v for k, v in env.vars.items() if k != "__file__"})
            return namespace
        return None

    def _bases(self, here: Path, own: Root) -> list[_Base]:
        """Where an absolute import is looked for, in order: the importing module's folder,
        the kernel's folder, the packages the kernel is in (by their own names, its package
        root first), then each import path root (a root that is itself a package also by
        its own name)."""
        kernel_dir = Path(os.path.abspath(self.path)).parent.resolve()
        kernel = self._kernel_root()
        bases = [
            _Base(
                here, own, KERNEL_TREE if here == kernel_dir else "the importing module's folder"
            ),
            _Base(kernel_dir, kernel, KERNEL_TREE),
        ]
        package = Root(self.tree, PACKAGE_ROOT)
        for folder in self._packages(kernel_dir):
            bases.append(_Base(folder.parent, package, PACKAGE_ROOT, folder.name))
        for root in self.import_path:
            bases.append(_Base(root.folder, root, root.origin))
            if _is_package(root.folder):
                bases.append(_Base(root.folder.parent, root, root.origin, root.folder.name))
        unique: dict[tuple[Path, Path, str | None], _Base] = {}
        for b in bases:
            unique.setdefault((b.folder, b.root.folder, b.only), b)
        return list(unique.values())

    def _packages(self, kernel_dir: Path) -> list[Path]:
        """The packages the kernel is in, the top one first (the kernel's tree, then each
        folder with an `__init__.py` down to the kernel's): each resolves by its own name
        (`mypkg/` below a folder that is a package too, as nki-library's `nkilib/` is)."""
        found = []
        folder = kernel_dir
        while _is_package(folder) and folder.is_relative_to(self.tree):
            found.append(folder)
            if folder == self.tree:
                break
            folder = folder.parent
        return found[::-1]

    def _find_module(self, dotted: str, level: int, span: SourceSpan) -> Any:
        """nki/numpy/math, else a helper module: relative to the importing file, or looked
        for in the folders of `_bases`."""
        if level == 0:
            known = import_module(self, dotted, span, quiet=True)
            if known is not None:
                return known
        file = Path(span.path).resolve()
        here = file.parent
        own, top = self._root_of(file)
        parts = dotted.split(".") if dotted else []
        if level:
            base = here
            for _ in range(level - 1):
                base = base.parent
            if level - 1 > len(here.parents) or not base.is_relative_to(top):
                return Poison(
                    KernelTypeError(
                        f"attempted relative import beyond top-level package: "
                        f"{'.' * level}{dotted} climbs out of {str(top)!r}",
                        span,
                        hint="helper modules come from the kernel's folder, or the package "
                        "it is in (folders with __init__.py), or a --path folder",
                    )
                )
            found = self._local_module(parts, _Base(base, own, own.origin), span)
            if found is None:
                return Poison(
                    KernelTypeError(
                        f"relative import: no module {'.' * level}{dotted} next to {span.path}",
                        span,
                    )
                )
            return found
        bases = self._bases(here, own)
        for b in bases:
            found = self._absolute(parts, b, span)
            if found is not None:
                return found
        looked: dict[Path, str] = {}
        for b in bases:
            folder, text = b.shown()
            looked.setdefault(folder, text)
        hint = (
            "add the folder that holds its package with --path DIR (path folders: "
            "import_path=[...] in the Python API, or NEURONEMU_PATH)"
        )
        kernel_dir = Path(os.path.abspath(self.path)).parent.resolve()
        outer = next((f for f in kernel_dir.parents if f.name == parts[0]), None)
        given = {root.folder for root in self.import_path}
        if outer is not None and not outer.is_relative_to(self.tree) and outer.parent not in given:
            # (a folder between has no __init__.py: walking up stopped below the package)
            hint = (
                f"the kernel is inside {parts[0]!r}, but a folder between has no "
                f"__init__.py, so its package root is not found by walking up: add "
                f"--path {str(outer.parent)!r}"
            )
        return Poison(
            KernelTypeError(
                f"module {dotted!r} is not available inside NKI kernels (only nki, numpy, "
                f"math and some standard modules are) and no helper module of that name "
                f"is in {', '.join(looked.values())}",
                span,
                hint=hint,
            )
        )

    def _s_Import(self, s: A.Import, env: Env) -> None:
        for dotted, alias in s.names:
            if alias is not None:
                env.vars[alias] = self._find_module(dotted, 0, s.span)
            else:
                # (`a`; a helper package's `a.b` and `a.b.c` loaded and bound in it)
                top = dotted.split(".")[0]
                module = self._find_module(top, 0, s.span)
                if "." in dotted and any(module is m for m in self._local_modules.values()):
                    sub = self._find_module(dotted, 0, s.span)
                    module = sub if isinstance(sub, Poison) else module
                env.vars[top] = module
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
