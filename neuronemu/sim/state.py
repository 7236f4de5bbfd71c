"""The machine's memories: HBM tensors, and SBUF and PSUM as per-partition byte arrays.

HBM tensors and engine registers are one array each. An SBUF or PSUM tile is a view of its
buffer's bytes at the tile's placement (partitions [p0, p0 + P), bytes [offset, offset + size)
of each), made when an instruction first touches the tile: it is *born* then, and its bytes
are set to the uninitialized sentinel (NaN for floats, zero for integers), as AWS's CPU
simulator fills fresh tensors, whatever an earlier tile left there. A tile that reuses freed
bytes therefore reads the same as a fresh one unless an access races with the old tile's
(then the race shows in the values, as on hardware).

`widen` (a wider float dtype) holds float tiles in that dtype instead, so that writes round
only to it (float32: `--no-precise`; float64: the shadow of `--explain-mismatch`); a widened
run cannot share bytes between dtypes, so there every on-chip tile has its own array.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from neuronemu.errors import InternalError
from neuronemu.ir import Tensor, View
from neuronemu_isa import Arch, Buffer
from neuronemu_isa.numerics import FLOAT_DTYPES, cast_to

__all__ = ["Memory", "register_reader", "register_writer"]

# The most bytes of fp32 conversions `Memory.read_fp32` keeps (the oldest go first).
# Inferred: room for the K tiles of stationary and moving that a blocked matmul's loop over
# M reads again (64 tiles of [128, 512] fp32 are 16 MiB).
FP32_KEPT_BYTES = 64 * 2**20


class Memory:
    """Input arrays are never modified: those of `read_in_place` (input tensor ids no
    instruction writes) are read where they are, through read-only views, the others
    copied. `placements` (tensor id -> Placement) and `arch` give the on-chip tiles their
    addresses; without them every tile has its own array."""

    def __init__(
        self,
        tensors: list[Tensor],
        inputs: dict[str, np.ndarray],
        widen: np.dtype | None = None,
        placements: Mapping[int, Any] | None = None,
        arch: Arch | None = None,
        read_in_place: Collection[int] = (),
    ):
        self.widen = widen
        self.arrays: dict[int, np.ndarray] = {}
        self._tensors = {t.id: t for t in tensors}
        self._placements: dict[int, Any] | None = None
        if placements is not None and widen is None and arch is not None:
            # (a plain dict: looked up per access; the allocator's may make its items lazily)
            self._placements = placements if type(placements) is dict else dict(placements)
        # Each physical core's SBUF and PSUM, made when a tile of it is first born.
        self._buffers: dict[tuple[Buffer, int], np.ndarray] = {}
        self._arch = arch
        self._inputs = inputs
        self._in_place = read_in_place
        # read_fp32's conversions, oldest first: (tile id, box, kept) -> (fp32 array, the tile's
        # buffer and core, the bytes it holds there); per buffer and core, the tiles that have
        # some, with those bytes; per tile, its keys
        self._fp32: dict[tuple, tuple[np.ndarray, tuple[Buffer, int], tuple]] = {}
        self._fp32_tiles: dict[tuple[Buffer, int], dict[int, tuple[int, int, int, int]]] = {}
        self._fp32_keys: dict[int, list[tuple]] = {}
        self._fp32_bytes = 0
        for t in tensors:
            if t.base is not None:
                continue  # an alias reads its root's array
            if not t.on_chip or t.buffer == Buffer.REG:  # on-chip tiles are born on first touch
                self.arrays[t.id] = self._initial(t, self.held_dtype(t, widen))

    def _initial(self, t: Tensor, held: np.dtype) -> np.ndarray:
        """A tensor's first contents: its data (inputs, constants) or the sentinel."""
        if t.kind in ("input", "constant"):
            value = np.asarray(self._inputs[t.name] if t.kind == "input" else t.data)
            if held != t.dtype.np:  # exact: the input is first given its own dtype
                value = value.astype(t.dtype.np)
            # (HBM arrays are C-contiguous: an alias views the bytes in another dtype, an
            # indirect copy addresses them flat)
            if (
                t.id in self._in_place
                and value.dtype == held
                and value.size == t.size
                and value.flags.c_contiguous
            ):
                value = value.reshape(t.shape).view()
                value.flags.writeable = False
                return value
            return np.array(value, dtype=held, copy=True, order="C").reshape(t.shape)
        return _uninitialized(t, held)

    @staticmethod
    def held_dtype(t: Tensor, widen: np.dtype | None) -> np.dtype:
        """The dtype `t` is held in: its own, or `widen` for a narrower float tensor whose
        bytes no alias reads."""
        dt = t.dtype.np
        if (
            widen is not None
            and t.dtype.name in FLOAT_DTYPES
            and dt.itemsize < widen.itemsize
            and not t.aliased
            and t.base is None
        ):
            return np.dtype(widen)
        return dt

    def read(self, view: View) -> np.ndarray:
        return view.np_view(self.array(view.tensor))

    def read_fp32(self, view: View) -> np.ndarray:
        """`view`'s values as fp32, read only. A placed tile's are converted once and kept
        until some write reaches the bytes they came from (a tile the matmuls of a loop read
        again and again is converted once)."""
        t = view.tensor
        region = self._held_bytes(t) if type(view) is View and t.base is None else None
        if region is None:
            return np.array(self.read(view), dtype=np.float32)
        key = (t.id, view.box, view.kept)  # (what np_view makes of it)
        found = self._fp32.get(key)
        if found is not None:
            return found[0]
        value = np.array(self.read(view), dtype=np.float32)
        value.flags.writeable = False  # (shared by the reads to come)
        where = (t.buffer, t.core)
        self._fp32[key] = (value, where, region)
        self._fp32_tiles.setdefault(where, {})[t.id] = region
        self._fp32_keys.setdefault(t.id, []).append(key)
        self._fp32_bytes += value.nbytes
        while self._fp32_bytes > FP32_KEPT_BYTES:
            self._forget(next(iter(self._fp32)))
        return value

    def _held_bytes(self, t: Tensor) -> tuple[int, int, int, int] | None:
        """The bytes a placed on-chip tile holds in its buffer (partitions [p0, p1), bytes
        [b0, b1) of each); None for any other tensor."""
        if self._placements is None or not t.on_chip or t.buffer == Buffer.REG:
            return None
        p = self._placements.get(t.id)
        if p is None:
            return None
        return (p.partition, p.partition + t.shape[0], p.offset, p.offset + p.size)

    def _forget(self, key: tuple) -> None:
        value, where, _ = self._fp32.pop(key)
        self._fp32_bytes -= value.nbytes
        keys = self._fp32_keys[key[0]]
        keys.remove(key)
        if not keys:
            del self._fp32_keys[key[0]]
            del self._fp32_tiles[where][key[0]]

    def _changed(self, t: Tensor) -> None:
        """Bytes of the root tensor `t` are about to change: forget the conversions of every
        tile holding some of them."""
        if not self._fp32:
            return
        tiles = self._fp32_tiles.get((t.buffer, t.core))
        if not tiles:
            return
        region = self._held_bytes(t)
        if region is None:
            hit = [t.id] if t.id in tiles else []
        else:
            p0, p1, b0, b1 = region
            hit = [
                tid
                for tid, (q0, q1, c0, c1) in tiles.items()
                if q0 < p1 and p0 < q1 and c0 < b1 and b0 < c1
            ]
        for tid in hit:
            for key in list(self._fp32_keys[tid]):
                self._forget(key)

    def write(self, view: View, value: Any) -> np.ndarray:
        """Store `value` (cast to the held dtype) into `view`; return the stored view."""
        t = view.tensor
        self._changed(t.root)
        if t.base is None and t.id not in self.arrays and view.is_full():
            # Written whole before anything reads it: what fresh memory holds is never seen.
            self.arrays[t.id] = self._birth(t, fill=False, forgotten=True)
        target = view.np_view(self.array(t))
        value = np.asarray(value)
        if value.size == target.size:
            value = value.reshape(target.shape)
        elif value.size == 1:
            value = np.broadcast_to(value.reshape(()), target.shape)
        else:
            raise InternalError(
                f"result of {value.size} elements for {view!r} ({target.size} elements)"
            )
        target[...] = cast_to(value, target.dtype)
        return target

    def array(self, t: Tensor) -> np.ndarray:
        if t.base is not None:  # the root's bytes in this dtype (the last dim is contiguous)
            return self.array(t.base).view(t.dtype.np)
        found = self.arrays.get(t.id)
        if found is None:
            found = self.arrays[t.id] = self._birth(t)
        return found

    def release(self, t: Tensor) -> None:
        """`t`'s last access has run: drop its array (its bytes stay, as on hardware)."""
        if t.on_chip and t.buffer != Buffer.REG:
            self.arrays.pop(t.id, None)
            for key in self._fp32_keys.get(t.id, [])[:]:
                self._forget(key)

    def changing(self, t: Tensor) -> None:
        """Bytes of `t` are about to be written other than by `write` (an indirect copy)."""
        self._changed(t.root)

    def _buffer(self, buffer: Buffer, core: int) -> np.ndarray:
        found = self._buffers.get((buffer, core))
        if found is None:
            arch = self._arch
            assert arch is not None
            shape = (
                (arch.sbuf_partitions, arch.sbuf_bytes_per_partition)
                if buffer == Buffer.SBUF
                else (arch.psum_partitions, arch.psum_bytes_per_partition)
            )
            # np.zeros maps pages lazily: untouched SBUF costs no resident memory.
            found = self._buffers[(buffer, core)] = np.zeros(shape, dtype=np.uint8)
        return found

    def _birth(self, t: Tensor, fill: bool = True, forgotten: bool = False) -> np.ndarray:
        """`t`'s array: in its placed bytes (filled with what fresh memory reads as, unless
        `fill` is False), else its own. `forgotten`: the conversions of its bytes are gone
        already (`write` forgot them)."""
        held = self.held_dtype(t, self.widen)
        placement = None if self._placements is None else self._placements.get(t.id)
        if placement is None:
            if not fill and t.kind not in ("input", "constant"):
                return np.empty(t.shape, dtype=held)
            return self._initial(t, held)
        if not forgotten:
            self._changed(t)  # (a tile born where others were: what they held is gone)
        buffer = self._buffer(t.buffer, t.core)
        row = buffer.strides[0]
        if placement.offset + math.prod(t.shape[1:]) * held.itemsize > row:
            raise InternalError(f"{t!r} placed at byte {placement.offset} runs past its partition")
        strides = [held.itemsize]
        for n in reversed(t.shape[2:]):
            strides.insert(0, strides[0] * n)
        # (made straight on the buffer's bytes: as_strided took 6 us a tile, this 1)
        tile = np.ndarray(
            t.shape,
            held,
            buffer=buffer,
            offset=placement.partition * row + placement.offset,
            strides=(row, *strides),
        )
        if t.kind == "constant":
            tile[...] = self._initial(t, held)
        elif fill:
            tile[...] = _sentinel(t, held)
        return tile


