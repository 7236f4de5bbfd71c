"""Budgets of one run (sizes, trace-time work, time, memory) and the meter that enforces them.

A kernel file is untrusted input: every way it can make neuronemu work or allocate is
counted against a budget as the work is created, and running out is a located `BudgetError`
naming the budget and how to raise it (`--limit NAME=VALUE`, or `limits=` in the API).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import numbers
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from neuronemu.errors import BudgetError, SourceSpan, UsageError, shown

__all__ = [
    "Limits",
    "Meter",
    "allocate",
    "checked",
    "metered",
    "poll",
    "process_rss_bytes",
    "tick",
]

_KIB, _MIB, _GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """What one run may cost. Every field is a budget; `--limit NAME=VALUE` sets one."""

    # A kernel file, a helper module it imports or a .nasm program file (bytes); parsing is
    # ~linear in it.
    file_bytes: int = 1 * _MIB
    # One string or bytes literal in a kernel file.
    literal_bytes: int = 1 * _MIB
    # Trace-time integers: literals and results of arithmetic (bits). Below Python's own
    # 4,300-digit str() limit, so every legal int prints.
    int_bits: int = 8192
    # Items in one trace-time sequence, string, dict, set or NumPy array (a container's items
    # counted through every reference: what hash, == and repr walk).
    sequence_items: int = 4 * _MIB
    # Containers nested in one trace-time value (`x = (x,)` in a loop). hash, == and repr
    # recurse in C; at most `_MAX_NESTING_DEPTH`, which the C stack holds in any thread.
    nesting_depth: int = 1000
    # Trace-time steps: loop iterations, comprehension items, items consumed by builtins.
    loop_iterations: int = 1_000_000
    # Instructions the kernel emits (a runaway loop stops here, as it is traced). Tracing
    # emits 20-50 thousand instructions a second today, so a runaway stops within ~10 s;
    # AWS's largest tutorial kernels emit ~100,000.
    instructions: int = 150_000
    # SPMD program instances of one launch (each is traced in turn).
    grid_instances: int = 4096
    # Wall-clock seconds to parse and trace the kernel, and for the whole run.
    trace_seconds: float = 20.0
    run_seconds: float = 300.0
    # Data the run holds: inputs, HBM tensors and trace-time arrays (bytes); the process as
    # a whole may hold this plus `_PROCESS_HEADROOM_BYTES` (neuronemu, NumPy, Numba).
    memory_bytes: int = 4 * _GIB

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, default value, what it bounds) for every budget, for docs and `--help`."""
        rows = []
        for f in dataclasses.fields(self):
            rows.append((f.name, _show(f.name, getattr(self, f.name)), _WHAT[f.name]))
        return rows

    def replace(self, **changes: Any) -> Limits:
        return dataclasses.replace(self, **changes)

    def parse(self, text: str) -> Limits:
        """These limits with one changed by `NAME=VALUE` (`memory_bytes=8G`,
        `trace_seconds=60`, `instructions=5000000`)."""
        return parse_limit(text, self)


_WHAT = {
    "file_bytes": "size of a kernel file, helper module or .nasm program file",
    "literal_bytes": "size of one string or bytes literal",
    "int_bits": "bits of a trace-time integer",
    "sequence_items": "items in one trace-time list, tuple, string, dict, set or array",
    "nesting_depth": "containers nested in one trace-time value",
    "loop_iterations": "trace-time loop iterations and items consumed by builtins",
    "instructions": "instructions the kernel emits (with device loops: executes)",
    "grid_instances": "SPMD program instances of one launch",
    "trace_seconds": "wall-clock seconds to parse and trace a kernel",
    "run_seconds": "wall-clock seconds for a whole run",
    "memory_bytes": "bytes of inputs, HBM tensors and trace-time data",
}
# The interpreter, NumPy, Numba and neuronemu's own tables, on top of the data budget.
_PROCESS_HEADROOM_BYTES = 1 * _GIB
# Deeper values would let C code that recurses into them (a tuple's hash) overflow the stack,
# under the tracer's recursion limit of 8000 frames too.
_MAX_NESTING_DEPTH = 4000
# The most any budget may be (a C long: what NumPy and the scheduler hold).
_MAX_COUNT = 2**63 - 1
_UNITS = {
    "": 1,
    "k": _KIB,
    "kb": _KIB,
    "kib": _KIB,
    "m": _MIB,
    "mb": _MIB,
    "mib": _MIB,
    "g": _GIB,
    "gb": _GIB,
    "gib": _GIB,
}


def _show(name: str, value: Any) -> str:
    if name.endswith("_bytes"):
        for unit, size in (("G", _GIB), ("M", _MIB), ("K", _KIB)):
            if value % size == 0:
                return f"{value // size}{unit}"
        return str(value)
    if name.endswith("_seconds"):
        return f"{value:g}"
    return f"{value:_}".replace("_", ",") if value >= 10_000 else str(value)


