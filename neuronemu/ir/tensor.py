"""Tensors of a program: where they live (HBM, SBUF, PSUM, engine registers), shape, dtype."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from neuronemu.errors import KernelTypeError, SourceSpan
from neuronemu.ir.dtypes import DType
from neuronemu.ir.view import View
from neuronemu_isa import Buffer

__all__ = ["BufferKind", "BUFFERS", "REGISTERS", "Tensor", "alias_shape"]

_ids = itertools.count()


@dataclass(frozen=True)
class BufferKind:
    """`nl.sbuf`, `nl.psum`, `nl.hbm`, `nl.shared_hbm`, `nl.private_hbm`."""

    name: str

    @functools.cached_property
    def buffer(self) -> Buffer:
        return {"sbuf": Buffer.SBUF, "psum": Buffer.PSUM, "reg": Buffer.REG}.get(
            self.name, Buffer.HBM)

    def __repr__(self) -> str:
        return f"nl.{self.name}"

BUFFERS = {n: BufferKind(n) for n in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")}
# Engine registers are tensors too, so that their ordering, races and text form come free;
# kernels never name this buffer.
REGISTERS = BufferKind("reg")

@dataclass(eq=False)
class Tensor:
    """A tensor in HBM, SBUF or PSUM. `kind`: "input", "output" (shared_hbm) or "tile"."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    kind_of_buffer: BufferKind
    span: SourceSpan
    kind: str = "tile"
    id: int = field(default_factory=lambda: next(_ids))
    address: int | None = None  # a placement the kernel asked for (bytes per partition)
    partition_offset: int | None = None  # ... and its first partition
    # A reinterpretation (`t.view(dtype)`): the same bytes as `base` (never itself an alias)
    # in another dtype, the last dim scaled by the ratio of the item sizes.
    base: Tensor | None = None
    aliased: bool = False  # some alias views this tensor's bytes
    out_shape: tuple[int, ...] | None = None  # the shape a kernel returned it as (a reshape)

    @property
    def root(self) -> Tensor:
        """The tensor that owns the bytes (itself unless it is an alias)."""
        return self if self.base is None else self.base
    data: np.ndarray | None = None  # the contents of a constant (kind "constant")

    @functools.cached_property
    def buffer(self) -> Buffer:
        return self.kind_of_buffer.buffer

    @property
    def on_chip(self) -> bool:
        return self.buffer != Buffer.HBM

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes_per_partition(self) -> int:
        return math.prod(self.shape[1:]) * self.dtype.itemsize

    def full(self) -> View:
        return self._full

    @functools.cached_property
    def _full(self) -> View:
        return View(self, tuple((0, n, 1) for n in self.shape), tuple(range(len(self.shape))))

    @property
    def label(self) -> str:
        """The name for messages: unnamed tiles are named by the variable they are bound to."""
        return self.name.lstrip("%") or "tmp"

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"{self.name}: {self.kind_of_buffer.name} {self.dtype.name}[{dims}]"

def alias_shape(root: Tensor, dtype: DType, span: SourceSpan) -> tuple[int, ...]:
    """The shape of `root`'s bytes read as `dtype`: the last dim scaled."""
    nbytes = root.shape[-1] * root.dtype.itemsize
    if nbytes % dtype.itemsize:
        raise KernelTypeError(
            f"cannot view {root.name} as {dtype.name}: a row of its last dim holds {nbytes} "
            f"bytes, not a whole number of {dtype.itemsize}-byte items", span)
    return (*root.shape[:-1], nbytes // dtype.itemsize)