def _sentinel(t: Tensor, held: np.dtype) -> np.ndarray:
    """What fresh memory reads as: NaN for floats (as AWS's CPU simulator fills it), zero
    for integers."""
    if t.dtype.name in FLOAT_DTYPES:
        return np.array(np.nan, dtype=np.float32).astype(held)
    return np.zeros((), dtype=held)


def _uninitialized(t: Tensor, held: np.dtype) -> np.ndarray:
    return np.full(t.shape, _sentinel(t, held), dtype=held)


def register_reader(mem: Memory) -> Callable[[View], int]:
    held = _Held(mem)

    def read(view: View) -> int:
        target = held.target(view)
        if target is None:
            return int(np.asarray(mem.read(view)).reshape(-1)[0])
        return int(target.reshape(-1)[0])

    return read


def register_writer(mem: Memory) -> Callable[[View, int], None]:
    held = _Held(mem)

    def write(view: View, value: int) -> None:
        target = held.target(view)
        if target is None:
            mem.write(view, np.full(view.shape, value, dtype=view.dtype.np))
        else:  # (the same value: the register's dtype, stored as its bits)
            target[...] = np.full((), value, dtype=view.dtype.np)

    return write


class _Held:
    """A register's elements in the memory's array, by view: a device loop reads its bound
    and writes its variable every pass, through the same views (a register's bytes are
    never converted or kept elsewhere, `Memory.write`; it is never released)."""

    def __init__(self, mem: Memory):
        self.mem = mem
        self.views: dict[int, tuple[View, np.ndarray, np.ndarray]] = {}

    def target(self, view: View) -> np.ndarray | None:
        """The view's elements (written in place), or None where it is not such a view or
        its register's array is not made yet."""
        t = view.tensor
        if t.buffer != Buffer.REG or t.base is not None or type(view) is not View:
            return None
        array = self.mem.arrays.get(t.id)
        if array is None:
            return None
        got = self.views.get(id(view))
        if got is None or got[1] is not array:
            target = view.np_view(array)
            if not np.shares_memory(target, array):
                return None
            got = self.views[id(view)] = (view, array, target)
        return got[2]
