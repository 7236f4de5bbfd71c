"""How far a run's time can be trusted: the share of its critical path that rests on
documented, inferred and fitted costs, and the machine constants involved.

Every constant of `isa/arch/<target>.toml` is documented (its value read from the cited AWS
Neuron doc) unless that file's `[provenance]` table says "inferred" (the docs are silent on
it for this target) or "fitted" (chosen to reproduce a published figure, `isa/arch/fitted.md`).

Each stretch of the critical path (`critical.py`) is time the scheduler took for one reason,
and the reason's time is a sum of terms, each resting on some constants:

- an engine's own work and a DMA transfer: its instruction's cost rule (the spec's `cost` in
  `isa/`, over its engine's clock). Which constants the rule reads is recorded by running it
  on the target's constants; how much of the cost each carries is how far the cost moves when
  that constant alone is doubled or halved (the larger move: a term `k * c` and a term `k / c`
  both move by the whole term). A Tensor-engine instruction's LoadStationary is its spec's
  `preload_cost` alike, and the time the dI/dt throttle adds rests on the throttle's constants;
  a transfer slower than its cost shares the core's HBM bandwidth (`dma.hbm_bytes_per_ns`);
- a DMA transfer's fixed latency: `dma.fixed_ns`; waiting for its queue to take it:
  `dma.issue_ns`; waiting for DMA engines busy with earlier transfers: their rate and their
  packets' overhead (`dma.bytes_per_ns_per_engine`, `dma.packet_bytes`,
  `dma.theoretical_bytes_per_ns_per_engine`);
- a semaphore wait: `cost.semaphore_ns`, and the producer's pipeline latency (Vector, Scalar,
  GpSimd, Sync: `cost.static_overhead_cycles` + `cost.access_overhead_cycles` cycles; Tensor:
  `cost.matmul_latency_cycles`; over the engine's clock); the last instruction's latency alike;
- a shared port (`other`): `cost.port_conflicts`.

A term's time is split over its constants by those weights, and each constant's time counts
toward its provenance. Time no constant accounts for (the start of a run, a rule of the
scheduler alone) counts as inferred: no document states it either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from neuronemu.program.table import by_form
from neuronemu.program.verify import instr_check
from neuronemu.report.critical import CAUSES, CriticalPath
from neuronemu.sim.timing import ENGINE_KEYS, Timeline
from neuronemu_isa import Engine

__all__ = [
    "PROVENANCES",
    "Fidelity",
    "cost_rests_on",
    "fidelity",
    "provenance",
    "rule_weights",
    "tag_shares",
]

# From the most trusted to the least: read from a document, chosen to reproduce a published
# figure, chosen where the documents are silent.
PROVENANCES = ("documented", "fitted", "inferred")
_PREFIX = "provenance_"
# Rounding slack (ns) when telling a stretched time from the cost it stretches.
_EPS = 1e-6

Weights = dict[str, float]  # constant -> its share of a term (the shares add to 1)


def provenance(arch: Any) -> dict[str, str]:
    """Every constant of `arch` (as the code reads it: `cost_semaphore_ns`) -> "documented",
    "fitted" or "inferred", from its file's `[provenance]` table."""
    tags = {k: "documented" for k in arch.keys() if not k.startswith(_PREFIX)}
    for key in arch.keys():
        if key.startswith(_PREFIX):
            name = key[len(_PREFIX) :].replace(".", "_", 1)
            tag = arch[key]
            if name not in tags or tag not in PROVENANCES:
                raise ValueError(f"arch {arch.name}: provenance of {name!r}: {tag!r}")
            tags[name] = tag
    return tags


