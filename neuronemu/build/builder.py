"""Allocate tensors, emit verified instructions, and derive their dependencies and semaphores."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuronemu.build.allocator import allocate, allocate_planned
from neuronemu.build.control_flow import ControlFlow
from neuronemu.build.psum_banks import check_psum_banks
from neuronemu.build.psum_init import ZeroFills
from neuronemu.build.spill import Planner, rebuild
from neuronemu.checks.accesses import History, conflicts, record
from neuronemu.errors import (
    AllocationError,
    ConstraintError,
    InternalError,
    KernelTypeError,
    SourceSpan,
    shown,
)
from neuronemu.host.gcpolicy import quiet
from neuronemu.ir import ALL_DTYPES, REGISTERS, BufferKind, DType, Tensor, View, alias_shape
from neuronemu.jit import worker as jit_worker
from neuronemu.limits import Limits, Meter
from neuronemu.program import Instr, Loop, Program, reuse_deps
from neuronemu.program.table import shared_form
from neuronemu.program.verify import check_instr
from neuronemu.replay import journal
from neuronemu.replay.repeats import ALL_WRITTEN as _ALL_WRITTEN
from neuronemu.replay.repeats import Repeats
from neuronemu_isa import Arch, Buffer, Engine, InstrSpec

__all__ = ["Builder"]


class Builder(ControlFlow, Repeats, ZeroFills):
    def __init__(self, arch: Arch, meter: Meter | None = None):
        self.arch = arch
        self.meter = meter or Meter(Limits())
        self.max_instructions = self.meter.limits.instructions
        self.instrs: list[Instr] = []
        self.tensors: list[Tensor] = []
        self._history: dict[int, History] = {}
        self._start_replays()
        # PSUM tensors: which elements hold data (_ALL_WRITTEN once a write covered them all)
        self._written: dict[int, np.ndarray] = {}
        self._uses: dict[int, list[int]] = {}  # tensor id -> [first, last] instruction index
        # tensor id -> stream -> [first, last] instruction on that stream touching it
        self._stream_uses: dict[int, dict[str, list[int]]] = {}
        self._next_queue = 0
        self._queues: dict[tuple, int] = {}  # (source line, HBM tensors) -> its DMA queue
        # a replayed transfer's shared form -> the names of its HBM operands (None: look
        # each time)
        self._hbm_operands: dict[Any, list[str] | None] = {}
        self._clocks: dict[Engine, float] = {}  # GHz, by engine
        self._verified: dict[Any, int] = {}  # verified instruction forms -> cost in cycles
        self._registers: dict[tuple[Engine, str, int], Tensor] = {}
        self._aliases: dict[tuple[int, str], Tensor] = {}  # (root id, dtype) -> alias
        self._defaults: dict[str, dict[str, Any]] = {}  # attribute defaults by instruction
        self._flags: dict[str, tuple[str, ...]] = {}  # read-before-write flags by instruction
        self.written: set[int] = set()  # ids of tensors some instruction writes
        # SPMD: instances run in turn; their shared_hbm allocations are one tensor each.
        self._instance = 0
        # LNC2: the physical NeuronCore the current instance runs on, and how many there are.
        self._core = 0
        self.cores = 1
        # Cross-core synchronizations: per core, how many so far and their instructions.
        self._epoch: dict[int, int] = {}
        self._syncs: dict[int, list[list[Instr]]] = {}
        self._shared: list[Tensor] = []
        self._shared_ordinal = 0
        self._barrier: tuple[int, ...] = ()
        self._past_barrier: set[str] = set()
        # `with nl.no_reorder():` blocks: each instruction follows the previous one.
        self.no_reorder_depth = 0
        self._last_in_block: int | None = None
        self.names: dict[str, Instr] = {}  # instructions by their `name=`
        # Model the compiler's spills when live tiles outgrow SBUF (False: refuse instead).
        self.spill = True
        # Device loops: all of them (outermost first), the open ones with the number of
        # tensors allocated before each, and the tensors allocated in closed loops' bodies.
        self.loops: list[Loop] = []
        self._open: list[tuple[Loop, int]] = []
        self._body_local: dict[int, Loop] = {}
        # PSUM zero fills held back for the accumulation group's first matmul (psum_init)
        self._zero_fills = {}
        self.fold_psum_zero_init = True  # (a run's `passes` may turn it off)
        # `t[...] op= v` and nl.* results assigned into a tile of another dtype are computed
        # straight into the tile (the write-in-place pass; a run's `passes` may turn it off)
        self.write_in_place = True

    # Allocation ----------------------------------------------------------------------------

    def registers(
        self, engine: Engine, name: str, shape: tuple[int, int], dtype: str, span: SourceSpan
    ) -> Tensor:
        """The register file `name` of an engine, one tensor per engine."""
        key = (engine, name, self._core)
        t = self._registers.get(key)
        if t is None:
            core = f".nc{self._core}" if self._core else ""
            label = f"{name}.{engine.value}{core}"
            t = self._alloc(label, shape, ALL_DTYPES[dtype], REGISTERS, span)
            self._registers[key] = t
        return t

    def alias(self, root: Tensor, dtype: DType, span: SourceSpan) -> Tensor:
        """`root`'s bytes read as `dtype` (one alias tensor per root and dtype)."""
        if dtype.name == root.dtype.name:
            return root
        key = (root.id, dtype.name)
        t = self._aliases.get(key)
        if t is None:
            t = Tensor(
                f"{root.name}.as_{dtype.name}",
                alias_shape(root, dtype, span),
                dtype,
                root.kind_of_buffer,
                span,
                root.kind,
                base=root,
                core=root.core,
            )
            root.aliased = True
            self.tensors.append(t)
            self._aliases[key] = t
        return t

    def begin_instance(self, n: int, core: int = 0) -> None:
        """Start SPMD program instance `n` on physical core `core`: it runs after every
        instruction of the instances before it on that core (the other core runs its own
        instances alongside, ordered with this one only by what the kernel synchronizes)."""
        self.flush_zero_fills()
        self._instance = n
        self._core = core
        self.cores = max(self.cores, core + 1)
        self._shared_ordinal = 0
        if n:
            last: dict[str, int] = {}
            for ins in self.instrs:
                if ins.core == core:
                    last[ins.stream] = ins.index
            self._barrier = tuple(sorted(last.values()))
            self._past_barrier = set()

    def on_core(self, core: int) -> None:
        """Emit what follows on physical core `core` (a text program's `nc1.` streams)."""
        self.flush_zero_fills()
        self._core = core
        self.cores = max(self.cores, core + 1)

    def alloc(
        self,
        name: str,
        shape: Any,
        dtype: DType,
        kind_of_buffer: BufferKind,
        span: SourceSpan,
        kind: str = "tile",
    ) -> Tensor:
        if kind_of_buffer.name == "shared_hbm" and kind != "constant":
            t = self._alloc_shared(name, shape, dtype, kind_of_buffer, span, kind)
        else:
            t = self._alloc(name, shape, dtype, kind_of_buffer, span, kind)
        if self.meter.journals:
            journal.record(
                self.meter, ("alloc", t, (name, shape, dtype, kind_of_buffer, span, kind))
            )
        return t

    def again(self, tile: Tensor, args: tuple) -> Tensor:
        """A tile allocated as `tile` was, with `alloc`'s arguments `args` (a replayed loop
        iteration's allocation): an on-chip tile of the same shape, dtype and buffer passed
        `_alloc`'s checks already, and costs the meter nothing."""
        if not tile.on_chip:
            return self.alloc(*args)
        name, _, _, _, span, kind = args
        t = Tensor(name, tile.shape, tile.dtype, tile.kind_of_buffer, span, kind, core=self._core)
        t.buffer = buffer = tile.buffer  # (cached: as `tile`'s, the same kind of buffer)
        t.on_chip = True
        self.tensors.append(t)
        if buffer == Buffer.PSUM:
            self._written[t.id] = np.zeros(t.shape, dtype=np.bool_)
        if self.meter.journals:
            journal.record(self.meter, ("alloc", t, args))
        return t

    def _alloc_shared(
        self,
        name: str,
        shape: Any,
        dtype: DType,
        kind_of_buffer: BufferKind,
        span: SourceSpan,
        kind: str,
    ) -> Tensor:
        ordinal = self._shared_ordinal
        self._shared_ordinal += 1
        if self._instance == 0:
            t = self._alloc(name, shape, dtype, kind_of_buffer, span, kind)
            self._shared.append(t)
            return t
        same = self._shared[ordinal] if ordinal < len(self._shared) else None
        if same is None or same.shape != tuple(shape) or same.dtype != dtype:
            raise KernelTypeError(
                "SPMD program instances must allocate the same shared_hbm tensors (same "
                f"order, shapes and dtypes); instance {self._instance} differs here",
                span,
            )
        return same

    def _alloc(
        self,
        name: str,
        shape: Any,
        dtype: DType,
        kind_of_buffer: BufferKind,
        span: SourceSpan,
        kind: str = "tile",
    ) -> Tensor:
        if isinstance(shape, list):
            shape = tuple(shape)
        if (
            not isinstance(shape, tuple)
            or not shape
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
        ):
            raise KernelTypeError(
                f"tensor shape must be a non-empty tuple of ints, got {shown(shape)}", span
            )
        if any(d <= 0 for d in shape):
            raise KernelTypeError(f"tensor shape {list(shape)} has a dimension <= 0", span)
        if len(shape) == 1 and kind_of_buffer.name in ("sbuf", "psum"):
            # A partition dim alone (`nl.copy(t[:, 0])`, older kernels' `(128,)` tiles): one
            # element per partition (inferred: NKI's tiles always have their partition dim).
            shape = (shape[0], 1)
        t = Tensor(name, shape, dtype, kind_of_buffer, span, kind, core=self._core)
        name = t.label
        if not t.on_chip:  # on-chip tensors are bounded by SBUF/PSUM capacity below
            self.meter.allocate(
                t.size * dtype.itemsize, f"HBM tensor {name!r} of shape {list(shape)}", span
            )
        if t.on_chip:
            where = t.buffer.value.upper()
            if len(shape) < 2:
                raise ConstraintError(
                    f"{where} tensor {name!r} has shape {list(shape)}; on-chip tensors need a "
                    "partition dim and at least one free dim",
                    span,
                    hint=f"use shape ({shape[0]}, 1)",
                )
            if shape[0] > self.arch.tile_pmax:
                raise ConstraintError(
                    f"{where} tensor {name!r} has partition dimension {shape[0]}, which exceeds "
                    f"{self.arch.tile_pmax} (nl.tile_size.pmax)",
                    span,
                    hint=f"tile the first dimension into chunks of at most {self.arch.tile_pmax}",
                )
            limit = (
                self.arch.psum_bytes_per_partition
                if t.buffer == Buffer.PSUM
                else self.arch.sbuf_usable_bytes_per_partition
            )
            if t.bytes_per_partition > limit:
                raise AllocationError(
                    f"{where} tensor {name!r} needs {t.bytes_per_partition} bytes per partition, "
                    f"over the {limit} bytes per partition of {where} on {self.arch.name}",
                    span,
                )
        self.tensors.append(t)
        if t.buffer == Buffer.PSUM:
            self._written[t.id] = np.zeros(shape, dtype=np.bool_)
        return t

    # Emission ------------------------------------------------------------------------------

    def emit(
        self,
        spec: InstrSpec,
        engine: Engine,
        operands: dict[str, Any],
        attrs: dict[str, Any],
        span: SourceSpan,
        cycles: int | None = None,
        shared: Any = None,
    ) -> Instr:
        """Add an instruction; `cycles`: its cost, known already (a replayed loop iteration's
        instruction has the form, hence the checks and cost, of the one it repeats); `shared`:
        what a replay gives the instructions made from one traced instruction to share
        (neuronemu.replay.repeats)."""
        if self._zero_fills:
            attrs = dict(attrs)
            self._zero_fill_before(spec, operands, attrs)
        if self.meter.journals:
            recorded = ["emit", spec, engine, dict(operands), dict(attrs), span]
        if len(self.instrs) >= self.max_instructions:
            raise self.too_many_instructions(span)
        if not len(self.instrs) & 255:  # the clocks and memory, now and then
            self.meter.poll(span)
            jit_worker.expect(len(self.instrs))
        attrs = self._attr_defaults(spec) | attrs
        self._resolve_overwrite_flags(spec, operands, attrs, span)
        if cycles is None:
            cycles = self._checked_cycles(spec, engine, operands, attrs, span)
        ins = Instr(
            len(self.instrs),
            spec,
            engine,
            dict(operands),
            attrs,
            span,
            cycles=cycles,
            ns=cycles / self._clock_of(engine),
            core=self._core,
            epoch=self._epoch.get(self._core, 0),
        )
        if shared is not None:
            self._share(ins, shared)
        if engine == Engine.DMA:
            ins.queue = self._queue_of(ins)
        self._add_dependencies(ins)
        self.instrs.append(ins)
        if self.meter.journals:
            journal.record(self.meter, (*recorded, cycles))
        return ins

    def too_many_instructions(self, span: SourceSpan) -> Exception:
        """The error of the instruction that goes past the instruction budget."""
        return self.meter.over(
            "instructions",
            f"the kernel emits more than {self.max_instructions:,} instructions",
            span,
        )

    def _clock_of(self, engine: Engine) -> float:
        """An engine's clock, GHz."""
        ghz = self._clocks.get(engine)
        if ghz is None:
            ghz = self._clocks[engine] = self.arch.clock_ghz(engine.value)
        return ghz

    def _queue_of(self, ins: Instr) -> int:
        """The DMA queue of a transfer: one per source line and HBM tensor it moves, these
        taking the queues in turn, all but the last, which carries the spills (inferred: the
        compiler gives each DMA instruction of the program a queue; the iterations of a loop
        are the same instruction, and so are the calls of a helper for the same tensor)."""
        shared = shared_form(ins)
        names = self._hbm_operands.get(shared) if shared is not None else None
        if names is not None:  # (a repeat: its HBM operands are where the first one's were)
            ops = ins.operands
            hbm = [ops[name].tensor.id for name in names]  # type: ignore[union-attr]
        else:
            views = ins.views("in") + ins.views("out")
            hbm = [v.tensor.id for _, v in views if not v.tensor.on_chip]
            if shared is not None:
                self._hbm_operands[shared] = (
                    [name for name, v in views if not v.tensor.on_chip]
                    if all(not name.endswith(".index") for name, _ in views)
                    else None
                )
        key = (ins.span, tuple(hbm))
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = self._next_queue
            self._next_queue = (self._next_queue + 1) % self.spill_queue
        return q

    @property
    def spill_queue(self) -> int:
        """The queue of the copies the allocator adds (nki_perf_guide.rst: the compiler's
        spill and reload transfers run on a queue of their own, `qSyncSpillReload`)."""
        return self.arch.dma_queues - 1

    def _attr_defaults(self, spec: InstrSpec) -> dict[str, Any]:
        """Each attribute's default (None for a required one), once per instruction kind."""
        defaults = self._defaults.get(spec.name)
        if defaults is None:
            defaults = self._defaults[spec.name] = {
                a.name: None if a.required else a.default for a in spec.attrs
            }
        return defaults

    def _flag_names(self, spec: InstrSpec) -> tuple[str, ...]:
        """The attributes that say whether an output is read before it is written."""
        names = self._flags.get(spec.name)
        if names is None:
            names = self._flags[spec.name] = tuple(
                op.reads_if for op in spec.outputs if isinstance(op.reads_if, str)
            )
        return names

    def _checked_cycles(
        self,
        spec: InstrSpec,
        engine: Engine,
        operands: dict[str, Any],
        attrs: dict[str, Any],
        span: SourceSpan,
    ) -> int:
        """Verify and cost an instruction. Both depend only on operand shapes, dtypes,
        buffers and strides and on the attributes, so unrolled loops hit a memo."""
        try:
            key = (
                spec.name,
                engine,
                tuple(
                    (k, v.shape, v.dtype.name, v.buffer, v.as_pattern()[1], type(v))
                    if isinstance(v, View)
                    else (k, v)
                    for k, v in operands.items()
                ),
                tuple(attrs.items()),
            )
            hash(key)
        except TypeError:  # an unhashable attribute (a list): no memo
            key = None
        cycles = self._verified.get(key) if key is not None else None
        if cycles is None:
            check = check_instr(spec, engine, operands, attrs, self.arch, span)
            cycles = int(spec.cost(check))
            if key is not None:
                self._verified[key] = cycles
        return cycles

    def _resolve_overwrite_flags(
        self, spec: InstrSpec, operands: dict[str, Any], attrs: dict[str, Any], span: SourceSpan
    ) -> None:
        """`accumulate=None`: the first write to a PSUM location overwrites, later ones add.

        Ref: nki.isa.nc_matmul ("auto-detect based on whether this PSUM location was
        previously written").
        """
        for op in spec.outputs:
            if not isinstance(op.reads_if, str) or attrs.get(op.reads_if) is not None:
                continue
            view = operands.get(op.name)
            if not isinstance(view, View):
                attrs[op.reads_if] = False
                continue
            view = view.as_root()
            mask = self._written.get(view.tensor.id)
            if mask is None:
                attrs[op.reads_if] = False
                continue
            if mask is _ALL_WRITTEN:
                attrs[op.reads_if] = True
                continue
            region = view.np_view(mask)
            if region.all():
                attrs[op.reads_if] = True
            elif not region.any():
                attrs[op.reads_if] = False
            else:
                raise ConstraintError(
                    f"{spec.name}: {op.reads_if}=None cannot decide for {shown(view)}: part of the "
                    "region was written before and part was not",
                    span,
                    hint=f"pass {op.reads_if}=True or False explicitly",
                )

    def _add_dependencies(self, ins: Instr) -> None:
        if self._body_local:
            self._check_not_body_local(ins)
        deps = self._data_deps(ins)
        if self.cores > 1:  # nothing orders two cores but what the kernel synchronizes
            deps = {d for d in deps if self.instrs[d].core == ins.core}
        if self._barrier and ins.stream not in self._past_barrier:
            deps.update(self._barrier)
            self._past_barrier.add(ins.stream)
        if self.no_reorder_depth:
            if self._last_in_block is not None:
                deps.add(self._last_in_block)
            self._last_in_block = ins.index
        else:
            self._last_in_block = None
        deps.discard(ins.index)
        self._set_deps(ins, deps)

    def _data_deps(self, ins: Instr) -> set[int]:
        """The earlier instructions `ins` reads after or writes after (RAW, WAR, WAW), as
        the accesses so far say; records its own accesses."""
        reads = [v.as_root() for _, v in ins.views("in")]
        writes = [v.as_root() for _, v in ins.views("out")]
        return self._accessed(ins, reads, writes)

    def _accessed(self, ins: Instr, reads: list[View], writes: list[View]) -> set[int]:
        """`_data_deps` of root views `reads` and `writes`."""
        history = self._history
        if self._pending or self._unrecorded or self._deferred:
            self._settle(reads, writes)
        deps = conflicts(history, reads, writes)
        record(history, reads, writes, ins.index)
        index, stream = ins.index, None
        uses, stream_uses = self._uses, self._stream_uses
        for v in (*reads, *writes):  # each tile's live range, overall and per stream
            t = v.tensor
            use = uses.get(t.id)
            if use is None:
                uses[t.id] = [index, index]
            else:
                use[1] = index
            if t.on_chip:
                if stream is None:
                    stream = ins.stream
                per_stream = stream_uses.get(t.id)
                if per_stream is None:
                    per_stream = stream_uses[t.id] = {}
                span = per_stream.get(stream)
                if span is None:
                    per_stream[stream] = [index, index]
                else:
                    span[1] = index
        for v in writes:
            self.written.add(v.tensor.id)
            mask = self._written.get(v.tensor.id)
            if mask is not None and mask is not _ALL_WRITTEN:
                if v.is_full():  # (then no region need be looked at again)
                    self._written[v.tensor.id] = _ALL_WRITTEN
                else:
                    v.np_view(mask)[...] = True
        return deps

    def _set_deps(self, ins: Instr, deps: set[int]) -> None:
        ins.deps = tuple(sorted(deps))
        ins.waits = self._waits_of(ins, ins.deps)

    def _waits_of(self, ins: Instr, deps: tuple[int, ...]) -> tuple[int, ...]:
        """The semaphore waits of `ins` following `deps` (ascending): the latest dependency
        on each other stream."""
        latest: dict[str, int] = {}
        instrs, own = self.instrs, ins.stream
        engine, queue, core = ins.engine, ins.queue, ins.core
        for d in deps:  # (ascending: the last one per stream is the latest)
            other = instrs[d]
            if other.engine is engine and other.queue == queue and other.core == core:
                continue  # the same stream (its name is made of these)
            stream = other.stream
            if stream != own:
                latest[stream] = d
        return tuple(sorted(latest.values()))

    def add_dependency(self, consumer: Instr, producer: Instr, span: SourceSpan) -> None:
        """An explicit edge (`depends_on`, `with_schedule`): consumer runs after producer."""
        journal.refuse(self.meter, "an explicit dependency")
        if producer.index >= consumer.index:
            raise ConstraintError(
                f"instruction #{consumer.index} ({consumer.spec.name}, {consumer.span}) cannot "
                f"depend on #{producer.index} ({producer.spec.name}, {producer.span}), which "
                "comes later in program order; neuronemu keeps each engine in program order",
                span,
            )
        self._set_deps(consumer, set(consumer.deps) | {producer.index})

    # Finishing -----------------------------------------------------------------------------

    def finish(
        self,
        kernel: str,
        file: str,
        inputs: dict[str, Tensor],
        outputs: list[Tensor],
        params: dict[str, Any],
        grid: tuple[int, ...] = (1,),
        reuse_waits: bool = True,
    ) -> Program:
        """Allocate the tiles and seal the program. `reuse_waits`: make every tile that
        reuses freed bytes wait for the last accesses to their previous tile (False: the
        text form, whose waits are taken as written)."""
        # (its objects live to the run's end: neuronemu.host.gcpolicy)
        self._zero_fills.clear()  # (tiles nothing touched: their fill has no effect)
        with quiet(len(self.instrs)):
            if self._open:
                raise InternalError(f"device loop at {self._open[-1][0].span} was never closed")
            # Spills are not modelled across device loops' iterations: over capacity, refuse.
            self._pair_syncs()
            plan = self.spill and not self.loops and self.cores == 1
            poll = self.meter.check_run_time  # (spills can take a while: the run's budget holds)
            planner = Planner(self.instrs, self.written, poll=poll) if plan else None
            # (on one core: every tensor, as the list is; replays' tiles not made yet too)
            mine = self.tensors if self.cores == 1 else [t for t in self.tensors if t.core == 0]
            uses = self.tile_uses()  # (with the tiles whose live ranges replays deferred)
            if planner is None:
                allocation = allocate(mine, uses, self.instrs, self.arch)
            else:  # (a second plan, with first loads hoisted, where tiles outgrow SBUF)
                allocation, planner = allocate_planned(mine, uses, self.instrs, self.arch, planner)
            for core in range(1, self.cores):  # each core its own SBUF and PSUM
                own = allocate(
                    [t for t in self.tensors if t.core == core], uses, self.instrs, self.arch
                )
                allocation.placements.update(own.placements)
                allocation.reuses.extend(own.reuses)
                for buffer, peak in own.peak.items():
                    allocation.peak[buffer] = max(allocation.peak.get(buffer, 0), peak)
            notes = (
                rebuild(self, planner, allocation.placements)
                if planner and (planner.spills or planner.hoisted)
                else []
            )
            program = Program(
                kernel,
                file,
                self.arch,
                self.instrs,
                self.tensors,
                inputs,
                outputs,
                params,
                allocation.peak[Buffer.SBUF],
                allocation.peak[Buffer.PSUM],
                grid,
            )
            program.notes = notes
            program.loops = self.loops
            self._replays_into(program)
            program.cores = self.cores
            program.placements = allocation.placements
            check_psum_banks(program.table(), allocation.placements, self.arch)
            program.reuses = allocation.reuse_ids()
            if reuse_waits:
                program.reuse_deps = reuse_deps.pairs(
                    program.reuses, self.stream_rows(), len(self.instrs)
                )
            return program

    def spill_copy(
        self,
        spec: InstrSpec,
        dst: View,
        src: View,
        span: SourceSpan,
        attrs: dict[str, Any] | None = None,
    ) -> Instr:
        """A copy the allocator adds (a spill or a reload), on the spill queue; `rederive`
        numbers it."""
        attrs = self._attr_defaults(spec) | (attrs or {})
        operands: dict[str, Any] = {"dst": dst, "src": src}
        cycles = self._checked_cycles(spec, Engine.DMA, operands, attrs, span)
        ins = Instr(-1, spec, Engine.DMA, operands, attrs, span, cycles=cycles)
        ins.ns = cycles / self.arch.clock_ghz(Engine.DMA.value)
        ins.queue = self.spill_queue
        return ins

    def rederive(self, instrs: list[Instr], renumber: dict[int, int]) -> None:
        """Number `instrs` (the program with added instructions; `renumber` maps the old
        indices of the others) afresh and derive the dependencies again: each instruction
        keeps its old ones (data, explicit edges, barriers, no_reorder blocks), renumbered,
        and gains the data dependencies of the new program. Edges to instructions no longer
        in the program (loads moved to reloads) go."""
        self.instrs = instrs
        self._history, self._uses, self._stream_uses = {}, {}, {}
        self._start_replays()  # (the indices moved)
        for k, ins in enumerate(instrs):
            if not k & 4095:
                self.meter.check_run_time()
            old = ins.deps if ins.index >= 0 else ()
            deps = {renumber[d] for d in old if d in renumber}
            ins.index = k
            deps |= self._data_deps(ins)
            deps.discard(k)
            self._set_deps(ins, deps)

    def use_range(self, tensor_id: int) -> tuple[int, int]:
        first, last = self.tile_uses()[tensor_id]
        return first, last
