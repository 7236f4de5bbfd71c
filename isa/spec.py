"""The vocabulary instructions are declared in: engines, buffers, operands, attributes, specs.

An `InstrSpec` is data: the verifier, the tracer's argument binding, the executor, the cost
model and the disassembler all derive from it. Constraints and costs see only `OperandInfo`
(shape, dtype, buffer), never values.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Mapping

from neuronemu_isa.numerics import PACKED

__all__ = [
    "REG",
    "Engine",
    "Buffer",
    "Operand",
    "In",
    "Out",
    "RegisterFile",
    "Result",
    "Attr",
    "OperandInfo",
    "Check",
    "InstrSpec",
    "SBUF",
    "PSUM",
    "HBM",
    "ON_CHIP",
    "same_partition_size",
    "same_free_size",
    "max_partition",
    "max_free",
    "not_both_psum",
    "per_partition_or_scalar",
    "first_input_result",
    "hbm_traffic",
    "packed_misuse",
]


class Engine(str, Enum):
    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    SYNC = "sync"
    DMA = "dma"


class Buffer(str, Enum):
    SBUF = "sbuf"
    PSUM = "psum"
    HBM = "hbm"
    REG = "reg"  # an engine's internal registers (activation's reduce_regs)


SBUF, PSUM, HBM, REG = Buffer.SBUF, Buffer.PSUM, Buffer.HBM, Buffer.REG
ON_CHIP = (SBUF, PSUM)


@dataclass(frozen=True)
class RegisterFile:
    """An engine's internal registers an instruction uses implicitly (kernels never name
    them): `words(engine)` 32-bit values of `dtype` per lane, for `pmax` lanes. `per_lane`
    files are viewed over the tile's partitions only; `used(attrs)` says whether an optional
    register operand is in use (activation's reduce registers, only in its reduce form)."""

    dtype: str
    words: Callable[[Engine], int] = lambda engine: 1
    per_lane: bool = True
    used: Callable[[Mapping[str, Any]], bool] = lambda attrs: True


@dataclass(frozen=True)
class Operand:
    """A tensor (or immediate) operand; `role` is "in" or "out"."""

    name: str
    role: str
    buffers: tuple[Buffer, ...]
    dtypes: frozenset[str] | None = None  # None: any dtype
    optional: bool = False
    scalar: bool = False  # a Python number may stand in for the tile
    # An output also read: when this attribute is true (accumulate), or when this function
    # of the attributes says so.
    reads_if: str | Callable[[Mapping[str, Any]], bool] | None = None
    register: RegisterFile | None = None  # for REG operands: the file it is bound to
    # An output read only to keep the elements the instruction does not write (a merge):
    # never-written bytes there are not an uninitialized read (the check cannot tell which
    # elements the instruction writes, so it takes them all as written).
    merge: bool = False
    # An input the semantics use only as fp32 values (`f32` of it), always or when this
    # function of the attributes says so: the executor may hand them over converted, and
    # convert a tile's bytes once for every read until they change.
    fp32: bool | Callable[[Mapping[str, Any]], bool] = False

    def reads(self, attrs: Mapping[str, Any]) -> bool:
        """Does the instruction read this operand, given its attributes?"""
        if self.role == "in":
            return True
        if self.reads_if is None:
            return False
        if callable(self.reads_if):
            return bool(self.reads_if(attrs))
        return bool(attrs.get(self.reads_if))

    def as_fp32(self, attrs: Mapping[str, Any]) -> bool:
        """Do the semantics use this operand only as fp32 values, given the attributes?"""
        return bool(self.fp32(attrs)) if callable(self.fp32) else self.fp32


def In(
    name: str,
    *buffers: Buffer,
    dtypes: Any = None,
    optional: bool = False,
    scalar: bool = False,
    fp32: bool | Callable[[Mapping[str, Any]], bool] = False,
) -> Operand:
    return Operand(
        name, "in", buffers, frozenset(dtypes) if dtypes else None, optional, scalar, fp32=fp32
    )


def Out(
    name: str,
    *buffers: Buffer,
    dtypes: Any = None,
    reads_if: str | Callable[[Mapping[str, Any]], bool] | None = None,
    optional: bool = False,
    register: RegisterFile | None = None,
    merge: bool = False,
) -> Operand:
    return Operand(
        name,
        "out",
        buffers,
        frozenset(dtypes) if dtypes else None,
        optional,
        reads_if=reads_if,
        register=register,
        merge=merge,
    )


_NO_DEFAULT = object()


@dataclass(frozen=True)
class Attr:
    """A compile-time attribute (op, accumulate, value...); `choices` restricts its values."""

    name: str
    default: Any = _NO_DEFAULT
    choices: tuple[Any, ...] | None = None

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT


@dataclass(frozen=True)
class OperandInfo:
    """What constraints and costs may know of an operand: its shape, dtype and buffer."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: Buffer
    itemsize: int
    inner_stride_bytes: int = 0  # 0 when contiguous in the innermost free dim
    indirect_rows: int = 0  # rows addressed from run-time offsets (0: a static pattern)
    # Maximal runs of contiguous bytes the operand's elements form in memory (each partition of
    # an on-chip operand a memory of its own): a DMA moves each run as a packet of its own.
    runs: int = 1

    @property
    def partition_size(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self) -> int:
        return math.prod(self.shape[1:]) if len(self.shape) > 1 else 1

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    @property
    def bytes_per_partition(self) -> int:
        return self.free_size * self.itemsize


@dataclass(frozen=True)
class Check:
    """The context a constraint or a cost function sees."""

    arch: Any
    engine: Engine
    operands: Mapping[str, OperandInfo | float | None]
    attrs: Mapping[str, Any]

    def tile(self, name: str) -> OperandInfo:
        """Operand `name`, a tile the instruction has (a required one: the verifier saw it);
        asking for one it lacks is neuronemu's bug."""
        v = self.operands.get(name)
        if not isinstance(v, OperandInfo):
            raise AssertionError(f"{name} is not a tile operand here (it is {v!r})")
        return v

    def tile_or_none(self, name: str) -> OperandInfo | None:
        """Operand `name` if it is a tile; None if it is absent or an immediate."""
        v = self.operands.get(name)
        return v if isinstance(v, OperandInfo) else None


Constraint = Callable[[Check], "str | None"]
# What a value-returning call (older NKI: no dst=) makes for its dst: shape, dtype, buffer.
Result = tuple[tuple[int, ...], str, Buffer]


def first_input_result(c: Check) -> Result | None:
    """The default dst of a value-returning call: its first tile input's shape and dtype, in
    SBUF (a tile keeps a free dim: [P] is [P, 1]); None without a tile input."""
    first = next((v for v in c.operands.values() if isinstance(v, OperandInfo)), None)
    if first is None:
        return None
    shape = first.shape if len(first.shape) >= 2 else (*first.shape, 1)
    return tuple(shape), first.dtype, SBUF


def hbm_traffic(spec: InstrSpec, c: Check) -> tuple[int, int]:
    """Bytes an instruction reads from and writes to HBM: its HBM operands, read or
    written as the spec declares them."""
    read = write = 0
    for op in spec.operands:
        info = c.tile_or_none(op.name)
        if info is None or info.buffer != HBM:
            continue
        if op.reads(c.attrs):
            read += info.nbytes
        if op.role == "out":
            write += info.nbytes
    return read, write


@dataclass(frozen=True)
class InstrSpec:
    """One instruction, declared once.

    `semantics(**inputs, **attrs)` is pure NumPy: it receives each present input operand (an
    array, or a float for an immediate), each output whose `reads_if` attribute is true, and
    every attribute; for each output `o` it names a `<o>_shape` parameter for, that
    output's shape; for each operand `o` it names `<o>_dtype_name` for, its NKI dtype name
    (a packed MX tile's words do not say which format they pack); and, if it names an
    `engine` parameter, the Engine that runs it. It
    returns the single output's values, or a dict by output name. The machine casts each
    result to its destination dtype on write (round to nearest even).
    """

    name: str
    engines: tuple[Engine, ...]  # the first is the default engine
    operands: tuple[Operand, ...]
    semantics: Callable[..., Any]
    cost: Callable[[Check], int]
    attrs: tuple[Attr, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    doc: str = ""
    positional: tuple[str, ...] = field(default=())  # parameter order, as nki.isa declares it
    # Optional: called like `semantics`, returns messages about the values (e.g. inputs
    # outside an activation's documented range), reported with the instruction's line.
    diagnose: Callable[..., list[str]] | None = None
    # Optional: the engine when the kernel names none (engine=unknown), from the operands
    # (OperandInfo, an immediate or None) and attributes; without it, `engines[0]`.
    default_engine: Callable[[Mapping[str, Any], Mapping[str, Any]], Engine] | None = None
    # The dst a value-returning call makes (older NKI), from the inputs (a Check whose
    # operands are the call's tile inputs): shape, dtype and buffer. Default: like its first
    # tile input, in SBUF.
    result: Callable[[Check], Result | None] = first_input_result
    # Multiply-add FLOPs the instruction does on the PE array (the Tensor-engine floor and
    # MFU count them); None: none.
    flops: Callable[[Check], int] | None = None
    # The PE array's peak FLOP rate in the instruction's mode and dtypes (flops per ns: FP32
    # at a quarter of BF16, FP8 double_row at twice it): the Tensor-engine floor divides
    # `flops` by it. None: the BF16 peak.
    peak_flops_per_ns: Callable[[Check], float] | None = None
    # The older value-returning form (`t = nisa.f(...)`) of a call the older compiler lowered
    # to another instruction: given the call's operands and attributes by name, the
    # instruction's name and its operands and attributes, or None (as written).
    older_call: Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None] | None = None
    # Which elements of the first output come from written data only, given a mask per read
    # operand (True: written) and the attributes; for instructions that move data across
    # partitions (None: one never-written element read spoils the whole output).
    validity: Callable[..., Any] | None = None
    # An operand the engine loads before it works (the Tensor engine's LoadStationary) and
    # the cycles that takes: the load overlaps the engine's previous instruction, but an
    # engine that was waiting for the operand's data pays it; none when the previous
    # instruction of the engine loaded the same operand.
    preloaded: str | None = None
    preload_cost: Callable[[Check], int] | None = None
    # Outputs that must lie within one PSUM bank (a matmul's accumulation group).
    one_psum_bank: tuple[str, ...] = ()
    # For a plain product `dst (+)= stationary.T @ moving` in fp32: given the attributes,
    # None where they change the values otherwise (a transpose, a mode), else whether it adds
    # to what dst holds. Steps of one into a region sum as one product
    # (neuronemu.sim.batched). None: never one.
    product_step: Callable[[Mapping[str, Any]], bool | None] | None = None
    # May its operands be indirect views (addressed at run time, gather/scatter)?
    indirect: bool = False
    # A copy whose `dst` depends on `src` alone: running it again reproduces `dst` while
    # `src` is unchanged (the allocator reloads a spilled tile so, neuronemu.build.spill).
    pure_copy: bool = False
    # The operand that holds the other physical core's tile (sendrecv's `src`, once the two
    # cores' calls are paired): the instruction moves data between the cores.
    peer: str | None = None
    # The older value-returning form's parameters (neuronxcc.nki), in its order, each with the
    # name it binds to, when they are not `positional` without dst: "shape" and "dtype" give
    # the tile the call returns (`t = nisa.memset(shape, value, dtype)`).
    older_params: tuple[tuple[str, str], ...] = ()
    # What it may do with the packed MX x4 dtypes (numerics.PACKED) on operands whose `dtypes`
    # do not name them: "refuse" (their words are no numbers an engine computes with), "copy"
    # (bits moved between tiles of one dtype), "zero" (filled with 0). See `packed_misuse`.
    packed: str = "refuse"

    def operand(self, name: str) -> Operand:
        for op in self.operands:
            if op.name == name:
                return op
        raise KeyError(name)

    @functools.cached_property
    def inputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role == "in")

    @functools.cached_property
    def outputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role == "out")

    @property
    def param_names(self) -> tuple[str, ...]:
        return self.positional or (
            tuple(o.name for o in self.operands) + tuple(a.name for a in self.attrs)
        )


