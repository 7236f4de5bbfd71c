"""Older-dialect index arithmetic: `nl.arange`, `nl.mgrid`, affine index expressions and masks.

`i_p = nl.arange(128)[:, None]` is an index that varies along position 0 of a 2-d iteration
space; `a[k * 128 + i_p, i_f]` is then a strided box of `a`, and `mask=(k * 128 + i_p < n)`
restricts the iteration space of an instruction to a range along that position.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any

from neuronemu.errors import ConstraintError, KernelTypeError, SourceSpan, shown
from neuronemu.ir import DType, PatternView, Tensor, View
from neuronemu.replay import journal
from neuronemu_isa import Buffer

__all__ = [
    "AffineIndex",
    "marked_index",
    "Predicate",
    "arange",
    "mgrid_index",
    "MGrid",
    "MGRID",
    "AffineView",
    "AffinePattern",
    "MAX_MASK_PIECES",
]


class _Axes:
    """Iteration axes, each `nl.arange` and `nl.mgrid` dim one of its own, numbered as drawn.
    A replayed loop draws as many as the iterations it stands for drew
    (neuronemu.replay.templates), so that later axes are numbered as in the loop unrolled."""

    def __init__(self) -> None:
        self.drawn = 0

    def take(self) -> int:
        self.drawn += 1
        return self.drawn - 1


AXES = _Axes()
# Positions an index may span: far past any tensor dim, well inside a C integer.
_MAX_INDEX_SIZE = 1 << 31


def affine_pattern_attrs(expr: AffineIndex) -> dict[str, Any]:
    """An older-dialect index expression as the `pattern`/`offset`/`channel_multiplier` of a
    pattern-generating instruction (`nisa.iota(expr)`): the partition position's coefficient
    is the channel multiplier, each free position a [step, num] pair, outermost first."""
    steps = [0] * max(expr.ndim, 1)
    for _, _, from_right, coeff in expr.terms:
        steps[expr.position(from_right)] += coeff
    shape = expr.dense_shape if expr.ndim else (1,)
    pattern = [[steps[k], shape[k]] for k in range(1, len(shape))] or [[0, 1]]
    return {"pattern": pattern, "offset": expr.offset, "channel_multiplier": steps[0]}


_CMP_OPS = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal",
            "==": "equal", "!=": "not_equal"}  # fmt: skip


def predicate_select_attrs(pred: Any, shape: tuple[int, ...], span: SourceSpan) -> dict[str, Any]:
    """An older-dialect `pred=` (one affine condition, e.g. `iy < ix`) as the `pattern`,
    `offset`, `channel_multiplier` and `cmp_op` of a pattern-comparing instruction
    (`nisa.affine_select`), over a tile of `shape`: `expr op bound` is `expr - bound op 0`."""
    if not isinstance(pred, Predicate) or len(pred.conditions) != 1 or pred.never:
        raise KernelTypeError(
            f"pred= is one affine condition such as (iy < ix), got {shown(pred)}", span
        )
    expr, op, bound = pred.conditions[0]
    attrs = affine_pattern_attrs(expr - bound)
    free = shape[1:]
    steps = [step for step, _ in attrs["pattern"]] if expr.ndim > 1 else []
    steps = [0] * (len(free) - len(steps)) + steps  # positions the condition does not span
    attrs["pattern"] = [[step, n] for step, n in zip(steps[-len(free) :], free)] or [[0, 1]]
    return attrs | {"cmp_op": _CMP_OPS[op]}


@dataclass(frozen=True)
class AffineIndex:
    """offset + sum(coeff * axis) over iteration axes; `ndim` dims, numpy-style broadcast.

    Each term is (axis id, axis size, position counted from the right, coefficient).
    """

    terms: tuple[tuple[int, int, int, int], ...]
    offset: int
    ndim: int
    # The whole grid of an `nl.mgrid` index (dense, as NumPy's mgrid: each index has the
    # grid's shape), kept through arithmetic; None for `nl.arange` indices.
    grid: tuple[int, ...] | None = None

    @property
    def dense_shape(self) -> tuple[int, ...]:
        """The shape of the values the index stands for: the grid's, else `shape`."""
        return self.grid if self.grid is not None and len(self.grid) == self.ndim else self.shape

    @property
    def shape(self) -> tuple[int, ...]:
        dims = [1] * self.ndim
        for _, size, from_right, _ in self.terms:
            dims[self.ndim - 1 - from_right] = size
        return tuple(dims)

    def position(self, from_right: int) -> int:
        return self.ndim - 1 - from_right

    def _combine(self, other: Any, sign: int) -> AffineIndex:
        if isinstance(other, bool) or not isinstance(other, (int, AffineIndex)):
            return NotImplemented
        if isinstance(other, int):
            offset = _marked_as(self.offset + sign * other, self.offset, other)
            return AffineIndex(self.terms, offset, self.ndim, self.grid)
        merged: dict[int, list[int]] = {t[0]: list(t) for t in self.terms}
        for axis, size, from_right, coeff in other.terms:
            if axis in merged:
                merged[axis][3] += sign * coeff
            else:
                merged[axis] = [axis, size, from_right, sign * coeff]
        # A zero coefficient keeps its term: the index still spans that position (NumPy
        # broadcasting: 0 * i_b has i_b's shape).
        terms = tuple((axis, size, right, coeff) for axis, size, right, coeff in merged.values())
        return AffineIndex(
            terms,
            _marked_as(self.offset + sign * other.offset, self.offset, other.offset),
            max(self.ndim, other.ndim),
            self.grid if self.grid is not None else other.grid,
        )

    def __add__(self, other: Any) -> AffineIndex:
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> AffineIndex:
        return self._combine(other, -1)

    def __rsub__(self, other: Any) -> AffineIndex:
        return (self * -1)._combine(other, 1)

    def __mul__(self, other: Any) -> AffineIndex:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return AffineIndex(
            tuple((a, s, r, c * other) for a, s, r, c in self.terms),
            self.offset * other,
            self.ndim,
            self.grid,
        )

    __rmul__ = __mul__

    def __neg__(self) -> AffineIndex:
        return self * -1

    def _compare(self, op: str, bound: Any) -> Predicate:
        if isinstance(bound, AffineIndex):  # i < j is i - j < 0
            return Predicate(((self - bound, op, 0),))
        if isinstance(bound, bool) or not isinstance(bound, int):
            return NotImplemented
        return Predicate(((self, op, bound),))

    def __lt__(self, bound: Any) -> Predicate:
        return self._compare("<", bound)

    def __le__(self, bound: Any) -> Predicate:
        return self._compare("<=", bound)

    def __gt__(self, bound: Any) -> Predicate:
        return self._compare(">", bound)

    def __ge__(self, bound: Any) -> Predicate:
        return self._compare(">=", bound)

    def expand(self, key: Any, span: SourceSpan) -> AffineIndex:
        """`idx[:, None]`, `idx[None, :]`, `idx[None, :, None]`...: place a 1-d index on one
        position of an N-d iteration space (the one `:`)."""
        key = key if isinstance(key, tuple) else (key,)
        full = [k for k in key if isinstance(k, slice) and k == slice(None)]
        if self.ndim != 1 or len(full) != 1 or any(k is not None for k in key if k not in full):
            raise KernelTypeError(
                "an nl.arange index is placed with one ':' and Nones, e.g. [:, None] or "
                "[None, :, None]",
                span,
            )
        pos = next(i for i, k in enumerate(key) if isinstance(k, slice))
        from_right = len(key) - 1 - pos
        return AffineIndex(
            tuple((a, s, from_right, c) for a, s, _, c in self.terms), self.offset, len(key)
        )

    def __repr__(self) -> str:
        parts = [f"{c}*i{a}[{s}]" for a, s, _, c in self.terms]
        return " + ".join(parts + [str(self.offset)])


