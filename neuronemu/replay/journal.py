"""The record of a loop iteration being traced, for the tracer to replay it
(neuronemu.replay.templates): the builder and the interpreter note here what they do."""

from __future__ import annotations

import collections
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, TypeVar

import numpy as np

from neuronemu.ir import Tensor

if TYPE_CHECKING:
    from neuronemu.limits import Meter

_T = TypeVar("_T")

__all__ = [
    "Journal",
    "record",
    "refuse",
    "made",
    "consume",
    "read",
    "create",
    "change",
    "iterate",
    "MUTABLE",
    "Affine",
    "Opaque",
    "Marked",
    "Text",
    "text",
    "text_field",
    "marked",
    "derive",
    "derived",
    "made_by",
    "operands",
    "plain",
    "pickable",
    "pick",
    "block",
    "holder",
    "guard",
    "lookup",
    "copies",
    "made_object",
    "attribute_set",
    "GUARDED",
    "TESTS",
    "is_int",
    "compared",
    "chosen",
]

# Containers whose contents an iteration can change (a value read from one that a loop
# changes is carried from one iteration to the next).
MUTABLE = (list, dict, set, collections.deque, np.ndarray)


@dataclass
class Journal:
    """What one iteration of a loop did that a replay must repeat, in order."""

    events: list[tuple] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)  # allocated, in order
    holders: list[Any] = field(default_factory=list)  # block tensors it made, in order
    why: str | None = None  # why the iteration cannot be replayed, if it cannot
    steps: int = 0  # trace-time steps it took (the meter's)
    data_bytes: int = 0  # trace-time data it allocated (the meter's)
    axes: int = 0  # iteration axes it drew (nl.arange, nl.mgrid: legacy_index.AXES)
    made: dict[int, object] = field(default_factory=dict)  # iterators it made, by id
    # Mutable containers it read and it changed (by id; the objects kept alive with them).
    reads: dict[int, object] = field(default_factory=dict)
    changed: dict[int, object] = field(default_factory=dict)
    # Containers it made: changing them is its own business (their contents at its end are
    # what a replay makes again).
    created: dict[int, object] = field(default_factory=dict)
    # Items it took from a list or tuple by an index that moves with the loop (by the item's
    # id): (container, index, item), or (None, None, item) when taken at two places.
    picked: dict[int, tuple] = field(default_factory=dict)
    # Journals open with it, it included (its place among them, from 1): a value marked
    # while fewer were open (`Marked.level`) is made of outer loops' variables only, the
    # same in every iteration of this loop.
    level: int = 0


def record(meter: Meter, event: tuple) -> None:
    """Note `event` in every journal open (loops nested in a recorded iteration)."""
    for journal in meter.journals:
        if event[0] == "alloc":
            journal.tensors.append(event[1])
        journal.events.append(event)


def _up_to(meter: Meter, level: int | None) -> list[Journal]:
    """The journals open that a value marked at `level` depends on (`level_of`: those open
    when it was marked, not those of loops nested since, for which it is the same in every
    iteration; None: all)."""
    return meter.journals if level is None else meter.journals[:level]


def refuse(meter: Meter, why: str, level: int | None = None) -> None:
    """The iterations being recorded did something a replay cannot repeat (with `level`,
    something with a value marked at that level: `_up_to`)."""
    for journal in _up_to(meter, level):
        if journal.why is None:
            journal.why = why


def _note(meter: Meter, event: tuple, level: int | None) -> None:
    """`event` in the journals a value marked at `level` depends on."""
    for journal in _up_to(meter, level):
        journal.events.append(event)


# Comparisons whose outcome a replay checks for every iteration it makes (between ints that
# move by a constant step, their difference moves by one too: Plan.guarded), and what each
# tests, on plain ints.
TESTS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
GUARDED = frozenset(TESTS)


def is_int(value: object) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def guard(
    meter: Meter, op: str, left: object, right: object, outcome: bool, ranged: bool = False
) -> None:
    """`left op right` came out `outcome` in the iterations being recorded, at least one side
    marked. Between ints none of them Opaque, it is noted in the journals whose loops it
    depends on (by its level), for a replay to make only the iterations where it comes out
    the same; any other condition on a marked value refuses them. (`ranged`: noted by a
    loop replayed within them, at its last iteration: its first ones noted it as they ran.)"""
    kind = marked(left, right)
    if kind is None:
        return
    if kind is Opaque or op not in GUARDED or not (is_int(left) and is_int(right)):
        refuse(meter, "a condition on the loop variable")
        return
    _note(meter, ("guard", left, right, op, bool(outcome), ranged), level_of(left, right))


