"""The only home of Numba-jitted code; each jitted function has a plain-Python twin (here,
but the allocator's placement: neuronemu.jit.place).

Numba is imported when a jitted function is first called (it costs ~0.25 s of start-up, and
commands that schedule nothing, such as `asm`, never need it).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np

from neuronemu.host.cachedirs import private_dir
from neuronemu.jit import compiling
from neuronemu.jit.place import _place_py


def numba_cache_dir() -> str:
    """Compiled code goes to the user's cache (NUMBA_CACHE_DIR wins), never next to the
    installed package: files written there turned `site-packages/neuronemu` into a namespace
    package that shadowed a later editable install."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "neuronemu", "numba")


__all__ = [
    "njit",
    "schedule",
    "_schedule_py",
    "clocks",
    "_clocks_py",
    "first_race",
    "_first_race_py",
    "reuse_race",
    "_reuse_race_py",
    "place",
    "_place_py",
    "critical_walk",
    "_critical_walk_py",
    "KIND_COMPUTE",
    "KIND_TENSOR",
    "KIND_DMA",
    "PORT_SBUF",
    "PORT_PSUM",
    "MACHINE_FIELDS",
]

# What an instruction is, for the scheduler.
KIND_COMPUTE = 0  # Vector, Scalar, GpSimd, Sync: in-order streams
KIND_TENSOR = 1  # TensorE: in-order, subject to the dI/dt throttle
KIND_DMA = 2  # a DMA queue: fixed latency, then the DMA engines and HBM

# Port bits (NC-v2): accesses that exclude each other between engines.
PORT_SBUF = 1  # Vector and GpSimd cannot access SBUF in parallel
PORT_PSUM = 2  # Vector and Scalar cannot access PSUM in parallel

# The `machine` vector, in this order.
MACHINE_FIELDS = (
    "dma_fixed_ns",
    "semaphore_ns",
    "hbm_bytes_per_ns",
    "n_dma_engines",
    "throttle_floor",
    "throttle_ramp_ns",
    "throttle_rearm_idle_ns",
    "dma_issue_ns",
    "dma_queue_depth",
)


# Whether Numba may import SciPy's BLAS wrappers when it first loads compiled code (True: as
# Numba does). It does so only to offer `np.dot` and `np.linalg` in jitted code, which nothing
# here uses, and `scipy.linalg` takes ~0.4 s to import. The `neuronemu` command, whose process
# is its own, sets False; the Python API leaves the host process's Numba as Numba makes it.
LINALG = True


def _import_numba():
    import numba

    if not LINALG and "numba.np.arraymath" not in sys.modules:
        blas = "scipy.linalg.cython_blas"
        if blas not in sys.modules:
            sys.modules[blas] = None  # type: ignore[assignment]  # (import raises ImportError)
            try:
                import numba.np.arraymath  # noqa: F401  (records "no BLAS" and moves on)
            finally:
                del sys.modules[blas]
    return numba


def njit(fn):
    """The project's jit: cached on disk, no fastmath (results must match the twin)."""
    numba = _import_numba()
    if not numba.config.CACHE_DIR:  # NUMBA_CACHE_DIR, read when numba is imported, wins
        numba.config.CACHE_DIR = numba_cache_dir()
    # Numba's cache is pickles and machine code: a directory another user could write (or
    # replace) would let them run code here, so it is not used (compiled afresh in each
    # process instead); a private one is used by its real path (neuronemu.host.cachedirs).
    real = private_dir(numba.config.CACHE_DIR, create=True)
    if real is not None:
        numba.config.CACHE_DIR = real
    compiling.watch(numba, LAZY)  # (a compile about to start is told: see there)
    return numba.njit(cache=real is not None, fastmath=False, nogil=True)(fn)


# Runs a jitted function in another process (set by neuronemu.jit.worker while its
# worker runs): (name, arguments, positions of the arguments it writes into) -> its result,
# or NOT_RUN where the call is to run here.
REMOTE: Callable[[str, tuple, tuple[int, ...]], Any] | None = None
NOT_RUN = object()
# Runs a pass compiled ahead of time (set by neuronemu.jit.ahead once it has loaded its
# module): (name, arguments) -> its result, or NOT_RUN where the module has no function
# built for these arguments' types. Tried first: it needs no Numba.
AHEAD: Callable[[str, tuple], Any] | None = None


