"""What a run reports: the `--json` contract, Perfetto trace events, and the human summary."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuronemu.ir import View
from neuronemu.nasm import write
from neuronemu.program import Program
from neuronemu.program.table import by_form
from neuronemu.program.verify import instr_check
from neuronemu.report.critical import CriticalPath, critical_path
from neuronemu.report.fidelity import Fidelity, cost_rests_on, fidelity, provenance, tag_shares
from neuronemu.report.reference import CheckResult
from neuronemu.report.stalls import LINE_CAUSES, Stalls, stalls
from neuronemu.sim.timing import ENGINE_KEYS, Timeline
from neuronemu_isa import Buffer
from neuronemu_isa.spec import hbm_traffic

__all__ = ["Result", "LINES_SHOWN"]

# The kernel lines `--json` lists in `lines`, the most time first.
LINES_SHOWN = 10


@dataclass
class Result:
    """One run: the program, its outputs (None when timing only), timeline and check."""

    program: Program
    timeline: Timeline
    outputs: dict[str, np.ndarray] | None
    check: CheckResult | None = None
    grid: tuple[int, ...] = (1,)
    _busy: dict[str, float] = field(default_factory=dict, repr=False)
    _critical: CriticalPath | None = field(default=None, repr=False)
    _fidelity: Fidelity | None = field(default=None, repr=False)
    _stalls: Stalls | None = field(default=None, repr=False)
    _flops: int | None = field(default=None, repr=False)  # (matmul_flops, once worked out)
    _hbm: dict[str, int] | None = field(default=None, repr=False)  # (hbm_bytes, likewise)
    _floor: float | None = field(default=None, repr=False)  # (tensor_floor_ns, likewise)

    @property
    def critical_path(self) -> CriticalPath:
        """The chain of instructions and waits that sets the total time, by cause."""
        if self._critical is None:
            self._critical = critical_path(self.timeline)
        return self._critical

    @property
    def fidelity(self) -> Fidelity:
        """How much of the critical path rests on documented, fitted and inferred costs."""
        if self._fidelity is None:
            self._fidelity = fidelity(self.timeline, self.critical_path)
        return self._fidelity

    @property
    def stalls(self) -> Stalls:
        """Every instruction's time by cause, and the sums per kernel source line."""
        if self._stalls is None:
            self._stalls = stalls(self.timeline)
        return self._stalls

    @property
    def time_ns(self) -> float:
        return self.timeline.total_ns

    @property
    def cycles(self) -> int:
        return int(math.ceil(self.time_ns * self.program.arch.clock_ghz("report")))

    @property
    def bound_by(self) -> str:
        return self.timeline.bound_by()

    @property
    def engines(self) -> dict[str, dict[str, float | int]]:
        if not self._busy:
            self._busy = self.timeline.busy_ns()
        counts = self.timeline.program.engine_counts()  # executed (device loops: per pass)
        active = self.timeline.active_ns()
        total = self.time_ns
        return {
            k: {
                "instructions": counts[k],
                "busy_ns": round(self._busy[k], 3),
                "utilization": round(self._busy[k] / total, 6) if total else 0.0,
                "active_ns": round(active[k], 3),
            }
            for k in ENGINE_KEYS
        }

    @property
    def matmul_flops(self) -> int:
        """The PE array's FLOPs summed over the run (each spec's `flops`: 2 * K * M * N for
        a matmul)."""
        if self._flops is None:
            program, arch = self.timeline.program, self.program.arch
            known: dict[Any, int] = {}  # by instruction form (a loop's repeats)

            def flops(ins: Any) -> int:
                count = ins.spec.flops
                if count is None:
                    return 0
                return by_form(ins, known, lambda: count(instr_check(ins, arch)))

            # (a repeat's are its base's: FLOPs depend on the form alone)
            table = program.table()
            self._flops = int(table.summed(flops, table.form_base))
        return self._flops

    @property
    def tensor_floor_ns(self) -> float:
        """The least time the matmul FLOPs can take: each matmul's FLOPs at the peak rate of
        its own mode and dtypes (FP32 a quarter of BF16, FP8 double_row twice it)."""
        if self._floor is None:
            program, arch = self.timeline.program, self.program.arch
            known: dict[Any, float] = {}  # by instruction form (a loop's repeats)

            def floor_ns(ins: Any) -> float:
                spec = ins.spec
                if spec.flops is None:
                    return 0.0

                def worked_out() -> float:
                    check = instr_check(ins, arch)
                    peak = spec.peak_flops_per_ns
                    rate = arch.peak_bf16_flops_per_ns if peak is None else peak(check)
                    return spec.flops(check) / rate

                return by_form(ins, known, worked_out)

            table = program.table()
            self._floor = float(table.summed(floor_ns, table.form_base, 0.0))
        return self._floor

    @property
    def mfu(self) -> float:
        """The Tensor-engine floor over the run's duration: the matmuls' FLOPs over the peak of
        their own modes for as long as the run takes, in [0, 1]."""
        if not self.time_ns:
            return 0.0
        return self.tensor_floor_ns / self.time_ns

    @property
    def hbm_bytes(self) -> dict[str, int]:
        """Bytes the run reads from and writes to HBM: every instruction's HBM operands."""
        if self._hbm is None:
            program, arch = self.timeline.program, self.program.arch
            known: dict[Any, np.ndarray] = {}  # by instruction form (a loop's repeats)
            none = np.zeros(2, dtype=np.int64)

            def traffic(ins: Any) -> np.ndarray:
                if not any(
                    isinstance(v, View) and v.buffer == Buffer.HBM for v in ins.operands.values()
                ):
                    return none  # (no HBM operand: no HBM bytes)
                spec = ins.spec
                return by_form(
                    ins,
                    known,
                    lambda: np.array(hbm_traffic(spec, instr_check(ins, arch)), dtype=np.int64),
                )

            # (a repeat's are its base's: they depend on the form alone)
            table = program.table()
            read, write = table.summed(traffic, table.form_base, none).tolist()
            self._hbm = {"read": read, "write": write}
        return dict(self._hbm)

    def top_source_lines(self, n: int = 5) -> list[tuple[str, str, float]]:
        """The `n` (engine, kernel source line, busy ns) with the most engine time."""
        tl = self.timeline
        places: dict[tuple, int] = {}  # (engine, span) -> its number (spans are shared)
        of = tl.program.table().per_instr(
            lambda i: places.setdefault((i.engine, i.span), len(places)), np.int64
        )
        keys: dict[tuple[str, str], int] = {}  # (engine, source line) -> its number
        key_of = np.array(
            [keys.setdefault((e.value, str(span)), len(keys)) for e, span in places],
            dtype=np.int64,
        )
        # (bincount adds in program order, as a running sum per key would)
        busy = np.bincount(key_of[of], weights=tl.end_ns - tl.xfer_ns, minlength=len(keys))
        totals = {key: float(busy[k]) for key, k in keys.items()}
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        return [(engine, line, ns) for (engine, line), ns in ranked]

    @property
    def cores(self) -> list[dict[str, Any]]:
        """Per physical NeuronCore (two in an LNC2 launch): when its last result is ready
        and how many instructions it ran."""
        tl = self.timeline
        core = tl.program.table().per_instr(lambda i: i.core, np.int64)
        out = []
        for c in range(tl.program.cores):
            mine = core == c
            done = float(tl.ready_ns[mine].max()) if mine.any() else 0.0
            out.append({"core": c, "time_ns": round(done, 3), "instructions": int(mine.sum())})
        return out

    def to_json(self) -> dict[str, Any]:
        p = self.program
        return {
            "schema": 1,
            "kernel": p.kernel,
            "file": p.file,
            "target": p.arch.name,
            "grid": list(self.grid),
            "cycles": self.cycles,
            "time_ns": round(self.time_ns, 3),
            "bound_by": self.bound_by,
            "engines": self.engines,
            "mfu": round(self.mfu, 6),
            "tensor_floor_ns": round(self.tensor_floor_ns, 3),
            "hbm_bytes": self.hbm_bytes,
            "sbuf_peak_bytes_per_partition": p.sbuf_peak_bytes,
            "psum_peak_bytes_per_partition": p.psum_peak_bytes,
            "outputs": {
                t.name: {"shape": list(t.out_shape or t.shape), "dtype": t.dtype.name}
                for t in p.outputs
            },
            "check": None if self.check is None else self.check.to_json(),
            "notes": list(p.notes),
            "critical_path": self.critical_path.to_json(),
            "fidelity": self.fidelity.to_json(),
            "lines": self.stalls.to_json(LINES_SHOWN),
            "cores": self.cores,
            "nki_dialect": p.dialect,
        }

    def trace_events(self) -> dict[str, Any]:
        """Chrome/Perfetto trace-event JSON: a track per engine and per DMA queue, one slice
        per instruction named by the instruction and its kernel source line."""
        names = [k for k in ENGINE_KEYS if k != "dma"]
        names += [f"dma.q{q}" for q in range(int(self.program.arch.dma_queues))]
        names += [s for s in self.timeline.program.streams() if s not in names]
        tl = self.timeline
        track = self._tracks()
        names += [t for t in dict.fromkeys(track) if t not in names]
        tid = {name: i for i, name in enumerate(names)}
        events: list[dict[str, Any]] = [
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": name}}
            for name, i in tid.items()
        ]
        why = self.stalls
        rests, rules = cost_rests_on(tl)
        tags = provenance(self.program.arch)
        costs = [
            (
                {k: round(w, 4) for k, w in sorted(rule.items(), key=lambda kw: -kw[1])},
                {p: round(s, 4) for p, s in tag_shares(rule, tags).items()},
            )
            for rule in rules
        ]
        for ins, s, x, e, since, done, causes, rule in zip(
            self.timeline.program.table().instrs,
            tl.start_ns,
            tl.xfer_ns,
            tl.end_ns,
            why.span_from.tolist(),
            tl.ready_ns.tolist(),
            why.ns.round(3).tolist(),
            rests.tolist(),
        ):
            line = str(ins.span)
            args: dict[str, Any] = {
                "source": line,
                "instruction": f"#{ins.index} {write.instruction(ins)}",
            }
            if x > s:
                args["trigger_ts_us"] = float(s) / 1000.0
            # Its span by cause: from when its stream could take it until its result is
            # visible (they add up to done_ts_us - waiting_since_ts_us).
            args["waiting_since_ts_us"] = since / 1000.0
            args["done_ts_us"] = done / 1000.0
            args["causes_ns"] = {c: ns for c, ns in zip(LINE_CAUSES, causes) if ns > 0}
            # What its cost rests on: the constants of its cost rule, and their provenance.
            args["cost_rests_on"], args["cost_provenance"] = costs[rule]
            events.append(
                {
                    "name": f"{ins.spec.name} {line.rsplit('/', 1)[-1]}",
                    "ph": "X",
                    "pid": 0,
                    "tid": tid[track[ins.index]],
                    "ts": float(s) / 1000.0,
                    "dur": float(e - s) / 1000.0,
                    "args": args,
                }
            )
        events += self._critical_flows({i: tid[t] for i, t in enumerate(track)})
        events += self._counters()
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def _tracks(self) -> list[str]:
        """Each instruction's trace track: its stream; a DMA queue's transfers in flight at
        once go to lanes of it ("dma.q3", "dma.q3 #2", ...), so slices never overlap."""
        tl = self.timeline
        lanes: dict[str, list[float]] = {}  # queue -> each lane's end
        out = []
        for ins in self.timeline.program.table().instrs:
            name = ins.stream
            if ins.engine.value != "dma":
                out.append(name)
                continue
            ends = lanes.setdefault(name, [])
            s, e = float(tl.start_ns[ins.index]), float(tl.end_ns[ins.index])
            k = next((j for j, end in enumerate(ends) if end <= s + 1e-9), len(ends))
            if k == len(ends):
                ends.append(e)
            else:
                ends[k] = e
            out.append(name if k == 0 else f"{name} #{k + 1}")
        return out

    def _critical_flows(self, tid: dict[int, int]) -> list[dict[str, Any]]:
        """Flow arrows along the critical path: from each instruction waited for, at its end,
        to the one that waited, at the moment it could go on (Perfetto binds them to the
        enclosing slices). A transfer's slice starts at its trigger, before what it waits for
        may have ended: the arrow lands at that end, inside the slice, never back in time."""
        tl = self.timeline
        events: list[dict[str, Any]] = []
        for n, (a, b) in enumerate(self.critical_path.edges()):
            common = {"name": "critical path", "cat": "critical", "id": n, "pid": 0}
            left = float(tl.end_ns[a])
            landed = min(max(float(tl.start_ns[b]), left), float(tl.end_ns[b]))
            events.append({**common, "ph": "s", "tid": tid[a], "ts": left / 1e3})
            events.append({**common, "ph": "f", "bp": "e", "tid": tid[b], "ts": landed / 1e3})
        return events

    def _counters(self) -> list[dict[str, Any]]:
        """Counter tracks: DMA transfers in flight, and HBM bandwidth (GB/s) in use."""
        tl = self.timeline
        dma = [
            i
            for i, ins in enumerate(self.timeline.program.table().instrs)
            if ins.engine.value == "dma"
        ]
        changes: dict[float, list[float]] = {}
        hbm = (
            tl.hbm_bytes
            if tl.hbm_bytes is not None
            else np.zeros(len(self.timeline.program.table().instrs))
        )
        for i in dma:
            x, e = float(tl.xfer_ns[i]), float(tl.end_ns[i])
            rate = float(hbm[i]) / (e - x) if e > x else 0.0  # bytes/ns = GB/s
            changes.setdefault(x, [0.0, 0.0])
            changes.setdefault(e, [0.0, 0.0])
            changes[x][0] += 1
            changes[x][1] += rate
            changes[e][0] -= 1
            changes[e][1] -= rate
        events: list[dict[str, Any]] = []
        in_flight = bandwidth = 0.0
        for t in sorted(changes):
            in_flight += changes[t][0]
            bandwidth += changes[t][1]
            for name, value in (("DMA transfers in flight", in_flight), ("HBM GB/s", bandwidth)):
                events.append(
                    {
                        "name": name,
                        "ph": "C",
                        "pid": 0,
                        "ts": t / 1e3,
                        "args": {"value": round(max(value, 0.0), 6)},
                    }
                )
        return events

    def write_trace(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.trace_events(), f)

    def summary_rows(self) -> list[tuple[str, str, str, str]]:
        return [
            (k, str(v["instructions"]), f"{v['busy_ns']:.0f}", f"{100 * v['utilization']:.1f}%")
            for k, v in self.engines.items()
        ]
