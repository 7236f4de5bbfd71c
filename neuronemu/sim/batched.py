"""Matmul chains run as one GEMM on the kernel inputs their operands were loaded from.

A tiled matmul accumulates each output tile over K in a PSUM bank: a chain of nc_matmul
instructions into one region, each multiplying a [K, M] stationary tile by a [K, N] moving
tile that a DMA has just loaded (or loaded once and kept) from the kernel's inputs. Run one by
one, each step converts its tiles to fp32, multiplies 128 x 128 x 512 and adds into PSUM:
several times what NumPy takes for the whole product. Here such a chain is found before the
run, and its sum is computed at its last step as one product of the stacked input boxes
(contiguous rows of one input each: the K tiles in order), with the steps before it and the
loads that only fed them left out. Chains with the same stationary and moving rows whose
columns tile a grid (a tiled matmul's output tiles) are one product, in bands that fit
GROUP_BYTES.

The values are the steps' (the same products, summed in fp32, in another order: the last
bits can differ, and more where partial sums cancel, docs/limitations.md; a product that is
not finite is summed step by step instead). Single products (a chain of one step) are taken
where they join a group. A chain is taken only where nothing else touches its PSUM tile
between its first and last step, and every operand is a plain box of a tile whose last
writer was a plain copy of a plain box of an input no instruction writes (the bytes it came
from hold still); a load is left out only when every read of what it wrote is by such a
step. Anything else runs as it is (`neuronemu.sim.functional.execute`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuronemu.ir import Tensor, View
from neuronemu.limits import allocate, spare_bytes
from neuronemu.program import Instr, Program
from neuronemu_isa import Buffer
from neuronemu_isa.numerics import FP32_EXACT

__all__ = ["Batched", "plan"]

# Operand dtypes whose values fp32 holds exactly (the steps read them converted, or as they
# are): not tfloat32, which the Tensor engine rounds.
_OPERAND_DTYPES = FP32_EXACT | {"float32"}
# The most bytes of one product a group of chains computes at once (else each chain alone).
# Inferred: a [128, 4096] fp32 row block is 2 MiB.
GROUP_BYTES = 64 * 2**20
# An input is converted to fp32 whole once, kept for the run, up to this many fp32 bytes
# (a 4096 x 4096 input is 64 MiB); a larger one is converted box by box. Inferred.
WHOLE_INPUT_BYTES = 256 * 2**20


def _box2(view: Any) -> tuple[int, int, int, int] | None:
    """A plain 2-D box of a root tensor (every element, in order): (r0, r1, c0, c1)."""
    if type(view) is not View:
        return None
    t = view.tensor
    if t.base is not None or len(t.shape) != 2 or view.kept != (0, 1):
        return None
    (r0, r1, rs), (c0, c1, cs) = view.box
    if rs != 1 or cs != 1 or r1 <= r0 or c1 <= c0:
        return None
    return r0, r1, c0, c1


@dataclass
class _Load:
    """A plain dma_copy from an input into a tile: where the tile's box came from."""

    index: int
    tile: int  # the tile's id
    whole: bool  # it writes the whole tile
    src: Tensor
    src_box: tuple[int, int, int, int]
    dst_box: tuple[int, int, int, int]
    readers: list[Any] = field(default_factory=list)  # the chains whose steps read it
    needed: bool = False  # something else reads what it wrote: it runs

    def source(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
        """The input box a box of the tile holds (inside what this load wrote), or None."""
        r0, r1, c0, c1 = box
        d0, d1, e0, e1 = self.dst_box
        if not (d0 <= r0 and r1 <= d1 and e0 <= c0 and c1 <= e1):
            return None
        s0, _, t0, _ = self.src_box
        return s0 + r0 - d0, s0 + r1 - d0, t0 + c0 - e0, t0 + c1 - e0


@dataclass
class _Chain:
    dst: View
    dst_box: tuple[int, int, int, int]
    adds: bool  # its first step adds to what the region held
    stationary: tuple[Tensor, tuple[int, int, int, int]]  # input, stacked box
    moving: tuple[Tensor, tuple[int, int, int, int]]
    steps: list[int] = field(default_factory=list)
    group: _Group | None = None
    # each step's input boxes, for `Batched._stepwise`: ((input, box), (input, box))
    each: list[tuple[tuple, tuple]] = field(default_factory=list)

    def extend(self, s: tuple, m: tuple) -> bool:
        """Take a step reading input boxes `s` and `m` (input, box): the next K rows of
        both stacks, the same columns."""
        (st, sb), (mt, mb) = self.stationary, self.moving
        if s[0] is not st or m[0] is not mt:
            return False
        k = s[1][1] - s[1][0]
        if (
            s[1][0] != sb[1]
            or s[1][2:] != sb[2:]
            or m[1][0] != mb[1]
            or m[1][2:] != mb[2:]
            or m[1][1] - m[1][0] != k
        ):
            return False
        self.stationary = (st, (sb[0], s[1][1], sb[2], sb[3]))
        self.moving = (mt, (mb[0], m[1][1], mb[2], mb[3]))
        return True


@dataclass
class _Group:
    """Chains whose products are blocks of one: stationary and moving stacks of the same
    rows of one input each, their columns tiling [s0, s1) and [c0, c1)."""

    chains: list[_Chain]
    s0: int
    s1: int
    c0: int
    c1: int
    product: np.ndarray | None = None
    left: int = 0  # chains not written yet


class Batched:
    """What `plan` found: the instructions the run leaves out (`skip`), and per chain's last
    step its value (`result`)."""

    def __init__(self, chains: list[_Chain], loads: list[_Load], arrays: dict[int, np.ndarray]):
        self.ends = {c.steps[-1]: c for c in chains}
        self.skip = {i for c in chains for i in c.steps[:-1]}
        self.skip.update(load.index for load in loads)
        self._arrays = arrays  # the inputs' arrays, by tensor id
        self._fp32: dict[int, np.ndarray] = {}

    def result(self, i: int, mem: Any) -> tuple[View, np.ndarray]:
        """The chain ending at instruction `i`: its region and what the steps leave there.
        Where the product is not finite (inputs that are not, or partial sums that cancel
        one way and overflow the other), the steps' own sums, one after the other."""
        chain = self.ends[i]
        group = chain.group
        if group is None:
            value = self._product(chain.stationary, chain.moving)
        else:
            if group.product is None:
                (st, sb), (mt, mb) = chain.stationary, chain.moving
                group.product = self._product(
                    (st, (*sb[:2], group.s0, group.s1)), (mt, (*mb[:2], group.c0, group.c1))
                )
                group.left = len(group.chains)
            s0, s1 = chain.stationary[1][2:]
            c0, c1 = chain.moving[1][2:]
            value = group.product[s0 - group.s0 : s1 - group.s0, c0 - group.c0 : c1 - group.c0]
            group.left -= 1
            if not group.left:
                group.product = None
        held = np.asarray(mem.read(chain.dst), dtype=np.float32) if chain.adds else None
        if not np.isfinite(value).all():
            return chain.dst, self._stepwise(chain, held)
        with np.errstate(all="ignore"):
            return chain.dst, value if held is None else held + value

    def _stepwise(self, chain: _Chain, held: np.ndarray | None) -> np.ndarray:
        """What the steps leave, each adding its product to what the one before left (to
        `held`, what the region held, where the first adds)."""
        total = held
        with np.errstate(all="ignore"):
            for s, m in chain.each:
                value = self._product(s, m)
                total = value if total is None else np.add(total, value, out=value)
        assert total is not None
        return total

    def _product(self, s: tuple, m: tuple) -> np.ndarray:
        (st, (r0, r1, c0, c1)), (mt, (q0, q1, d0, d1)) = s, m
        with np.errstate(all="ignore"):  # (overflow to inf is the machine's, as each step's)
            return self._input(st, r0, r1, c0, c1).T @ self._input(mt, q0, q1, d0, d1)

    def _input(self, t: Tensor, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """A box of an input as fp32: of the input's own array where it is fp32, else of
        its conversion, made once where it fits WHOLE_INPUT_BYTES and half the run's spare
        memory (counted against its budget), else of the box alone."""
        array = self._fp32.get(t.id)
        if array is None:
            raw = self._arrays[t.id]
            spare = spare_bytes()
            nbytes = raw.size * 4
            if raw.dtype == np.float32:
                array = raw
            elif nbytes <= WHOLE_INPUT_BYTES and (spare is None or 2 * nbytes <= spare):
                allocate(nbytes, f"input {t.name!r} as fp32 (for its matmuls)", t.span)
                array = raw.astype(np.float32)
            else:
                return np.asarray(raw[r0:r1, c0:c1], dtype=np.float32)
            self._fp32[t.id] = array
        return array[r0:r1, c0:c1]


def _load(ins: Instr, still: set[int]) -> _Load | None:
    """A plain copy (a dma_copy, `InstrSpec.pure_copy`) of a box of an input `still` holds
    into a box of an SBUF tile of the same dtype and shape, as a _Load; else None."""
    a = ins.attrs
    if a.get("oob_mode") is not None or a.get("dge_mode") is not None:
        return None
    dst, src = ins.operands.get("dst"), ins.operands.get("src")
    db, sb = _box2(dst), _box2(src)
    if db is None or sb is None:
        return None
    assert isinstance(dst, View) and isinstance(src, View)
    if (
        dst.tensor.buffer != Buffer.SBUF
        or src.tensor.id not in still
        or src.dtype != dst.dtype
        or (db[1] - db[0], db[3] - db[2]) != (sb[1] - sb[0], sb[3] - sb[2])
    ):
        return None
    return _Load(ins.index, dst.tensor.id, dst.is_full(), src.tensor, sb, db)


def _step(
    ins: Instr, adds: bool, loads: dict[int, _Load], open_: dict[int, _Chain], done: list
) -> bool:
    """Take the product `ins` (`adds`: to what its dst holds) as a step of the chain
    accumulating into its dst (ending the one there, if it cannot extend it, and starting
    another); False when it cannot be one (it then runs, and ends any chain whose tile it
    touches)."""
    ops = ins.operands
    dst = ops.get("dst")
    db = _box2(dst)
    if db is None:
        return False
    assert isinstance(dst, View)
    if dst.tensor.buffer != Buffer.PSUM or dst.dtype.name != "float32":
        return False
    sources = []
    for name in ("stationary", "moving"):
        view = ops.get(name)
        box = _box2(view)
        if box is None:
            return False
        assert isinstance(view, View)
        load = loads.get(view.tensor.id)
        if view.dtype.name not in _OPERAND_DTYPES or load is None:
            return False
        got = load.source(box)
        if got is None:
            return False
        sources.append((load, (load.src, got)))
    (ls, s), (lm, m) = sources
    tid = dst.tensor.id
    chain = open_.get(tid)
    if chain is None or not (chain.dst_box == db and adds and chain.extend(s, m)):
        if chain is not None:
            done.append(chain)
        chain = open_[tid] = _Chain(dst, db, adds, s, m)
    chain.steps.append(ins.index)
    chain.each.append((s, m))
    ls.readers.append(chain)
    lm.readers.append(chain)
    return True


def _group(chains: list[_Chain]) -> None:
    """Chains with the same stationary and moving rows whose columns tile a grid (every
    stationary block with every moving block, as a tiled matmul's output tiles): one
    product per band of stationary blocks within GROUP_BYTES. Others: one per run of
    chains with the same stationary stack whose moving columns follow each other."""
    by: dict[tuple, list[_Chain]] = {}
    for c in chains:
        (st, sb), (mt, mb) = c.stationary, c.moving
        by.setdefault((st.id, sb[:2], mt.id, mb[:2]), []).append(c)
    for same in by.values():
        if len(same) > 1 and not _grid(same):
            by_stationary: dict[tuple, list[_Chain]] = {}
            for c in same:
                by_stationary.setdefault(c.stationary[1][2:], []).append(c)
            for row in by_stationary.values():
                _runs(row)


def _tiling(ranges: set[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """`ranges` in order if they tile one range, else None."""
    ordered = sorted(ranges)
    if any(a[1] != b[0] for a, b in zip(ordered, ordered[1:])):
        return None
    return ordered


def _grid(chains: list[_Chain]) -> bool:
    """Group `chains` (the same rows) as bands of a grid of output blocks, if they are one."""
    cells = {(c.stationary[1][2:], c.moving[1][2:]): c for c in chains}
    rows = _tiling({s for s, _ in cells})
    cols = _tiling({m for _, m in cells})
    if rows is None or cols is None or len(cells) != len(chains):
        return False
    if len(cells) != len(rows) * len(cols):
        return False
    width = cols[-1][1] - cols[0][0]
    k = chains[0].moving[1][1] - chains[0].moving[1][0]
    if k * width * 4 > GROUP_BYTES:  # (the moving box, converted)
        return False
    band: list[tuple[int, int]] = []
    for r in [*rows, None]:
        if r is not None and (not band or (r[1] - band[0][0]) * width * 4 <= GROUP_BYTES):
            band.append(r)
            continue
        members = [cells[(b, m)] for b in band for m in cols]
        if len(members) > 1:
            group = _Group(members, band[0][0], band[-1][1], cols[0][0], cols[-1][1])
            for c in members:
                c.group = group
        band = [] if r is None else [r]
    return True


def _runs(chains: list[_Chain]) -> None:
    """Group chains of one stationary stack whose moving columns follow each other."""
    chains.sort(key=lambda c: c.moving[1][2])
    run: list[_Chain] = []
    for c in [*chains, None]:
        if c is not None and run:
            c0, c1 = run[0].moving[1][2], c.moving[1][3]
            s0, s1 = c.stationary[1][2:]
            k = c.moving[1][1] - c.moving[1][0]
            if (
                c.moving[1][2] == run[-1].moving[1][3]
                and max(s1 - s0, k) * (c1 - c0) * 4 <= GROUP_BYTES
            ):
                run.append(c)
                continue
        if len(run) > 1:
            s0, s1 = run[0].stationary[1][2:]
            group = _Group(run, s0, s1, run[0].moving[1][2], run[-1].moving[1][3])
            for member in run:
                member.group = group
        run = [] if c is None else [c]


def plan(program: Program, mem: Any, still: set[int]) -> Batched | None:
    """The chains of `program` (run in program order, on `mem`) and the loads they make
    needless; `still`: the ids of the input tensors no instruction writes. None when there
    are none."""
    if not program.table().per_instr(lambda ins: ins.spec.product_step is not None, np.bool_).any():
        return None  # (no product: the walk below would find nothing)
    loads: dict[int, _Load] = {}  # tile id -> the load its bytes came from
    open_: dict[int, _Chain] = {}  # PSUM tile id -> the chain accumulating there
    done: list[_Chain] = []
    all_loads: list[_Load] = []
    for ins in program.raw_instrs:  # (no dependency read: the reuse ones left unmerged)
        spec = ins.spec
        adds = None if spec.product_step is None else spec.product_step(ins.attrs)
        if adds is not None and _step(ins, adds, loads, open_, done):
            continue
        load = _load(ins, still) if spec.pure_copy else None
        for role in ("in", "out"):
            for _, view in ins.views(role):
                tid = view.as_root().tensor.id
                chain = open_.pop(tid, None)
                if chain is not None:  # (its region is touched: the chain ends before)
                    done.append(chain)
                held = loads.get(tid)
                if held is None or (load is not None and role == "out" and load.whole):
                    continue  # (a load over the whole tile: what the last one wrote is gone)
                held.needed = True  # (read by another instruction, or partly overwritten)
                if role == "out":
                    del loads[tid]
        if load is not None:
            loads[load.tile] = load
            all_loads.append(load)
    done.extend(open_.values())
    # (a single product, as attention's Q.K^T tiles are, counts where it joins a group)
    _group(done)
    chains = [c for c in done if len(c.steps) > 1 or c.group is not None]
    if not chains:
        return None
    kept = {id(c) for c in chains}
    skipped = [
        load
        for load in all_loads
        if not load.needed and load.readers and all(id(c) in kept for c in load.readers)
    ]
    arrays = {t.id: mem.array(t) for t in program.inputs.values() if t.id in still}
    return Batched(chains, skipped, arrays)
