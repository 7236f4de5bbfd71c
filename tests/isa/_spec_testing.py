"""More shared pieces for the ISA tests: constraint-message tables, a sequential fold, cost floors.

Like `_isa_testing.py`, independent of the code under test (`neuronemu_isa.instructions._common`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _isa_testing import fired

from neuronemu_isa import Engine, InstrSpec, load_arch

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