class _Reading:
    """A target's constants as a cost rule sees them, recording which it reads; `changed`
    gives one of them another value."""

    def __init__(self, arch: Any, constants: set[str], changed: dict[str, Any] | None = None):
        self._arch, self._constants, self._changed = arch, constants, changed or {}
        self.read: set[str] = set()

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        if key in self._constants:
            self.read.add(key)
            if key in self._changed:
                return self._changed[key]
        return getattr(self._arch, key)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def clock_ghz(self, engine: str) -> float:
        return float(getattr(self, f"clock_ghz_{engine}"))


def rule_weights(rule: Callable[[Any], float], arch: Any, constants: set[str]) -> Weights:
    """The constants `rule(arch)` reads, each with its share of the result: how far the
    result moves when that constant alone is doubled or halved (the larger move), over the
    sum of those moves (equal shares where nothing moves, or a changed value breaks the
    rule)."""
    reading = _Reading(arch, constants)
    base = float(rule(reading))
    names = sorted(reading.read)
    moves: dict[str, float] = {}
    try:
        for k in names:
            v = arch[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v == 0:
                moves[k] = 0.0
                continue
            half = max(v // 2, 1) if isinstance(v, int) else v / 2
            moves[k] = max(
                abs(float(rule(_Reading(arch, constants, {k: x}))) - base) for x in (v * 2, half)
            )
    except Exception:  # noqa: BLE001  (a value the rule cannot take: equal shares)
        moves = {k: 0.0 for k in names}
    total = sum(moves.values())
    if total <= 0:
        return {k: 1.0 / len(names) for k in names}
    return {k: m / total for k, m in moves.items() if m > 0}


def _latency_weights(arch: Any, engine: str) -> Weights:
    """The terms of an engine's pipeline latency (`sim/timing.py`): cycles over its clock."""
    if engine == "tensor":
        cycles = {"cost_matmul_latency_cycles": float(arch.cost_matmul_latency_cycles)}
    elif engine == "dma":
        return {}
    else:
        cycles = {
            "cost_static_overhead_cycles": float(arch.cost_static_overhead_cycles),
            "cost_access_overhead_cycles": float(arch.cost_access_overhead_cycles),
        }
    # (doubled or halved, a term moves by itself; the clock moves all of them)
    total = sum(cycles.values())
    if total <= 0:
        return {}
    out = {k: c / (2 * total) for k, c in cycles.items()}
    out[f"clock_ghz_{engine}"] = 0.5
    return out


_QUEUED_ON_ENGINES = {  # waiting for DMA engines busy with earlier transfers
    "dma_bytes_per_ns_per_engine": 1 / 3,
    "dma_packet_bytes": 1 / 3,
    "dma_theoretical_bytes_per_ns_per_engine": 1 / 3,
}
_THROTTLE = {
    "cost_tensor_throttle_floor": 1 / 3,
    "cost_tensor_throttle_ramp_ns": 1 / 3,
    "cost_tensor_throttle_rearm_idle_ns": 1 / 3,
}


class _Rules:
    """Each instruction's cost rule and LoadStationary as weights, worked out once per form."""

    def __init__(self, timeline: Timeline):
        program = timeline.program
        self.arch = program.arch
        self.constants = set(provenance(self.arch))
        self.instrs = program.table().instrs
        self.source = program.table().form_base
        self.cost: dict[Any, Weights] = {}
        self.preload: dict[Any, Weights] = {}

    def weights(self, ins: Any, known: dict[Any, Weights], preload: bool) -> Weights:
        """The weights of `ins`'s cost rule (`preload`: its LoadStationary's), by its form."""
        arch, spec = self.arch, ins.spec
        fn = spec.preload_cost if preload else spec.cost
        if fn is None:
            return {}
        engine = ins.engine.value

        def worked_out() -> Weights:
            check = instr_check(ins, arch)

            def rule(a: Any) -> float:
                cycles = fn(dataclasses.replace(check, arch=a))
                # (a transfer's cost is in ns: its "clock" is the unit, 1 GHz, not a rate)
                return cycles if ins.engine == Engine.DMA else cycles / a.clock_ghz(engine)

            return rule_weights(rule, arch, self.constants)

        return by_form(ins, known, worked_out)

    def cost_of(self, i: int) -> Weights:
        return self.weights(self.instrs[int(self.source[i])], self.cost, False)

    def preload_of(self, i: int) -> Weights:
        return self.weights(self.instrs[int(self.source[i])], self.preload, True)


def cost_rests_on(timeline: Timeline) -> tuple[np.ndarray, list[Weights]]:
    """What each instruction's cost rests on: per instruction a number into the list of
    weights (constant -> its share of the cost), one per form."""
    rules = _Rules(timeline)
    made: list[Weights] = []
    numbers: dict[Any, int] = {}

    def number(ins: Any) -> int:
        def new() -> int:
            made.append(rules.weights(ins, rules.cost, False))
            return len(made) - 1

        return by_form(ins, numbers, new)

    return timeline.program.table().per_instr(number, np.int64, rules.source), made


def tag_shares(weights: Weights, tags: dict[str, str]) -> dict[str, float]:
    """The shares of a cost (`weights`) resting on each provenance (those it has)."""
    out: dict[str, float] = {}
    for k, w in weights.items():
        out[tags[k]] = out.get(tags[k], 0.0) + w
    return out


class Fidelity:
    """The critical path's time per provenance and per constant."""

    def __init__(self, total: float, per_constant: dict[str, float], unattributed: float, arch):
        self.ns = total
        self.tags = provenance(arch)
        self.values = {k: arch[k] for k in per_constant}
        self.per_constant = per_constant
        self.unattributed = unattributed

    def by_provenance(self) -> dict[str, float]:
        """ns of the critical path per provenance (time no constant accounts for: inferred)."""
        out = {p: 0.0 for p in PROVENANCES}
        for k, ns in self.per_constant.items():
            out[self.tags[k]] += ns
        out["inferred"] += self.unattributed
        return out

    def shares(self) -> dict[str, float]:
        got = self.by_provenance()
        total = sum(got.values())
        return {p: (ns / total if total > 0 else 0.0) for p, ns in got.items()}

    def constants(self, provenance: str | None = None) -> list[tuple[str, Any, str, float]]:
        """(name, value, provenance, ns of the path resting on it), most first."""
        rows = [
            (k, self.values[k], self.tags[k], ns)
            for k, ns in self.per_constant.items()
            if ns > 0 and (provenance is None or self.tags[k] == provenance)
        ]
        return sorted(rows, key=lambda r: (-r[3], r[0]))

    def to_json(self) -> dict[str, Any]:
        shares = self.shares()
        return {
            "critical_path_ns": round(self.ns, 3),
            "shares": {p: round(s, 6) for p, s in shares.items()},
            "constants": [
                {
                    "name": k,
                    "value": v,
                    "provenance": tag,
                    "ns": round(ns, 3),
                    "share": round(ns / self.ns, 6) if self.ns else 0.0,
                }
                for k, v, tag, ns in self.constants()
            ],
        }

    def summary(self, shown: int = 3) -> str:
        """One sentence: `41% of the critical path rests on inferred costs (dma_queue_depth,
        ...), 30% on fitted (...), 29% on documented`."""
        shares = self.shares()
        if self.ns <= 0:
            return "fidelity: no critical path"
        parts = []
        for p in ("inferred", "fitted", "documented"):
            names = [k for k, *_ in self.constants(p)]
            more = f", +{len(names) - shown}" if len(names) > shown else ""
            which = f" ({', '.join(names[:shown])}{more})" if names and p != "documented" else ""
            parts.append(f"{100 * shares[p]:.0f}% on {p}{which}")
        first = parts[0].replace(" on inferred", " of the critical path rests on inferred costs")
        return f"fidelity: {first}, " + ", ".join(parts[1:])


def fidelity(timeline: Timeline, path: CriticalPath) -> Fidelity:
    """The provenance of `path`, the critical path of `timeline`."""
    program = timeline.program
    arch = program.arch
    per: dict[str, float] = {}
    unattributed = 0.0

    def add(weights: Weights, ns: float) -> None:
        nonlocal unattributed
        if ns <= 0:
            return
        if not weights:
            unattributed += ns
            return
        for k, w in weights.items():
            per[k] = per.get(k, 0.0) + w * ns

    a = timeline.arrays
    if path.index.size == 0 or a is None:
        add({}, path.ns)
        return Fidelity(path.ns, per, unattributed, arch)
    i, cause, ns, edge = path.index, path.cause, path.ns_of, path.edge
    start, xfer, end = (x[i] for x in (timeline.start_ns, timeline.xfer_ns, timeline.end_ns))
    cost, engine = a["cost_ns"][i], timeline.engine_index[i]
    tensor = ENGINE_KEYS.index("tensor")
    is_ = {name: cause == CAUSES.index(name) for name in CAUSES}
    # An engine's own work (its stretch: from its start to its end): a Tensor-engine
    # instruction's LoadStationary first, then its cost, stretched by the throttle.
    working = cause < ENGINE_KEYS.index("dma")
    loaded = np.where(working & (engine == tensor) & (a["pre_ns"][i] > 0), xfer - start, 0.0)
    stretched = np.where(working & (engine == tensor), ns - loaded - cost, 0.0)
    stretched = np.where(stretched > _EPS, stretched, 0.0)
    work = np.where(working, ns - loaded - stretched, 0.0)
    add(_THROTTLE, float(stretched.sum()))
    # A transfer: its cost, and beyond it the HBM bandwidth it shares.
    moving = is_["dma transfer"]
    shared = np.where(moving & (ns - cost > _EPS), ns - cost, 0.0)
    work = np.where(moving, ns - shared, work)
    add({"dma_hbm_bytes_per_ns": 1.0}, float(shared.sum()))
    # Each cost rule once per form: the time resting on it summed per instruction first.
    rules = _Rules(timeline)
    source = rules.source[i]
    for summed, rule in ((work, rules.cost_of), (loaded, rules.preload_of)):
        total = np.bincount(source, weights=summed)
        for k in np.flatnonzero(total > 0).tolist():
            add(rule(k), float(total[k]))
    add({"dma_fixed_ns": 1.0}, float(ns[is_["dma fixed latency"]].sum()))
    queued = is_["dma queueing"]
    # (on the queue's interval the walk goes on to the previous transfer; for the engines,
    # the transfer's own time)
    add({"dma_issue_ns": 1.0}, float(ns[queued & (edge >= 0)].sum()))
    add(_QUEUED_ON_ENGINES, float(ns[queued & (edge < 0)].sum()))
    # A wait: the semaphore and the producer's pipeline latency (none after a matmul, for the
    # next one on the Tensor engine: its accumulation follows in the pipeline).
    waits = is_["semaphore"] & (edge >= 0)
    producer = np.where(waits, timeline.engine_index[np.maximum(edge, 0)], 0)
    chained = waits & (producer == tensor) & (a["stream"][np.maximum(edge, 0)] == a["stream"][i])
    sem = np.where(waits & ~chained, np.minimum(ns, float(arch.cost_semaphore_ns)), 0.0)
    add({"cost_semaphore_ns": 1.0}, float(sem.sum()))
    latency = np.where(waits, ns - sem, 0.0)
    tail = is_["engine latency"]
    for e, key in enumerate(ENGINE_KEYS):
        got = float(latency[producer == e].sum()) + float(ns[tail & (engine == e)].sum())
        add(_latency_weights(arch, key), got)
    port = {"cost_port_conflicts": 1.0} if arch.cost_port_conflicts else {}
    add(port, float(ns[is_["other"]].sum()))
    add({}, float(ns[is_["semaphore"] & (edge < 0)].sum()))
    return Fidelity(path.ns, per, unattributed, arch)
