"""`nl.*` launch and loop names: `program_id`, `num_programs`, the loop ranges."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from neuronemu.errors import KernelTypeError, shown
from neuronemu.trace.lib.host import py
from neuronemu.trace.values import OLDER_NKI, CoreDim, DeviceRange, Scalar

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def program_id(ctx: Context, span, axis=0):
    if not isinstance(axis, int) or not 0 <= axis < len(ctx.grid):
        raise KernelTypeError(
            f"nl.program_id({shown(axis)}): the launch grid {list(ctx.grid)} has "
            f"{len(ctx.grid)} axes",
            span,
        )
    return ctx.program_ids[axis]


def num_programs(ctx: Context, span, axes=None):
    if axes is None:
        return math.prod(ctx.grid)
    for a in axes if isinstance(axes, (tuple, list)) else (axes,):
        if not isinstance(a, int) or not 0 <= a < len(ctx.grid):
            raise KernelTypeError(
                f"nl.num_programs({shown(axes)}): the launch grid "
                f"{list(ctx.grid)} has {len(ctx.grid)} axes",
                span,
            )
    if isinstance(axes, (tuple, list)):
        return math.prod(ctx.grid[a] for a in axes)
    return ctx.grid[axes]


def nc(ctx: Context, span, n):
    """`nl.nc(2)`: logical-NeuronCore count of a launch grid dimension (nl.spmd_dim)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise KernelTypeError(f"nl.nc() takes a positive int, got {shown(n)}", span)
    return CoreDim(n, n)


def spmd_dim(ctx: Context, span, *factors):
    """`nl.spmd_dim(grid_x, nl.nc(2))`: one launch grid dimension of grid_x * 2 instances,
    spread over the physical NeuronCores as the factors' order says (row-major: `nl.nc(2)`
    last puts instance x on core x % 2, first on core x // grid_x; test_nki_spmd_grid.py)."""
    if not factors or not all(isinstance(f, int) and not isinstance(f, bool) for f in factors):
        raise KernelTypeError(
            f"nl.spmd_dim() takes ints (sizes, nl.nc(n)), got {shown(factors)}", span
        )
    cores = [k for k, f in enumerate(factors) if isinstance(f, CoreDim)]
    if len(cores) > 1:
        raise KernelTypeError("nl.spmd_dim() takes at most one nl.nc(n) factor", span)
    if not cores:
        return math.prod(factors)
    k = cores[0]
    core = factors[k]
    assert isinstance(core, CoreDim)
    return CoreDim(math.prod(factors), core.cores, core.stride * math.prod(factors[k + 1 :]))


def loop_range(name: str) -> Callable[..., range]:
    def call(ctx: Context, span, start, stop=None, step=1, **_hints):
        made = py(ctx, range, f"nl.{name}")(
            span, *((start,) if stop is None else (start, stop)), *(() if stop is None else (step,))
        )
        if name != "static_range" and ctx.dialect == OLDER_NKI:
            # Older NKI traces the body of this loop once (only static_range "will fully
            # unroll the loop during NKI kernel tracing", nki.language.static_range): the
            # tracer runs each iteration from the numbers the first began with (loops.py).
            ctx.note_one_pass(made)
        return made

    return call


def dynamic_range(ctx: Context, span, start, stop=None, step=1, **hints):
    """`for i in nl.dynamic_range(...)` (older NKI): a loop the device runs. With a register
    bound it is a device loop (the tracer runs the body once, `DeviceRange`); with int bounds
    neuronemu unrolls it like the others (its loop overhead is not modelled)."""
    if stop is None:
        start, stop = 0, start
    if isinstance(start, Scalar) or isinstance(stop, Scalar):
        return DeviceRange(start, stop, step, span)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step)):
        raise KernelTypeError(
            f"nl.dynamic_range takes ints or registers, got {shown((start, stop, step))}", span
        )
    return loop_range("dynamic_range")(ctx, span, start, stop, step, **hints)
