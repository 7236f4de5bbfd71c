"""topk: the k largest values of each 16-partition snake of src, and their snake positions.

Ref: nki.isa.topk (NKI 0.6.0; docs 2.32 and 2.33, https://awsdocs-neuron.readthedocs-hosted.com/
en/v2.33.0/nki/api/generated/nki.isa.topk.html). GpSimd engine; src bfloat16, val_dst bfloat16,
idx_dst uint32, all in SBUF. Each group of 16 partitions is one problem: snake element s of
group g is src[16g + s % 16, s // 16], for s < n (slots past n are ignored). k is val_dst's
free size. Result j of a group is written in the same snake layout, at partition 16g + j % 16,
free position j // 16: its value to val_dst, its snake position (0..n-1) to idx_dst. Only the
first ceil(k / 16) free positions are written, each across all 16 partitions, so when 16 does
not divide k the last position's slots k..16*ceil(k/16)-1 are written with unspecified data
(nki-library's gpsimd_topk: "positions [k, k_pad) are unwritten and carry garbage"): here
GARBAGE_VALUE and GARBAGE_INDEX, so that a kernel using them shows it. The other free
positions keep their contents.

Order of the results, undocumented (inferred): `sorted=True` (docs 2.33) writes them in
descending order of value, as nki-library's gpsimd_topk asks of "sorted"; `sorted=False` (the
only form in docs 2.32) writes them ascending, as docs 2.32 state. Equal values rank by snake
position, lower first, and NaN ranks below every number (as max8 here); the docs say neither.
"""

from __future__ import annotations

import math

import numpy as np

from neuronemu_isa.instructions._common import f32, rows
from neuronemu_isa.spec import SBUF, Attr, Check, Engine, In, InstrSpec, Out, same_partition_size

# What the unspecified slots of the last written position get (inferred: the docs say only
# that the hardware writes the whole position).
GARBAGE_VALUE = float("nan")
GARBAGE_INDEX = 0xFFFFFFFF
# nki.isa.topk: a snake spans 16 partitions (the constraints read the same number from the arch
# key tile_topk_group_partitions).
GROUP = 16


def semantics(src, val_dst, idx_dst, *, n, sorted=False):
    x = rows(f32(src))
    k = rows(val_dst).shape[1]
    values = np.array(rows(val_dst), copy=True)  # (their own dtype: merged slots keep bits)
    indices = np.array(rows(idx_dst), copy=True)
    cols, slots = math.ceil(n / GROUP), GROUP * math.ceil(k / GROUP)
    for p0 in range(0, x.shape[0], GROUP):
        snake = x[p0 : p0 + GROUP, :cols].T.reshape(-1)[:n]
        # Stable on the negated values: equal values by position, NaN (sorted last) lowest.
        ranked = np.argsort(-snake, kind="stable")[:k]
        emitted = ranked if sorted else ranked[::-1]
        new_values = np.full(slots, GARBAGE_VALUE, dtype=np.float32)
        new_indices = np.full(slots, GARBAGE_INDEX, dtype=np.int64)
        new_values[:k], new_indices[:k] = snake[emitted], emitted
        width = slots // GROUP
        values[p0 : p0 + GROUP, :width] = new_values.reshape(width, GROUP).T.astype(values.dtype)
        indices[p0 : p0 + GROUP, :width] = new_indices.reshape(width, GROUP).T
    return {"val_dst": values, "idx_dst": indices}


def validity(src, val_dst=None, idx_dst=None, *, n, **_):
    """The written positions of a group are sound when every element of its snake is; the
    others keep what val_dst held. Masks: True where written."""
    written = rows(src)
    shape = rows(val_dst).shape if val_dst is not None else written.shape
    out: np.ndarray = np.ones(shape, np.bool_)  # (numpy's stubs: a 0-d array, for any shape)
    if val_dst is not None:
        out &= rows(val_dst)
    cols, width = math.ceil(n / GROUP), math.ceil(out.shape[1] / GROUP)
    for p0 in range(0, written.shape[0], GROUP):
        block = written[p0 : p0 + GROUP, :cols].T.reshape(-1)[:n]
        out[p0 : p0 + GROUP, :width] = bool(block.all())
    return out


def cost(c: Check) -> int:
    # nki.isa.topk: 4*n + K GpSimd cycles per partition (the partitions work in parallel).
    k = c.tile("val_dst").free_size
    return int(c.arch.cost_topk_cycles_per_element * c.attrs["n"] + k)


def _groups(c: Check) -> str | None:
    src, group = c.tile("src"), c.arch.tile_topk_group_partitions
    if src.partition_size % group:
        return (
            f"src has {src.partition_size} partitions; it must be a multiple of {group} "
            "(tile_topk_group_partitions: one snake per group)"
        )
    return None


def _n(c: Check) -> str | None:
    n, lo, hi = c.attrs.get("n"), c.arch.tile_topk_n_min, c.arch.tile_topk_n_max
    if isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi:
        return f"n is {n!r}; it must be an int in {lo}..{hi} (tile_topk_n_min..tile_topk_n_max)"
    src, group = c.tile("src"), c.arch.tile_topk_group_partitions
    if src.free_size * group < n:
        return (
            f"src has {src.free_size} elements per partition; a snake of n={n} needs "
            f"ceil(n / {group}) = {math.ceil(n / group)}"
        )
    return None


def _k(c: Check) -> str | None:
    val, idx, n = c.tile("val_dst"), c.tile("idx_dst"), c.attrs.get("n")
    k, limit = val.free_size, c.arch.tile_topk_k_max
    if idx.free_size != k:
        return (
            f"idx_dst has {idx.free_size} elements per partition and val_dst {k}; both hold "
            "the k results"
        )
    if k > limit:
        return f"val_dst asks for k={k} results; at most {limit} (tile_topk_k_max)"
    if isinstance(n, int) and k > n:
        return f"val_dst asks for k={k} results of a snake of only n={n} elements"
    return None


SPEC = InstrSpec(
    name="topk",
    engines=(Engine.GPSIMD,),
    operands=(
        Out("val_dst", SBUF, dtypes=("bfloat16",), reads_if=lambda attrs: True, merge=True),
        Out("idx_dst", SBUF, dtypes=("uint32",), reads_if=lambda attrs: True, merge=True),
        In("src", SBUF, dtypes=("bfloat16",)),
    ),
    attrs=(Attr("n"), Attr("sorted", False, (False, True))),
    constraints=(same_partition_size("val_dst", "idx_dst", "src"), _groups, _n, _k),
    semantics=semantics,
    validity=validity,
    cost=cost,
    doc=__doc__,
    positional=("val_dst", "idx_dst", "src", "n", "sorted"),
)
