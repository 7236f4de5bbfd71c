"""The values a replay makes: each recorded value's spec (neuronemu.replay.templates) made
for the iteration `s` iterations after the recorded one, directly or by a maker compiled
once per spec; and the block tiles a recorded iteration takes (`recorded_block`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from neuronemu.errors import SourceSpan
from neuronemu.ir import Tensor, View
from neuronemu.limits import Meter
from neuronemu.program.lazy import Slots
from neuronemu.replay import journal
from neuronemu.replay.records import Form
from neuronemu.trace.legacy_index import AffineIndex, MGrid, Predicate

if TYPE_CHECKING:
    from neuronemu.trace.values import BlockTensor

__all__ = ["Made", "Maker", "compiled", "value", "maker", "recorded_block"]


@functools.lru_cache(maxsize=None)
def _fields_of(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


class Made(Slots):
    """The tensors one replayed iteration made (in order), and the containers it made (by
    their spec). A quick iteration's tiles are made when read (neuronemu.replay.lazy_tiles)."""

    def __init__(self, meter: Any = None) -> None:
        super().__init__()
        self.containers: dict[int, Any] = {}
        self.holders: list[Any] = []  # the block tensors it made, in order
        self.meter = meter  # (items taken from lists are noted in its open journals)

    def ids(self) -> Sequence[int]:
        """The ids of its tensors, in order (those not made yet: without making them)."""
        runs = self.runs
        if len(runs) == 1 and runs[0][:2] == (0, len(self)):  # (some made since or not)
            return runs[0][2].ids()  # type: ignore[attr-defined,no-any-return]
        return [t.id for t in self]


def value(spec: tuple, s: int, tensors: Made) -> Any:
    """The value `spec` stands for, `s` iterations after the recorded one."""
    kind = spec[0]
    if kind == "same":
        return spec[1]
    if kind == "tensor":
        return tensors[spec[1]]
    if kind == "holder":
        return tensors.holders[spec[1]]
    if kind == "int":
        return journal.Affine(spec[1] + s * spec[2])
    if kind == "tuple":
        return tuple(value(x, s, tensors) for x in spec[1])
    if kind in ("list", "dict"):
        made = tensors.containers.get(id(spec))
        if made is None:
            made = tensors.containers[id(spec)] = [] if kind == "list" else {}
            if isinstance(made, list):
                made.extend(value(x, s, tensors) for x in spec[1])
            else:
                made.update((k, value(x, s, tensors)) for k, x in spec[1])
        return made
    if kind == "object":  # (a kernel object the iteration made: made again, once)
        made = tensors.containers.get(id(spec))
        if made is None:
            made = tensors.containers[id(spec)] = spec[1].new_object()
            made.attrs.update((k, value(x, s, tensors)) for k, x in spec[2])
        return made
    if kind == "pick":
        container = value(spec[1], s, tensors)
        index = value(spec[2], s, tensors)
        item = container[index]
        if tensors.meter is not None and tensors.meter.journals:
            journal.pick(tensors.meter, container, index, item)
        return item
    if kind == "view":
        return _view_maker(spec)(s, tensors)
    if kind == "index":
        _, y, terms, offset = spec
        return AffineIndex(
            tuple((axis + s * move, *rest) for axis, move, *rest in terms),
            value(offset, s, tensors),
            y.ndim,
            y.grid,
        )
    if kind == "slice":
        return slice(*(value(x, s, tensors) for x in spec[1]))
    if kind == "text":
        return journal.text(
            [p if isinstance(p, str) else (value(p[0], s, tensors), p[1]) for p in spec[1]]
        )
    if kind == "mgrid":
        return MGrid([value(x, s, tensors) for x in spec[1]])
    if kind == "predicate":
        return Predicate(
            tuple((value(e, s, tensors), op, value(bound, s, tensors)) for e, op, bound in spec[1]),
            spec[2],
        )
    raise AssertionError(kind)


Maker = Callable[[int, Made], Any]


def maker(spec: tuple) -> Maker:
    """`value(spec, ...)` as a function of the step and the tensors made, with the work
    that does not depend on them done once."""
    kind = spec[0]
    if kind == "same":
        same = spec[1]
        return lambda s, tensors: same
    if kind == "tensor":
        i = spec[1]
        return lambda s, tensors: tensors[i]
    if kind == "int":
        start, step, affine = spec[1], spec[2], journal.Affine
        return lambda s, tensors: affine(start + s * step)
    if kind == "view":
        return _view_maker(spec)
    if kind == "tuple":
        parts = [maker(x) for x in spec[1]]
        return lambda s, tensors: tuple([part(s, tensors) for part in parts])
    return functools.partial(value, spec)  # (containers made once per iteration; picks)