def compared(meter: Meter, op: str, left: object, right: object) -> bool | None:
    """`left op right`, one side marked, in an iteration being recorded: between ints, its
    outcome, noted (`guard`); else None, the iterations refused."""
    if op in GUARDED and is_int(left) and is_int(right):
        outcome = bool(TESTS[op](int(left), int(right)))  # type: ignore[call-overload]
        guard(meter, op, left, right, outcome)
        return outcome
    if op in ("is", "is not") and (left is None) != (right is None):
        # (`offset is not None`: no value is None, whatever the iteration makes of it)
        return op == "is not"
    refuse(meter, "a condition on the loop variable")
    return None


def chosen(meter: Meter, name: str, args: tuple) -> object:
    """`min(a, b, ...)` or `max(...)` of ints, one of them marked, in an iteration being
    recorded: the argument Python picks (the first least or greatest), noted as the
    conditions that picked it (`guard`), so a replay makes only the iterations that pick the
    same one; it moves as that argument does."""
    pick = 0
    for k in range(1, len(args)):
        if (args[k] < args[pick]) if name == "min" else (args[k] > args[pick]):
            pick = k
    best = args[pick]
    for k, other in enumerate(args):
        if k != pick:  # (before the pick: strictly beaten; after it: at least matched)
            op = ("<" if k < pick else "<=") if name == "min" else (">" if k < pick else ">=")
            guard(meter, op, best, other, True)
    return best


def made(meter: Meter, obj: object) -> None:
    """An iterator made in the iterations being recorded (consuming it there is theirs)."""
    for journal in meter.journals:
        journal.made[id(obj)] = obj


def consume(meter: Meter, obj: object) -> None:
    """An iterator is consumed: an iteration that did not make it changes it."""
    for journal in meter.journals:
        if id(obj) not in journal.made and journal.why is None:
            journal.why = "an iterator of an earlier iteration"


def read(meter: Meter, obj: object) -> None:
    """A container's contents are read in the iterations being recorded (a Text's refuse
    the iterations it depends on)."""
    if isinstance(obj, Text):
        refuse(meter, "a string made of the loop variable, read", level_of(obj))
    elif isinstance(obj, MUTABLE):
        for journal in meter.journals:
            if id(obj) not in journal.created:
                journal.reads[id(obj)] = obj


def create(meter: Meter, obj: _T) -> _T:
    """A container made in the iterations being recorded; returns it."""
    if isinstance(obj, MUTABLE):
        for journal in meter.journals:
            journal.created[id(obj)] = obj
    return obj


def made_object(meter: Meter, obj: object) -> None:
    """A kernel object (an instance of a kernel class) made in the iterations being
    recorded: what they set on it is theirs (where it goes from there, a container or a
    variable after the loop, the match looks: it refuses one)."""
    for journal in meter.journals:
        journal.created[id(obj)] = obj


def attribute_set(meter: Meter, obj: object) -> None:
    """`obj.attr = value` in the iterations being recorded: refuses those that did not make
    `obj` (a replay does not repeat it)."""
    for journal in meter.journals:
        if id(obj) not in journal.created and journal.why is None:
            journal.why = "an attribute set"


def change(meter: Meter, obj: object, event: tuple | None) -> None:
    """A container is changed in the iterations being recorded: by `event` (a replay
    repeats it), or in a way a replay cannot repeat (None), unless the iteration made it."""
    for journal in meter.journals:
        if id(obj) in journal.created:
            continue
        if event is None:
            journal.why = journal.why or "a container changed in a way a replay cannot repeat"
        else:
            journal.changed[id(obj)] = obj
            journal.events.append(event)


def iterate(meter: Meter, obj: object) -> None:
    """`obj` is iterated (or read) in the iterations being recorded."""
    read(meter, obj)
    if hasattr(obj, "__next__"):
        consume(meter, obj)


