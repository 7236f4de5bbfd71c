"""How deep and how large a trace-time value is, counted through every reference: the work C
code that recurses into it (hash, ==, repr) will do, measured before that code runs, and the
bound every container a kernel makes keeps (`nesting_depth`, `sequence_items`).

A value is walked once per distinct container (a list shared a million times is walked once
and counted a million times), with the clocks read as it goes, so measuring never costs more
than the value's own size in memory.
"""

from __future__ import annotations

import collections
import sys
import weakref
from typing import Any

from neuronemu.errors import SourceSpan
from neuronemu.limits import Meter
from neuronemu.trace.exceptions import KernelException
from neuronemu.trace.objects import UserObject

__all__ = ["measure", "mutated", "check_made", "check_item", "check_text", "check_compare"]

# (a slice holds any three values: `x = slice(x)` nests as `x = (x,)` does)
_BASES = (
    list, tuple, dict, set, frozenset, collections.deque, collections.ChainMap, slice,
    UserObject, KernelException,
)  # fmt: skip
_KINDS: dict[type, bool] = {t: True for t in _BASES}
_TEXT = (str, bytes)
_CAP = 1 << 62  # sizes past any budget (a DAG of lists can count 2**1000 items)
_WALK_TICK = 4096  # items looked at per unit of the meter's clock polling


def _container(t: type) -> bool:
    known = _KINDS.get(t)
    if known is None:
        known = _KINDS[t] = issubclass(t, _BASES)
    return known


def _parts(node: Any, text: bool) -> tuple[int, list[Any]]:
    """A container's own items (with `text`, a string counts its characters) and the
    containers among them."""
    if isinstance(node, (list, tuple)):
        items: Any = node
    elif isinstance(node, dict):
        items = [*node.keys(), *node.values()]
    elif isinstance(node, UserObject):
        items = [*node.attrs.values(), *(node.exc_args or ())]
    elif isinstance(node, KernelException):
        items = node.args
    elif isinstance(node, slice):
        items = (node.start, node.stop, node.step)
    elif isinstance(node, collections.ChainMap):
        items = node.maps  # (len, == and printing walk each map each time it appears)
    else:
        items = node
    n = len(items)
    if text:
        n += sum(len(x) for x in items if isinstance(x, _TEXT))
    if n > 16 and not any(map(_container, set(map(type, items)))):
        return n, []  # (a wide flat container: its items looked at in C)
    return n, [x for x in items if _container(type(x))]


