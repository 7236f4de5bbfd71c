"""The cold start, told and done ahead: the status line's word when the jitted passes are
about to compile (neuronemu.jit.compiling), and `neuronemu warm-up`, which compiles them."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Any, Iterator

import click

__all__ = ["say_compiling", "status_shown", "warm_up"]

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
    machine and Numba version, so that the first large run does not (~15 s)."""
    import numba

    import neuronemu
    from neuronemu.inputs import parse_spec
    from neuronemu.jit import worker as jit_worker

    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]  # (numba sets it at run time)
        click.echo("the JIT is off (NUMBA_DISABLE_JIT): nothing to compile")
        return
    cold = _cold()
    folder = numba.config.CACHE_DIR  # type: ignore[attr-defined]  # (numba sets it at run time)
    if not cold:
        click.echo(f"the jitted passes are compiled already (in {folder})")
        return
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