class _Lazy:
    """A jitted twin compiled (or loaded from Numba's cache) at its first call. `writes`:
    the names of the arguments it writes into (its other outputs are returned)."""

    def __init__(self, fn, writes=()):
        self.py = fn
        self.name = fn.__name__.removeprefix("_").removesuffix("_py")
        self.writes = tuple(fn.__code__.co_varnames.index(w) for w in writes)
        self._jitted = None
        LAZY[self.name] = self

    def load(self):
        if self._jitted is None:
            self._jitted = njit(self.py)
        return self._jitted

    def __call__(self, *args):
        if AHEAD is not None:
            got = AHEAD(self.name, args)
            if got is not NOT_RUN:
                return got
        if REMOTE is not None:
            got = REMOTE(self.name, args, self.writes)
            if got is not NOT_RUN:
                return got
        return self.load()(*args)


LAZY: dict[str, _Lazy] = {}  # name -> the jitted function


def loaded() -> bool:
    """Has this process loaded (or compiled) any jitted function?"""
    return any(f._jitted is not None for f in LAZY.values())


def load_all() -> list[str]:
    """Load every jitted function's code from Numba's cache now, compiling nothing: the
    names of those the cache held code for (the first call of any other compiles it). Only
    the runtime that code calls (Numba's NRT) is set up: the target and typing contexts'
    registries, which only a compile uses, are left to the first compile, which fills them
    itself (they took 0.2-0.4 s of the worker's ~0.9 s load)."""
    jitted = {name: f.load() for name, f in LAZY.items()}
    for dispatcher in jitted.values():
        load_cached(dispatcher, lean=True)
    return [name for name, dispatcher in jitted.items() if dispatcher.overloads]


def load_cached(dispatcher, lean: bool = False) -> None:
    """Load the compiled code Numba's cache holds for `dispatcher` (what its first call would
    load), compiling nothing; `lean`: with the runtime alone set up, not the contexts'
    registries (`load_all`). Through Numba's internals: where they differ, nothing is loaded
    and the first call loads it as usual."""
    try:
        cache = dispatcher._cache
        if lean:
            from numba.core.runtime import nrt

            nrt.rtsys.initialize(dispatcher.targetctx)  # (what the code links against)
            load = cache._load_overload
        else:
            load = cache.load_overload
        for key in cache._cache_file._load_index():
            compiled = load(key[0], dispatcher.targetctx)
            if compiled is not None:
                dispatcher.add_overload(compiled)
    except Exception:  # noqa: BLE001  (another Numba: leave it to the first call)
        pass