def measure(
    meter: Meter, value: Any, span: SourceSpan | None, text: bool = False
) -> tuple[int, int]:
    """(depth, items): how many containers nest in `value` (0 for a plain value) and how many
    items C code walks through it, each shared container counted every time it appears (as
    hash, == and repr visit it; with `text`, strings count their characters). A container
    that holds itself is counted once, as repr's `[...]` does."""
    if not _container(type(value)):
        return 0, len(value) if text and isinstance(value, _TEXT) else 1
    state = _Cache.of(meter)
    cache = None if text else state
    memo: dict[int, tuple[int, int, bool]] = {}  # id -> (depth, items, immutable)
    pending: dict[int, tuple[int, list[Any]]] = {}
    stack = [value]
    while stack:
        node = stack[-1]
        key = id(node)
        if key in memo:
            stack.pop()
            continue
        entry = pending.pop(key, None)
        if entry is None:  # first visit: its containers go first
            hit = None if cache is None else cache.get(node)
            if hit is not None:
                memo[key] = hit
                stack.pop()
                continue
            n, kids = _parts(node, text)
            pending[key] = (n, kids)
            for kid in kids:
                k = id(kid)
                if k not in memo and k not in pending:
                    stack.append(kid)
            # The walk's work: items looked at (those of a wide flat container too: C
            # looks at each), carried over from call to call so that many small walks add up.
            state.walked += 1 + len(kids) + n
            if state.walked >= _WALK_TICK:
                meter.tick(span, state.walked // _WALK_TICK)
                state.walked %= _WALK_TICK
            continue
        n, kids = entry
        depth, size, frozen = 0, n, type(node) in _IMMUTABLE
        for kid in kids:  # one not measured is the node's own ancestor: a cycle
            d, c, f = memo.get(id(kid), (0, 0, False))
            depth = d if d > depth else depth
            size += c
            frozen = frozen and f
        memo[key] = got = (depth + 1, min(size, _CAP), frozen)
        if cache is not None and got[0] >= _Cache.DEPTH:
            cache.put(node, got)
        stack.pop()
    depth, size, _ = memo[id(value)]
    return depth, size


_IMMUTABLE = (tuple, frozenset, slice)


class _Cache:
    """The measures of deep values (`x = (x,)` or `x = [x]` in a loop walks only the new
    container). A tuple's holds for good; a mutable container's until the kernel next changes
    a container (`mutated`). Shallower values are cheap to walk again and are never kept.

    The cache holds its values alive; each time it has doubled, the entries nothing else
    holds are dropped (newest first, so a dropped tuple frees the older ones only it held,
    in the same pass)."""

    DEPTH = 16
    _FIRST_PRUNE = 4096
    _OF: weakref.WeakKeyDictionary[Meter, _Cache] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.entries: dict[int, tuple[Any, tuple[int, int, bool], int]] = {}
        self.walked = 0  # items walked since the meter's clock was last ticked
        self.epoch = 0
        self.prune_at = self._FIRST_PRUNE

    @classmethod
    def of(cls, meter: Meter) -> _Cache:
        cache = cls._OF.get(meter)
        if cache is None:
            cache = cls._OF[meter] = cls()
        return cache

    def get(self, node: Any) -> tuple[int, int, bool] | None:
        entry = self.entries.get(id(node))
        if entry is None or entry[0] is not node:
            return None
        if not entry[1][2] and entry[2] != self.epoch:
            return None
        return entry[1]

    def put(self, node: Any, measured: tuple[int, int, bool]) -> None:
        self.entries[id(node)] = (node, measured, self.epoch)
        if len(self.entries) <= self.prune_at:
            return
        for key in reversed(list(self.entries)):
            held = self.entries[key][0]
            # Referenced by its entry, `held` and getrefcount's argument: nothing else.
            if sys.getrefcount(held) <= 3:
                del self.entries[key]
            held = None
        self.prune_at = max(self._FIRST_PRUNE, 2 * len(self.entries))


def mutated(meter: Meter, obj: Any) -> None:
    """The kernel may have changed `obj` (an item set, a method called on it): if it is a
    mutable container, the measures of mutable ones no longer hold."""
    cache = _Cache._OF.get(meter)
    if cache is not None and isinstance(obj, _MUTABLE):
        cache.epoch += 1


_MUTABLE = (list, dict, set, collections.deque, UserObject)


def _check(meter: Meter, depth: int, size: int, what: str, span: SourceSpan | None) -> None:
    if depth > meter.limits.nesting_depth:
        raise meter.over("nesting_depth", f"{what} would nest {depth:,} containers deep", span)
    if size > meter.limits.sequence_items:
        raise meter.over(
            "sequence_items",
            f"{what} would hold {size:,} items counted through every reference (hash, == "
            "and printing walk a shared item each time it appears)",
            span,
        )


def check_made(meter: Meter, value: Any, span: SourceSpan | None, what: str = "") -> Any:
    """A container the kernel has just made (a literal, `[x] * n`, a builtin's result, an
    object): within the nesting and item budgets. Returns `value`."""
    if _container(type(value)):
        depth, size = measure(meter, value, span)
        _check(meter, depth, size, what or f"a {type(value).__name__}", span)
    return value


def check_item(meter: Meter, value: Any, span: SourceSpan | None, what: str) -> None:
    """A value about to be put into a container (`list.append`, `d[k] = v`, a field): the
    container will nest one deeper than it."""
    if _container(type(value)):
        depth, size = measure(meter, value, span)
        _check(meter, depth + 1, size, what, span)


def check_text(meter: Meter, value: Any, span: SourceSpan | None) -> None:
    """`str(value)` or `repr(value)` is about to be made: its characters within budget."""
    depth, size = measure(meter, value, span, text=True)
    _check(meter, depth, size, "the text of a value", span)


def check_compare(meter: Meter, op: str, left: Any, right: Any, span: SourceSpan | None) -> None:
    """`left op right` on containers recurses in C through both: charged (one step per 64
    items it may visit) before it runs."""
    if op in ("in", "not in"):
        if isinstance(right, (list, tuple, collections.deque)):
            _, size = measure(meter, right, span)
        elif isinstance(right, (dict, set, frozenset)):
            _, size = measure(meter, left, span)  # a hash, and a compare or two
        else:
            return
    elif _container(type(left)) and _container(type(right)):
        (dl, sl), (dr, sr) = measure(meter, left, span), measure(meter, right, span)
        _check(meter, min(dl, dr), 0, "a compared value", span)
        size = min(sl, sr)
    else:
        return
    meter.step(span, size // 64)


def check_compared(meter: Meter, values: Any, span: SourceSpan | None) -> None:
    """Values a call compares in C (`max(a, b)`, `sorted(xs)`, `list.index`, `operator.eq`
    on lists): charged as `==` is, one step per 64 items of each that it may visit, before
    it runs (a list graph with 2**60 paths, built by appends, never ended)."""
    for value in values:
        if _container(type(value)):
            depth, size = measure(meter, value, span)
            _check(meter, depth, 0, "a compared value", span)
            meter.step(span, size // 64)


# Iterators made over iterators (`g = map(f, g)`, `filter`, `enumerate`, `iter`, islice, a
# generator expression over a generator, in a loop): taking an item runs down the whole chain
# in C, one C frame a level, where no recursion limit reaches (a chain of 200,000 was a
# SIGSEGV; of map with a kernel function, a hang). Each is counted as it is made: a chain
# deeper than nesting_depth is refused there.
class _Chains:
    """The chained iterators alive, by id: (the iterator, its depth). An entry holds its
    iterator; entries that nothing else holds are dropped as the table grows."""

    _FIRST_PRUNE = 1024

    def __init__(self) -> None:
        self.entries: dict[int, tuple[Any, int]] = {}
        self.prune_at = self._FIRST_PRUNE

    @classmethod
    def of(cls, meter: Meter) -> _Chains:
        chains = getattr(meter, "_iterator_chains", None)
        if chains is None:
            chains = cls()
            meter._iterator_chains = chains  # type: ignore[attr-defined]
        return chains

    def depth(self, value: Any) -> int:
        entry = self.entries.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else 0

    def prune(self) -> None:
        # (held by the table's tuple, the loop's name and getrefcount's argument: no more)
        self.entries = {k: e for k, e in self.entries.items() if sys.getrefcount(e[0]) > 3}
        self.prune_at = max(self._FIRST_PRUNE, 2 * len(self.entries))


def check_chained(meter: Meter, result: Any, inputs: Any, span: Any, what: str) -> None:
    """`result`, an iterator made over `inputs`: one level deeper than the deepest iterator
    among them, refused past nesting_depth."""
    if not hasattr(result, "__next__"):
        return
    chains = _Chains.of(meter)
    depth = max((chains.depth(a) + 1 for a in inputs if hasattr(a, "__next__")), default=0)
    if depth == 0:
        return
    if depth > meter.limits.nesting_depth:
        raise meter.over(
            "nesting_depth", f"{what} would be an iterator over iterators {depth:,} deep", span
        )
    chains.entries[id(result)] = (result, depth)
    if len(chains.entries) >= chains.prune_at:
        chains.prune()
