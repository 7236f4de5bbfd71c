"""The cyclic GC during a run. Nearly every object a run makes is the program it builds,
which lives to the run's end, so a collection that walks them finds next to nothing:

- a run (`run_scope`) lets only the youngest generation be collected: at 100,000
  instructions the full collections took ~40% of the run, and the middle generation's ~10%
  (317 objects found in 20 collections);
- the passes that run no kernel code and make what lives on (a replayed loop's iterations,
  allocation, the checks and the schedule) go without young collections too (`quiet`): what
  they made is frozen (`gc.freeze`, out of every collection's walk) when they end, and the
  run unfreezes it as it returns. On the 100,000-instruction matmul the young collections
  took ~0.25 s, walking objects that all survived.

Cycles the kernel's own code leaves die young and are still collected. A host that froze
objects itself keeps its freeze: then nothing is frozen or unfrozen here."""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["YOUNG_THRESHOLD", "quiet", "run_scope"]

YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)

_freezing = False  # inside a run that may freeze (the host froze nothing)


def run_scope(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run with the young generation alone collected, and free to freeze (`quiet`);
    the thresholds come back and what it froze is unfrozen when it returns or raises."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _freezing
        saved, was = gc.get_threshold(), _freezing
        mine = not was and gc.get_freeze_count() == 0
        gc.set_threshold(YOUNG_THRESHOLD, 2**31 - 1, 2**31 - 1)
        _freezing = was or mine
        try:
            return fn(*args, **kwargs)
        finally:
            _freezing = was
            gc.set_threshold(*saved)
            if mine:
                gc.unfreeze()

    return wrapper


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A pass that runs no kernel code, whose objects live to the run's end: no collection
    while it runs, and what it made frozen when it ends (only inside a `run_scope` free to
    freeze, with the GC on)."""
    if not _freezing or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
