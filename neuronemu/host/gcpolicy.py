"""The cyclic GC during a run. Nearly every object a run makes is the program it builds,
which lives to the run's end, so a collection that walks them finds next to nothing:

- a run (`run_scope`) lets only the youngest generation be collected: at 100,000
  instructions the full collections took ~40% of the run, and the middle generation's ~10%
  (317 objects found in 20 collections);
- in programs past QUIET_ABOVE instructions, the passes that run no kernel code and make
  what lives on (a replayed loop's iterations, allocation, the checks and the schedule) go
  without young collections too (`quiet`), and freeze every object tracked when they end
  (`gc.freeze`: out of every collection's walk), the program so far and the host's
  objects alike, until the run returns and unfreezes them. On the 100,000-instruction
  matmul the young collections took ~0.25 s, walking objects that all survived.

Cycles the kernel's own code leaves are collected young, unless a quiet pass freezes them
first: those wait for the run's end. A host that froze objects itself keeps its freeze:
then nothing is frozen or unfrozen here. Runs that overlap (threads) share one scope: the
GC comes back as the first found it when the last returns."""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["QUIET_ABOVE", "YOUNG_THRESHOLD", "quiet", "run_scope"]

YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)
# Programs past this many instructions run their quiet passes without collections (below
# it, what the young collections cost is not worth asking whether the host froze objects:
# `gc.get_freeze_count` walks every frozen object). Inferred: ~2.5 us of collections per
# instruction, so ~0.05 s at this size.
QUIET_ABOVE = 20_000

_lock = threading.Lock()
_depth = 0  # runs under way (threads may overlap them)
_saved: tuple[int, ...] = ()  # the thresholds the first of them found
_freezing: bool | None = None  # they may freeze (the host had frozen nothing); None: not asked


def run_scope(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run with the young generation alone collected, and free to freeze (`quiet`);
    as the last run under way returns or raises, the thresholds come back and what was
    frozen is unfrozen."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _depth, _saved, _freezing
        with _lock:
            if _depth == 0:
                _saved = gc.get_threshold()
                _freezing = None
                gc.set_threshold(YOUNG_THRESHOLD, 2**31 - 1, 2**31 - 1)
            _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    gc.set_threshold(*_saved)
                    if _freezing:
                        gc.unfreeze()
                    _freezing = None

    return wrapper


@contextlib.contextmanager
def quiet(instructions: int) -> Iterator[None]:
    """A pass that runs no kernel code, whose objects live to the run's end, in a program of
    `instructions`: past QUIET_ABOVE, no collection while it runs, and every tracked object
    frozen when it ends (only inside a `run_scope`, with the GC on, when the host had frozen
    nothing)."""
    global _freezing
    if instructions <= QUIET_ABOVE or not _depth or not gc.isenabled():
        yield
        return
    with _lock:
        if _freezing is None:  # (asked once per run: the answer walks what is frozen)
            _freezing = gc.get_freeze_count() == 0
        freezing = _freezing
    if not freezing:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
