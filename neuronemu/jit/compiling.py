"""Telling a cold start: the first compile of a jitted pass in a process (its code in Numba's
cache missing or stale: a new install, another Numba, a changed source, a new machine) takes
seconds where loading takes a fraction of one, and would otherwise pass in silence.

`watch` (called by neuronemu.jit.compiled as it imports Numba) listens to Numba's compile
events. Just before the first compile of one of the passes in a process, it calls
`ON_COMPILE(seconds, cached)` once: `seconds`, how long the passes not yet in the cache are
expected to take, from the figures this machine recorded when it last compiled them (a
small JSON file beside Numba's cache) or COMPILE_SECONDS; `cached`, whether the compiled code
is kept (a cache folder that is not private keeps nothing: every process compiles again).
The command sets ON_COMPILE to its status line (neuronemu.cli); a worker process sends it to
the command (neuronemu.jit.worker)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any, Callable, Mapping

from neuronemu.host.cachedirs import read_private

__all__ = [
    "COMPILE_SECONDS",
    "FIGURES_FILE",
    "ON_COMPILE",
    "estimate",
    "is_cached",
    "tell",
    "watch",
]

# Called once per process just before the first compile of a jitted pass: (seconds, cached).
ON_COMPILE: Callable[[float, bool], None] | None = None

# Seconds each pass took to compile on the 2-core CI machine, for a machine that has recorded
# none yet: CPU seconds, Numba 0.68, measured (a loaded machine takes longer; the placement
# includes Numba's helpers for strings, which it compiles too).
COMPILE_SECONDS = {
    "place": 9.8,
    "schedule": 1.4,
    "first_race": 0.7,
    "critical_walk": 0.7,
    "clocks": 0.5,
    "reuse_race": 0.2,
}
DEFAULT_SECONDS = 2.0  # (a pass not in the table above)

# This machine's figures, {pass: seconds}, in Numba's cache folder (private, or not used).
FIGURES_FILE = "neuronemu-compile-seconds.json"
_FIGURES_MAX_BYTES = 4096

_passes: Mapping[str, Any] = {}  # name -> neuronemu.jit.compiled._Lazy
_told = False
_depth = 0  # compiles of the passes under way (one may compile another's callee)
_started = 0.0


def watch(numba: Any, passes: Mapping[str, Any]) -> None:
    """Listen to `numba`'s compile events for `passes` (once per process)."""
    global _passes
    if _passes:
        return
    _passes = passes
    try:
        from numba.core import event
    except ImportError:  # (a Numba without events: compiles go untold)
        return

    class _Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            name = _name_of(ev)
            if name is not None:
                _starting(name, ev.data["dispatcher"])

        def on_end(self, ev: Any) -> None:
            name = _name_of(ev)
            if name is not None:
                _ended(name, ev.data["dispatcher"])

    event.register("numba:compile", _Listener())


def _name_of(ev: Any) -> str | None:
    """The pass an event is about (None: not one of them, such as Numba's own helpers)."""
    try:
        fn = ev.data["dispatcher"].py_func
    except (AttributeError, KeyError, TypeError):
        return None
    for name, lazy in _passes.items():
        if lazy.py is fn:
            return name
    return None


def _starting(name: str, dispatcher: Any) -> None:
    global _depth, _started
    _depth += 1
    if _depth > 1:
        return
    _started = time.perf_counter()
    if not _told and ON_COMPILE is not None:
        cache = _cache_dir(dispatcher)
        tell(estimate(cache, name), cache is not None)


def tell(seconds: float, cached: bool) -> None:
    """Call ON_COMPILE, if this process has not yet (a worker's compile is told here too)."""
    global _told
    if not _told and ON_COMPILE is not None:
        _told = True
        try:
            ON_COMPILE(seconds, cached)
        except OSError:  # (stderr closed: the compile goes on untold)
            pass


def _ended(name: str, dispatcher: Any) -> None:
    global _depth
    _depth = max(_depth - 1, 0)
    cache = _cache_dir(dispatcher)
    if _depth == 0 and cache is not None:
        _record(cache, name, time.perf_counter() - _started)


def _cache_dir(dispatcher: Any) -> str | None:
    """Numba's cache folder if `dispatcher`'s code is kept there (None: it is not, the folder
    not being private; neuronemu.jit.compiled.njit makes it the folder's real path)."""
    import numba
    from numba.core.caching import NullCache

    if isinstance(getattr(dispatcher, "_cache", None), NullCache):
        return None
    return str(numba.config.CACHE_DIR)  # type: ignore[attr-defined]  # (set at run time)


def estimate(cache_dir: str | None, compiling: str = "") -> float:
    """Seconds to compile every pass whose code is not in the cache (and `compiling`, the one
    about to compile): this machine's last figure for each, else COMPILE_SECONDS."""
    figures = _figures(cache_dir) if cache_dir is not None else {}
    total = 0.0
    for name, lazy in _passes.items():
        if name == compiling or not is_cached(lazy.load()):
            total += figures.get(name, COMPILE_SECONDS.get(name, DEFAULT_SECONDS))
    return total


def is_cached(dispatcher: Any) -> bool:
    """Does Numba's cache hold code `dispatcher` can load (for some signature), fresh for its
    source and this machine? Read from the cache's index through Numba's internals, loading
    nothing; where they differ, False."""
    try:
        cache = dispatcher._cache
        codegen = dispatcher.targetctx.codegen()
        return any(
            cache._index_key(key[0], codegen) == key for key in cache._cache_file._load_index()
        )
    except Exception:  # noqa: BLE001  (another Numba)
        return False


def _figures(cache_dir: str) -> dict[str, float]:
    data = read_private(os.path.join(cache_dir, FIGURES_FILE), _FIGURES_MAX_BYTES)
    try:
        got = json.loads(data) if data is not None else {}
    except ValueError:
        return {}
    if not isinstance(got, dict):
        return {}
    return {
        k: float(v)
        for k, v in got.items()
        if isinstance(k, str) and isinstance(v, (int, float)) and 0 <= v < 3600
    }


def _record(cache_dir: str, name: str, seconds: float) -> None:
    """Keep `seconds` as this machine's figure for `name` (written whole, by rename)."""
    figures = _figures(cache_dir)
    figures[name] = round(seconds, 2)
    try:
        fd, path = tempfile.mkstemp(dir=cache_dir, prefix=".figures-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(figures, f)
        os.replace(path, os.path.join(cache_dir, FIGURES_FILE))
    except OSError:
        try:
            os.unlink(path)
        except OSError:
            pass