def _view_maker(spec: tuple) -> Maker:
    """A view moved by `s` steps: made directly (dataclasses.replace costs more than the
    rest of a replay), with the recorded view's shape and its bounds moved."""
    _, view, tensor, box, offset, delta = spec
    cls: type = type(view)
    known = view.__dict__
    fields = {f: known[f] for f in _fields_of(cls) if f not in ("tensor", "box", "offset")}
    if "shape" in known:
        fields["shape"] = known["shape"]
    of_tensor = maker(tensor)
    moves = any(b[1] or b[3] for b in box)
    fixed_box = tuple((a, b, step) for a, _, b, _, step in box)
    bounds = known.get("_bounds") if cls is View else None
    if bounds is not None and not moves:
        fields["_bounds"] = bounds
        bounds = None
    if bounds is not None:
        bounds = tuple((lo, hi, b[1]) for (lo, hi), b in zip(bounds, box))

    if len(box) == 2 and moves and offset is None and bounds is not None:
        return _described(_view_maker_2d(cls, fields, of_tensor, box, bounds), view, box, of_tensor)

    def make(s: int, tensors: Made) -> View:
        made: View = object.__new__(cls)
        d = made.__dict__
        d.update(fields)
        d["tensor"] = of_tensor(s, tensors)
        d["box"] = (
            tuple([(a + s * da, b + s * db, step) for a, da, b, db, step in box])
            if moves
            else fixed_box
        )
        if offset is not None:
            d["offset"] = offset + s * delta
        if bounds is not None:
            d["_bounds"] = tuple([(lo + s * move, hi + s * move) for lo, hi, move in bounds])
        return made

    return _described(make, view, box, of_tensor)


def _described(make: Maker, view: View, box: tuple, of_tensor: Maker) -> Maker:
    """`make`, with what a view it makes is of (`make.tensor(s, tensors)`) and, where the
    recorded view's bounds are known, its bounds (`make.bounds(s)`): what some passes ask of
    an instruction's operands without the views being made (neuronemu.program.LateInstr,
    neuronemu.replay.repeats)."""
    make.tensor = of_tensor  # type: ignore[attr-defined]
    bounds = view.__dict__.get("_bounds") if type(view) is View else None
    if bounds is not None and box:
        make.bounds = _bounds_maker(bounds, tuple(b[1] for b in box))  # type: ignore[attr-defined]
    return make


def _bounds_maker(bounds: tuple, moves: tuple[int, ...]) -> Callable[[int], tuple]:
    """The bounds of the view made `s` steps on, as the makers set them (each dim's moved by
    its start's move)."""
    if len(bounds) == 2:  # (the common case, with no loop over dims)
        (lo0, hi0), (lo1, hi1) = bounds
        m0, m1 = moves
        return lambda s: ((lo0 + s * m0, hi0 + s * m0), (lo1 + s * m1, hi1 + s * m1))
    moved = tuple(zip(bounds, moves))
    return lambda s: tuple([(lo + s * m, hi + s * m) for (lo, hi), m in moved])


def _view_maker_2d(
    cls: type, fields: dict[str, Any], of_tensor: Maker, box: tuple, bounds: tuple
) -> Maker:
    """`_view_maker`'s `make` for the most common view, a moving box of two dims whose
    bounds are known: the same view, made with no loop over dims (most of a replay's time
    is spent making views)."""
    (a0, da0, b0, db0, step0), (a1, da1, b1, db1, step1) = box
    (lo0, hi0, m0), (lo1, hi1, m1) = bounds
    new = object.__new__

    def make(s: int, tensors: Made) -> View:
        made: View = new(cls)
        d = made.__dict__
        d.update(fields)
        d["tensor"] = of_tensor(s, tensors)
        d["box"] = ((a0 + s * da0, b0 + s * db0, step0), (a1 + s * da1, b1 + s * db1, step1))
        d["_bounds"] = ((lo0 + s * m0, hi0 + s * m0), (lo1 + s * m1, hi1 + s * m1))
        return made

    return make


def compiled(ev: tuple) -> tuple[tuple, Any]:
    """A recorded event and, for an instruction, its operands and attributes as (name,
    value, None) for what does not move and (name, None, maker) for what does (attributes
    that all stay: one dict, shared by every replay, which emit copies), and the form its
    repeats share (`neuronemu.program.Form`), unless an immediate or attribute moves."""
    if ev[0] != "emit":
        return ev, None
    ops, attrs = (
        [(k, v[1], None) if v[0] == "same" else (k, None, maker(v)) for k, v in d.items()]
        for d in (ev[3], ev[4])
    )
    form = Form() if ev[6] is not None else None
    if all(make is None for _, _, make in attrs):
        return ev, (ops, {k: v for k, v, _ in attrs}, form)
    return ev, (ops, attrs, form)


def recorded_block(meter: Meter, holder: BlockTensor, index: Any, span: SourceSpan) -> tuple:
    """`holder[index]` in an iteration being recorded: a block tile at block indices
    that stay or move with the loop, noted for a replay to take again at the moved ones
    (neuronemu.replay.journal.block; allocating it, when this access does, is the replay's
    too). Other block accesses (a sub-tensor, negative indices) refuse the iterations."""
    lead = (index if isinstance(index, tuple) else (index,))[: len(holder.blocks)]
    plain = all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in lead)
    if len(lead) < len(holder.blocks) or not plain or journal.marked(*lead) is journal.Opaque:
        journal.refuse(meter, "a block tensor")
        return holder.split(index, span)
    created = tuple(int(i) for i in lead) not in holder.tiles
    journals, meter.journals = meter.journals, []
    try:  # (what the allocation does is the block event's: the replay does it again)
        tile, rest = holder.split(index, span)
    finally:
        meter.journals = journals
    assert isinstance(tile, Tensor)  # (every block index given: a tile, not a block tensor)
    journal.block(meter, holder, tuple(lead), tile, created)
    return tile, rest
