"""The cold start, told and done ahead: the status line's word when the jitted passes are
about to compile (neuronemu.jit.compiling), and `neuronemu warm-up`, which compiles them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator

import click

__all__ = ["build_later", "say_compiling", "status_shown", "warm_up"]

_status: Any = None  # the command's live status line (rich), while one is shown


@contextlib.contextmanager
def status_shown(status: Any) -> Iterator[None]:
    """While a live status line is shown, the word goes above it (not through it)."""
    global _status
    _status = status
    try:
        yield
    finally:
        _status = None


def say_compiling(seconds: float, cached: bool) -> None:
    """neuronemu.jit.compiling.ON_COMPILE for the command: a line on stderr (never stdout,
    which --json keeps for the JSON)."""
    about = f"about {max(round(seconds), 1)} s"
    if cached:
        text = f"neuronemu: compiling the scheduler once ({about})"
    else:
        text = f"neuronemu: compiling the scheduler ({about}; not kept: its cache folder is shared)"
    if _status is not None:
        _status.console.print(text, markup=False, highlight=False)
    else:
        click.echo(text, err=True)


# A program past the jitted passes' threshold (20,000 instructions: 4 per tile here) that
# takes each of them, timed only (its inputs never made).
_KERNEL = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        for j in nl.affine_range(a.shape[1] // 1024):
            r = slice(i * 128, (i + 1) * 128)
            c = slice(j * 1024, (j + 1) * 1024)
            x = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.sbuf)
            y = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x, src=a[r, c])
            nisa.dma_copy(dst=y, src=b[r, c])
            z = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
            nisa.dma_copy(dst=out[r, c], src=z)
    return out
"""
_SPEC = "bfloat16[16384,40960]"  # (5,120 tiles: 20,480 instructions)


def _cold() -> list[str]:
    """The passes whose compiled code the cache lacks (or has stale)."""
    from neuronemu.jit import compiled as _jit
    from neuronemu.jit import compiling

    return [name for name, lazy in _jit.LAZY.items() if not compiling.is_cached(lazy.load())]


@click.command("warm-up")
def warm_up() -> None:
    """Compile the jitted passes (the scheduler, the checks, the placement) now, once per
    machine and Numba version, so that the first large run does not (~15 s); then build them
    ahead of time (~20 s, once per version), so that large runs start them at once."""
    import numba

    import neuronemu
    from neuronemu.jit import ahead

    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]  # (numba sets it at run time)
        click.echo("the JIT is off (NUMBA_DISABLE_JIT): nothing to compile")
        return
    # (one warm-up at a time, the whole of it: the compile takes as long as the build, and a
    # run starts its background build only where no warm-up holds the lock; this one waits
    # for another, then finds what it did)
    with ahead.building() as free:
        if free is False:
            click.echo("waiting for another warm-up (perhaps a run's, in the background)")
    with ahead.building(wait=True):
        cold = _cold()
        folder = numba.config.CACHE_DIR  # type: ignore[attr-defined]  # (set at run time)
        if cold:
            try:
                _compile(folder)
            except neuronemu.UsageError as e:  # (not built ahead either: runs do not retry)
                ahead.record_failure(str(e))
                raise
        else:
            click.echo(f"the jitted passes are compiled already (in {folder})")
        _build_ahead()


def _compile(folder: str) -> None:
    """Run a kernel that takes every pass, compiling those the cache lacks."""
    import neuronemu
    from neuronemu.inputs import parse_spec
    from neuronemu.jit import worker as jit_worker

    jit_worker.ENABLED = False  # (compiled here, in this process)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="neuronemu-warm-up-") as tmp:
        path = os.path.join(tmp, "warm_up.py")
        with open(path, "w") as f:
            f.write(_KERNEL)
        inputs = {n: parse_spec(n, _SPEC, 0, unmade=True) for n in ("a", "b")}
        result = neuronemu.run(path, inputs, timing_only=True, print_fn=lambda _: None)
        _ = result.critical_path  # (walked when asked for, as the command asks)
    left = _cold()
    seconds = time.perf_counter() - began
    if left:
        raise neuronemu.UsageError(
            f"compiled the jitted passes but {', '.join(left)} not kept (in {folder})",
            hint="is the cache folder private to you? (see docs/trust.md)",
        )
    click.echo(f"compiled the jitted passes in {seconds:.0f} s (kept in {folder})")


def _build_ahead() -> None:
    """The passes compiled ahead of time (neuronemu.jit.ahead), from the signatures the
    cache now holds: a large run then imports them in ~3 ms instead of loading Numba. Built
    again where the module lacks a signature the cache holds (its callers changed)."""
    from neuronemu.jit import ahead

    if not ahead.enabled():
        click.echo(
            "the jitted passes are not built ahead of time (NEURONEMU_AHEAD=0, or bounds checked)"
        )
        return
    if ahead.load(again=True) is not None and ahead.current():
        click.echo(f"the jitted passes are built ahead of time already (in {ahead.folder()})")
        return
    click.echo(f"building the jitted passes ahead of time (about {AHEAD_SECONDS} s, once)")
    began = time.perf_counter()
    try:
        path = ahead.build()
    except RuntimeError as e:
        click.echo(
            f"warning: the jitted passes are not built ahead of time: {e}; large runs load"
            " them through Numba instead (~0.4 s each)",
            err=True,
        )
        return
    seconds = time.perf_counter() - began
    click.echo(f"built the jitted passes ahead of time in {seconds:.0f} s (kept in {path})")


def build_later() -> None:
    """After a run that loaded the jitted passes through Numba (the command's worker, or a
    call the module had no function for): if they are not built ahead of time yet, or the
    module lacks what a call needed (and no build of this version failed before, and none is
    under way), `neuronemu warm-up` in a detached process of low priority, its output
    dropped, so that the next large runs start them at once. Said on stderr. Not on a CI
    machine (`CI` set, as CI services set it: a fresh machine each time, whose build would be
    lost); NEURONEMU_AHEAD=0 turns it off."""
    from neuronemu.jit import ahead
    from neuronemu.jit import compiled as _jit

    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        return
    if not ahead.enabled() or ahead.available(*_jit.LAZY) or ahead.failed() is not None:
        return
    with ahead.building() as free:
        if not free:  # (a warm-up is under way, or there is no private folder to build in)
            return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        subprocess.Popen(
            [sys.executable, "-c", _LATER, root],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # (not ended with the command, nor by its Ctrl-C)
        )
    except OSError:
        return
    click.echo(
        "neuronemu: building the jitted passes ahead of time, once, in the background (under"
        " a minute): later large runs skip loading them through Numba (~0.4 s each)",
        err=True,
    )


# The detached build: this very package (its folder first on the path only while it is
# imported, as the worker's; the current folder off it: a file there must not stand in for
# a module), at low priority.
_LATER = (
    "import os, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "sys.path.insert(0, sys.argv[1]); from neuronemu.cli import main; del sys.path[0]; "
    "os.nice(10); main(['warm-up'], prog_name='neuronemu')"
)


# How long building the passes ahead of time takes (measured: 15-19 s on a 2-core machine).
AHEAD_SECONDS = 20
