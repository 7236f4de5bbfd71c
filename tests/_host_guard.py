"""A host-effect guard for tests: an audit hook that records what a kernel run does to the
host (files written, processes started, sockets, code loaded from pickles...).

    with HostGuard(allow=[cache_dir]) as guard:
        neuronemu.run(path, inputs)
    guard.assert_clean()

`sys.addaudithook` hooks can never be removed, so one hook is installed per process (on the
first `HostGuard`) and does nothing unless a guard is armed (inside its `with`). Events come
from every thread, which is what we want: the kernel's work may run on any.

What counts as a host effect (PEP 578 event names, see the audit events table of the Python
docs):

- `open` with a writing flag (write, read-write, append, create, truncate) of a path outside
  the allowed directories. Reads are fine: kernels read helper modules next to them.
- process creation: `os.system`, `os.exec`, `os.spawn`, `os.posix_spawn`, `os.fork`,
  `os.forkpty`, `subprocess.Popen`, `pty.spawn`, `os.kill`/`os.killpg`.
- any `socket.*` event, and the other network events (`urllib.Request`,
  `http.client.connect`, `ftplib.*`, `smtplib.*`, `poplib.*`, `imaplib.*`, `nntplib.*`,
  `telnetlib.*`, `webbrowser.open`).
- file system changes outside the allowed directories: `os.remove`, `os.rename`,
  `os.rmdir`, `os.mkdir`, `os.symlink`, `os.link`, `os.chmod`, `os.chown`, `os.truncate`,
  `os.utime`, `os.chdir`, `os.chflags`, `os.setxattr`, `os.removexattr`, `shutil.*`.
- host process state: `os.putenv`, `os.unsetenv`, `sys.addaudithook`, `sys.settrace`,
  `sys.setprofile`, `sys._getframe`, `object.__setattr__`/`object.__delattr__` on a class
  that is not neuronemu's (`setattr(np.ndarray, ...)`), `function.__new__`, `code.__new__`,
  `builtins.input`.
- code loading: `exec` and `compile` of code (Python and its libraries do not run either
  during an ordinary kernel run once they are imported; neuronemu never does), `marshal.*`,
  `ctypes.*`, `pickle.find_class` of anything outside neuronemu and a few plain containers
  (a cache entry that names `os.system` is an attack), `import` of a module that reaches
  the host (`subprocess`, `socket`, `ctypes`, `shutil`, `pty`, `multiprocessing`...).

An ordinary kernel run (warm or cold AST cache) fires none of these outside the allowed
directories: `tests/property/test_host_guard.py` checks that, and that the guard catches a
deliberate write and `os.system`. The allowed directories are the neuronemu cache
(`$NEURONEMU_CACHE_DIR`), Numba's cache (`$NUMBA_CACHE_DIR`, or the `__pycache__` folders of
the installed neuronemu package, where `cache=True` jit functions keep their machine code)
and Lark's grammar cache (`tempfile.gettempdir()/.lark_cache*`, written once when the
grammar's LALR tables are first built).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HostEffect", "HostEffectError", "HostGuard", "default_allowed_dirs"]

_WRITE_FLAGS = (
    os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC | getattr(os, "O_TMPFILE", 0)
)

_PROCESS_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.spawn",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "subprocess.Popen",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "os.startfile",
    }
)
_NETWORK_PREFIXES = (
    "socket.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "nntplib.",
    "telnetlib.",
)
_NETWORK_EVENTS = frozenset(
    {"urllib.Request", "http.client.connect", "http.client.send", "webbrowser.open"}
)
# File system changes: (event, indexes of the path arguments).
_PATH_EVENTS = {
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.symlink": (0, 1),
    "os.link": (0, 1),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.lchmod": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.copymode": (0, 1),
    "shutil.copystat": (0, 1),
    "shutil.copytree": (0, 1),
    "shutil.move": (0, 1),
    "shutil.rmtree": (0,),
    "shutil.chown": (0,),
    "shutil.make_archive": (0,),
    "shutil.unpack_archive": (0, 1),
}
_STATE_EVENTS = frozenset(
    {
        "os.putenv",
        "os.unsetenv",
        "os.chdir",
        "sys.addaudithook",
        "sys.settrace",
        "sys.setprofile",
        "sys._getframe",
        "function.__new__",
        "code.__new__",
        "builtins.input",
        "builtins.breakpoint",
        "sys.excepthook",
        "sys.unraisablehook",
        "cpython.run_command",
        "cpython.run_file",
        "cpython.run_module",
        "cpython.run_interactivehook",
        "cpython.remote_debugger_script",
        "mmap.__new__",
        "resource.setrlimit",
        "resource.prlimit",
        "os.setuid",
        "os.setgid",
    }
)
_CODE_PREFIXES = ("ctypes.", "marshal.")
_CODE_EVENTS = frozenset(
    {"exec", "compile", "gc.get_referrers", "gc.get_referents", "gc.get_objects"}
)
_HOST_MODULES = frozenset(
    {
        "subprocess",
        "_posixsubprocess",
        "socket",
        "_socket",
        "ssl",
        "ctypes",
        "_ctypes",
        "pty",
        "multiprocessing",
        "concurrent.futures",
        "webbrowser",
        "http.client",
        "urllib.request",
        "ftplib",
        "smtplib",
        "telnetlib",
        "shelve",
        "pdb",
        "code",
        "codeop",
    }
)
# What an AST cache entry (or any legitimate pickle neuronemu loads) may name besides
# neuronemu's own classes: plain containers.
_SAFE_PICKLE_GLOBALS = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("builtins", "Ellipsis"),
        ("builtins", "bytearray"),
        ("copyreg", "_reconstructor"),
        ("builtins", "object"),
        ("copyreg", "__newobj__"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }
)


@dataclass(frozen=True)
class HostEffect:
    """One audit event the guard counts as touching the host."""

    event: str
    detail: str
    where: str  # the innermost frames that raised it

    def __str__(self) -> str:
        return f"{self.event}: {self.detail}\n{self.where}"


class HostEffectError(AssertionError):
    pass


def default_allowed_dirs() -> list[str]:
    """The neuronemu cache, Numba's cache and neuronemu's own __pycache__ folders."""
    dirs: list[str] = []
    cache = os.environ.get("NEURONEMU_CACHE_DIR")
    if cache:
        dirs.append(cache)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        dirs.append(os.path.join(base, "neuronemu"))
    numba_cache = os.environ.get("NUMBA_CACHE_DIR")
    if numba_cache:
        dirs.append(numba_cache)
    try:
        import neuronemu

        dirs.append(os.path.dirname(os.path.abspath(neuronemu.__file__)))
    except ImportError:  # pragma: no cover - the tests always have neuronemu
        pass
    return dirs


_LOCK = threading.Lock()
_ARMED: list[HostGuard] = []
_INSTALLED = False
_IN_HOOK = threading.local()


def _path_text(value: Any) -> str | None:
    if isinstance(value, int):
        return None  # a file descriptor: its opening was audited already
    try:
        text = os.fspath(value)
    except TypeError:
        return repr(value)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    return text


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _ARMED or getattr(_IN_HOOK, "on", False):
        return
    _IN_HOOK.on = True
    try:
        guard = _ARMED[-1]
        detail = guard._judge(event, args)
        if detail is not None:
            where = "".join(traceback.format_stack(sys._getframe(1), limit=6))
            guard.effects.append(HostEffect(event, detail, where))
    except Exception as exc:  # never break the code under test from inside the hook
        guard = _ARMED[-1] if _ARMED else None
        if guard is not None:
            guard.effects.append(HostEffect("guard-error", repr(exc), ""))
    finally:
        _IN_HOOK.on = False


def _install() -> None:
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            sys.addaudithook(_hook)
            _INSTALLED = True


@dataclass
class HostGuard:
    """Records host effects while armed (`with guard:`); `allow` are directories (and their
    subtrees) where writes are fine. `record_all=True` records every audit event (to see what
    fires), not only host effects."""

    allow: Iterable[str | os.PathLike[str]] = ()
    record_all: bool = False
    effects: list[HostEffect] = field(default_factory=list)

    def __post_init__(self) -> None:
        dirs = [os.fspath(d) for d in self.allow] + default_allowed_dirs()
        self._allowed = tuple(os.path.join(os.path.abspath(d), "") for d in dirs)
        self._tmp = os.path.join(os.path.abspath(tempfile.gettempdir()), "")
        _install()

    def __enter__(self) -> HostGuard:
        _ARMED.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _ARMED.remove(self)

    # -- judging events ------------------------------------------------------------------

    def allowed(self, path: str) -> bool:
        full = os.path.abspath(path)
        if full.startswith(self._allowed) or os.path.join(full, "") in self._allowed:
            return True
        # Lark's cache of the grammar's LALR tables (Lark(cache=True)).
        return full.startswith(self._tmp) and os.path.basename(full).startswith(".lark_cache")

    def _judge(self, event: str, args: tuple[Any, ...]) -> str | None:
        if self.record_all:
            return _short(args)
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            text = _path_text(path)
            if text is None:
                return None
            writing = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writing and not self.allowed(text):
                return f"open for writing: {text!r} (mode {mode!r}, flags {flags!r})"
            return None
        if (
            event in _PROCESS_EVENTS
            or event in _NETWORK_EVENTS
            or event.startswith(_NETWORK_PREFIXES)
        ):
            return _short(args)
        if event in _PATH_EVENTS:
            paths = [_path_text(args[i]) for i in _PATH_EVENTS[event] if i < len(args)]
            bad = [p for p in paths if p is not None and not self.allowed(p)]
            if event == "os.mkdir":  # the folders leading to a cache (mkdir -p)
                bad = [
                    p
                    for p in bad
                    if not any(
                        d.startswith(os.path.join(os.path.abspath(p), "")) for d in self._allowed
                    )
                ]
            return f"{bad!r}" if bad else None
        if event == "import":
            name = args[0] if args else ""
            return f"import {name}" if name in _HOST_MODULES else None
        if event == "sys._getframe":
            # Tracebacks, warnings and dataclasses read frames: not a way out by itself.
            return None
        if event in _STATE_EVENTS:
            return _short(args)
        if event == "compile" and _called_from_ast_parse():
            # ast.parse/ast.literal_eval (the front end reads string literals with it): the
            # result is a syntax tree, never code that runs.
            return None
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            module = getattr(target, "__module__", "") or ""
            if not isinstance(target, type) or module.startswith(("neuronemu", "isa")):
                return None
            detail = f"{target!r}.{args[1] if len(args) > 1 else '?'}"
        elif event == "pickle.find_class":
            module, name = (tuple(args) + ("", ""))[:2]
            if (
                str(module).startswith(("neuronemu.", "isa."))
                or (module, name) in _SAFE_PICKLE_GLOBALS
            ):
                return None
            detail = f"{module}.{name}"
        elif event in _CODE_EVENTS or event.startswith(_CODE_PREFIXES):
            detail = _short(args)
        else:
            return None
        # Code loading and class set-up are fine when Python's import system runs an
        # installed module (a lazy `import difflib` in an error path: namedtuple and
        # dataclass compile their methods) or Numba loads its cached machine code (ctypes,
        # pickled type signatures); a kernel reaches neither. Host modules are caught above,
        # at their `import` event.
        return None if _trusted_machinery() else detail

    # -- results ---------------------------------------------------------------------------

    def assert_clean(self) -> None:
        if self.effects:
            shown = "\n".join(str(e) for e in self.effects[:5])
            raise HostEffectError(f"{len(self.effects)} host effect(s):\n{shown}")


_NUMBA_DIRS = tuple(os.path.join(os.sep, d, "") for d in ("numba", "llvmlite"))


def _trusted_machinery() -> bool:
    """Is Python's import system, or Numba loading or compiling a jit function, on the
    stack?"""
    frame = sys._getframe(2)
    for _ in range(400):
        if frame is None:
            return False
        filename = frame.f_code.co_filename
        if filename.startswith("<frozen importlib._bootstrap") or any(
            d in filename for d in _NUMBA_DIRS
        ):
            return True
        frame = frame.f_back
    return False


def _called_from_ast_parse() -> bool:
    """Was `compile` called by `ast.parse` (a syntax tree only, PyCF_ONLY_AST)?"""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "parse" and os.path.basename(code.co_filename) == "ast.py":
            return True
        frame = frame.f_back
    return False


def _short(args: tuple[Any, ...], width: int = 300) -> str:
    try:
        text = repr(args)
    except Exception:  # pragma: no cover - an object whose repr fails
        text = "<unprintable>"
    return text if len(text) <= width else text[:width] + "..."


def describe(effects: Iterable[HostEffect]) -> list[str]:
    """One line per effect (for tables and failure files)."""
    return [f"{e.event}: {e.detail}" for e in effects]


if __name__ == "__main__":  # pragma: no cover - manual check of what fires
    import neuronemu

    target = Path(sys.argv[1])
    with HostGuard(record_all=True) as g:
        neuronemu.run(target, {}, print_fn=lambda _: None)
    for e in g.effects:
        print(e.event, e.detail[:120])
