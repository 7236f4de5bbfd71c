"""Cycle-approximate timing: schedule a program's streams and summarize engine activity.

Reads only shapes and costs, never values, so results cannot depend on timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuronemu.ir import IndirectView, View
from neuronemu.jit import compiled as _jit
from neuronemu.jit import worker as jit_worker
from neuronemu.program import Program
from neuronemu.program.table import Table, by_form, distinct, operand_form, shared_form
from neuronemu.program.verify import instr_check, operand_info
from neuronemu_isa import Arch, Buffer, Engine
from neuronemu_isa import dma as _dma

__all__ = ["Timeline", "schedule", "schedule_arrays", "ENGINE_KEYS", "LATENCY_BOUND_BELOW"]

ENGINE_KEYS = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")
# Inferred: when even the busiest engine is busy less than this fraction of the run, the
# kernel is bound by dependency latency (semaphores, DMA fixed cost), not by an engine.
LATENCY_BOUND_BELOW = 0.5

_ENGINE_INDEX = {Engine(k): i for i, k in enumerate(ENGINE_KEYS)}


@dataclass
class Timeline:
    """Per-instruction times (ns) and the per-engine summary derived from them.

    `start_ns`: issue (for DMA, the trigger); `xfer_ns`: when the work itself starts (for DMA,
    when its engines begin moving bytes, after the fixed latency); `end_ns`: the engine or
    queue is free again; `ready_ns`: the results are visible to other engines.
    """

    program: Program
    start_ns: np.ndarray
    end_ns: np.ndarray
    xfer_ns: np.ndarray
    ready_ns: np.ndarray
    engine_index: np.ndarray  # index into ENGINE_KEYS, per instruction
    hbm_bytes: np.ndarray | None = None
    # The scheduler's inputs (schedule_arrays), kept for analyses of the same run.
    arrays: dict[str, np.ndarray] | None = field(default=None, repr=False)
    _busy: dict[str, float] = field(default_factory=dict, repr=False)
    _active: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def total_ns(self) -> float:
        return float(self.ready_ns.max()) if self.ready_ns.size else 0.0

    def busy_ns(self) -> dict[str, float]:
        """Time each engine computes; for DMA, the union of transfer phases (the time any DMA
        engine moves bytes or pays its packets' overhead), not the fixed trigger latency."""
        if self._busy:
            return dict(self._busy)
        busy = {k: 0.0 for k in ENGINE_KEYS}
        dur = self.end_ns - self.xfer_ns
        sums = np.bincount(self.engine_index, weights=dur, minlength=len(ENGINE_KEYS))
        for k, v in zip(ENGINE_KEYS, sums):
            busy[k] = float(v)
        is_dma = self.engine_index == ENGINE_KEYS.index("dma")
        gap = self.arrays["gap_ns"][is_dma] if self.arrays is not None else 0.0
        busy["dma"] = _union_length(self.xfer_ns[is_dma], self.end_ns[is_dma] + gap)
        self._busy = busy
        return dict(busy)

    def active_ns(self) -> dict[str, float]:
        """Time each engine has an instruction in flight, from its issue until its result is
        committed (the union over its instructions): what the Neuron profiler reports as an
        engine's active time, where an instruction lasts its pipeline latency beyond its
        initiation interval (nki_perf_guide.rst fig16, fig18). A DMA transfer is in flight
        from its trigger (its fixed latency, the descriptors' processing, included) until
        its last packet's overhead is done; `busy_ns` counts only the bytes moving."""
        if self._active:
            return dict(self._active)
        is_dma = self.engine_index == ENGINE_KEYS.index("dma")
        gap = self.arrays["gap_ns"] if self.arrays is not None else 0.0
        begin = self.start_ns
        finish = np.where(is_dma, self.end_ns + gap, self.ready_ns)
        for k, key in enumerate(ENGINE_KEYS):
            mine = self.engine_index == k
            self._active[key] = _union_length(begin[mine], finish[mine])
        return dict(self._active)

    def bound_by(self) -> str:
        """The engine busy the largest fraction of the run, or "latency" when none is busy
        at least LATENCY_BOUND_BELOW of it."""
        total = self.total_ns
        if total <= 0:
            return "latency"
        busy = self.busy_ns()
        candidates = {k: v for k, v in busy.items() if k != "sync"}
        top = max(candidates, key=lambda k: candidates[k])
        return top if candidates[top] / total >= LATENCY_BOUND_BELOW else "latency"


def _union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    if not starts.size:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    # A new run starts where an interval begins after everything before it has ended.
    new = np.empty(s.size, dtype=np.bool_)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    run_start = s[new]
    run_end = np.append(e[np.flatnonzero(new)[1:] - 1], e[-1])
    return float((run_end - run_start).sum())


def schedule_arrays(program: Program, base: dict | None = None) -> dict[str, np.ndarray]:
    """The scheduler's inputs: streams, kinds, costs, latencies, dependencies (CSR), DMA
    engine ranges, HBM bytes, DMA packet overheads and NC-v2 port masks, plus the `machine`
    constants. `base`: `program.table().arrays()`, if made."""
    arch, table = program.arch, program.table()
    base = table.arrays() if base is None else base
    instrs = table.instrs
    n = len(instrs)
    engine = table.per_instr(lambda i: _ENGINE_INDEX[i.engine], np.int64)
    # What the engine alone decides: kind, latency, and what a dependent on the same stream
    # waits after the end (its chain).
    semaphore = arch.cost_semaphore_ns
    kinds = np.full(len(ENGINE_KEYS), _jit.KIND_COMPUTE, dtype=np.int64)
    latencies = np.zeros(len(ENGINE_KEYS), dtype=np.float64)
    chains = np.zeros(len(ENGINE_KEYS), dtype=np.float64)
    for e in (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD, Engine.SYNC):
        latencies[_ENGINE_INDEX[e]] = _compute_latency_ns(arch, e)
        # nki_perf_guide.rst fig16: a dependent instruction on the same engine also waits
        # on that engine's semaphore.
        chains[_ENGINE_INDEX[e]] = latencies[_ENGINE_INDEX[e]] + semaphore
    # Same-engine dependents (PSUM accumulation groups) follow in the pipeline.
    kinds[_ENGINE_INDEX[Engine.TENSOR]] = _jit.KIND_TENSOR
    latencies[_ENGINE_INDEX[Engine.TENSOR]] = arch.cost_matmul_latency_cycles / arch.clock_ghz(
        "tensor"
    )
    # Completion is a semaphore the DMA engines post; nothing lags behind it.
    kinds[_ENGINE_INDEX[Engine.DMA]] = _jit.KIND_DMA
    chains[_ENGINE_INDEX[Engine.DMA]] = semaphore
    kind, latency, chain = kinds[engine], latencies[engine], chains[engine]
    dma_lo = np.zeros(n, dtype=np.int64)
    dma_hi = np.zeros(n, dtype=np.int64)
    hbm = np.zeros(n, dtype=np.float64)
    gap = np.zeros(n, dtype=np.float64)
    transfers = np.flatnonzero(engine == _ENGINE_INDEX[Engine.DMA])
    if len(transfers):
        # Each transfer's row, worked out for those whose repeats do not share it (whose
        # SBUF operands move across partitions) and those that repeat none.
        source = table.base_where(_sbuf_names)
        own = transfers[source[transfers] == transfers]
        form_of = _TransferForms(program)
        rows = np.zeros((n, 4), dtype=np.float64)
        made = [form_of(instrs[i]) for i in own.tolist()]
        rows[own] = np.array(made, dtype=np.float64).reshape(-1, 4)
        row = rows[source[transfers]]
        cores = table.per_instr(lambda i: i.core, np.int64)[transfers]
        # (each physical core has its own DMA engines)
        dma_lo[transfers] = row[:, 0] + cores * arch.dma_queues
        dma_hi[transfers] = dma_lo[transfers] + row[:, 1]
        hbm[transfers], gap[transfers] = row[:, 2], row[:, 3]
    pre = _preload_ns(table, np.flatnonzero(engine == _ENGINE_INDEX[Engine.TENSOR]))
    ports = np.zeros(n, dtype=np.int64)
    if arch.cost_port_conflicts:
        masks: dict[Any, int] = {}  # port masks, by the form a loop's repeats share
        for i in np.flatnonzero(kind == _jit.KIND_COMPUTE).tolist():
            ins = instrs[i]
            shared = shared_form(ins)
            if shared is None:
                ports[i] = _port_mask(ins)
            else:
                mask = masks.get(shared)
                if mask is None:
                    mask = masks[shared] = _port_mask(ins)
                ports[i] = mask
    # An LNC2 launch: two physical cores, each with its DMA engines and its share of the
    # chip's HBM bandwidth (the shares pooled: inferred, no document says how two cores'
    # traffic shares HBM).
    n_cores = program.cores
    machine = np.array(
        [
            arch.dma_fixed_ns,
            arch.cost_semaphore_ns,
            arch.dma_hbm_bytes_per_ns * n_cores,
            arch.dma_queues * n_cores,
            arch.cost_tensor_throttle_floor,
            arch.cost_tensor_throttle_ramp_ns,
            arch.cost_tensor_throttle_rearm_idle_ns,
            arch.dma_issue_ns,
            arch.dma_queue_depth,
        ],
        dtype=np.float64,
    )
    return {
        "stream": base["stream"],
        "kind": kind,
        "cost_ns": base["cost_ns"],
        "latency_ns": latency,
        "chain_ns": chain,
        "dep_indptr": base["dep_indptr"],
        "dep_indices": base["dep_indices"],
        "n_streams": int(base["n_streams"]),
        "dma_lo": dma_lo,
        "dma_hi": dma_hi,
        "hbm_bytes": hbm,
        "gap_ns": gap,
        "pre_ns": pre,
        "port_mask": ports,
        "machine": machine,
        "engine_index": engine,  # (by ENGINE_KEYS: the Timeline's)
    }


SCHEDULER_ARGS = (
    "stream",
    "kind",
    "cost_ns",
    "latency_ns",
    "chain_ns",
    "dep_indptr",
    "dep_indices",
    "n_streams",
    "dma_lo",
    "dma_hi",
    "hbm_bytes",
    "gap_ns",
    "pre_ns",
    "port_mask",
    "machine",
)


def _compute_latency_ns(arch: Arch, engine: Engine) -> float:
    """Time after a Vector/Scalar/GpSimd instruction ends until its output is committed.

    trainium_inferentia2_arch.rst: ~100 cycles static overhead when an instruction depends on
    the previous one, and ~60 cycles per SBUF/PSUM access request; together they give the
    159 ns duration of a 1-element ScalarE activation in nki_perf_guide.rst fig16 (inferred).
    """
    cycles = arch.cost_static_overhead_cycles + arch.cost_access_overhead_cycles
    return cycles / arch.clock_ghz(engine.value)


def _preload_ns(table: Table, rows: np.ndarray) -> np.ndarray:
    """Per instruction, the time the Tensor engine takes to load its preloaded operand (its
    LoadStationary): 0 but for the Tensor engine's instructions `rows` (in program order),
    and for those whose core's previous one on that engine loaded the same elements of the
    same tensor. The program table asks only the instructions that stand for others."""
    arch, instrs = table.arch, table.instrs
    pre = np.zeros(table.n, dtype=np.float64)
    if not len(rows):
        return pre
    # the tensor each preloads (-1: none)
    tensor = table.operand_tensors(rows, lambda ins: ins.spec.preloaded)
    costs: dict[Any, float] = {}  # by instruction form

    def cost(ins: Any) -> float:
        work = ins.spec.preload_cost
        if work is None or ins.engine != Engine.TENSOR:
            return 0.0
        return by_form(ins, costs, lambda: work(instr_check(ins, arch)) / arch.clock_ghz("tensor"))

    pre[rows] = table.per_instr(cost, np.float64, table.form_base)[rows]
    pre[tensor < 0] = 0.0
    # The same tensor as the core's previous one on the engine: the same elements too?
    # (their views made only then: they cost)
    core = table.per_instr(lambda i: i.core, np.int64)[rows]
    for c in distinct(core).tolist():
        mine = rows[core == c]
        after = np.flatnonzero((tensor[mine[1:]] == tensor[mine[:-1]]) & (tensor[mine[1:]] >= 0))
        for a, b in zip(mine[after].tolist(), mine[after + 1].tolist()):
            was, now = instrs[a], instrs[b]
            held = was.operand(was.spec.preloaded).as_pattern()
            if held == now.operand(now.spec.preloaded).as_pattern():
                pre[b] = 0.0
    return pre


def _dma_key(srcs: list[View], dst: View, shared: Any = None) -> tuple | None:
    """What a transfer's engines, HBM bytes and packets depend on: its operands' forms (or
    the form the repeats of a replayed loop's transfer share), and the SBUF side's first
    partition (None: not memoized)."""
    key: list = [shared]
    for v in (*srcs, dst):
        form = () if shared is not None and not isinstance(v, IndirectView) else operand_form(v)
        if form is None:
            return None
        key.append((form, v.bounds()[0][0] if v.buffer == Buffer.SBUF else 0))
    return tuple(key)


class _TransferForms:
    """A transfer's first DMA engine, engine count, HBM bytes and packet overhead
    (`_dma_form`), worked out once per form: per `_dma_key` (its operands' forms) or, for the
    repeats of a replayed transfer, per `_repeat_key` (the form they share and where their
    SBUF operands start). (The repeats that share their base's are not asked: `_still`.)"""

    def __init__(self, program: Program):
        self.arch = program.arch
        self.forms: dict[tuple, tuple[int, int, float, float]] = {}
        # a replayed transfer's form -> its SBUF operands, whose first partition its key adds
        self.recipes: dict[Any, list[str]] = {}

    def __call__(self, ins: Any) -> tuple[int, int, float, float]:
        shared = shared_form(ins)
        if shared is None:
            return self._made(ins, None)
        recipe = self.recipes.get(shared)
        if recipe is not None:  # a repeat of a replayed transfer: its key at once
            key = _repeat_key(shared, ins, recipe)
            form = self.forms.get(key)
            if form is None:
                form = self._made(ins, key)
        else:
            form = self._made(ins, None)
        return form

    def _made(self, ins: Any, key: tuple | None) -> tuple[int, int, float, float]:
        shared, forms = shared_form(ins), self.forms
        srcs, dst = _transfer_sides(ins.operands)
        if key is None:
            key = _dma_key(srcs, dst, shared)
            form = forms.get(key) if key is not None else None
            if shared is not None and key is not None:
                self.recipes[shared] = _sbuf_operands(ins.operands, srcs, dst)
                key = _repeat_key(shared, ins, self.recipes[shared])
                form = forms.get(key)
            if form is not None:
                return form
        # (a form a replayed transfer shares is made per replay: transfers of the same
        # operand forms, made in other replays, share their answer too)
        own = _dma_key(srcs, dst) if shared is not None else None
        form = forms.get(own) if own is not None else None
        if form is None:
            form = _dma_form(self.arch, srcs, dst)
            if own is not None:
                forms[own] = form
        if key is not None:
            forms[key] = form
        return form


def _sbuf_names(ins: Any) -> list[str]:
    """A transfer's SBUF operands (the repeats of a replayed transfer share its `_dma_form`
    where these start on the same partition in every repeat); nothing else's."""
    if ins.engine != Engine.DMA:
        return []
    srcs, dst = _transfer_sides(ins.operands)
    return _sbuf_operands(ins.operands, srcs, dst)


def _sbuf_operands(ops: dict[str, Any], srcs: list[View], dst: View) -> list[str]:
    """The names of a transfer's SBUF operands, among `srcs` and `dst` (`_dma_key`: what
    the repeats of one replayed transfer differ by is where these start)."""
    mine = {id(v) for v in (*srcs, dst) if v.buffer == Buffer.SBUF}
    return [k for k, v in ops.items() if id(v) in mine]


def _transfer_sides(ops: dict[str, Any]) -> tuple[list[View], View]:
    """A transfer's sources and destination (dma_compute has src0, src1, ...; device_print
    has no destination on chip: its source stands for it)."""
    srcs = [v for k, v in ops.items() if k.startswith("src") and isinstance(v, View)]
    return srcs, ops.get("dst", srcs[0])


def _repeat_key(shared: Any, ins: Any, sbuf: list[str]) -> tuple:
    """`_dma_key` of a repeat of a replayed transfer, given its SBUF operands' names."""
    return (shared, *[ins.start_of(k) for k in sbuf])


def _dma_form(arch: Arch, srcs: list[View], dst: View) -> tuple[int, int, float, float]:
    """A transfer's first DMA engine, engine count, HBM bytes and packet overhead (ns)."""
    src = srcs[0]
    infos = operand_info("src", src), operand_info("dst", dst)
    lo, count = _dma_engines(arch, src, dst, _dma.engines_used(arch, *infos))
    hbm = _dma.hbm_bytes(*infos) + sum(
        operand_info("src", s).nbytes for s in srcs[1:] if s.buffer == Buffer.HBM
    )
    gap = _dma.packet_overhead_ns(arch, *infos)
    return lo, count, float(hbm), float(gap)


def _dma_engines(arch: Arch, src, dst, count: int) -> tuple[int, int]:
    """First DMA engine and engine count: the partition group of the SBUF side's first
    partition (nki-dma-overview.rst: engine e moves partitions [8e, 8e + 8))."""
    sbuf = [v for v in (dst, src) if v.buffer == Buffer.SBUF]
    first = sbuf[0].bounds()[0][0] // arch.dma_partitions_per_engine if sbuf else 0
    first = min(first, arch.dma_queues - count)
    return int(first), int(count)


def _port_mask(ins) -> int:
    """NC-v2 port use (trainium_inferentia2_arch.rst): Vector and GpSimd share SBUF access;
    Vector and Scalar share PSUM access."""
    buffers = {v.buffer for _, v in ins.views("in") + ins.views("out")}
    mask = 0
    if ins.engine in (Engine.VECTOR, Engine.GPSIMD) and Buffer.SBUF in buffers:
        mask |= _jit.PORT_SBUF
    if ins.engine in (Engine.VECTOR, Engine.SCALAR) and Buffer.PSUM in buffers:
        mask |= _jit.PORT_PSUM
    return mask


# Programs up to this many instructions are scheduled by the jitted scheduler's plain twin
# (the same results, tested): importing Numba and loading the cached scheduler take ~0.6 s,
# which the twin's 12-24 us per instruction take only past ~25,000 instructions (measured:
# 9,280 instructions 0.11 s, 99,328 2.4 s; 2 cores).
JIT_ABOVE = 20_000


def schedule(program: Program, use_jit: bool = True, base: dict | None = None) -> Timeline:
    """`base`: `program.table().arrays()`, if made."""
    a = schedule_arrays(program, base)
    jit = use_jit and len(program.table().instrs) > jit_worker.jit_above(JIT_ABOVE, "schedule")
    fn = _jit.schedule if jit else _jit._schedule_py
    start, xfer, end = fn(*(a[k] for k in SCHEDULER_ARGS))
    return Timeline(
        program, start, end, xfer, end + a["latency_ns"], a["engine_index"], a["hbm_bytes"], a
    )