@dataclass(frozen=True)
class Predicate:
    """A conjunction of `affine <op> int` conditions, as given to `mask=`."""

    conditions: tuple[tuple[AffineIndex, str, int], ...]
    never: bool = False  # `& False`: nothing is left

    def __and__(self, other: Any) -> Predicate:
        if isinstance(other, bool):  # a condition known when tracing
            return self if other else Predicate(self.conditions, never=True)
        if not isinstance(other, Predicate):
            return NotImplemented
        return Predicate(self.conditions + other.conditions, self.never or other.never)

    __rand__ = __and__

    def ranges(self, span: SourceSpan) -> dict[int, tuple[int, int]]:
        """Per iteration position (from the left), the allowed [lo, hi): the mask as one
        rectangle (a condition over two indices that keeps something else is an error)."""
        pieces, _ = self.pieces(span)
        if len(pieces) > 1:
            raise KernelTypeError(
                f"mask= {shown(self)} keeps a region that is not a rectangle "
                f"({len(pieces)} of them); this operation takes one range per axis",
                span,
                hint="give each condition one nl.arange index (i_p < n, i_f < m)",
            )
        return pieces[0]

    def pieces(self, span: SourceSpan) -> tuple[list[Ranges], tuple[int, ...]]:
        """The iteration points the mask keeps, as rectangles (per position, an allowed
        [lo, hi)), and the positions they are split along. A condition on one index narrows
        its position; a condition on two indices at two positions (`512 * ix + iy < n`, as
        AWS's tutorial add kernel and a padded max-pool write) keeps, for each value of the
        outer index, a range of the inner one, and the outer values that keep the same range
        make one rectangle. The docs define a mask as ranges along the tile's axes, which
        the compiler turns into smaller instructions (nki.api.shared, "NKI API Masking":
        https://awsdocs-neuron.readthedocs-hosted.com/en/v2.21.0.beta/general/nki/api/
        nki.api.shared.html); one instruction per rectangle for the rest is inferred."""
        nothing: tuple[list[Ranges], tuple[int, ...]] = ([{0: (0, 0)}], ())
        if self.never:
            return nothing
        base: Ranges = {}
        sizes: dict[int, int] = {}
        pairs: list[_Pair] = []
        for expr, op, bound in self.conditions:
            terms = [t for t in expr.terms if t[3] != 0]  # a zero coefficient constrains nothing
            if not terms:  # every index cancelled: a condition known when tracing
                if not _holds(expr.offset, op, bound):
                    return nothing
                continue
            at = sorted((expr.position(t[2]), t[1], t[3]) for t in terms)
            for pos, size, _ in at:
                sizes[pos] = size
            if len(at) == 1:
                _narrow(base, at[0], expr.offset, op, bound)
            elif len(at) == 2 and at[0][0] != at[1][0]:
                pairs.append(_Pair(at[0], at[1], expr.offset, op, bound))
            else:
                raise KernelTypeError(
                    f"mask condition on {shown(expr)} must involve one nl.arange index, or "
                    "two on different axes",
                    span,
                )
        if not pairs:
            return [base], ()
        outers = sorted({p.outer[0] for p in pairs})
        if set(outers) & {p.inner[0] for p in pairs}:
            raise KernelTypeError(
                f"mask= {shown(self)}: an index is the outer one of one condition and the "
                "inner one of another; neuronemu does not split such chains yet",
                span,
            )
        splits = [(s, _runs(base, [p for p in pairs if p.outer[0] == s], span)) for s in outers]
        count = math.prod(len(runs) for _, runs in splits)
        if count > MAX_MASK_PIECES:
            raise KernelTypeError(
                f"mask= {shown(self)} keeps a region of {count} rectangles, more than the "
                f"{MAX_MASK_PIECES} instructions neuronemu emits for one masked call",
                span,
                hint="split the call yourself (a loop over row blocks, each with a one-index mask)",
            )
        pieces = []
        for combo in itertools.product(*(runs for _, runs in splits)):
            ranges = dict(base)
            for (s, _), (lo, hi, inner) in zip(splits, combo):
                ranges[s] = (lo, hi)
                for pos, (a, b) in inner.items():
                    old = ranges.get(pos, (0, sizes[pos]))
                    ranges[pos] = (max(old[0], a), min(old[1], b))
            if all(lo < hi for lo, hi in ranges.values()):
                pieces.append(ranges)
        return (pieces or nothing[0]), tuple(s for s, runs in splits if len(runs) > 1)

    def __repr__(self) -> str:
        text = " & ".join(f"({e!r} {op} {b})" for e, op, b in self.conditions)
        return text + (" & False" if self.never else "")


