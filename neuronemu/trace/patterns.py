"""`match` (PEP 634): the subject tried against each case's pattern in order, the first that
matches (and whose guard holds) runs its block, as CPython 3.11 does it.

A pattern's names are bound once it has matched, before its guard runs (a guard that fails
leaves them bound, as in CPython). The copies a pattern makes (`*rest`, `**rest`) are sized
before they are made, like any other trace-time sequence.
"""

from __future__ import annotations

import collections.abc
from typing import Any

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.trace.exceptions import ExceptionClass, builtin_base, caught, class_of
from neuronemu.trace.objects import UserClass
from neuronemu.trace.state import TracerState
from neuronemu.trace.values import Builtin

__all__ = ["Patterns"]

# The builtin classes whose one positional sub-pattern matches the subject itself (PEP 634).
_SELF_MATCHING = frozenset(
    "bool bytearray bytes dict float frozenset int list set str tuple".split()
)
_NOT_SEQUENCES = (str, bytes, bytearray)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, collections.abc.Sequence) and not isinstance(value, _NOT_SEQUENCES)


def _is_attribute_error(err: NeuronEmuError) -> bool:
    value = caught(err)
    if value is None:
        return False
    base = builtin_base(class_of(value))
    return base is not None and issubclass(base.py, AttributeError)


def _type_error(message: str, span: SourceSpan) -> KernelTypeError:
    return KernelTypeError(message, span).as_python("TypeError")