def pickable(meter: Meter, container: object, index: object) -> bool:
    """Is `container[index]` an item an iteration takes by the loop (a replay takes the item
    at the moved index; see neuronemu.replay.templates)? A list or tuple, an index inside it,
    and either the index moves by a constant step or the container is itself such an item
    (`rows[i][0]`)."""
    if not (
        isinstance(container, (list, tuple))
        and isinstance(index, int)
        and not isinstance(index, (bool, Opaque))
        and 0 <= index < len(container)
    ):
        return False
    return isinstance(index, Affine) or any(id(container) in j.picked for j in meter.journals)


def block(meter: Meter, holder: object, key: tuple, tile: Tensor, created: bool) -> None:
    """A block tile was taken from a block tensor (`holder`, made before the iterations or in
    them: `holder`) at block indices `key`, which may move with the loop, allocated by this
    access or before: one of the iteration's tiles, in order, that a replay takes again at
    the moved key."""
    for journal in meter.journals:
        journal.tensors.append(tile)
        journal.events.append(("block", holder, key, created, tile))


def holder(meter: Meter, made: Any) -> None:
    """A block tensor (older NKI: `nl.ndarray((B, nl.par_dim(P), F))`) made in the iterations
    being recorded: a replay makes one like it in each iteration (at its creation name, its
    blocks none yet), and its block tiles are taken from it (`block`)."""
    for journal in meter.journals:
        journal.holders.append(made)
        journal.events.append(("holder", made, made.name))


# The items a lookup takes (`lookup`): values compared by value, that nothing changes.
LOOKED_UP = (int, bool, float, str, type(None))


def lookup(meter: Meter, container: object, index: object, item: object) -> object:
    """`container[index]`, a list or tuple from before the loop at an index that moves by a
    constant step, giving a number, string or None (`tile_required[i]`, `strides[i]`): noted
    in the journals the index depends on, for a replay to make only the iterations that take
    the same item, or for an int one that moves by the same step (`Plan.guarded`); an int is
    marked as moving so. Any other item refuses them."""
    number = is_int(item) and not isinstance(item, Opaque)  # (an outer loop's Affine too)
    if type(item) not in LOOKED_UP and not number:
        refuse(meter, "an index that does not move by a constant step")
        return item
    level = level_of(index, item)
    _note(meter, ("lookup", container, index, item), level)
    return at_level(Affine(item), level) if number else item  # type: ignore[call-overload]


def pick(meter: Meter, container: object, index: int, item: object) -> None:
    """`container[index]` was taken as `pickable` says: noted by the item's identity, which
    says where it came from (for a tile or a list; any other item refuses the iterations)."""
    if not isinstance(item, (Tensor, list)):
        refuse(meter, "an index that does not move by a constant step")
        return
    for journal in meter.journals:
        before = journal.picked.get(id(item))
        if before is not None and (before[0] is not container or before[1] != index):
            journal.picked[id(item)] = (None, None, item)
        else:
            journal.picked[id(item)] = (container, index, item)


# A level above any number of journals open: a mark of unknown origin counts for all.
ALL_LEVELS = 1 << 30


class Marked(int):
    """An int that depends on the iteration of a loop being recorded (its loop variable, or
    a value the kernel computed from it). Behaves as an int; the tracer watches it.
    `level`: how many of the journals open when it was marked it depends on (the loop's
    own and those around it; unknown: all of them)."""

    level = ALL_LEVELS


class Affine(Marked):
    """A + B * (the iteration): moves by a constant step from one iteration to the next."""


class Opaque(Marked):
    """Depends on the iteration in some other way (i % 2, i * i, i // 4...)."""


class Text(str):
    """A string an f-string made of ints that move with a loop being recorded (a tile's
    `name=f"acc_{i}"`): its pieces, each a string or (a marked int, its format spec), for a
    replay to make again at the moved ints. Only kept and passed on: any read of it (a
    comparison, an index, a method, iterating, an argument of the library but `name=`)
    refuses the iterations (`read`), as its characters would carry the iteration unmarked."""

    pieces: tuple


# Format specs of an int a replay formats again exactly: fill, alignment, sign, width, zero
# padding and grouping, then d (or none), x, X, o, b.
_INT_SPEC = re.compile(r"(.?[<>=^])?[+\- ]?0?\d*[,_]?[dxXob]?")