def _schedule_py(
    stream,
    kind,
    cost_ns,
    latency_ns,
    chain_ns,
    dep_indptr,
    dep_indices,
    n_streams,
    dma_lo,
    dma_hi,
    hbm_bytes,
    gap_ns,
    pre_ns,
    port_mask,
    machine,
):
    """Start, transfer-start and end time (ns) of each instruction.

    Each stream (engine or DMA queue) issues in order, one instruction at a time. An
    instruction may start when its stream is free and every dependency's result is visible:
    the producer's end plus `chain_ns` when it ran on the same stream, else plus its
    `latency_ns` and the semaphore latency. On NC-v2, `port_mask` instructions also wait for
    the SBUF/PSUM port they share with another engine.

    List scheduling: of the streams' next instructions whose dependencies are placed, the
    one that can start first (then the lowest index) is placed next, so shared resources
    (DMA engines, HBM, ports) are handed out in time order, not program order.

    A TensorE instruction with `pre_ns` first loads an operand (LoadStationary): the load
    starts once its inputs from other engines are ready and the previous instruction has
    begun its own work, so that it hides behind that work; the work starts when both the
    load and the engine are done (`xfer`; `start` is when the engine began on it, the load
    included).

    TensorE work is stretched by the dI/dt throttle: its utilization limit starts at
    `throttle_floor` and ramps linearly to 1 over `throttle_ramp_ns` of work; an idle gap of
    `throttle_rearm_idle_ns` re-arms it.

    A DMA queue takes its next transfer `dma_issue_ns` after it took the previous one (the
    transfers of a queue overlap in flight), and holds at most `dma_queue_depth` transfers
    not yet done (so that one queue cannot claim the DMA engines far ahead of the others,
    which the engines serve in turn); a transfer pays the fixed trigger latency, waits
    for its DMA engines [dma_lo, dma_hi) to finish earlier transfers, then occupies them for
    `cost_ns` and then `gap_ns` more (its packets' overhead, before the engines take another
    transfer); its HBM bytes also take turns on the core's HBM bandwidth.
    """
    n = stream.shape[0]
    dma_fixed_ns = machine[0]
    semaphore_ns = machine[1]
    hbm_bytes_per_ns = machine[2]
    n_dma = int(machine[3])
    throttle_floor = machine[4]
    throttle_ramp_ns = machine[5]
    throttle_rearm_ns = machine[6]
    dma_issue_ns = machine[7]
    depth = max(int(machine[8]), 1)
    start = np.zeros(n, dtype=np.float64)
    xfer = np.zeros(n, dtype=np.float64)
    end = np.zeros(n, dtype=np.float64)
    placed = np.zeros(n, dtype=np.bool_)
    free = np.zeros(n_streams, dtype=np.float64)
    # A DMA queue's last `depth` transfers: when each slot is free again (its transfer done).
    slots = np.zeros((n_streams, depth), dtype=np.float64)
    taken = np.zeros(n_streams, dtype=np.int64)
    dma_free = np.zeros(max(n_dma, 1), dtype=np.float64)
    port_free = np.zeros(2, dtype=np.float64)
    hbm_free = 0.0
    ramp_start = 0.0
    tensor_idle_since = -np.inf
    tensor_work_start = 0.0  # when the Tensor engine's latest instruction began its work
    # Each stream's instructions in program order (CSR), and the next one to place.
    counts = np.zeros(n_streams + 1, dtype=np.int64)
    for i in range(n):
        counts[stream[i] + 1] += 1
    first = np.cumsum(counts)
    order = np.empty(n, dtype=np.int64)
    fill = first[:-1].copy()
    for i in range(n):
        order[fill[stream[i]]] = i
        fill[stream[i]] += 1
    head = first[:-1].copy()
    for _ in range(n):
        best = -1
        best_t = 0.0
        for s in range(n_streams):
            if head[s] == first[s + 1]:
                continue
            i = order[head[s]]
            t = free[s]
            if kind[i] == KIND_DMA and slots[s, taken[s] % depth] > t:
                t = slots[s, taken[s] % depth]
            ok = True
            for k in range(dep_indptr[i], dep_indptr[i + 1]):
                d = dep_indices[k]
                if not placed[d]:
                    ok = False
                    break
                if stream[d] == s:
                    ready = end[d] + chain_ns[d]
                else:
                    ready = end[d] + latency_ns[d] + semaphore_ns
                if ready > t:
                    t = ready
            if not ok:
                continue
            mask = port_mask[i]
            if mask & PORT_SBUF and port_free[0] > t:
                t = port_free[0]
            if mask & PORT_PSUM and port_free[1] > t:
                t = port_free[1]
            if best < 0 or t < best_t or (t == best_t and i < best):
                best = i
                best_t = t
        i = best
        t = best_t
        s = stream[i]
        head[s] += 1
        placed[i] = True
        start[i] = t
        k_i = kind[i]
        if k_i == KIND_DMA:
            a = t
            x = a + dma_fixed_ns
            for e in range(dma_lo[i], dma_hi[i]):
                if dma_free[e] > x:
                    x = dma_free[e]
            e_end = x + cost_ns[i]
            if hbm_bytes[i] > 0:
                h = hbm_free if hbm_free > x else x
                hbm_free = h + hbm_bytes[i] / hbm_bytes_per_ns
                if hbm_free > e_end:
                    e_end = hbm_free
            for e in range(dma_lo[i], dma_hi[i]):
                dma_free[e] = e_end + gap_ns[i]
            xfer[i] = x
        elif k_i == KIND_TENSOR:
            w = t
            if pre_ns[i] > 0.0:
                # When its inputs from other engines are ready (the engine's own earlier
                # instructions write PSUM, never the loaded operand).
                data = 0.0
                for k in range(dep_indptr[i], dep_indptr[i + 1]):
                    d = dep_indices[k]
                    if stream[d] != s:
                        ready = end[d] + latency_ns[d] + semaphore_ns
                        if ready > data:
                            data = ready
                load = data if data > tensor_work_start else tensor_work_start
                if load + pre_ns[i] > w:
                    w = load + pre_ns[i]
            if w - tensor_idle_since >= throttle_rearm_ns:
                ramp_start = w
            ramped = (w - ramp_start) / throttle_ramp_ns
            if ramped < 0.0:
                ramped = 0.0
            limit = 1.0 if ramped >= 1.0 else throttle_floor + (1.0 - throttle_floor) * ramped
            e_end = w + cost_ns[i] / limit
            tensor_idle_since = e_end
            tensor_work_start = w
            xfer[i] = w
        else:
            e_end = t + cost_ns[i]
            xfer[i] = t
        end[i] = e_end
        # A DMA queue takes its next transfer `dma_issue_ns` after it took this one (its
        # transfers overlap in flight); an engine is free when its instruction ends.
        free[s] = t + dma_issue_ns if k_i == KIND_DMA else e_end
        if k_i == KIND_DMA:
            slots[s, taken[s] % depth] = e_end
            taken[s] += 1
        mask = port_mask[i]
        if mask & PORT_SBUF:
            port_free[0] = e_end
        if mask & PORT_PSUM:
            port_free[1] = e_end
    return start, xfer, end