def parse_limit(text: str, limits: Limits) -> Limits:
    """`NAME=VALUE` (`memory_bytes=8G`, `trace_seconds=60`, `instructions=5000000`)."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    known = {f.name: f for f in dataclasses.fields(limits)}
    if not sep or name not in known:
        raise UsageError(
            f"--limit {text!r}: expected NAME=VALUE with NAME one of {', '.join(known)}"
        )
    value = value.strip().replace("_", "").replace(",", "")
    try:
        if name.endswith("_seconds"):
            parsed: float = float(value.rstrip("s"))
            ok = math.isfinite(parsed) and parsed > 0
        else:
            m = re.fullmatch(r"([0-9]+)\s*([a-zA-Z]*)", value)
            if (
                m is None
                or m.group(2).lower() not in _UNITS
                or (m.group(2) and not name.endswith("_bytes"))
            ):
                raise ValueError(value)
            # (the length first: Python reads no int of over 4,300 digits)
            if len(m.group(1).lstrip("0")) > len(str(_MAX_COUNT)):
                parsed = _MAX_COUNT + 1
            else:
                parsed = int(m.group(1)) * _UNITS[m.group(2).lower()]
            ok = parsed > 0
    except ValueError:
        ok = False
    if ok and parsed > _MAX_COUNT:
        raise UsageError(f"--limit {shown(text)}: {name} is at most {_MAX_COUNT:,}")
    if ok and name == "nesting_depth" and parsed > _MAX_NESTING_DEPTH:
        raise UsageError(
            f"--limit {text!r}: nesting_depth is at most {_MAX_NESTING_DEPTH} (deeper values "
            "would overflow the C stack when hashed, compared or printed)"
        )
    if not ok:
        raise UsageError(
            f"--limit {text!r}: {name} must be a positive "
            f"{'number of seconds' if name.endswith('_seconds') else 'integer'}"
            + (" (K, M and G suffixes allowed)" if name.endswith("_bytes") else "")
        )
    return limits.replace(**{name: parsed})


def checked(limits: Limits) -> Limits:
    """`limits` as the Python API was given them, each value checked as `--limit` checks
    its text: an integer for a count or a size, a finite number for seconds, each positive
    (a NaN would turn a clock off)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(limits):
        value: Any = getattr(limits, f.name)
        seconds = f.name.endswith("_seconds")
        kind = numbers.Real if seconds else numbers.Integral
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if ok and value > _MAX_COUNT:
            raise UsageError(f"limits: {f.name} is at most {_MAX_COUNT:,}, got {shown(value)}")
        if not ok or abs(value) > _MAX_COUNT:
            raise UsageError(
                f"limits: {f.name} must be a positive {'number' if seconds else 'integer'}, "
                f"got {shown(value)}"
            )
        values[f.name] = float(value) if seconds else int(value)
        try:
            parse_limit(f"{f.name}={values[f.name]!r}", limits)
        except UsageError as err:
            raise UsageError(err.message.replace("--limit ", "limits: ", 1)) from None
    return limits.replace(**values)


def process_rss_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 where that is not available)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# A sequence of this many items costs one tick of work (Meter.tick) to make: a loop that
# makes large strings or lists reads the clocks in proportion to what it makes, so that the
# trace_seconds budget stops it within a fraction of a second of running out.
_ITEMS_PER_TICK = 4096


