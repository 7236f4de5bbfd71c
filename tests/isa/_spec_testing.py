"""More shared pieces for the ISA tests: the spec contract's data format, constraint-message
checks, a sequential fold, cost floors.

Like `_isa_testing.py`, independent of the code under test (`neuronemu_isa.instructions._common`).

The ISA test contract: each `test_<name>.py` exports data, and `test_contract.py` checks it for
every spec of the registry:

- `CHECK`, made by `checker`: `CHECK(**change)` is the Check of an accepted configuration
  changed by keywords: `target=`, `engine=`, `attrs=` (merged into the base attributes) and
  operands by name (a tile, an immediate or None).
- `ACCEPTED`: `[accepted(id, **change), ...]`, at least one: every constraint accepts
  `CHECK(**change)` and its cost is a positive int.
- `VIOLATIONS`: `[violation(id, [part, ...], **change), ...]`: exactly one constraint rejects
  `CHECK(**change)`, with a message holding every part (the operand, its value, the limit);
  together they hit every constraint of the spec.
- `COST_GROWTH`: a `Growth` (which operand grows, and how the cost must follow), or None for an
  instruction whose cost does not depend on its shapes.

`accepted` and `violation` make `pytest.param`s: (change,) and (change, parts), with their id.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from _isa_testing import TARGETS, assert_cost_grows, fired, make_check

from neuronemu_isa import Engine, InstrSpec, load_arch
from neuronemu_isa.spec import Check

F32 = np.float32

# The tests' own fp32 binary ops (lhs, rhs): one IEEE operation each.
ARITH: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def assert_single_message(spec: InstrSpec, check: Any, expected: list[str]) -> None:
    """Exactly one constraint rejects `check`, and its message holds every `expected` part."""
    found = fired(spec, check)
    assert len(found) == 1, found
    for part in expected:
        assert part in found[0][1], f"{part!r} not in {found[0][1]!r}"


def assert_every_constraint_hit(
    spec: InstrSpec, make: Callable[..., Any], cases: list[Any]
) -> None:
    """The violation table (pytest.param of a `make` keyword dict) covers every constraint."""
    hit = {i for p in cases for i, _ in fired(spec, make(**p.values[0]))}
    assert hit == set(range(len(spec.constraints)))


def sequential_fold(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray], x: np.ndarray, init: Any = None
) -> np.ndarray:
    """[P, F] -> [P], combining one column at a time from the left (one rounding per step)."""
    cols = [x[:, i] for i in range(x.shape[1])]
    if init is not None:
        cols.insert(0, np.broadcast_to(np.asarray(init, dtype=x.dtype), (x.shape[0],)))
    acc = cols[0].copy()
    for col in cols[1:]:
        acc = fn(acc, col)
    return acc


def floor_cycles(target: str, engine: Engine) -> int:
    """The smallest cost of a streaming instruction: MIN_II, plus start-up on GpSimd."""
    arch = load_arch(target)
    startup = arch.cost_gpsimd_startup_cycles if engine == Engine.GPSIMD else 0
    return int(arch.cost_min_ii_cycles + startup)


# The contract's data -----------------------------------------------------------------------


def checker(
    engine: Engine, target: str = "trn2", attrs: Mapping[str, Any] | None = None, **operands: Any
) -> Callable[..., Check]:
    """A module's CHECK: the Check of `operands` on `engine` and `target` with `attrs`, each
    changed by its keywords (`attrs` merged into the base ones, operands replaced by name)."""
    base_target, base_engine, base_attrs = target, engine, dict(attrs or {})

    def check(
        target: str = base_target,
        attrs: Mapping[str, Any] | None = None,
        engine: Engine = base_engine,
        **ops: Any,
    ) -> Check:
        return make_check(target, engine, {**operands, **ops}, {**base_attrs, **(attrs or {})})

    return check


def accepted(id: str, **change: Any) -> Any:
    """An ACCEPTED case: `CHECK(**change)` passes every constraint."""
    return pytest.param(change, id=id)


def violation(id: str, parts: Sequence[str], **change: Any) -> Any:
    """A VIOLATIONS case: one constraint rejects `CHECK(**change)`, its message holding `parts`."""
    return pytest.param(change, list(parts), id=id)


def on_each_target(id: str = "", targets: Sequence[str] = TARGETS, **change: Any) -> list[Any]:
    """One ACCEPTED case per target: `change` with `target` set, its id `<id>-<target>`."""
    return [accepted(f"{id}-{t}" if id else t, **change, target=t) for t in targets]


def priced(spec: InstrSpec, check: Check) -> int:
    """The cost of a check every constraint of `spec` accepts."""
    assert fired(spec, check) == []
    return spec.cost(check)


def least_cost(engine: Engine | None = None, times: int = 1) -> Callable[..., int]:
    """A Growth floor: `times` the least streaming cost (`floor_cycles`) on the drawn target and
    on `engine` (or, without one, the drawn `engine` parameter)."""

    def floor(target: str, **params: Any) -> int:
        return times * floor_cycles(target, engine or params["engine"])

    return floor


# A parameter with at most this many choices is tried in every combination by the ladder.
FEW_CHOICES = 8


@dataclass(frozen=True)
class Growth:
    """How a spec's cost follows one operand's size: `check(**params, **{size: n})` is the Check
    priced, for n within `sizes` (smallest, largest) and each parameter among its choices.

    Every priced Check passes the constraints (unless `accepted` is False: a cost model may be
    asked about shapes no kernel can give). The cost is an int, never below `floor(**params)`
    (default: the cost at the smallest size), never smaller for a larger n, and strictly larger
    once past `floor + slack` when the larger n is at least `ratio` times the smaller plus `gap`.
    The largest size costs more than the smallest; with a `knee` (n, m), sizes up to n cost
    exactly the floor and size m more.
    """

    check: Callable[..., Check]
    floor: Callable[..., int] | None = None
    size: str = "free"
    sizes: tuple[int, int] = (1, 65536)
    params: Mapping[str, Sequence[Any]] = field(default_factory=lambda: {"target": TARGETS})
    knee: tuple[int, int] | None = None
    slack: int = 0
    ratio: int = 2
    gap: int = 0
    accepted: bool = True

    def cost(self, spec: InstrSpec, n: int, params: Mapping[str, Any]) -> int:
        check = self.check(**params, **{self.size: n})
        return priced(spec, check) if self.accepted else spec.cost(check)

    def least(self, spec: InstrSpec, params: Mapping[str, Any]) -> int:
        return self.floor(**params) if self.floor else self.cost(spec, self.sizes[0], params)

    def assert_grows(self, spec: InstrSpec, params: Mapping[str, Any], n1: int, n2: int) -> None:
        assert_cost_grows(
            lambda n: self.cost(spec, n, params),
            n1,
            n2,
            self.least(spec, params),
            self.slack,
            self.ratio,
            self.gap,
        )

    def combinations(self) -> list[dict[str, Any]]:
        """Every combination of the parameters with few choices, the others at their first."""
        choices = [v if len(v) <= FEW_CHOICES else v[:1] for v in self.params.values()]
        return [dict(zip(self.params, combo)) for combo in itertools.product(*choices)]

    def ladder(self) -> list[int]:
        """The smallest size, doubling up to the largest, and the sizes of the knee."""
        lo, hi = self.sizes
        rungs = {lo, hi, *(self.knee or ())}
        while lo < hi:
            rungs.add(lo)
            lo *= 2
        return sorted(rungs)

    def assert_climbs(self, spec: InstrSpec, params: Mapping[str, Any]) -> None:
        """The growth rule between neighbouring rungs of the ladder, its two ends, the knee."""
        ladder = self.ladder()
        for small, large in zip(ladder, ladder[1:]):
            self.assert_grows(spec, params, small, large)
        lo, hi = (self.cost(spec, n, params) for n in self.sizes)
        assert lo < hi, f"cost {lo} at {self.size}={self.sizes[0]} and {hi} at {self.sizes[1]}"
        if self.knee:
            sizes = (self.sizes[0], *self.knee)
            least, costs = self.least(spec, params), [self.cost(spec, n, params) for n in sizes]
            assert costs[0] == costs[1] == least < costs[2], f"costs {costs} at {sizes}"
