"""`nki.compiler`: direct allocation (`sbuf/psum.alloc`, `mod_alloc`, `auto_alloc`) and
the decorators and directives, which do not change what runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neuronemu.build.allocator import partition_offset
from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan, shown
from neuronemu.ir import BUFFERS, DType, Tensor
from neuronemu.trace.lib.emit import NO_REORDER, builtin
from neuronemu.trace.values import (
    BlockTensor,
    Builtin,
    DirectAlloc,
    EnumValue,
    Namespace,
    Partial,
    no_block_dims,
)

if TYPE_CHECKING:
    from neuronemu.trace.lib.context import Context


def decorator(name: str) -> Any:

    def deco(span: SourceSpan, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return args[0]
        return Builtin(f"nki.{name}", lambda span, fn: fn)

    return Builtin(f"nki.{name}", deco)


_ALLOC_PARAMS = ("idx", "pdim_size", "fdim_size")  # nki.compiler.sbuf.alloc's names for them


def _allocation_args(func: Any, index: tuple, pdim: int, fdim: int) -> tuple[list, dict]:
    """How the allocation function is called: by the documented names when it has them all
    (a functools.partial fixing another parameter by keyword needs them so, as nki-samples'
    allocated attention does), else positionally."""
    target, bound = func, set()
    if isinstance(func, Partial):
        target, bound = func.func, set(func.kwargs)
    params = getattr(getattr(target, "fn", None), "params", None)
    names = {p.name for p in params} if params is not None else set()
    if set(_ALLOC_PARAMS) <= names and bound:
        return [], dict(zip(_ALLOC_PARAMS, (index, pdim, fdim)))
    return [index, pdim, fdim], {}


def directly_placed(
    ctx: Context, span: SourceSpan, shape: tuple, at: int, dt: DType, kind: DirectAlloc, name: str
) -> Any:
    """A tensor whose tiles the kernel places (nki direct allocation): each block's tile gets
    the address the allocation function gives for its block index."""
    tile_shape = tuple(int(d) for d in shape[at:])
    plain = BUFFERS[kind.name]

    def make(label: str, index: tuple[int, ...]) -> Tensor:
        t = ctx.builder.alloc(label, tile_shape, dt, plain, span)
        free_bytes = t.bytes_per_partition
        got = ctx.call(
            kind.func, *_allocation_args(kind.func, index, tile_shape[0], free_bytes), span
        )
        want = 3 if kind.name == "psum" else 2
        if not (
            isinstance(got, (tuple, list))
            and len(got) == want
            and all(isinstance(g, int) and not isinstance(g, bool) for g in got)
        ):
            what = "(bank, partition, byte offset)" if want == 3 else "(partition, byte offset)"
            raise KernelTypeError(
                f"the allocation function of {label!r} must return {what} ints, got {shown(got)}",
                span,
            )
        partition, offset = got[-2], got[-1]
        if offset < 0:
            raise ConstraintError(
                f"the allocation function puts {label!r} at byte offset {offset}; offsets are >= 0",
                span,
            )
        if want == 3:
            if not 0 <= got[0] < ctx.arch.psum_banks or not 0 <= offset < ctx.arch.psum_bank_bytes:
                raise ConstraintError(
                    f"{label!r}: PSUM bank {got[0]} offset {offset} is not in "
                    f"{ctx.arch.psum_banks} banks of "
                    f"{ctx.arch.psum_bank_bytes} bytes",
                    span,
                )
            offset += got[0] * ctx.arch.psum_bank_bytes
        t.partition_offset = partition_offset(partition, t, ctx.arch, span)
        t.address = offset
        return t

    if not at:
        return make(name, ())
    no_block_dims(ctx, span)
    return BlockTensor(name, tuple(int(d) for d in shape[:at]), tile_shape, dt, plain, span, make)


def namespace(ctx: Context) -> Namespace:
    """`nki.compiler`: direct allocation (sbuf/psum alloc, mod_alloc, auto_alloc) and the
    kernel decorators and directives, which do not change what the emulator runs."""

    def modulo(base: int, shape: Any, scale: int, index: tuple[int, ...]) -> int:
        shape = tuple(shape) if shape else (1,) * len(index)
        flat = 0
        for i, n in zip(index, shape):
            flat = flat * n + i % n
        for n in shape[len(index) :]:
            flat *= n
        return base + flat * scale

    def allocator(buffer: str) -> Namespace:
        def alloc(span, func, **_):
            return DirectAlloc(buffer, func)

        def mod_alloc(
            span,
            base_addr=0,
            *,
            base_bank=0,
            num_bank_tiles=(),
            base_partition=0,
            num_par_tiles=(),
            num_free_tiles=(),
            **_,
        ):
            for name, value in (
                ("base_addr", base_addr),
                ("base_bank", base_bank),
                ("base_partition", base_partition),
            ):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise KernelTypeError(
                        f"mod_alloc: {name} must be an int >= 0, got {shown(value)}", span
                    )
            for name, value in (
                ("num_bank_tiles", num_bank_tiles),
                ("num_par_tiles", num_par_tiles),
                ("num_free_tiles", num_free_tiles),
            ):
                if not isinstance(value, (tuple, list)) or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value
                ):
                    raise KernelTypeError(
                        f"mod_alloc: {name} must be a tuple of ints > 0, got {shown(value)}", span
                    )

            def place(span2, index, pdim_size, fdim_size):
                index = tuple(index)
                where = (
                    modulo(base_partition, num_par_tiles, pdim_size, index),
                    modulo(base_addr, num_free_tiles, fdim_size, index),
                )
                if buffer == "psum":
                    return (modulo(base_bank, num_bank_tiles, 1, index), *where)
                return where

            return DirectAlloc(buffer, builtin(f"nki.compiler.{buffer}.mod_alloc", place))

        return Namespace(
            f"nki.compiler.{buffer}",
            {
                "alloc": builtin(f"nki.compiler.{buffer}.alloc", alloc),
                "mod_alloc": builtin(f"nki.compiler.{buffer}.mod_alloc", mod_alloc),
                "auto_alloc": builtin(
                    f"nki.compiler.{buffer}.auto_alloc", lambda span, **_: BUFFERS[buffer]
                ),
            },
        )

    members: dict[str, Any] = {"sbuf": allocator("sbuf"), "psum": allocator("psum")}
    for deco in ("skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc"):
        members[deco] = decorator(deco)
    members["no_reorder"] = builtin("nki.compiler.no_reorder", lambda span: NO_REORDER)
    members["multi_buffer"] = builtin(
        "nki.compiler.multi_buffer", lambda span, factor=2: EnumValue("multi_buffer", str(factor))
    )
    return Namespace("nki.compiler", members)
