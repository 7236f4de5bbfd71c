"""The Builder's control flow: device loops (a body traced once, run by the machine) and
the points where the two cores of an LNC2 launch meet (core_barrier, sendrecv)."""

from __future__ import annotations

from typing import Any

from neuronemu.build.state import BuilderState
from neuronemu.checks.accesses import conflicts, copy_history, record
from neuronemu.errors import ConstraintError, SourceSpan
from neuronemu.ir import View
from neuronemu.program import Instr, Loop
from neuronemu.program.control import BRANCH, CORE_BARRIER, SENDRECV
from neuronemu.replay import journal
from neuronemu_isa import Engine

__all__ = ["ControlFlow"]

# The order in which a device loop's branches appear (the streams' order).
_ENGINE_ORDER = (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD, Engine.SYNC)


class ControlFlow(BuilderState):
    """Mixed into Builder (whose state it uses: instrs, tensors, loops, the access history)."""

    # Between the cores ----------------------------------------------------------------------

    def core_barrier(self, data: View, engine: Engine, span: SourceSpan) -> None:
        """`nisa.core_barrier`: this core arrives after all it did so far; it goes on (a
        `wait` every stream's next instruction follows) once the other core arrived too."""
        self._no_sync_in_loop("core_barrier", span)
        journal.refuse(self.meter, "core_barrier")
        named = {"data": data.tensor.name}
        arrive = self.emit(CORE_BARRIER, engine, {}, {"phase": "arrive"} | named, span)
        self._fence(arrive)
        self._next_epoch()
        wait = self.emit(CORE_BARRIER, engine, {}, {"phase": "wait"} | named, span)
        self._set_deps(wait, set(wait.deps) | {arrive.index})
        self._syncs.setdefault(self._core, []).append([arrive, wait])
        self._barrier, self._past_barrier = (wait.index,), {wait.stream}

    def sendrecv(self, src: View, dst: View, attrs: dict[str, Any], span: SourceSpan) -> None:
        """`nisa.sendrecv`: this core's instruction receives the peer's `src` into `dst`
        (the operand is swapped in when the program is sealed and the pair is known)."""
        self._no_sync_in_loop("sendrecv", span)
        journal.refuse(self.meter, "sendrecv")
        ins = self.emit(SENDRECV, Engine.DMA, {"src": src, "dst": dst}, attrs, span)
        self._next_epoch()
        self._syncs.setdefault(self._core, []).append([ins])

    def _no_sync_in_loop(self, name: str, span: SourceSpan) -> None:
        if self._open:
            raise ConstraintError(
                f"{name} inside a device loop is not supported by neuronemu yet", span
            )

    def _fence(self, ins: Instr) -> None:
        """`ins` follows the last instruction of every stream of its core."""
        last: dict[str, int] = {}
        for other in self.instrs[: ins.index]:
            if other.core == ins.core:
                last[other.stream] = other.index
        self._set_deps(ins, set(ins.deps) | set(last.values()))

    def _next_epoch(self) -> None:
        self._epoch[self._core] = self._epoch.get(self._core, 0) + 1

    def _pair_syncs(self) -> None:
        """Match the Nth synchronization of each core with the other core's Nth, and put
        the program in an order that runs them where they meet: per epoch, both cores'
        work, then the arrivals (and exchanges), then the waits. Indices change."""
        if not self._syncs:
            return
        first = next(iter(self._syncs.values()))[0][0]
        calls = [[s[0].spec.name for s in self._syncs.get(c, [])] for c in range(self.cores)]
        if self.cores == 1:
            if any(s[0].spec is SENDRECV for s in self._syncs.get(0, [])):
                raise ConstraintError(
                    "sendrecv needs a logical NeuronCore of two physical cores: launch the "
                    "kernel on two (kernel[2](...), or a grid dim nl.nc(2)) on trn2/trn3",
                    next(s[0] for s in self._syncs[0] if s[0].spec is SENDRECV).span,
                )
            return  # a barrier with no partner running: nothing to wait for
        self._replays_moved()  # (the indices change)
        self.settle_all()  # (as the live ranges by tile below)
        if calls[0] != calls[1]:
            raise ConstraintError(
                f"the cores do not meet: core 0 calls {calls[0]} and core 1 calls {calls[1]} "
                "(the Nth core_barrier/sendrecv of one core waits for the Nth of the other)",
                first.span,
            )
        for a, b in zip(self._syncs[0], self._syncs[1]):
            if a[0].spec is CORE_BARRIER:
                for wait, arrive in ((a[1], b[0]), (b[1], a[0])):
                    wait.deps = tuple(sorted(set(wait.deps) | {arrive.index}))
            else:
                x, y = a[0], b[0]
                x.operands["src"], y.operands["src"] = y.operands["src"], x.operands["src"]
                for ins in (x, y):  # each now reads the other core's tile: a use of it
                    tid = ins.operands["src"].as_root().tensor.id  # type: ignore[union-attr]
                    use = self._uses[tid]
                    use[0], use[1] = min(use[0], ins.index), max(use[1], ins.index)
                    span = self._stream_uses.setdefault(tid, {}).setdefault(
                        ins.stream, [ins.index, ins.index]
                    )
                    span[0], span[1] = min(span[0], ins.index), max(span[1], ins.index)
                joint = set(x.deps) | set(y.deps)
                x.deps, y.deps = tuple(sorted(joint)), tuple(sorted(joint))
                x.attrs["pair"], y.attrs["pair"] = y.index, x.index
        # Whatever followed one of an exchange's pair follows both (the peer reads src).
        peer = {
            s[0].index: p[0].index
            for c, other in ((0, 1), (1, 0))
            for s, p in zip(self._syncs[c], self._syncs[other])
            if s[0].spec is SENDRECV
        }
        for ins in self.instrs:
            extra = {peer[d] for d in ins.deps if d in peer} - {ins.index}
            if extra:
                ins.deps = tuple(sorted(set(ins.deps) | extra))

        def slot(ins: Instr) -> tuple[int, int, int]:
            if ins.spec is SENDRECV or (
                ins.spec is CORE_BARRIER and ins.attrs["phase"] == "arrive"
            ):
                return (ins.epoch, 1, ins.index)
            if ins.spec is CORE_BARRIER:
                return (ins.epoch, -1, ins.index)
            return (ins.epoch, 0, ins.index)

        order = sorted(self.instrs, key=slot)
        new = {ins.index: k for k, ins in enumerate(order)}
        for k, ins in enumerate(order):
            ins.index = k
        self.instrs = order
        for ins in order:
            if ins.spec is SENDRECV and ins.attrs.get("pair", -1) in new:
                ins.attrs["pair"] = new[ins.attrs["pair"]]
        for ins in order:
            deps = {new[d] for d in ins.deps}
            if ins.spec is SENDRECV and ins.attrs["pair"] < ins.index:
                deps.add(ins.attrs["pair"])  # the pair moves at once: one after the other here
            self._set_deps(ins, deps)
        for ins in order:
            if ins.carried:
                ins.carried = tuple(sorted(new[d] for d in ins.carried))
        for loop in self.loops:
            loop.begin, loop.end = new[loop.begin], new[loop.end - 1] + 1
        tables: list[dict[Any, list[int]]] = [self._uses, *self._stream_uses.values()]
        for table in tables:
            for use in table.values():
                use[0], use[1] = new[use[0]], new[use[1]]

    # Device loops --------------------------------------------------------------------------

    def begin_loop(self, loop: Loop) -> Loop:
        """Open a device loop whose body is the instructions emitted until `end_loop`."""
        journal.refuse(self.meter, "a device loop")
        if self.no_reorder_depth:
            raise ConstraintError(
                "a device loop cannot be inside `with nl.no_reorder()` (NKI Loops); put the "
                "no_reorder block inside the loop's body instead",
                loop.span,
            )
        self.flush_zero_fills()
        loop.begin = len(self.instrs)
        self.loops.append(loop)
        self._open.append((loop, len(self.tensors)))
        return loop

    def end_loop(self, cond: View | None = None) -> Loop:
        """Close the innermost device loop: each sequencer with instructions in the body
        ends it with a branch; the body's instructions gain the dependencies on the
        previous iteration, and its tiles stay allocated for the whole loop."""
        own = {t.id for t in self.tensors[self._open[-1][1] :]}
        self.drop_zero_fills(own)
        self.flush_zero_fills()
        loop, tensors_before = self._open.pop()
        if cond is not None:
            loop.cond = cond
        body = self.instrs[loop.begin :]
        engines = {Engine.SYNC if i.engine == Engine.DMA else i.engine for i in body}
        compared = loop.cond if loop.kind != "for" else loop.upper
        for engine in sorted(engines or {Engine.SYNC}, key=_ENGINE_ORDER.index):
            operands = {"cond": compared} if isinstance(compared, View) else {}
            self.emit(
                BRANCH,
                engine,
                operands,
                {"loop": self.loops.index(loop), "kind": loop.kind},
                loop.span,
            )
        loop.end = len(self.instrs)
        touched = self._extend_uses(loop)
        if loop.kind in ("for", "while"):
            self._carry(self.instrs[loop.begin : loop.end], touched)
        shared = {t.id for t in self._shared}  # an SPMD instance's shared_hbm: one tensor
        for t in self.tensors[tensors_before:]:
            if t.id not in shared:
                self._body_local[t.id] = loop
        return loop

    def adopt_loop(self, loop: Loop) -> None:
        """A device loop over instructions already emitted (a text program's `.loop`): its
        tiles stay allocated for the whole loop."""
        self.loops.append(loop)
        self._extend_uses(loop)

    def _extend_uses(self, loop: Loop) -> set[int]:
        """Keep every tensor the body touches allocated for the whole loop (a body's tiles
        are allocated once and reused by every iteration, nki-dynamic-loops.rst)."""
        body = self.instrs[loop.begin : loop.end]
        touched = {v.as_root().tensor.id for i in body for _, v in i.views("in") + i.views("out")}
        for tid in touched:
            use = self._uses[tid]
            use[0], use[1] = min(use[0], loop.begin), max(use[1], loop.end - 1)
        return touched

    def abandon_loop(self) -> None:
        """Forget the innermost open loop (its body raised an error while tracing)."""
        loop, _ = self._open.pop()
        self.loops.remove(loop)

    def _carry(self, body: list[Instr], touched: set[int]) -> None:
        """Replay the body after itself: what each instruction then conflicts with among the
        body's later (or its own) instructions comes from the previous iteration."""
        history = {tid: copy_history(h) for tid, h in self._history.items() if tid in touched}
        for ins in body:
            reads = [v.as_root() for _, v in ins.views("in")]
            writes = [v.as_root() for _, v in ins.views("out")]
            found = conflicts(history, reads, writes)
            record(history, reads, writes, ins.index)
            carried = {d for d in found if d >= ins.index}
            if carried - set(ins.carried):
                ins.carried = tuple(sorted(set(ins.carried) | carried))

    def _check_not_body_local(self, ins: Instr) -> None:
        for _, v in ins.views("in") + ins.views("out"):
            loop = self._body_local.get(v.as_root().tensor.id)
            if loop is not None:
                raise ConstraintError(
                    f"{ins.spec.name}: {v.tensor.name} was allocated inside the device loop at "
                    f"{loop.span}; a tensor declared in a loop's body cannot be used after the "
                    "loop (NKI Loops)",
                    ins.span,
                    hint="allocate it before the loop and write it inside",
                )