Ranges = dict[int, tuple[int, int]]
# Rectangles one masked call may become, at most (inferred: a bound, not a documented
# figure; a triangle over a 128-partition tile takes 128).
MAX_MASK_PIECES = 256
# Values of an outer index a mask condition is worked out for, one by one, at most.
_MAX_SPLIT_VALUES = 1 << 16
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_HOLDS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _holds(value: int, op: str, bound: int) -> bool:
    return bool(_HOLDS[op](value, bound))


@dataclass(frozen=True)
class _Pair:
    """A mask condition over two indices: (position, size, coefficient) of each, the outer
    (leftmost) one first, and `offset + ... <op> bound`."""

    outer: tuple[int, int, int]
    inner: tuple[int, int, int]
    offset: int
    op: str
    bound: int


def _narrow(out: Ranges, term: tuple[int, int, int], offset: int, op: str, bound: int) -> None:
    """Narrow `out[pos]` to the x in [0, size) with coeff * x + offset <op> bound."""
    pos, size, coeff = term
    lo, hi = 0, size
    rhs = bound - offset
    if coeff < 0:
        coeff, rhs, op = -coeff, -rhs, _FLIPPED[op]
    if op == "<":
        hi = min(hi, -(-rhs // coeff))
    elif op == "<=":
        hi = min(hi, rhs // coeff + 1)
    elif op == ">":
        lo = max(lo, rhs // coeff + 1)
    else:
        lo = max(lo, -(-rhs // coeff))
    old = out.get(pos, (0, size))
    out[pos] = (max(old[0], lo), min(old[1], hi))


def _runs(base: Ranges, pairs: list[_Pair], span: SourceSpan) -> list[tuple[int, int, Ranges]]:
    """Along the outer index the conditions `pairs` share: its values grouped in runs that
    keep the same ranges of the inner indices, as (lo, hi, ranges); runs keeping nothing are
    left out."""
    pos, size, _ = pairs[0].outer
    lo, hi = base.get(pos, (0, size))
    if hi - lo > _MAX_SPLIT_VALUES:
        raise KernelTypeError(
            f"a mask condition over two indices splits an index of {hi - lo} values, more "
            f"than the {_MAX_SPLIT_VALUES} neuronemu works out one by one",
            span,
        )
    runs: list[list[Any]] = []
    for v in range(lo, hi):
        inner: Ranges = {p.inner[0]: base[p.inner[0]] for p in pairs if p.inner[0] in base}
        for p in pairs:
            _narrow(inner, p.inner, p.offset + p.outer[2] * v, p.op, p.bound)
        kept = inner if all(a < b for a, b in inner.values()) else None
        if runs and runs[-1][1] == v and runs[-1][2] == kept:
            runs[-1][1] = v + 1
        else:
            runs.append([v, v + 1, kept])
    return [(a, b, r) for a, b, r in runs if r is not None]


def arange(span: SourceSpan, *args: Any) -> AffineIndex:
    r = range(*args)
    if r.step != 1:
        raise KernelTypeError("nl.arange with a step is not supported yet", span)
    if not 0 < r.stop - r.start <= _MAX_INDEX_SIZE:
        raise KernelTypeError(f"nl.arange must have 1 to {_MAX_INDEX_SIZE} positions", span)
    return AffineIndex(((AXES.take(), len(r), 0, 1),), r.start, 1)


class MGrid(tuple):
    """The indices of `nl.mgrid[...]`, also reachable as `.p` (partition) and `.x`, `.y`, `.z`
    (free dims 1, 2, 3: nki-samples' select_and_scatter indexes a 4-d grid so; inferred)."""

    def axis(self, name: str) -> AffineIndex | None:
        k = {"p": 0, "x": min(1, len(self) - 1), "y": 2, "z": 3}[name]
        return self[k] if k < len(self) else None


def mgrid_index(key: Any, span: SourceSpan) -> MGrid:
    key = key if isinstance(key, tuple) else (key,)

    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if not all(
        isinstance(k, slice)
        and is_int(k.stop)
        and all(x is None or is_int(x) for x in (k.start, k.step))
        for k in key
    ):
        raise KernelTypeError(
            "nl.mgrid takes bounded slices of ints, e.g. nl.mgrid[0:128, 0:512]", span
        )
    ranges = []
    for k in key:
        r = range(k.start or 0, k.stop, k.step or 1)
        if r.step != 1:
            raise KernelTypeError("nl.mgrid with a step is not supported yet", span)
        if not 0 < r.stop - r.start <= _MAX_INDEX_SIZE:
            raise KernelTypeError(
                f"nl.mgrid[{r.start}:{r.stop}] must have 1 to {_MAX_INDEX_SIZE} positions", span
            )
        ranges.append(r)
    grid = tuple(len(r) for r in ranges)  # sizes checked above: len() cannot overflow
    return MGrid(
        [
            AffineIndex(((AXES.take(), len(r), len(key) - 1 - i, 1),), r.start, len(key), grid)
            for i, r in enumerate(ranges)
        ]
    )


class _MGridMaker:
    """`nl.mgrid`: subscripted with slices, it gives the iteration indices."""

    def __repr__(self) -> str:
        return "nl.mgrid"


MGRID = _MGridMaker()


# Index-expression views ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AffineView:
    """`t[k * 128 + i_p, i_f]`: per iteration position, a tensor dim walked from `start` by
    `step` for `size` elements. It may reach past the tensor until a mask clips it, so it
    becomes a View (and is bounds-checked) only when an instruction uses it."""

    base: View
    dims: tuple[tuple[int, int, int, int], ...]  # per position: (tensor dim, start, step, size)
    fixed: tuple[tuple[int, int], ...]  # tensor dims indexed by a constant: (dim, index)
    span: SourceSpan

    @property
    def tensor(self) -> Tensor:
        return self.base.tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d[3] for d in self.dims)

    @property
    def dtype(self) -> DType:
        return self.base.dtype

    @property
    def buffer(self) -> Buffer:
        return self.base.buffer

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @staticmethod
    def build(base: View, index: tuple, span: SourceSpan) -> AffineView:
        if len(index) != len(base.shape):
            raise KernelTypeError(
                f"{shown(base)} has {len(base.shape)} dims; an nl.arange index must give "
                f"one index per dim, got {len(index)}",
                span,
            )
        ndim = max(i.ndim for i in index if isinstance(i, AffineIndex))
        index = tuple(
            AffineIndex((), i, ndim) if isinstance(i, int) and not isinstance(i, bool) else i
            for i in index
        )
        for idx in index:
            if not isinstance(idx, AffineIndex):
                raise KernelTypeError(
                    f"index {shown(idx)} of {base.tensor.name}: slices cannot be mixed with "
                    "nl.arange indices yet",
                    span,
                )
        if isinstance(base, PatternView):
            return AffinePattern.make(base, index, ndim, span)
        dims: dict[int, tuple[int, int, int, int]] = {}
        fixed: list[tuple[int, int]] = []
        for dim, idx in zip(base.kept, index):
            start, _, step = base.box[dim]
            if not idx.terms:
                fixed.append((dim, start + idx.offset * step))
                continue
            _, size, from_right, coeff = idx.terms[0]
            pos = ndim - 1 - from_right
            if len(idx.terms) > 1 or coeff <= 0 or pos in dims:
                # Several indices in a dim (a sliding window), a decreasing or a diagonal
                # walk: a general access pattern.
                return AffinePattern.make(base, index, ndim, span)
            dims[pos] = (dim, start + idx.offset * step, coeff * step, size)
        # An iteration position no index walks has size 1, as NumPy broadcasts index arrays
        # (`t[i_p, 0]` with i_p = nl.arange(P)[:, None] is [P, 1]): it takes the next
        # int-indexed dim, when that keeps the dims in order.
        missing = [p for p in range(ndim) if p not in dims]
        if missing and len(missing) <= len(fixed):
            filled = dict(dims)
            for p, (dim, at) in zip(missing, fixed):
                filled[p] = (dim, at, 1, 1)
            order = [filled[p][0] for p in sorted(filled)]
            if order == sorted(order):
                dims = filled
                fixed = fixed[len(missing) :]
        if sorted(dims) != list(range(len(dims))) or [dims[p][0] for p in sorted(dims)] != sorted(
            d[0] for d in dims.values()
        ):
            return AffinePattern.make(base, index, ndim, span)  # transposing through indices
        return AffineView(base, tuple(dims[p] for p in sorted(dims)), tuple(fixed), span)

    def resolve(self, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
        """The View of the positions allowed by a mask's ranges; None when nothing is left."""
        t = self.tensor
        box = list(self.base.box)
        for dim, at in self.fixed:
            box[dim] = (at, at + 1, 1)
        for pos, (dim, start, step, size) in enumerate(self.dims):
            lo, hi = (ranges or {}).get(pos, (0, size))
            lo, hi = max(lo, 0), min(hi, size)
            if hi <= lo:
                return None
            first, last = start + lo * step, start + (hi - 1) * step
            if first < 0 or last >= t.shape[dim]:
                raise ConstraintError(
                    f"index of {t.name} reaches {last} in dim {dim} (size {t.shape[dim]})"
                    + ("" if ranges else "; use mask= to stay in bounds"),
                    self.span,
                )
            box[dim] = (first, last + 1, step)
        keep_fixed_partition = t.on_chip and any(d == 0 for d, _ in self.fixed)
        kept = tuple(sorted({d[0] for d in self.dims} | ({0} if keep_fixed_partition else set())))
        return View(t, tuple(box), kept)

    def __repr__(self) -> str:
        return f"{self.tensor.name}[affine {list(self.shape)}]"


@dataclass(frozen=True, eq=False)
class AffinePattern(AffineView):
    """An index expression no box describes (several nl.arange indices in one dim, a walk
    against the dim order, a view that is itself a pattern): one access-pattern level per
    iteration position, `offset + sum(stride * i)` over the view's flat elements."""

    offset: int = 0
    levels: tuple[tuple[int, int], ...] = ()  # per iteration position: (stride, size)
    # per view dim: (its size, constant part, ((position, coefficient), ...)) for bounds
    checks: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.levels)

    @staticmethod
    def make(base: View, index: tuple, ndim: int, span: SourceSpan) -> AffinePattern:
        offset, pairs = base.as_pattern()
        strides = [0] * ndim
        sizes = [1] * ndim
        checks = []
        for (stride, count), idx in zip(pairs, index):
            offset += stride * idx.offset
            terms = []
            for _, size, from_right, coeff in idx.terms:
                pos = ndim - 1 - from_right
                strides[pos] += stride * coeff
                sizes[pos] = size
                terms.append((pos, coeff))
            checks.append((count, idx.offset, tuple(terms)))
        return AffinePattern(base, (), (), span, offset, tuple(zip(strides, sizes)), tuple(checks))

    def resolve(self, ranges: dict[int, tuple[int, int]] | None = None) -> View | None:
        bounds = []
        for pos, (_, size) in enumerate(self.levels):
            # A mask on a position this index does not walk (size 1) leaves it alone.
            lo, hi = (ranges or {}).get(pos, (0, size)) if size > 1 else (0, 1)
            lo, hi = max(lo, 0), min(hi, size)
            if hi <= lo:
                return None
            bounds.append((lo, hi))
        for dim, (count, const, terms) in enumerate(self.checks):
            lo = const + sum(c * (bounds[p][0] if c > 0 else bounds[p][1] - 1) for p, c in terms)
            hi = const + sum(c * (bounds[p][1] - 1 if c > 0 else bounds[p][0]) for p, c in terms)
            if lo < 0 or hi >= count:
                raise ConstraintError(
                    f"index of {self.tensor.name} reaches {lo if lo < 0 else hi} in dim {dim} "
                    f"(size {count})" + ("" if ranges else "; use mask= to stay in bounds"),
                    self.span,
                )
        offset = self.offset + sum(stride * lo for (stride, _), (lo, _) in zip(self.levels, bounds))
        pattern = [[stride, hi - lo] for (stride, _), (lo, hi) in zip(self.levels, bounds)]
        return PatternView.build(self.tensor, offset, pattern, self.span, internal=True)


def _marked_as(offset: int, *parts: int) -> int:
    """An offset summed from `parts`, marked as they are (a loop variable's moves through a
    sum: `i * 64 + iy - ix` in the library's hands as in the kernel's)."""
    kind = journal.marked(*parts)
    if kind is None:
        return offset
    return journal.at_level(kind(offset), journal.level_of(*parts))


def marked_index(meter: Any, op: str, a: Any, b: Any, result: AffineIndex) -> AffineIndex:
    """An index computed, in an iteration being recorded, from the loop variable: its offset
    moves as the variable does under `+`, `-` and products by a plain int (its offset marked
    so, neuronemu.replay.journal.Affine); anything else refuses the loop (a coefficient that
    moves)."""

    def kind(x: Any) -> Any:
        return journal.marked(x.offset if isinstance(x, AffineIndex) else x)

    ka, kb = kind(a), kind(b)
    if ka is None and kb is None:
        return result
    plain_moves = any(k and not isinstance(x, AffineIndex) for x, k in ((a, ka), (b, kb)))
    if journal.Opaque in (ka, kb) or op not in ("+", "-", "*") or (op == "*" and plain_moves):
        journal.refuse(meter, "an index that does not move by a constant step")
        return result
    return replace(result, offset=journal.Affine(result.offset))
