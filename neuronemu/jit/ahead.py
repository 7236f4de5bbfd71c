"""The jitted passes compiled ahead of time: one extension module, built by Numba's AOT
compiler (numba.pycc) into the user's private cache, that this process imports in a few
milliseconds (~3, its hash checked), without Numba. Loading Numba and the passes from its
cache takes ~0.3-0.4 s, which a large run otherwise spends waiting for the worker
(neuronemu.jit.worker) or, in a host's process, at its first jitted call.

`neuronemu warm-up` builds it (~20 s, once per version of the passes' source, NumPy and
Python), from the signatures Numba's cache holds for them: those the command's calls use.
The module is the same compiled code (no fastmath, for a generic CPU of the machine's
architecture, so a home folder shared by several machines serves them all). It does not
check what it is given: an argument of another dtype would be read as the built one. So
a call goes to it only when every argument is exactly of a type it was built for (an
array's dtype, dimensions, C order and, if the pass may write it, writability; a scalar's
kind); any other call goes to Numba as before.

It is off where the JIT is (NUMBA_DISABLE_JIT) or bounds are checked (NUMBA_BOUNDSCHECK:
the module was built without), and with NEURONEMU_AHEAD=0. A module is used only from a
private folder (neuronemu.host.cachedirs), by its real path, and only with its manifest (the
signatures, and the module's sha256: a manifest is never paired with another build's
module): its code runs in this process. A call that finds no function for its arguments'
types (the module older than its callers) sets the module aside for the rest of the process
(`missed`), and the command builds it again (neuronemu.cli.warm_up_command.build_later)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from neuronemu.host.cachedirs import private_dir, read_private
from neuronemu.jit import compiled as _jit

__all__ = [
    "JIT_ABOVE",
    "available",
    "build",
    "building",
    "call",
    "current",
    "enabled",
    "failed",
    "folder",
    "load",
    "missed",
    "module_name",
    "record_failure",
]

# With the module loaded, a step takes its jitted form past this many instructions: there is
# no load to weigh, and the calls cost less than the plain forms at every size measured
# (kernels/tensor_add.py timed only, medians of 7: 128 instructions 39 ms against 41, 512:
# 76 against 91, 1,024: 158 against 244).
JIT_ABOVE = 0

# How large a module and its manifest may be (the passes' module is ~1 MB).
_MODULE_MAX_BYTES = 64 * 2**20
_MANIFEST_MAX_BYTES = 2**20

# The passes' source: what the module is compiled from (the module's name changes with it).
_SOURCES = ("compiled.py", "place.py")

# The module's passes, once looked for: name -> [(argument checks (`_kind`s), function,
# argument kinds as the manifest says them)].
_loaded: Any = None
_looked = False
# A call found no function built for its arguments' types: the module is older than its
# callers (their dtypes changed with no change to the passes' source). The rest of the
# process goes as without it, and the command's next build (`build_later`) makes it anew
# from Numba's cache, which then holds the new signatures too.
_missed = False
# The modules this process imported: name -> the sha256 of the one imported.
_IMPORTED: dict[str, str] = {}


def enabled() -> bool:
    env = os.environ
    return (
        env.get("NEURONEMU_AHEAD", "1") != "0"
        and env.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
        and env.get("NUMBA_BOUNDSCHECK", "0") in ("", "0")
    )


def folder() -> str:
    """Where the module is kept: beside Numba's cache (NUMBA_CACHE_DIR, else the user's)."""
    numba_cache = os.environ.get("NUMBA_CACHE_DIR") or _jit.numba_cache_dir()
    return os.path.join(numba_cache, "ahead")


def module_name() -> str:
    """The module's name, which says what it was built from: the passes' source, NumPy's
    version (its C API), Python's and the machine's architecture."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    for part in (np.__version__, sys.version, platform.machine()):
        digest.update(part.encode())
    return f"neuronemu_passes_{digest.hexdigest()[:20]}"


def load(again: bool = False) -> dict[str, list] | None:
    """The passes of the module built for this source, if there is one (looked for once per
    process, or `again`): `_loaded`."""
    global _loaded, _looked
    if _looked and not again:
        return _loaded
    _looked, _loaded = True, None
    if not enabled():
        return None
    # (a module or manifest not as a build leaves them: as if there were none)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, ImportError, AttributeError):
        _loaded = _import(folder(), module_name())
    if _loaded is not None:
        _jit.AHEAD = call
    return _loaded