schedule = _Lazy(_schedule_py)


# The race check (neuronemu.checks.hazards) over flat arrays, for programs past the checks' JIT
# threshold: the same answers as the plain check there (a property test compares them).


def _clocks_py(stream, dep_indptr, dep_indices, n_streams):
    """Per instruction: its position on its stream (from 1) and its vector clock (for each
    stream, how many of that stream's instructions it follows)."""
    n = stream.shape[0]
    clock = np.zeros((n, n_streams), dtype=np.int32)
    position = np.zeros(n, dtype=np.int32)
    last = np.full(n_streams, -1, dtype=np.int64)
    for i in range(n):
        s = stream[i]
        if last[s] >= 0:
            for k in range(n_streams):
                clock[i, k] = clock[last[s], k]
        for p in range(dep_indptr[i], dep_indptr[i + 1]):
            d = dep_indices[p]
            for k in range(n_streams):
                if clock[d, k] > clock[i, k]:
                    clock[i, k] = clock[d, k]
        position[i] = clock[i, s] + 1
        clock[i, s] = position[i]
        last[s] = i
    return position, clock


# An access's `mark` in the race check: superseded (else: the last access that gathered it).
GONE = -2


def _first_race_py(
    acc_instr,
    acc_tensor,
    acc_write,
    lo,
    hi,
    stream,
    position,
    clock,
    core,
    twin,
    deferred,
    after,
    head,
    tail,
    gridded,
    cell_ptr,
    cell_id,
    cell_owner,
    chead,
    fnext,
    mark,
    start,
    n_deferred,
    work,
):
    """The first race, as (earlier access, later access), or (-1, -1); how many pairs of
    `twin` writes from two cores were deferred (the first `len(deferred)` of them stored
    there as instruction pairs; a zero-length `deferred`: none are, they race); and the
    access to go on from (`len(acc_instr)` when all are checked).

    Accesses come in program order, each instruction's reads before its writes. An access
    is compared with those of its tensor not yet superseded (a write that covers an access
    and follows it marks it GONE in `mark`; the next walk of a list unlinks it) that may
    overlap it, in order of arrival. Per tensor and table (0: reads, 1: writes), a list
    (`head[table]`, `tail[table]`, linked through `after[0]`; all -1 at first) holds them
    all. For a `gridded` tensor (neuronemu.checks.access_table.Accesses.grid), an access
    filed under cells (`cell_id[cell_ptr[a]:cell_ptr[a + 1]]`) is also in a list per table
    and cell (from `chead`, of filings linked through `fnext`, newest first; `cell_owner`:
    their access), a wide one (filed under none) in the tensor's list of wide ones
    (`head[2 + table]`, through `after[1]`); a filed access is compared with those filed
    under its cells and the wide ones (sorted back into arrival order), a wide one with
    all. The pass goes on from access `start` with `n_deferred` pairs so far, and stops
    after the access at which it has looked at `work` list entries and cells (0: after each
    access), so that its caller can read the clocks between calls."""
    na = acc_instr.shape[0]
    dims = lo.shape[1]
    defer = deferred.shape[0] > 0
    looked = 0
    found = np.empty((2, 64), dtype=np.int64)  # per table, the accesses to compare with
    count = np.zeros(2, dtype=np.int64)
    for a in range(start, na):
        if looked >= work and a > start:
            return -1, -1, n_deferred, a
        i = acc_instr[a]
        t = acc_tensor[a]
        writes = acc_write[a]
        filed = cell_ptr[a + 1] > cell_ptr[a]
        for table in (1, 0):
            count[table] = 0
            if table == 0 and not writes:
                break  # a read conflicts with writes only
            n = 0
            # The tensor's list of all, or (filed) of its wide ones then those of its cells
            # (p = first - 1: the tensor's), walked and what they hold taken once each,
            # unlinking those superseded.
            row, link, first, last = table, 0, 0, 0
            if filed:
                row, link, first, last = 2 + table, 1, cell_ptr[a], cell_ptr[a + 1]
            for p in range(first - 1, last):
                in_cell = p >= first
                c = cell_id[p] if in_cell else -1
                f = chead[table, c] if in_cell else head[row, t]
                prev = -1
                looked += 1  # (a list looked at, though empty)
                while f >= 0:
                    looked += 1
                    nxt = fnext[f] if in_cell else after[link, f]
                    e = cell_owner[f] if in_cell else f
                    if mark[e] == GONE:
                        if prev >= 0 and in_cell:
                            fnext[prev] = nxt
                        elif prev >= 0:
                            after[link, prev] = nxt
                        elif in_cell:
                            chead[table, c] = nxt
                        else:
                            head[row, t] = nxt
                    else:
                        if mark[e] != a:  # (once, however many cells it shares)
                            mark[e] = a
                            if n == found.shape[1]:
                                grown = np.empty((2, 2 * n), dtype=np.int64)
                                grown[:, :n] = found
                                found = grown
                            found[table, n] = e
                            n += 1
                        prev = f
                    f = nxt
                if not in_cell:
                    tail[row, t] = prev
            if filed and n > 1:
                found[table, :n] = np.sort(found[table, :n])
            count[table] = n
            for q in range(n):
                e = found[table, q]
                j = acc_instr[e]
                if j != i and clock[i, stream[j]] < position[j]:
                    hit = True
                    for d in range(dims):
                        if lo[a, d] >= hi[e, d] or lo[e, d] >= hi[a, d]:
                            hit = False
                            break
                    if hit:
                        if writes and table == 1 and defer and twin[i] and twin[j]:
                            if core[i] != core[j]:
                                if n_deferred < deferred.shape[0]:
                                    deferred[n_deferred, 0] = j
                                    deferred[n_deferred, 1] = i
                                n_deferred += 1
                                continue
                        return e, a, n_deferred, a
        if writes:
            # What this write covers and follows can race with nothing that does not also
            # race with it.
            for table in (1, 0):
                for q in range(count[table]):
                    e = found[table, q]
                    j = acc_instr[e]
                    gone = j != i and clock[i, stream[j]] >= position[j]
                    if gone:
                        for d in range(dims):
                            if lo[e, d] < lo[a, d] or hi[e, d] > hi[a, d]:
                                gone = False
                                break
                    if gone:
                        mark[e] = GONE
        table = 1 if writes else 0
        if tail[table, t] < 0:
            head[table, t] = a
        else:
            after[0, tail[table, t]] = a
        tail[table, t] = a
        if filed:
            for p in range(cell_ptr[a], cell_ptr[a + 1]):
                c = cell_id[p]
                fnext[p] = chead[table, c]
                chead[table, c] = p
        elif gridded[t]:
            if tail[2 + table, t] < 0:
                head[2 + table, t] = a
            else:
                after[1, tail[2 + table, t]] = a
            tail[2 + table, t] = a
    return -1, -1, n_deferred, na


