"""Trace-time value kinds a kernel manipulates besides tensors: namespaces (`nl`, `nisa`),
enum members, `nl.*` operator references, block-dim tensors, deferred module-level errors."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, TypeGuard

import numpy as np

from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan, shown
from neuronemu.ir import BufferKind, DType, Tensor, View
from neuronemu.ir.tensor import fmt_slice
from neuronemu.trace.legacy_index import AffineView

__all__ = [
    "Partial",
    "GridLaunch",
    "Builtin",
    "DirectAlloc",
    "is_tensor_like",
    "ParDim",
    "BlockTensor",
    "Namespace",
    "EnumValue",
    "OpRef",
    "Poison",
    "Scalar",
    "DeviceRange",
    "CoreDim",
    "no_block_dims",
    "OLDER_NKI",
    "CURRENT_NKI",
]


@dataclass(frozen=True, eq=False)
class DirectAlloc(BufferKind):
    """`nki.compiler.sbuf.alloc(func)` / `.mod_alloc(...)` (and the PSUM ones): the kernel
    places each tile itself. `func(block_index, partitions, bytes_per_partition)` gives
    (partition, byte offset) in SBUF, (bank, partition, byte offset) in PSUM."""

    func: Any = None

    def __repr__(self) -> str:
        return f"nki.compiler.{self.name}.alloc({shown(self.func)})"


def is_tensor_like(value: Any) -> TypeGuard[Tensor | View | AffineView]:
    return isinstance(value, (Tensor, View, AffineView))


class ParDim(int):
    """`nl.par_dim(n)`: marks the partition dim of an on-chip shape; the dims before it are
    block dims (older NKI)."""


@dataclass(eq=False)
class BlockTensor:
    """An on-chip tensor with block dims before its partition dim (older NKI: `nl.ndarray((B,
    nl.par_dim(P), F), buffer=nl.sbuf)`). Each block is a tile of its own, allocated when first
    indexed, so that each has its own live range (nki block dimension migration guide)."""

    name: str
    blocks: tuple[int, ...]
    tile_shape: tuple[int, ...]
    dtype: DType
    kind_of_buffer: BufferKind
    span: SourceSpan
    make: Callable[[str, tuple[int, ...]], Tensor]  # allocates one block's tile
    tiles: dict[tuple[int, ...], Tensor] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.blocks, *self.tile_shape)

    @property
    def label(self) -> str:
        return self.name.lstrip("%") or "tmp"

    def block(self, index: tuple[int, ...]) -> Tensor:
        t = self.tiles.get(index)
        if t is None:
            t = self.make(f"{self.label}_b{'_'.join(map(str, index))}", index)
            self.tiles[index] = t
        return t

    def split(self, index: Any, span: SourceSpan) -> tuple[Tensor | BlockTensor, tuple]:
        """The block an index names (its leading block indices) and the rest of the index;
        fewer block indices than block dims, and nothing else, name a block tensor."""
        if not isinstance(index, tuple):
            index = (index,)
        k = len(self.blocks)
        picked = []
        for pos, (i, n) in enumerate(zip(index[:k], self.blocks)):
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise KernelTypeError(
                    f"{self.label} has block dims {list(self.blocks)} before its partition dim; "
                    f"index each with an int (dim {pos} got "
                    f"{fmt_slice(i) if isinstance(i, slice) else repr(i)})",
                    span,
                )
            j = int(i) + n if i < 0 else int(i)
            if not 0 <= j < n:
                raise ConstraintError(
                    f"block index {i} is out of bounds for dim {pos} of {self.label} (size {n})",
                    span,
                )
            picked.append(j)
        if len(picked) < k and len(index) == len(picked):  # `t[i]`: the blocks under i
            return self.sub(tuple(picked)), ()
        if len(picked) < k:
            raise KernelTypeError(
                f"{self.label} has {k} block dims; index all of them to get a tile", span
            )
        return self.block(tuple(picked)), index[k:]

    def sub(self, prefix: tuple[int, ...]) -> BlockTensor:
        """The blocks whose leading block indices are `prefix`: a block tensor of the rest,
        sharing this one's tiles."""
        return BlockTensor(
            f"{self.label}[{', '.join(map(str, prefix))}]",
            self.blocks[len(prefix) :],
            self.tile_shape,
            self.dtype,
            self.kind_of_buffer,
            self.span,
            lambda _name, rest: self.block(prefix + rest),
        )

    def __repr__(self) -> str:
        tile = f"{self.dtype.name}{list(self.tile_shape)}"
        return f"{self.label}: blocks {list(self.blocks)} of {tile}"


@dataclass
class Namespace:
    """A module-like object: `nl`, `nisa`, `nki`, `np`, `math`, enum groups, `nl.tile_size`."""

    name: str
    members: dict[str, Any]
    kind: str = "attribute"  # what a member is called in "has no ..." errors

    def get(self, attr: str, span: SourceSpan) -> Any:
        try:
            return self.members[attr]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(attr, list(self.members), n=1)
            raise KernelTypeError(
                f"{self.name} has no {self.kind} {attr!r}",
                span,
                hint=f"did you mean {self.name}.{close[0]}?" if close else None,
            ) from None

    def __repr__(self) -> str:
        return f"<module {self.name}>"


@dataclass(frozen=True)
class EnumValue:
    """A member of an nki enum (`nisa.engine.vector`, `nisa.reduce_cmd.idle`)."""

    group: str
    name: str

    def __repr__(self) -> str:
        return f"{self.group}.{self.name}"