class Meter:
    """Counts a run's work against its `Limits`; every check names the line responsible."""

    # Look at the clock and the process's memory once per this many steps (cheap enough).
    _POLL_EVERY = 256

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.steps = 0
        self.data_bytes = 0
        self.started = time.monotonic()
        self.trace_started = self.started
        self._until_poll = self._POLL_EVERY
        # Loop iterations being recorded (neuronemu.replay.templates), innermost last.
        self.journals: list[Any] = []
        # Where a budget that runs out between the passes after the trace points (the
        # kernel's `def`): no instruction is at fault there.
        self.where: SourceSpan | None = None

    def over(self, name: str, what: str, span: SourceSpan | None) -> BudgetError:
        value = getattr(self.limits, name)
        return BudgetError(
            f"{what}, over the {name} budget of {_show(name, value)}",
            span or self.where,
            hint=f"raise it with --limit {name}=N (limits={{'{name}': N}} in the Python API) "
            "if the kernel really needs more",
        )

    # Trace-time work --------------------------------------------------------------------

    def step(self, span: SourceSpan | None, n: int = 1) -> None:
        """`n` units of trace-time work (iterations, consumed items)."""
        self.steps += n
        if self.steps > self.limits.loop_iterations:
            raise self.over(
                "loop_iterations", f"trace-time loops and builtins ran {self.steps:,} steps", span
            )
        self._until_poll -= n
        if self._until_poll <= 0:
            self._until_poll = self._POLL_EVERY
            self.poll(span)

    def tick(self, span: SourceSpan | None, n: int = 1) -> None:
        """`n` units of work that spend no budget of their own (calls, hand-overs, walks of
        a value): the clocks are read once per `_POLL_EVERY` of them, as for steps."""
        self._until_poll -= n
        if self._until_poll <= 0:
            self._until_poll = self._POLL_EVERY
            self.poll(span)

    def poll(self, span: SourceSpan | None) -> None:
        """The clocks and the process's memory."""
        now = time.monotonic()
        if now - self.trace_started > self.limits.trace_seconds:
            raise self.over(
                "trace_seconds", f"tracing has taken {now - self.trace_started:.1f} s", span
            )
        if now - self.started > self.limits.run_seconds:
            raise self.over("run_seconds", f"the run has taken {now - self.started:.1f} s", span)
        rss = process_rss_bytes()
        if rss > self.limits.memory_bytes + _PROCESS_HEADROOM_BYTES:
            raise self.over(
                "memory_bytes",
                f"the process holds {rss / _GIB:.1f} GiB "
                f"(budget plus {_PROCESS_HEADROOM_BYTES // _GIB} GiB for neuronemu)",
                span,
            )

    def end_trace(self) -> None:
        self.trace_started = math.inf  # the trace clock stops; the run clock goes on

    def check_run_time(self, span: SourceSpan | None = None) -> None:
        now = time.monotonic()
        if now - self.started > self.limits.run_seconds:
            raise self.over("run_seconds", f"the run has taken {now - self.started:.1f} s", span)

    def counted(self, iterable: Iterable[Any], span: SourceSpan | None) -> Iterator[Any]:
        """`iterable`, charging one step per item (for builtins that iterate in C)."""
        for item in iterable:
            self.step(span)
            yield item

    # Sizes -------------------------------------------------------------------------------

    def items(self, n: int, what: str, span: SourceSpan | None) -> None:
        """A trace-time sequence of `n` items is about to be made."""
        if n > self.limits.sequence_items:
            raise self.over("sequence_items", f"{what} would hold {n:,} items", span)
        if n >= _ITEMS_PER_TICK:  # (making it is work: the clocks are read as it mounts up)
            self.tick(span, n // _ITEMS_PER_TICK)

    def int_bits(self, bits: int, what: str, span: SourceSpan | None) -> None:
        if bits > self.limits.int_bits:
            raise self.over("int_bits", f"{what} would have {bits:,} bits", span)

    def allocate(self, nbytes: int, what: str, span: SourceSpan | None) -> None:
        """Data the run will hold (inputs, HBM tensors, trace-time arrays)."""
        self.data_bytes += nbytes
        if self.data_bytes > self.limits.memory_bytes:
            raise self.over(
                "memory_bytes",
                f"{what} needs {_bytes(nbytes)}, and the run "
                f"would then hold {_bytes(self.data_bytes)}",
                span,
            )


def _bytes(n: int) -> str:
    for unit, size in (("GiB", _GIB), ("MiB", _MIB), ("KiB", _KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# The meter of the run under way in this thread (`metered`): the passes after the trace
# (values, checks, explanations) read its clocks through `tick` as they go, each at the
# instruction it is at, without a meter in every signature.
_RUNNING: contextvars.ContextVar[Meter | None] = contextvars.ContextVar(
    "neuronemu_meter", default=None
)


@contextlib.contextmanager
def metered(meter: Meter) -> Iterator[Meter]:
    """Within it, `tick` counts against `meter`."""
    token = _RUNNING.set(meter)
    try:
        yield meter
    finally:
        _RUNNING.reset(token)


def tick(span: SourceSpan | None, n: int = 1) -> None:
    """`n` units of work of the pass under way (an instruction run, checked or compared):
    the run's clocks and memory are read once per `Meter._POLL_EVERY`; nothing outside a
    `metered` run."""
    meter = _RUNNING.get()
    if meter is not None:
        meter.tick(span, n)


def poll(span: SourceSpan | None = None) -> None:
    """Read the clocks and memory of the run under way now (between parts of a long pass)."""
    meter = _RUNNING.get()
    if meter is not None:
        meter.poll(span)


def spare_bytes() -> int | None:
    """What the run under way may still allocate before its memory budget (None outside a
    `metered` run)."""
    meter = _RUNNING.get()
    return None if meter is None else meter.limits.memory_bytes - meter.data_bytes


def allocate(nbytes: int, what: str, span: SourceSpan | None) -> None:
    """Data a pass after the trace keeps for the rest of the run (`Meter.allocate` of the
    run under way; nothing outside a `metered` run)."""
    meter = _RUNNING.get()
    if meter is not None:
        meter.allocate(nbytes, what, span)