def _reuse_race_py(old, new, span_ptr, span_first, span_last, stream, position, clock):
    """The first reuse (r) whose new tile's first access on some stream (first) does not
    follow the old tile's last access on some stream (last), as (r, first, last); or
    (-1, -1, -1). Per tile, its streams' [first, last] accesses, by first access (CSR)."""
    for r in range(old.shape[0]):
        o = old[r]
        m = new[r]
        for p in range(span_ptr[m], span_ptr[m + 1]):
            f = span_first[p]
            for q in range(span_ptr[o], span_ptr[o + 1]):
                last = span_last[q]
                if last < f and clock[f, stream[last]] < position[last]:
                    return r, f, last
    return -1, -1, -1


clocks = _Lazy(_clocks_py)
first_race = _Lazy(
    _first_race_py, writes=("deferred", "after", "head", "tail", "chead", "fnext", "mark")
)
reuse_race = _Lazy(_reuse_race_py)


# The critical path's walk (neuronemu.report.critical, where the rules are told) over flat
# arrays. A stretch's cause is its index in critical_path.CAUSES: an engine's own time is
# its ENGINE_KEYS index (the first five causes), then these.
CAUSE_DMA_TRANSFER = 5
CAUSE_DMA_FIXED = 6
CAUSE_DMA_QUEUEING = 7
CAUSE_SEMAPHORE = 8
CAUSE_ENGINE_LATENCY = 9
CAUSE_OTHER = 10