def _import(where: str, name: str) -> dict[str, list] | None:
    real = private_dir(where)
    if real is None:
        return None
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    path = os.path.join(real, name + suffix)
    # (each a regular file of this user's, not a link, that no one else can write; the
    # private folder they lie in keeps the module from being swapped before the loader opens
    # it by its path)
    data = read_private(os.path.join(real, name + ".json"), _MANIFEST_MAX_BYTES)
    code = read_private(path, _MODULE_MAX_BYTES)
    if data is None or code is None:
        return None
    manifest = json.loads(data)
    # (the manifest is the module's: a build killed between writing the two, or two builds
    # crossing, cannot pair a module with the signatures of another)
    sha = manifest.pop("sha256", None)
    if sha != hashlib.sha256(code).hexdigest():
        return None
    # (a module imported once stays this process's: importing a rebuilt one of the same name
    # and path again would give the first one's code, whatever the file holds now)
    if _IMPORTED.setdefault(name, sha) != sha:
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    passes: dict[str, list] = {}
    for pass_name, exports in manifest.items():
        for export, kinds in exports:
            checks = tuple(_kind(k) for k in kinds)
            passes.setdefault(pass_name, []).append((checks, getattr(module, export), kinds))
    return passes


def available(*passes: str) -> bool:
    """Does the module hold every one of `passes` (and has every call so far found its
    function)?"""
    loaded = load()
    return loaded is not None and not _missed and all(p in loaded for p in passes)


def current() -> bool:
    """Does the module hold every signature Numba's cache holds for the passes (those its
    calls have used, as `build` would take them)? Loads Numba and the cache's index."""
    loaded = load()
    return loaded is not None and all(
        any(kinds == built for _, _, built in loaded.get(pass_name, ()))
        for pass_name, kinds, _, _ in _signatures()
    )


def _signatures() -> list[tuple[str, list, Any, Any]]:
    """(pass, argument kinds, Numba's signature, plain function) of each signature Numba's
    cache (or this process) holds for the passes, those the module's calls can check."""
    found = []
    for pass_name, lazy in _jit.LAZY.items():
        dispatcher = lazy.load()
        _jit.load_cached(dispatcher)
        for compiled in dispatcher.overloads.values():
            kinds = [_spec(t) for t in compiled.signature.args]
            if None not in kinds:
                found.append((pass_name, kinds, compiled.signature, lazy.py))
    return found


def missed() -> bool:
    """Did a call find no function built for its arguments' types (`_missed`)?"""
    return _missed


def call(name: str, args: tuple) -> Any:
    """Pass `name` on `args` in the module, or NOT_RUN where it has no function built for
    exactly these argument types."""
    global _missed
    loaded = _loaded
    for kinds, function, _ in loaded.get(name, ()) if loaded is not None else ():
        if len(kinds) == len(args) and all(map(_fits, kinds, args)):
            return function(*args)
    _missed = True
    return _jit.NOT_RUN


# An argument's kind: ("array", dtype, ndim, writable) or ("int" | "float" | "bool",).
_SCALARS = {"int": (int, np.int64), "float": (float, np.float64), "bool": (bool, np.bool_)}


def _kind(spec: list) -> tuple:
    if spec[0] == "array":
        return ("array", np.dtype(spec[1]), int(spec[2]), bool(spec[3]))
    if spec[0] not in _SCALARS:
        raise ValueError(f"an argument kind the module does not take: {spec!r}")
    return (spec[0],)


def _fits(kind: tuple, arg: Any) -> bool:
    if kind[0] == "array":
        flags = getattr(arg, "flags", None)
        return (
            type(arg) is np.ndarray
            and arg.dtype == kind[1]
            and arg.ndim == kind[2]
            and flags.c_contiguous  # type: ignore[union-attr]
            and flags.aligned  # type: ignore[union-attr]
            and (flags.writeable or not kind[3])  # type: ignore[union-attr]
        )
    return type(arg) in _SCALARS[kind[0]]


# Building ------------------------------------------------------------------------------------