class Patterns(TracerState):
    """The `match` statement of the tracer (see tracer.py)."""

    def _s_Match(self, s: A.Match, env: Any) -> None:
        subject = self.eval(s.subject, env)
        for case in s.cases:
            self.meter.tick(case.span)
            bound: dict[str, Any] = {}
            if not self._matches(case.pattern, subject, bound, env):
                continue
            for name, value in bound.items():
                self.assign(A.Name(case.pattern.span, name), value, env)
            if case.guard is None or self.truth(self.eval(case.guard, env), case.guard.span):
                self.exec_body(case.body, env)
                return

    def _matches(self, p: A.Node, value: Any, bound: dict[str, Any], env: Any) -> bool:
        """Does `value` match pattern `p`? The names it binds go into `bound`."""
        if isinstance(p, A.MatchAs):
            if p.pattern is not None and not self._matches(p.pattern, value, bound, env):
                return False
            if p.name is not None:
                bound[p.name] = value
            return True
        if isinstance(p, A.MatchValue):
            other = self.eval(p.value, env)
            return self.truth(self.compare("==", value, other, p.span, True), p.span)
        if isinstance(p, A.MatchSingleton):
            return value is p.value
        if isinstance(p, A.MatchOr):
            for alternative in p.patterns:
                trial: dict[str, Any] = {}
                if self._matches(alternative, value, trial, env):
                    bound.update(trial)
                    return True
            return False
        if isinstance(p, A.MatchSequence):
            return self._sequence(p, value, bound, env)
        if isinstance(p, A.MatchMapping):
            return self._mapping(p, value, bound, env)
        if isinstance(p, A.MatchClass):
            return self._class(p, value, bound, env)
        return self.eval(p, env)  # (an Unsupported node: a complex literal, refused located)

    def _sequence(self, p: A.MatchSequence, value: Any, bound: dict[str, Any], env: Any) -> bool:
        if not _is_sequence(value):
            return False
        stars = [i for i, q in enumerate(p.patterns) if isinstance(q, A.MatchStar)]
        if len(p.patterns) == 1 and stars and p.patterns[0].name is None:  # type: ignore[attr-defined]
            return True  # `[*_]`: any sequence, its length never asked (as in CPython)
        try:
            n = len(value)
        except OverflowError as exc:  # (a range longer than a C ssize_t)
            raise KernelTypeError(str(exc), p.span).as_python("OverflowError") from None
        if not stars:
            if n != len(p.patterns):
                return False
            return all(self._matches(q, value[i], bound, env) for i, q in enumerate(p.patterns))
        star = stars[0]
        after = len(p.patterns) - star - 1
        if n < star + after:
            return False
        for i, q in enumerate(p.patterns[:star]):
            if not self._matches(q, value[i], bound, env):
                return False
        for j, q in enumerate(p.patterns[star + 1 :]):
            if not self._matches(q, value[n - after + j], bound, env):
                return False
        name = p.patterns[star].name  # type: ignore[attr-defined]  # (a MatchStar)
        if name is not None:
            self.meter.items(n - star - after, "the starred name of a sequence pattern", p.span)
            bound[name] = [value[i] for i in range(star, n - after)]
        return True

    def _mapping(self, p: A.MatchMapping, value: Any, bound: dict[str, Any], env: Any) -> bool:
        """As CPython's MATCH_KEYS: every key looked up (by hash, `get`, so that a
        defaultdict makes nothing) and checked against the ones before it, then the values
        matched in order."""
        if not isinstance(value, collections.abc.Mapping) or len(value) < len(p.keys):
            return False
        self.meter.tick(p.span, len(p.keys))
        seen: set[Any] = set()
        values = []
        missing = object()
        for node in p.keys:
            key = self.eval(node, env)
            try:
                if key in seen:
                    raise KernelTypeError(
                        f"mapping pattern checks duplicate key ({key!r})", node.span
                    ).as_python("ValueError")
                seen.add(key)
                got = value.get(key, missing)
            except TypeError as exc:  # (an unhashable key)
                raise _type_error(str(exc), node.span) from None
            if got is missing:
                return False
            values.append(got)
        for q, got in zip(p.patterns, values):
            if not self._matches(q, got, bound, env):
                return False
        if p.rest is not None:
            self.meter.items(len(value), "the `**` name of a mapping pattern", p.span)
            rest = dict(value)
            for key in seen:
                rest.pop(key, None)
            bound[p.rest] = rest
        return True

    def _class(self, p: A.MatchClass, value: Any, bound: dict[str, Any], env: Any) -> bool:
        """As CPython's MATCH_CLASS: an instance of the class, its attributes read (the
        positional ones by `__match_args__`), then the sub-patterns matched in order."""
        cls = self.eval(p.cls, env)
        builtin_type = isinstance(cls, Builtin) and cls.name in _SELF_MATCHING
        if not (isinstance(cls, (UserClass, ExceptionClass)) or builtin_type):
            raise _type_error("called match pattern must be a type", p.cls.span)
        _, isinstance_ = self.builtins.lookup("isinstance")
        if not isinstance_.fn(p.span, value, cls):
            return False
        name = cls.name
        self_matching = builtin_type or (isinstance(cls, UserClass) and cls.int_enum)
        attrs: list[str] = []
        subjects: list[Any] = []
        patterns = list(p.patterns)
        if p.patterns:
            match_args = () if self_matching else self._match_args(cls, p.span)
            if self_matching and len(p.patterns) == 1:
                subjects = [value]  # (the subject itself)
            elif len(p.patterns) > len(match_args):
                allowed = 1 if self_matching else len(match_args)
                s = "" if allowed == 1 else "s"
                raise _type_error(
                    f"{name}() accepts {allowed} positional sub-pattern{s} "
                    f"({len(p.patterns)} given)",
                    p.span,
                )
            else:
                for attr in match_args[: len(p.patterns)]:
                    if not isinstance(attr, str):
                        raise _type_error(
                            f"__match_args__ elements must be strings (got {type(attr).__name__})",
                            p.span,
                        )
                    attrs.append(attr)
        for attr in p.kwd_attrs:
            if attr in attrs:
                raise _type_error(
                    f"{name}() got multiple sub-patterns for attribute {attr!r}", p.span
                )
            attrs.append(attr)
        for attr in attrs:
            try:
                subjects.append(self.getattr(value, attr, p.span))
            except NeuronEmuError as err:
                if _is_attribute_error(err):
                    return False
                raise
        patterns += list(p.kwd_patterns)
        return all(self._matches(q, got, bound, env) for q, got in zip(patterns, subjects))

    def _match_args(self, cls: Any, span: SourceSpan) -> tuple[Any, ...]:
        """The class's `__match_args__`, as inherited: a class's own, or the one a dataclass
        makes of its fields; none for a class without."""
        if not isinstance(cls, UserClass):
            return ()
        for c in cls.order(span):
            if "__match_args__" in c.attrs:
                args = c.attrs["__match_args__"]
                if type(args) is not tuple:
                    raise _type_error(
                        f"{cls.name}.__match_args__ must be a tuple (got {type(args).__name__})",
                        span,
                    )
                return args
            if c.dataclass or c.named_tuple:
                return tuple(name for name, _ in c.all_fields())
        return ()