def text_field(value: object, conv: str | None, spec: str) -> bool:
    """Can a replay make an f-string's field of a marked value again (`text`): an Affine int
    formatted by a plain int spec (`{i}`, `{i:03d}`), or a Text, as it is (`{name}`)?"""
    if isinstance(value, Text):
        return conv is None and spec == ""
    return isinstance(value, Affine) and conv is None and _INT_SPEC.fullmatch(spec) is not None


def text(pieces: list) -> str:
    """The string of `pieces` (strings, and (marked int, format spec)), as a Text if any
    int is marked (a Text's pieces are spliced in), else a plain string."""
    flat: list = []
    for piece in pieces:
        if isinstance(piece, Text):
            flat.extend(piece.pieces)
        elif isinstance(piece, str):
            flat.append(piece)
        elif isinstance(piece[0], Marked):
            flat.append(piece)
        else:
            flat.append(format(piece[0], piece[1]))
    made = "".join(p if isinstance(p, str) else format(int(p[0]), p[1]) for p in flat)
    if all(isinstance(p, str) for p in flat):
        return made
    out = Text(made)
    out.pieces = tuple(flat)
    return out


def at_level(value: Marked, level: int | None) -> Marked:
    """`value`, marked as depending on the journals `level` says (None: all)."""
    if level is not None and level < ALL_LEVELS:
        value.level = level
    return value


def level_of(*values: object, kind: type[Marked] = Marked) -> int | None:
    """The highest `Marked.level` among the values marked `kind` (in containers and slices
    as `marked` looks), ALL_LEVELS past its scan; None when none is."""
    found: int | None = None
    for v in _marks(values):
        if v is None:
            return ALL_LEVELS
        if isinstance(v, kind):
            found = v.level if found is None else max(found, v.level)
    return found


# Items `marked` looks at, all containers in it together; past them a value counts as marked
# (Opaque): a replay is then refused, never wrong, and no scan costs more than this.
MARKED_SCAN_ITEMS = 4096


def marked(*values: object) -> type[Marked] | None:
    """Opaque if a value (or a tuple, list, set or dict of them, nested, or a slice) is
    Opaque, Affine if one is Affine, None if none is marked; Opaque too for containers with
    more than MARKED_SCAN_ITEMS items in all (not looked through). (A range keeps plain ints:
    the call that makes one of a marked value refuses the replay, `derived`.)"""
    found: type[Marked] | None = None
    for v in _marks(values):
        if v is None or isinstance(v, Opaque):
            return Opaque
        found = Affine
    return found


def _marks(values: tuple) -> Iterator[Marked | None]:
    """The marked ints among `values`, in containers, slices and exception values, looked
    through up to MARKED_SCAN_ITEMS items; then None, once, if there were more."""
    stack: list[object] = list(values)
    budget = MARKED_SCAN_ITEMS
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list, set, frozenset, dict)):
            budget -= len(v) * (2 if isinstance(v, dict) else 1)
            if budget < 0:
                yield None
                return
            stack.extend(v.items() if isinstance(v, dict) else v)
        elif isinstance(v, slice):
            stack.extend((v.start, v.stop, v.step))
        elif isinstance(v, Text):
            stack.extend(p[0] for p in v.pieces if not isinstance(p, str))
        elif hasattr(v, "cls") and isinstance(getattr(v, "args", None), tuple):
            stack.extend(getattr(v, "args"))  # (an exception value: `raise ValueError(i)`)
        elif isinstance(v, Marked):
            yield v


