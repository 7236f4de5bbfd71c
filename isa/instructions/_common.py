"""Shared dtype sets, constraint helpers and per-element cost rules of the compute engines."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from neuronemu_isa.numerics import DTYPES
from neuronemu_isa.spec import (
    PSUM,
    SBUF,
    Check,
    Engine,
    OperandInfo,
    RegisterFile,
    Result,
    first_input_result,
)

ANY_DTYPE = frozenset(DTYPES)
# The Scalar engine's per-lane fp32 accumulation registers (activation's reduce form), in use
# when a call reduces (reduce_cmd other than idle, or a reduce_res).
REDUCE_REGS = RegisterFile(
    "float32",
    used=lambda args: (
        args.get("reduce_cmd", "idle") not in (None, "idle") or args.get("reduce_res") is not None
    ),
)
MATMUL_IN = frozenset({"float8_e4m3", "float8_e5m2", "bfloat16", "float16", "float32"})
F32 = frozenset({"float32"})


def fixed_width_result(width: int, dtype: str) -> Callable[[Check], Result | None]:
    """The dst of a value-returning call that is `width` values per partition of `dtype`
    (bn_stats: 6 statistics; max8: 8 values)."""

    def result(c: Check) -> Result | None:
        first = first_input_result(c)
        return None if first is None else ((first[0][0], width), dtype, SBUF)

    return result


def f32(x: np.ndarray | float) -> np.ndarray:
    """Engines compute in fp32 (nki.isa: "arithmetic ... performed in float32")."""
    return np.asarray(x, dtype=np.float32)


def rows(x: np.ndarray) -> np.ndarray:
    """[P, free...] as [P, F], the per-partition element streams an engine walks."""
    return x.reshape(x.shape[0], -1)


def scalar_or_column(x: np.ndarray | float) -> np.ndarray:
    """An immediate, or a [P, 1] tile broadcast along the free dimension."""
    return f32(x) if np.ndim(x) == 0 else rows(f32(x))


def bitvec(op: str, a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """A bitvec ALU op on the raw integer bits of `a` (nki: right_shift is logical)."""
    from neuronemu_isa.ops import alu

    b = np.asarray(b).astype(a.dtype)
    if op == "right_shift" and a.dtype.kind == "i":
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        return np.right_shift(a.view(unsigned), b.astype(unsigned)).view(a.dtype)
    return alu(op)(a, b)


def bitvec_checks(ops: tuple[str, ...], tiles: tuple[str, ...], vector_only: bool):
    """Bitvec ops need integer dtypes (and maybe the Vector engine); no mixing with arithmetic."""
    from neuronemu_isa.ops import BITVEC_OPS

    def check(c: Check) -> str | None:
        chosen = [c.attrs.get(o) for o in ops if c.attrs.get(o) is not None]
        kinds = {op in BITVEC_OPS for op in chosen}
        if True not in kinds:
            return None
        if len(kinds) > 1:
            return f"ops {chosen} mix bitvec and arithmetic ops; both must be of one kind"
        if vector_only and c.engine != Engine.VECTOR:
            return f"bitvec op {chosen[0]!r} runs on the Vector engine only, not {c.engine.value}"
        for name in tiles:
            t = c.tile_or_none(name)
            if t is not None and not t.dtype.startswith(("int", "uint")):
                return f"bitvec op {chosen[0]!r} needs integer dtypes; {name} is {t.dtype}"
        return None

    return check


def no_gpsimd_psum(*names: str):
    def check(c: Check) -> str | None:
        if c.engine != Engine.GPSIMD:
            return None
        for n in names:
            t = c.tile_or_none(n)
            if t is not None and t.buffer == PSUM:
                return f"{n} is in PSUM, which the GpSimd engine cannot access; use vector"
        return None

    return check


def lane_elems_per_cycle(c: Check, engine: Engine, *tiles: OperandInfo | None) -> float:
    """Elements each lane (partition) processes per cycle for this engine and these dtypes.

    Vector: 512 elem/cycle over 128 lanes for 16-bit dtypes and 256 otherwise on NC-v3/v4,
    128 on NC-v2 (arch constants); Scalar and GpSimd: their per-cycle rates.
    """
    lanes = c.arch.sbuf_partitions
    if engine == Engine.VECTOR:
        sixteen = all(t is None or t.itemsize <= 2 for t in tiles)
        key = "cost_vector_elems_per_cycle_16bit" if sixteen else "cost_vector_elems_per_cycle"
        return c.arch[key] / lanes
    if engine == Engine.GPSIMD:
        return c.arch.cost_gpsimd_elems_per_cycle / lanes
    return c.arch.cost_scalar_elems_per_cycle / lanes


def streaming_cycles(c: Check, elements: int, *tiles: OperandInfo | None) -> int:
    """Cost of streaming `elements` per lane: max(MIN_II, N / rate), plus GpSimd start-up.

    Ref: nki.isa cost notes (ISA-old): most Vector/Scalar instructions take max(64, N) cycles
    on NC-v2; nki_perf_guide.rst: GpSimd instruction start-up ~150 cycles; a strided
    operand (innermost step over 16 bytes) streams at half rate.
    """
    rate = lane_elems_per_cycle(c, c.engine, *tiles)
    # trainium_inferentia2_arch.rst: a most-minor free stride over 16 bytes halves each
    # SBUF/PSUM read/write interface's bandwidth.
    if any(
        t is not None and t.inner_stride_bytes > c.arch.cost_stride_penalty_bytes for t in tiles
    ):
        rate /= c.arch.cost_stride_penalty_factor
    cycles = max(c.arch.cost_min_ii_cycles, math.ceil(elements / rate))
    if c.engine == Engine.GPSIMD:
        cycles += c.arch.cost_gpsimd_startup_cycles
    return int(cycles)


# The ufuncs `fold_free` reduces row by row, and the value a reduction starts from where
# NumPy's own would change a result: add starts from its identity 0.0, and 0.0 + -0.0 is
# +0.0, while -0.0 + x is x for every x (None: NumPy's start changes nothing: no identity,
# or 1 * x, which is x).
_FOLD_START: dict[Any, float | None] = {
    np.add: -0.0,
    np.multiply: None,
    np.maximum: None,
    np.minimum: None,
}


def fold_free(
    fn, x: np.ndarray, init: np.ndarray | np.floating | float | None = None
) -> np.ndarray:
    """Reduce [P, F] over F strictly left to right, ((init op x0) op x1) ..., giving [P].

    An engine walks a partition's elements one at a time, so the order (and hence the fp32
    rounding) is sequential, unlike NumPy's pairwise `sum`.
    """
    start = _FOLD_START.get(fn, False) if x.dtype == np.float32 and x.shape[0] > 1 else False
    if start is not False:
        # The elements as rows of a C-contiguous [F, P] array, reduced over its slow axis:
        # NumPy then combines them row by row, in order (its pairwise summation is only along
        # the fast axis, numpy.sum's notes; with P = 1 that axis is the fast one): the same
        # values as `accumulate` along F, in a third of its time.
        skip = 0 if init is None else 1
        rows_first = np.empty((x.shape[1] + skip, x.shape[0]), dtype=np.float32)
        if skip:
            rows_first[0] = np.asarray(init, dtype=np.float32).reshape(-1)
        rows_first[skip:] = x.T
        if start is None:
            out = fn.reduce(rows_first, axis=0)
        else:
            out = fn.reduce(rows_first, axis=0, initial=start)
        if not np.isnan(out).any():
            return out
        # (a NaN: which one comes out, sign and payload, follows the order of each step's
        # operands, which the reduction does not keep: left to right below)
    if init is not None:
        first = np.broadcast_to(np.asarray(init, dtype=x.dtype).reshape(-1, 1), (x.shape[0], 1))
        x = np.concatenate([first, x], axis=1)
    if isinstance(fn, np.ufunc):
        return fn.accumulate(x, axis=1)[:, -1]
    acc = x[:, 0]
    for i in range(1, x.shape[1]):
        acc = fn(acc, x[:, i])
    return acc


def affine_pattern(pattern, offset: int, channel_multiplier: int, partitions: int) -> np.ndarray:
    """[P, F] int32 values offset + p * channel_multiplier + sum(i_k * step_k) of an iota pattern.

    Ref: nki.isa.iota / nki.isa.affine_select: `pattern` is [[step, num], ...] outermost first;
    the values are computed in 32-bit integer arithmetic (wrapping).
    """
    value = np.full((partitions, 1), offset, dtype=np.int64)
    value = value + np.arange(partitions, dtype=np.int64).reshape(-1, 1) * channel_multiplier
    for step, num in pattern:
        value = (value[:, :, None] + np.arange(num, dtype=np.int64) * step).reshape(partitions, -1)
    return value.astype(np.int32)


def pattern_checks(dst: str):
    """An iota-style `pattern`: at most `tile_pattern_max_dims` [step, num] pairs whose nums
    multiply to the elements per partition of `dst`; offset and multiplier are integers."""

    def check(c: Check) -> str | None:
        pattern = c.attrs.get("pattern")
        limit = c.arch.tile_pattern_max_dims
        if not isinstance(pattern, (list, tuple)) or not all(
            isinstance(p, (list, tuple))
            and len(p) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in p)
            for p in pattern
        ):
            return f"pattern {pattern!r} must be a list of [step, num] integer pairs"
        if not 1 <= len(pattern) <= limit:
            return (
                f"pattern has {len(pattern)} [step, num] pairs; it must have 1 to {limit} "
                "(tile_pattern_max_dims)"
            )
        if any(num < 1 for _, num in pattern):
            return f"pattern {list(pattern)} has a num below 1"
        t = c.tile_or_none(dst)
        total = math.prod(num for _, num in pattern)
        if t is not None and total != t.free_size:
            return (
                f"pattern {list(pattern)} covers {total} elements per partition; {dst} has "
                f"{t.free_size}"
            )
        for name in ("offset", "channel_multiplier"):
            v = c.attrs.get(name, 0)
            if isinstance(v, bool) or not isinstance(v, int):
                return f"{name} {v!r} must be an int32 integer"
        return None

    return check


def needs_nc_version(version: int, what: str):
    """`what` exists only on NeuronCore-v`version` and newer."""

    def check(c: Check) -> str | None:
        if c.arch.nc_version >= version:
            return None
        from neuronemu_isa._arch import TARGETS, load_arch

        newer = "/".join(t for t in TARGETS if load_arch(t).nc_version >= version)
        return (
            f"{what} needs NC-v{version}+ ({newer}); target {c.arch.name} is "
            f"NC-v{c.arch.nc_version}"
        )

    return check


def column_of(name: str, like: str):
    """`name`, when given, is a [P, 1] tile with the partition size of `like`."""

    def check(c: Check) -> str | None:
        t, ref = c.tile_or_none(name), c.tile_or_none(like)
        if t is None or ref is None:
            return None
        if t.free_size != 1 or t.partition_size != ref.partition_size:
            return (
                f"{name} has shape {list(t.shape)}; it must be [{ref.partition_size}, 1] "
                f"(one value per partition of {like})"
            )
        return None

    return check


def same_dtype(a: str, b: str):
    def check(c: Check) -> str | None:
        ta, tb = c.tile_or_none(a), c.tile_or_none(b)
        if ta is not None and tb is not None and ta.dtype != tb.dtype:
            return f"{a} is {ta.dtype} and {b} is {tb.dtype}; they must have the same dtype"
        return None

    return check


def stateless_reduce_cmd(allowed: tuple[str, ...], result: str = "reduce_res"):
    """Accept only `reduce_cmd` values that need no Vector accumulator state from earlier
    instructions; and `result` only when the command actually reduces."""

    def check(c: Check) -> str | None:
        cmd = c.attrs.get("reduce_cmd")
        if cmd not in allowed:
            return (
                f"reduce_cmd={cmd!r} continues an accumulation kept between instructions, "
                f"which is not supported; use one of {', '.join(allowed)}"
            )
        if cmd == "idle" and c.tile_or_none(result) is not None:
            return f"{result} is given but reduce_cmd is idle; use reduce_cmd=reset_reduce"
        return None

    return check


def cycles_at_rate(c: Check, elements: int, elems_per_cycle: float) -> int:
    """max(MIN_II, elements per lane / (engine-wide elements per cycle / lanes))."""
    per_lane = elems_per_cycle / c.arch.sbuf_partitions
    return int(max(c.arch.cost_min_ii_cycles, math.ceil(elements / per_lane)))


def reads_dst_attr():
    """A fixed attribute for `Out(..., reads_if="reads_dst")`: the instruction leaves some of
    dst unmodified (predicated copies, shuffles with a keep mask), so it always reads dst."""
    from neuronemu_isa.spec import Attr

    return Attr("reads_dst", True, (True,))


def _arith_binary() -> tuple[str, ...]:
    from neuronemu_isa.ops import ALU_BINARY, BITVEC_OPS

    return tuple(op for op in ALU_BINARY if op not in BITVEC_OPS)


# Binary arithmetic ALU ops (nki.isa "Supported Math Operators", bitvec ops excluded).
ARITH_BINARY = _arith_binary()


def binary_step(op: str, x: np.ndarray, operand: np.ndarray, reverse: bool) -> np.ndarray:
    """x <op> operand in fp32, or operand <op> x when `reverse`."""
    from neuronemu_isa.ops import alu

    fn = alu(op)
    return fn(operand, x) if reverse else fn(x, operand)


FLOAT_DTYPES = frozenset(n for n in DTYPES if n.startswith(("float", "bfloat")))


def top8_checks(data: str, out: str | None, min_free: bool, vals: str | None = None):
    """max8 / nc_find_index8 / nc_match_replace8: `data` has at most tile_top8_free_max (and,
    with `min_free`, at least tile_top8_free_min) elements per partition; `out` and `vals`
    hold tile_top8_count elements per partition."""

    def check(c: Check) -> str | None:
        d = c.tile(data)
        lo, hi = c.arch.tile_top8_free_min, c.arch.tile_top8_free_max
        if d.free_size > hi or (min_free and d.free_size < lo):
            span = (
                f"{lo}..{hi} (tile_top8_free_min..tile_top8_free_max)"
                if min_free
                else f"at most {hi} (tile_top8_free_max)"
            )
            return f"{data} has {d.free_size} elements per partition; it must have {span}"
        k = c.arch.tile_top8_count
        for name in (out, vals):
            t = c.tile_or_none(name) if name else None
            if t is not None and t.free_size != k:
                return (
                    f"{name} has {t.free_size} elements per partition; it must have {k} "
                    "(tile_top8_count)"
                )
        return None

    return check


def claim_matches(data: np.ndarray, vals: np.ndarray, order) -> np.ndarray:
    """For each val (taken in `order`), the first position of `data` equal to it that an earlier
    val did not claim, per partition; int64, -1 where there is none. data [P, N], vals [P, 8]."""
    claimed = np.zeros(data.shape, dtype=bool)
    found = np.full(vals.shape, -1, dtype=np.int64)
    rows_ = np.arange(data.shape[0])
    for j in order:
        hits = (data == vals[:, j : j + 1]) & ~claimed
        first = hits.argmax(axis=1)
        ok = hits[rows_, first]
        found[ok, j] = first[ok]
        claimed[rows_[ok], first[ok]] = True
    return found


def two_arith_ops_attrs():
    """op0/op1 (binary arithmetic) and reverse0/reverse1, as scalar_tensor_tensor and
    tensor_tensor_scan declare them."""
    from neuronemu_isa.spec import Attr

    return (
        Attr("op0", choices=ARITH_BINARY),
        Attr("op1", choices=ARITH_BINARY),
        Attr("reverse0", False, (False, True)),
        Attr("reverse1", False, (False, True)),
    )


def tile_pair_with_scalar(first: str, second: str, scalar: str):
    """dst, `first` and `second` alike in partitions and elements per partition, `scalar` an
    immediate or [P, 1], and `first`/`second` not both in PSUM."""
    from neuronemu_isa.spec import (
        not_both_psum,
        per_partition_or_scalar,
        same_free_size,
        same_partition_size,
    )

    return (
        same_partition_size("dst", first, second),
        same_free_size("dst", first, second),
        per_partition_or_scalar(scalar, first),
        not_both_psum(first, second),
    )


def max_free_dims(key: str, *names: str):
    """Each of `names` has at most `arch[key]` free dimensions (rank key + 1 with partitions)."""

    def check(c: Check) -> str | None:
        limit = c.arch[key]
        for name in names:
            t = c.tile_or_none(name)
            if t is not None and len(t.shape) - 1 > limit:
                return (
                    f"{name} has {len(t.shape) - 1} free dimensions {list(t.shape)}; at most "
                    f"{limit} are allowed ({key})"
                )
        return None

    return check


def activate(
    op: str, data: np.ndarray, bias: np.ndarray | float | None, scale: np.ndarray | float
) -> np.ndarray:
    """[P, F] fp32 op(data * scale + bias), the Scalar engine's activation datapath.

    Ref: nki.isa.activation: the input is cast to fp32, multiplied by `scale` (an immediate or
    [P, 1]), `bias` ([P, 1], or an immediate on NC-v3+) added, then the function applied.
    """
    from neuronemu_isa.ops import ACTIVATIONS

    x = rows(f32(data)) * scalar_or_column(scale)
    if bias is not None:
        x = x + scalar_or_column(bias)
    with np.errstate(all="ignore"):
        return ACTIVATIONS[op](x.astype(np.float32))


# The MX formats (nki.isa.quantize_mx, nki.isa.nc_matmul_mx): a scaling group is 8 partitions
# x the 4 values of one x4 element; its scale sits in the group's own 32-partition quadrant,
# in the quadrant's first 4 partitions (32 / 8 groups), at the group's column (nki/deep-dives/
# mxfp-matmul.rst "Scale Tensor"; trainium3_arch.rst). The constraints read the same numbers
# from the arch keys tile_quadrant_partitions and tile_mx_group_partitions.
MX_QUADRANT, MX_GROUP_ROWS = 32, 8


def mx_scale_rows(partitions: int) -> np.ndarray:
    """For each data partition p, the row of the scale view holding its group's scales."""
    p = np.arange(partitions)
    return (p // MX_QUADRANT) * MX_QUADRANT + (p % MX_QUADRANT) // MX_GROUP_ROWS


def mx_scale_checks(data: str, scale: str, x4: bool):
    """`scale` holds one value per scaling group of `data` where mx_scale_rows puts it: the
    rows up to the last quadrant's scales, and one column per x4 element of `data` (per 4
    values when `data` is not packed: quantize_mx's source)."""

    def check(c: Check) -> str | None:
        d, s = c.tile_or_none(data), c.tile_or_none(scale)
        if d is None or s is None:
            return None
        quadrant, group = c.arch.tile_quadrant_partitions, c.arch.tile_mx_group_partitions
        p = d.partition_size
        need = (p - 1) // quadrant * quadrant + ((p - 1) % quadrant) // group + 1
        if s.partition_size < need:
            return (
                f"{scale} has {s.partition_size} partitions; the scales of {data}'s {p} "
                f"partitions need {need} (the first {quadrant // group} of each "
                f"{quadrant}-partition quadrant {data} spans)"
            )
        columns = d.free_size if x4 else d.free_size // c.arch.tile_mx_pack
        if s.free_size != columns:
            return (
                f"{scale} has {s.free_size} elements per partition; {data} has {columns} "
                "scaling groups per partition"
            )
        return None

    return check