@contextlib.contextmanager
def building(wait: bool = False) -> Iterator[bool | None]:
    """Hold the folder's build lock while the block runs: True; False where another process
    holds it (building the module now) and not `wait`ing for it; None where there is no lock
    to take (no private folder, or no flock on this system)."""
    real = private_dir(folder(), create=True)
    if real is None:
        yield None
        return
    try:
        import fcntl

        fd = os.open(os.path.join(real, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except (ImportError, OSError):
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def failed() -> str | None:
    """Why the last build of this version failed, if it did (a run does not try again:
    `neuronemu warm-up` does)."""
    data = read_private(os.path.join(folder(), module_name() + ".failed"), 4096)
    return None if data is None else data.decode(errors="replace")


def build() -> str:
    """Build the module from the signatures Numba's cache holds for the passes (run the
    passes first: `neuronemu warm-up` does) and keep it: its path. Raises RuntimeError,
    saying why, where it cannot (no private folder, no C compiler, no signatures); the
    reason is kept for `failed`. Call it holding `building()`: it clears what a build killed
    on the way left."""
    real = private_dir(folder(), create=True)
    if real is None:
        raise RuntimeError("no private folder to keep it in (see docs/trust.md)")
    name = module_name()
    try:
        path = _build(real, name)
    except RuntimeError as e:
        record_failure(str(e))
        raise
    with contextlib.suppress(OSError):
        os.remove(os.path.join(real, name + ".failed"))
    return path


def record_failure(reason: str) -> None:
    """Keep why this version's build failed (`failed`): runs do not try it again."""
    real = private_dir(folder(), create=True)
    if real is None:
        return
    failure = os.path.join(real, module_name() + ".failed")
    with contextlib.suppress(OSError):
        fd = os.open(failure, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(reason[:4000])


def _build(real: str, name: str) -> str:
    _clear_stale(real)
    try:
        return _built(real, name)
    except RuntimeError:
        raise
    except (Exception, SystemExit) as e:  # noqa: BLE001  (distutils exits without a compiler)
        raise RuntimeError(f"Numba's AOT compiler failed: {e}") from None


def _built(real: str, name: str) -> str:
    manifest: dict[str, Any] = {}
    exports: list[tuple[str, Any, Any]] = []
    for pass_name, kinds, signature, py in _signatures():
        # (named by its signature: a name stands for the same argument types in every build)
        export = f"{pass_name}_{hashlib.sha256(json.dumps(kinds).encode()).hexdigest()[:12]}"
        exports.append((export, signature, py))
        manifest.setdefault(pass_name, []).append([export, kinds])
    if not exports:
        raise RuntimeError("Numba's cache holds no signature of the passes: run one first")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (numba.pycc is deprecated: it says so on import)
            from numba.pycc import CC
    except ImportError as e:  # (it needs setuptools; a later Numba may not have it)
        raise RuntimeError(f"no Numba AOT compiler here: {e}") from None
    work = tempfile.mkdtemp(prefix=_WORK_PREFIX, dir=real)
    kept_tempdir = tempfile.tempdir
    tempfile.tempdir = work  # (pycc's own temporaries too: a killed build leaves them here)
    try:
        cc = CC(name)
        cc.output_dir = work
        cc.verbose = False
        for export, signature, py in exports:
            cc.export(export, signature)(py)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc.compile()
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        built = os.path.join(work, name + suffix)
        if not os.path.exists(built):
            raise RuntimeError("Numba's AOT compiler made no module")
        with open(built, "rb") as f:
            manifest["sha256"] = hashlib.sha256(f.read()).hexdigest()
        os.chmod(built, 0o700)
        listed = os.path.join(work, name + ".json")
        with open(listed, "w") as f:
            json.dump(manifest, f)
        os.chmod(listed, 0o600)
        target = os.path.join(real, name + suffix)
        os.replace(built, target)
        os.replace(listed, os.path.join(real, name + ".json"))
    finally:
        tempfile.tempdir = kept_tempdir
        shutil.rmtree(work, ignore_errors=True)
    _forget_others(real, name)
    return target


# A build's work folder, in the module's folder; one left by a build killed on the way is
# removed by the next (builds take the folder's lock: no other is under way then).
_WORK_PREFIX = "build-"


def _clear_stale(real: str) -> None:
    for entry in os.listdir(real):
        if entry.startswith(_WORK_PREFIX):
            shutil.rmtree(os.path.join(real, entry), ignore_errors=True)


def _spec(t: Any) -> list | None:
    """A Numba type as an argument kind of the manifest, or None (one the module's calls do
    not check: that signature is left out)."""
    from numba.core import types

    if isinstance(t, types.Array):
        if t.layout != "C" or not t.aligned:
            return None
        return ["array", np.dtype(str(t.dtype)).str, t.ndim, t.mutable]
    if isinstance(t, types.Boolean):
        return ["bool"]
    if t == types.int64:
        return ["int"]
    if t == types.float64:
        return ["float"]
    return None


def _forget_others(real: str, keep: str) -> None:
    """Remove the modules built from other versions of the passes (each ~1 MB) but the
    KEEP_OTHERS last built: two installs used in turn (two environments) keep theirs."""
    others: dict[str, float] = {}
    for entry in os.listdir(real):
        if entry.startswith("neuronemu_passes_") and not entry.startswith(keep):
            stem = entry.split(".", 1)[0]
            with contextlib.suppress(OSError):
                when = os.lstat(os.path.join(real, entry)).st_mtime
                others[stem] = max(others.get(stem, when), when)
    for stem in sorted(others, key=others.__getitem__, reverse=True)[KEEP_OTHERS:]:
        for entry in os.listdir(real):
            if entry.split(".", 1)[0] == stem:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(real, entry))


# How many modules of other versions of the passes a build leaves.
KEEP_OTHERS = 3