def derive(meter: Meter, op: str, a: object, b: object, result: object) -> object:
    """`a op b` computed by the kernel, marked as it depends on the iteration: sums and
    differences of ints, and products by a plain int, stay Affine; any other int made of a
    marked value is Opaque. A value of another type made of one (`i / 2`, `[0] * i`) would
    carry the iteration unmarked into a condition a replay does not repeat: the iterations
    are refused (`derived`)."""
    kind = marked(a, b)
    if kind is None:
        return result
    level = level_of(a, b)
    if isinstance(result, (list, tuple)) and _rearranged(op, a, b):
        return create(meter, result)
    if not isinstance(result, int) or isinstance(result, bool):
        return derived(meter, f"operator {op}", result, level)
    if kind is Affine and (
        op in ("+", "-") or (op == "*" and not (isinstance(a, Marked) and isinstance(b, Marked)))
    ):
        return at_level(Affine(result), level)
    if kind is Affine and op == "%" and isinstance(a, Affine) and _positive(b):
        # `t % n` moves by a constant step where `t` moves by a multiple of n (`bufs[i % 2]`
        # recorded two iterations at a time), or while `t` stays in the quotient's run;
        # which, the match says (plans: "mod" events)
        _note(meter, ("mod", a, b), level)
        return at_level(Affine(result), level)
    if kind is Affine and op == "//" and isinstance(a, Affine) and _positive(b):
        # `t // n` of a flattened loop: it stays while `t` stays in its run (guards, as a
        # replay checks); plain, as `float(t // n)` needs it
        low = int(a) - int(a) % b  # type: ignore[operator]
        guard(meter, ">=", a, low, True)
        guard(meter, "<", a, low + b, True)  # type: ignore[operator]
        return int(result)
    return at_level(Opaque(result), level)


def _rearranged(op: str, a: object, b: object) -> bool:
    """Is `a op b` a list or tuple made of its operands' items as they are, in an order and
    a number of copies the marked values do not decide (`indices + [i]`, `[i] * 2`)? Its
    items keep their marks, and what is read of it after, its length or an item, is what
    the loop unrolled reads: nothing to refuse. (`[0] * i` is refused: its length is `i`.)"""
    if isinstance(a, Marked) or isinstance(b, Marked):
        return False
    return op == "+" or (op == "*" and (is_int(a) or is_int(b)))


def _positive(value: object) -> bool:
    """A plain positive int (a divisor a quotient's runs are as long as)."""
    return is_int(value) and not isinstance(value, Marked) and value > 0  # type: ignore[operator]


# Operators that raise for some right operands (a zero divisor, a negative shift or power).
_RAISING_BY_RIGHT = frozenset(("/", "//", "%", "**", "<<", ">>"))


def operands(meter: Meter, op: str, a: object, b: object) -> None:
    """The operands of `a op b` in an iteration being recorded: containers read, and a right
    operand marked by the loop where the operator may raise for some values (`10 // (i - 5)`
    in an iteration a replay would not run) refuses the replay."""
    read(meter, a)
    read(meter, b)
    if op in _RAISING_BY_RIGHT and marked(b):
        refuse(meter, f"operator {op} by a value of the loop variable")


def plain(value: object) -> object:
    """A marked int as the plain int it stands for (`i is 1` as CPython's small ints are)."""
    return int(value) if isinstance(value, Marked) else value


def made_by(meter: Meter, what: str, args: Any, kwargs: dict, result: object) -> object:
    """The result of a Python call `what`: while a loop iteration is recorded and made of a
    value it marked, marked or refusing the replay (`derived`): `len([0] * i)`, `float(i)`,
    `str(i)` would otherwise carry the loop variable unmarked into a condition, and a replay
    would repeat the first iterations' branch."""
    if not meter.journals or marked(*args, *kwargs.values()) is None:
        return result
    if copies(what.removesuffix("()"), args, kwargs):
        return create(meter, result)  # (`tuple(shape)`: the same items, marks and all)
    return derived(meter, what, result, level_of(*args, *kwargs.values()))


def copies(name: str, args: Any, kwargs: dict) -> bool:
    """Does the builtin `name` called so make a list or tuple of its argument's items as they
    are, in order (`tuple(shape)`, `list(row)`)? Their marks go along: nothing to refuse."""
    one = len(args) == 1 and not kwargs
    return name in ("tuple", "list") and one and type(args[0]) in (list, tuple)


def derived(meter: Meter, what: str, result: object, level: int | None = None) -> object:
    """`result`, computed by `what` from a value marked by the iteration: an int becomes
    Opaque (a replay refuses a condition or an index on it); None says nothing; anything
    else (a float, a bool, a string, a container, a range) would carry the iteration where
    no mark follows it, so the iterations being recorded are refused."""
    if result is None:
        return None
    if isinstance(result, int) and not isinstance(result, bool):
        return at_level(Opaque(result), level)
    refuse(meter, f"a value made of the loop variable by {what}", level)
    return result