@dataclass(frozen=True)
class OpRef:
    """An `nl.*` function usable both as an operator argument (`op=nl.add`) and as a call."""

    name: str
    call: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        return f"nl.{self.name}"


@dataclass
class Poison:
    """A module-level name whose definition failed; using it raises the deferred error."""

    error: Exception


_SIGNATURES: dict[Callable[..., Any], inspect.Signature | None] = {}


@dataclass
class Builtin:
    """A trace-time function implemented by neuronemu; `fn(span, *args, **kwargs)`."""

    name: str
    fn: Callable[..., Any]
    # `psum_tile += f(...)` (older dialect): `accumulate(span, dst_view, *args, **kwargs)`
    # writes f's result into the PSUM tile by accumulation instead of adding a new tile.
    accumulate: Callable[..., Any] | None = None
    # `t[...] = f(...)`: `into(span, dst_view, *args, **kwargs)` writes f's result straight
    # into the slice (as the compiler does) and returns True, or returns False (then f runs
    # as usual and its tile is copied in).
    into: Callable[..., bool] | None = None

    def check_arguments(self, span: SourceSpan, args: list[Any], kwargs: dict[str, Any]) -> None:
        """A call that does not fit the signature is the kernel's error, not a crash."""
        if self.fn in _SIGNATURES:
            signature = _SIGNATURES[self.fn]
        else:
            try:
                signature = inspect.signature(self.fn)
            except (TypeError, ValueError):
                signature = None
            _SIGNATURES[self.fn] = signature
        if signature is None:
            return
        try:
            signature.bind(span, *args, **kwargs)
        except TypeError as exc:
            raise KernelTypeError(f"{self.name}(): {exc}", span) from None

    def __repr__(self) -> str:
        return f"<built-in {self.name}>"


@dataclass(frozen=True)
class GridLaunch:
    """`kernel[gx, gy]`: a kernel function with its SPMD launch grid, called from host code."""

    kernel: Any
    grid: tuple[int, ...]


class Partial:
    """`functools.partial(f, *args, **kwargs)`: calling it calls `f` with them first."""

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.func, self.args, self.kwargs = func, args, kwargs

    def __repr__(self) -> str:
        return f"functools.partial({self.func!r})"


class Scalar:
    """An `nki.isa.NkiScalar` (or an older `VirtualRegister`): one integer in a sequencer
    register, known only when the kernel runs. Arithmetic on it is traced into register
    instructions (`neuronemu.trace.lib.nl_control`). `frozen`: a loop's variable (writing
    it has no effect on the loop, so the older API refused it)."""

    __slots__ = ("view", "older", "frozen")

    def __init__(self, view: View, older: bool = False, frozen: bool = False):
        self.view = view
        self.older = older
        self.frozen = frozen

    @property
    def dtype(self) -> DType:
        return self.view.dtype

    def __bool__(self) -> bool:
        raise TypeError(f"{self!r} has a value only when the kernel runs")

    def __repr__(self) -> str:
        kind = "VirtualRegister" if self.older else "NkiScalar"
        return f"{kind}({self.view.tensor.name}, {self.dtype.name})"


@dataclass(frozen=True)
class DeviceRange:
    """`nl.dynamic_range(...)` with a register bound: a `for` over it is a device loop."""

    start: Any
    stop: Any
    step: Any
    span: SourceSpan


class CoreDim(int):
    """A launch grid dimension spread over physical NeuronCores (`nl.nc(2)`, `nl.spmd_dim(
    4, nl.nc(2))`, `nl.nc(2) * 2`): instance x of it runs on core (x // stride) % cores."""

    cores: int
    stride: int

    def __new__(cls, size: int, cores: int, stride: int = 1) -> CoreDim:
        dim = super().__new__(cls, size)
        dim.cores, dim.stride = cores, stride
        return dim

    def core_of(self, x: int) -> int:
        return (x // self.stride) % self.cores

    def __mul__(self, other: Any) -> Any:  # nl.nc(2) * 2: the cores outermost
        if isinstance(other, int) and not isinstance(other, (bool, CoreDim)):
            return CoreDim(int(self) * other, self.cores, self.stride * other)
        return int(self) * other

    def __rmul__(self, other: Any) -> Any:  # 2 * nl.nc(2): the cores innermost
        if isinstance(other, int) and not isinstance(other, (bool, CoreDim)):
            return CoreDim(other * int(self), self.cores, self.stride)
        return other * int(self)

    def __repr__(self) -> str:
        return f"spmd_dim({int(self)}, cores={self.cores})"


# The NKI a file is written for, by what it imports: the older `neuronxcc.nki` (Neuron SDK
# 2.26 and before) or `nki` (NKI Beta 2, SDK 2.27, and the 0.x releases after it;
# reference/neuroncore.md §0).
OLDER_NKI, CURRENT_NKI = "neuronxcc.nki", "nki"


def no_block_dims(ctx: Any, span: SourceSpan) -> None:
    """Block dimensions (a partition dim after other dims) exist in the older dialect only:
    the current NKI removed them (NKI migration guides: "Removing block dimensions from NKI
    kernels")."""
    if ctx.dialect == CURRENT_NKI:
        raise KernelTypeError(
            "block dimensions (a partition dim after other dims) were removed from NKI, which "
            'this file imports as `nki`; see the NKI migration guide "Removing block '
            'dimensions from NKI kernels"',
            span,
            hint="make the partition dim the first one and keep the blocks in a Python list "
            "(or import neuronxcc.nki, the older dialect that has them)",
        )