def packed_misuse(spec: InstrSpec, c: Check) -> str | None:
    """Why `spec` cannot take a packed MX x4 tile where it does (None if it can).

    nki.api.shared: the packed types are "custom data type for nki.isa.nc_matmul_mx and
    nki.isa.quantize_mx"; nki.isa.memset: "For x4 packed types ..., only value=0 is supported";
    nki.isa.dma_copy casts through fp32, which has no MX casting (neuroncore.md B4), so a copy
    moves them only between tiles of one dtype (its bits)."""
    tiles = [(op, c.tile_or_none(op.name)) for op in spec.operands]
    packed = [(op, t) for op, t in tiles if t is not None and t.dtype in PACKED]
    loose = [(op, t) for op, t in packed if op.dtypes is None or t.dtype not in op.dtypes]
    if not loose:
        return None
    op, t = loose[0]
    if spec.packed == "copy" and len({t.dtype for _, t in tiles if t is not None}) == 1:
        return None
    if spec.packed == "zero" and c.attrs.get("value") == 0:
        return None
    rule = {
        "copy": "copies it only to and from tiles of the same dtype (its bits)",
        "zero": "fills it with 0 only",
    }.get(spec.packed, "cannot compute with its packed words")
    return (
        f"{op.name} has the packed MX dtype {t.dtype}; {spec.name} {rule} (the x4 dtypes are "
        "for quantize_mx and nc_matmul_mx)"
    )


