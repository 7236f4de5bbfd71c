"""Kernels of a file: discovery (`@nki.jit` and kin, `with_schedule`), the SPMD launch,
inputs bound as HBM tensors, one trace per program instance."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan, UsageError, shown
from neuronemu.frontend import ast as A
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor
from neuronemu.replay.lazy_tiles import unnamed
from neuronemu.trace.interpreter import _Return
from neuronemu.trace.lib.modules import KERNEL_DECORATORS
from neuronemu.trace.objects import UserClass
from neuronemu.trace.state import Closure, Env, TracerState
from neuronemu.trace.values import CURRENT_NKI, OLDER_NKI, CoreDim

_KERNEL_DECORATORS = frozenset(KERNEL_DECORATORS)


def is_jit(d: A.Node) -> bool:
    """Is this decorator `jit`, `nki.jit` (or nki.baremetal, ...) or a call of one?"""
    if isinstance(d, A.Call):
        d = d.func
    return (isinstance(d, A.Name) and d.id in _KERNEL_DECORATORS) or (
        isinstance(d, A.Attribute) and d.attr in _KERNEL_DECORATORS
    )


@dataclass
class ScheduledKernel:
    """`kernel.with_schedule([(consumer, producer or [producers]), ...])`."""

    fn: A.FunctionDef
    edges: list[tuple[str, tuple[str, ...], SourceSpan]]


def schedule_edges(edges: Any, span: SourceSpan) -> list[tuple[str, tuple[str, ...], SourceSpan]]:
    out = []
    for edge in edges if isinstance(edges, (list, tuple)) else [None]:
        if not (isinstance(edge, (tuple, list)) and len(edge) == 2 and isinstance(edge[0], str)):
            raise KernelTypeError(
                "with_schedule takes a list of (consumer, producer) name pairs", span
            )
        producers = edge[1] if isinstance(edge[1], (list, tuple)) else (edge[1],)
        if not all(isinstance(p, str) for p in producers):
            raise KernelTypeError("with_schedule producers must be instruction names", span)
        out.append((edge[0], tuple(producers), span))
    return out


def _walk(node: Any):
    """Every AST node under `node`, depth first (iteratively: a kernel's expressions may nest
    deeper than Python's recursion limit)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, A.Node):
            yield item
            stack.extend(
                reversed(
                    [getattr(item, f.name) for f in dataclasses.fields(item) if f.name != "span"]
                )
            )
        elif isinstance(item, tuple):
            stack.extend(reversed(item))


def dialect_of(module: A.Module) -> str | None:
    """`neuronxcc.nki`, `nki`, or None when the file imports neither."""
    found: set[str] = set()
    for node in _walk(module.body):
        names: list[str] = []
        if isinstance(node, A.Import):
            names = [dotted for dotted, _ in node.names]
        elif isinstance(node, A.ImportFrom) and node.level == 0:
            names = [node.module] + [f"{node.module}.{n}" for n, _ in node.names]
        for name in names:
            if name == "neuronxcc.nki" or name.startswith("neuronxcc.nki."):
                found.add(OLDER_NKI)
            elif name == "nki" or name.startswith("nki."):
                found.add(CURRENT_NKI)
    if OLDER_NKI in found:
        return OLDER_NKI
    return CURRENT_NKI if found else None


class KernelLaunch(TracerState):
    """Kernel discovery and launch of the tracer (see tracer.py)."""

    built_kernels: dict[Any, Any]  # kernels builder functions made

    def kernels(self) -> dict[str, A.FunctionDef]:
        """Module-level functions decorated with `jit` (`@nki.jit`, `@nki.jit(...)`, `@jit`),
        and module-level `name = kernel.with_schedule([...])` results."""
        found = {}
        for stmt in self.module.body:
            if isinstance(stmt, A.FunctionDef) and any(
                is_jit(d) and not self._own_decorator(d) for d in stmt.decorators
            ):
                found[stmt.name] = stmt
        for name, value in self.globals.vars.items():
            if isinstance(value, ScheduledKernel):
                found[name] = value.fn
            elif self._built_kernel(value) and name not in found:
                found[name] = self._built_def(name, value)  # `triple = build(3)`
        return found

    def _built_def(self, name: str, closure: Closure) -> A.FunctionDef:
        """The definition a builder-made kernel is traced from: a copy of its `def` of its
        own (two kernels one builder made share the `def`, not their scopes)."""
        known = self.built_kernels.get(name)
        if known is None or known[1] is not closure:
            fn = dataclasses.replace(closure.fn)
            known = self.built_kernels[name] = (fn, closure)
            self.built_kernels[id(fn)] = known
        return known[0]

    def _built_kernel(self, value: Any) -> bool:
        """A `@nki.jit` function a builder function made and returned (its scope is the
        builder's call, not a module's)."""
        return (
            isinstance(value, Closure)
            and value.env.parent is not self.builtins
            and any(is_jit(d) for d in value.fn.decorators)
        )

    def _own_decorator(self, d: A.Node) -> bool:
        """`@trace` where `trace` is the file's own function (or class), not NKI's."""
        if isinstance(d, A.Call):
            d = d.func
        own = self.globals.vars.get(d.id) if isinstance(d, A.Name) else None
        return isinstance(own, (Closure, UserClass))

    def apply_schedule(self, kernel: str) -> None:
        """The `with_schedule` edges of a scheduled kernel, between `name=`d instructions."""
        value = self.globals.vars.get(kernel)
        if not isinstance(value, ScheduledKernel):
            return
        names = self.builder.names
        for consumer, producers, span in value.edges:
            for name in (consumer, *producers):
                if name not in names:
                    raise KernelTypeError(
                        f"with_schedule names instruction {name!r}, but no "
                        f"nisa call has name={name!r}",
                        span,
                    )
            for producer in producers:
                self.builder.add_dependency(names[consumer], names[producer], span)

    def launch_grid(self, fn: A.FunctionDef) -> tuple[int, ...] | None:
        """The grid of a `kernel[gx, gy](...)` launch in the file's host code, if constant."""
        kernels = {id(k) for k in self.kernels().values()}
        host = tuple(s for s in self.module.body if id(s) not in kernels)
        for node in _walk(host):
            if (
                isinstance(node, A.Subscript)
                and isinstance(node.value, A.Name)
                and node.value.id == fn.name
            ):
                try:
                    grid = self.eval(node.index, self.globals)
                except NeuronEmuError:
                    continue
                grid = grid if isinstance(grid, tuple) else (grid,)
                if grid and all(
                    isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid
                ):
                    return grid
        return None

    def call_kernel(
        self, fn: A.FunctionDef, inputs: dict[str, Any], grid: tuple[int, ...] = (1,)
    ) -> tuple[Any, dict]:
        """Bind inputs by parameter name (arrays become HBM tensors) and trace the kernel once
        per program instance of `grid`, in turn (instances share the HBM tensors)."""
        names = [p.name for p in fn.params if p.kind in ("normal", "kwonly")]
        unknown = [k for k in inputs if k not in names]
        varkw = any(p.kind == "kwargs" for p in fn.params)  # takes the rest, by name
        if unknown and not varkw:
            raise UsageError(
                f"kernel {fn.name!r} has no parameter {shown(unknown[0])} "
                f"(parameters: {', '.join(names) or 'none'})",
                fn.span,
            )
        built = self.built_kernels.get(id(fn))  # its builder's scope and defaults
        closure = built[1] if built is not None and built[0] is fn else None
        scope = closure.env if closure is not None else self.globals
        defaults = closure.defaults if closure is not None else None
        env = Env(scope)
        bound: dict[str, Any] = {}
        for p in fn.params:
            if p.kind == "varargs":
                env.vars[p.name] = ()
            elif p.kind == "kwargs":
                extra = {k: self._kernel_input(k, inputs[k], fn.span) for k in unknown}
                env.vars[p.name] = extra
                bound.update(extra)
            elif p.name in inputs:
                value = self._kernel_input(p.name, inputs[p.name], fn.span)
                env.vars[p.name] = bound[p.name] = value
            elif p.default is not None:
                value = defaults[p.name] if defaults else self.eval(p.default, self.globals)
                env.vars[p.name] = bound[p.name] = value
            else:
                missing = [
                    q.name
                    for q in fn.params
                    if q.kind not in ("varargs", "kwargs")
                    and q.name not in inputs
                    and q.default is None
                ]
                flags = " ".join(f"-i {m}=SPEC" for m in missing)
                raise UsageError(
                    f"kernel {fn.name!r} needs input{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(repr, missing))}: {flags} on the command line (e.g. "
                    f"-i {missing[0]}=float32[128,512]), inputs={{{missing[0]!r}: ...}} in the "
                    "Python API",
                    fn.span,
                )

        def instance() -> Any:
            instance_env = Env(scope)
            instance_env.vars.update(env.vars)
            try:
                self.exec_body(fn.body, instance_env)
            except _Return as r:
                return r.value
            return None

        try:
            returned = self.launch(grid, instance, fn.span)
        except BaseException:
            self.abort_generators()  # the trace failed: no more kernel code runs
            raise
        for t in unnamed(self.builder.tensors):  # tiles never bound to a variable
            t.name = self._unique_name(t.label)
        return returned, bound

    def _kernel_input(self, name: str, value: Any, span: SourceSpan) -> Any:
        """An input as the kernel sees it: an array becomes an HBM tensor."""
        if isinstance(value, np.ndarray):
            return self.input_tensor(name, value, span)
        if isinstance(value, np.generic) and not isinstance(value, np.void):
            value = value.item()  # (a NumPy scalar given as a compile-time value: its number)
        self.kernel_values[name] = value  # (for messages: which input was meant as what)
        return value

    def launch(self, grid: tuple[int, ...], instance: Any, span: SourceSpan) -> Any:
        """Run `instance()` once per program instance of `grid`, in turn (instances share the
        HBM tensors); the first instance's result is the launch's."""
        instances = math.prod(grid)
        if instances > self.meter.limits.grid_instances:
            raise self.meter.over(
                "grid_instances",
                f"the launch grid {list(grid)} has {instances:,} program instances",
                span,
            )
        saved = self.grid, self.program_ids
        self.grid = grid
        returned = None
        try:
            for n, pid in enumerate(itertools.product(*(range(g) for g in grid))):
                self.program_ids = pid
                self.builder.begin_instance(n, self._core_of(grid, pid))
                result = instance()
                if n == 0:
                    returned = result
        finally:
            self.grid, self.program_ids = saved
        return returned

    def _core_of(self, grid: tuple[int, ...], pid: tuple[int, ...]) -> int:
        """The physical NeuronCore of a program instance, on a target whose logical
        NeuronCore has two (LNC2: trn2, trn3): by the grid's `nl.nc(n)` dim, or for a launch
        `kernel[2](...)` (one number, the LNC degree: nki/get-started/about/lnc.rst), the
        instance's index; else core 0."""
        cores = self.arch.lnc_physical_cores
        for g, x in zip(grid, pid):
            if isinstance(g, CoreDim) and g.cores <= cores:
                return g.core_of(x)
        if len(grid) == 1 and cores > 1 and grid[0] == cores:
            return pid[0]
        return 0

    def input_tensor(self, name: str, array: np.ndarray, span: SourceSpan) -> Tensor:
        from neuronemu_isa.numerics import dtype_name

        try:
            dt = ALL_DTYPES[dtype_name(array.dtype)]
        except KeyError:
            raise UsageError(f"input {name!r} has unsupported dtype {array.dtype}", span) from None
        shape = tuple(int(d) for d in array.shape) or (1,)
        t = Tensor(name, shape, dt, BUFFERS["hbm"], span, kind="input")
        self.builder.tensors.append(t)
        return t


def launch_grid(index: Any, span: SourceSpan) -> tuple[int, ...]:
    """`kernel[gx, gy]`'s grid: positive ints (or core dims)."""
    grid = index if isinstance(index, tuple) else (index,)
    if not grid or not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid):
        raise KernelTypeError(
            f"a launch grid is positive ints, e.g. kernel[2, 4]; got {shown(index)}", span
        )
    return tuple(g if isinstance(g, CoreDim) else int(g) for g in grid)