def _critical_walk_py(
    i,
    tail,
    engine,
    stream,
    chain,
    latency,
    indptr,
    indices,
    previous,
    slot_of,
    start,
    xfer,
    end,
    dma_engine,
    semaphore_ns,
    dma_fixed_ns,
    issue_ns,
    eps,
):
    """The stretches of the path that ends at instruction `i` (`tail`: its engine latency
    after its end), latest first: (cause, ns, instruction, the instruction it waited for or
    -1). Each step goes to an earlier instruction, so there are at most 5 per instruction."""
    n = len(start)
    cause = np.empty(5 * n + 1, dtype=np.int64)
    ns = np.empty(5 * n + 1, dtype=np.float64)
    index = np.empty(5 * n + 1, dtype=np.int64)
    edge = np.empty(5 * n + 1, dtype=np.int64)
    k = 0
    if tail > 0:
        cause[k], ns[k], index[k], edge[k] = CAUSE_ENGINE_LATENCY, tail, i, -1
        k += 1
    at_start = False  # the walk reached i's start through its queue: i's own time is past
    while True:
        if not at_start:  # i's own time, latest first
            s, x, e = start[i], xfer[i], end[i]
            if engine[i] != dma_engine:
                cause[k], ns[k], index[k], edge[k] = engine[i], e - s, i, -1
                k += 1
            else:
                waited = x - s
                fixed = min(dma_fixed_ns, waited)
                cause[k], ns[k], index[k], edge[k] = CAUSE_DMA_TRANSFER, e - x, i, -1
                cause[k + 1], ns[k + 1], index[k + 1], edge[k + 1] = CAUSE_DMA_FIXED, fixed, i, -1
                k += 2
                if waited - fixed > 0:
                    cause[k], ns[k], index[k], edge[k] = CAUSE_DMA_QUEUEING, waited - fixed, i, -1
                    k += 1
        at_start = False
        t = start[i]
        if t <= eps:
            break
        best, best_t, best_wait = -1, -np.inf, 0.0
        p = previous[i]
        queued = p >= 0 and engine[i] == dma_engine
        if p >= 0:
            best, best_t = p, (start[p] + issue_ns if queued else end[p])
        slot = slot_of[i]
        if slot >= 0 and end[slot] > best_t + eps:  # the queue was full until `slot` ended
            best, best_t = slot, end[slot]
        own = stream[i]
        for q in range(indptr[i], indptr[i + 1]):
            d = indices[q]
            wait = chain[d] if stream[d] == own else latency[d] + semaphore_ns
            if end[d] + wait > best_t + eps:
                best, best_t, best_wait = d, end[d] + wait, wait
        if best < 0 or best_t < t - eps:  # released by something else (a port, the start)
            gap = t - max(best_t, 0.0) if best >= 0 else t
            cause[k], ns[k], index[k], edge[k] = CAUSE_OTHER, gap, i, -1
            k += 1
            if best < 0:
                break
        if best == p and queued:  # the queue's interval since p was taken
            cause[k], ns[k], index[k], edge[k] = CAUSE_DMA_QUEUEING, issue_ns, i, p
            at_start = True
        elif best == slot and slot >= 0:  # a slot of the queue: the path goes through it
            cause[k], ns[k], index[k], edge[k] = CAUSE_DMA_QUEUEING, 0.0, i, slot
        elif best_wait > 0:
            cause[k], ns[k], index[k], edge[k] = CAUSE_SEMAPHORE, best_wait, i, best
        else:  # a stream edge
            cause[k], ns[k], index[k], edge[k] = CAUSE_SEMAPHORE, 0.0, i, best
        k += 1
        i = best
    return cause[:k], ns[:k], index[:k], edge[:k]


critical_walk = _Lazy(_critical_walk_py)


# The allocator's placement, over flat arrays (its twin: neuronemu.jit.place).
place = _Lazy(_place_py)