# Constraint helpers: each returns a constraint naming the operand, its value and the limit.


def same_partition_size(*names: str) -> Constraint:
    def check(c: Check) -> str | None:
        tiles = [t for t in (c.tile_or_none(n) for n in names) if t is not None]
        if len({t.partition_size for t in tiles}) > 1:
            sizes = ", ".join(f"{t.name} {t.partition_size}" for t in tiles)
            return f"partition sizes differ ({sizes}); they must be equal"
        return None

    return check


def same_free_size(*names: str) -> Constraint:
    def check(c: Check) -> str | None:
        tiles = [t for t in (c.tile_or_none(n) for n in names) if t is not None]
        if len({t.free_size for t in tiles}) > 1:
            sizes = ", ".join(f"{t.name} {t.free_size}" for t in tiles)
            return f"elements per partition differ ({sizes}); they must be equal"
        return None

    return check


def max_partition(name: str, key: str) -> Constraint:
    def check(c: Check) -> str | None:
        t = c.tile_or_none(name)
        limit = c.arch[key]
        if t is not None and t.partition_size > limit:
            return f"{name} partition size {t.partition_size} exceeds {limit} ({key})"
        return None

    return check


def max_free(name: str, key: str) -> Constraint:
    def check(c: Check) -> str | None:
        t = c.tile_or_none(name)
        limit = c.arch[key]
        if t is not None and t.free_size > limit:
            return f"{name} free size {t.free_size} exceeds {limit} ({key})"
        return None

    return check


def not_both_psum(a: str, b: str) -> Constraint:
    def check(c: Check) -> str | None:
        ta, tb = c.tile_or_none(a), c.tile_or_none(b)
        if ta is not None and tb is not None and ta.buffer == tb.buffer == PSUM:
            return f"{a} and {b} are both in PSUM; at most one may be"
        return None

    return check


def per_partition_or_scalar(name: str, like: str) -> Constraint:
    """`name` is an immediate or a [P, 1] tile with the partition size of `like`."""

    def check(c: Check) -> str | None:
        t, ref = c.tile_or_none(name), c.tile_or_none(like)
        if t is None or ref is None:
            return None
        if t.free_size != 1 or t.partition_size != ref.partition_size:
            return (
                f"{name} has shape {list(t.shape)}; it must be a scalar or "
                f"[{ref.partition_size}, 1] (one value per partition of {like})"
            )
        return None

    return check
