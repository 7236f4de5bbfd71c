"""The AST builder's rules for `match` (PEP 634): patterns as CPython's ast names them, and
the checks CPython makes when it compiles them (an irrefutable case or alternative before
others, a name bound twice, alternatives binding different names, a starred name twice, a
duplicate literal key), each a located syntax error with CPython's message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lark import Transformer, v_args

from neuronemu.errors import KernelSyntaxError, SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.frontend.located import located

__all__ = ["MatchRules", "check_bindings", "irrefutable"]


@v_args(wrapper=located)
class MatchRules(Transformer):
    """The `match` part of the AST builder (to_ast.ToAst, whose `_span`, `_string` and
    `path` these rules use)."""

    if TYPE_CHECKING:  # what ToAst gives

        def _span(self, span: SourceSpan) -> SourceSpan: ...
        def _string(self, text: str, span: SourceSpan) -> A.Node: ...

    def match_stmt(self, meta, children):
        subject, *cases = children
        if isinstance(subject, A.Starred):  # (`match *a:`; `match *a, b:` is a tuple)
            raise KernelSyntaxError("invalid syntax", subject.span)
        for case in cases[:-1]:  # CPython's compile-time check
            if case.guard is None and irrefutable(case.pattern):
                raise KernelSyntaxError(unreachable(case.pattern), case.pattern.span)
        return A.Match(self._span(meta), subject, tuple(cases))

    def case_block(self, meta, children):
        pattern, guard, body = children
        check_bindings(pattern)
        return A.MatchCase(self._span(meta), pattern, guard, body)

    def guard(self, meta, children):
        return children[0]

    def open_sequence_pattern(self, meta, children):
        return self._sequence(self._span(meta), children)

    def sequence_pattern(self, meta, children):
        return self._sequence(self._span(meta), children)

    def _sequence(self, span: SourceSpan, items: list[Any]) -> A.MatchSequence:
        stars = [p for p in items if isinstance(p, A.MatchStar)]
        if len(stars) > 1:
            raise KernelSyntaxError("multiple starred names in sequence pattern", stars[1].span)
        return A.MatchSequence(span, tuple(items))

    def star_pattern(self, meta, children):
        name = str(children[0])
        return A.MatchStar(self._span(meta), None if name == "_" else name)

    def as_pattern(self, meta, children):
        pattern, name = children
        if str(name) == "_":
            raise KernelSyntaxError("cannot use '_' as a target", self._span(meta))
        return A.MatchAs(self._span(meta), pattern, str(name))

    def or_pattern(self, meta, children):
        for alternative in children[:-1]:
            if irrefutable(alternative):
                raise KernelSyntaxError(unreachable(alternative), alternative.span)
        return A.MatchOr(self._span(meta), tuple(children))

    def name_pattern(self, meta, children):
        node = children[0]
        if isinstance(node, A.Name):  # a capture (or the wildcard `_`)
            return A.MatchAs(self._span(meta), None, None if node.id == "_" else node.id)
        return A.MatchValue(self._span(meta), node)  # a dotted name: a value to compare

    def class_pattern(self, meta, children):
        cls, arguments = children
        patterns: list[A.Node] = []
        names: list[str] = []
        named: set[str] = set()
        values: list[A.Node] = []
        for arg in arguments or ():
            if isinstance(arg, tuple):
                if arg[0] in named:
                    raise KernelSyntaxError(
                        f"attribute name repeated in class pattern: {arg[0]}", arg[1].span
                    )
                names.append(arg[0])
                named.add(arg[0])
                values.append(arg[1])
            elif names:
                raise KernelSyntaxError("positional patterns follow keyword patterns", arg.span)
            else:
                patterns.append(arg)
        return A.MatchClass(self._span(meta), cls, tuple(patterns), tuple(names), tuple(values))

    def pattern_arguments(self, meta, children):
        return children

    def keyword_pattern(self, meta, children):
        return (str(children[0]), children[1])

    def mapping_pattern(self, meta, children):
        keys: list[A.Node] = []
        literal_keys: set[Any] = set()
        patterns: list[A.Node] = []
        rest = None
        for i, entry in enumerate(children):
            if isinstance(entry, A.MatchAs):  # (`**rest`, as rest_pattern makes it)
                if i != len(children) - 1:
                    raise KernelSyntaxError("'**' pattern must come last", entry.span)
                rest = entry.name
            else:
                key = entry[0]
                if isinstance(key, A.Const):
                    if key.value in literal_keys:  # (1 and True collide, as in CPython)
                        raise KernelSyntaxError(
                            f"mapping pattern checks duplicate key ({key.value!r})", key.span
                        )
                    literal_keys.add(key.value)
                keys.append(key)
                patterns.append(entry[1])
        return A.MatchMapping(self._span(meta), tuple(keys), tuple(patterns), rest)

    def key_pattern(self, meta, children):
        key, pattern = children
        if isinstance(key, A.MatchValue):
            key = key.value
        elif isinstance(key, A.MatchSingleton):
            key = A.Const(key.span, key.value)
        elif not isinstance(key, A.Attribute):  # a plain name: CPython refuses it as a key
            raise KernelSyntaxError(
                "mapping pattern keys may only match literals and attribute lookups", key.span
            )
        return (key, pattern)

    def rest_pattern(self, meta, children):
        name = str(children[0])
        if name == "_":
            raise KernelSyntaxError("cannot use '_' as a target", self._span(meta))
        return A.MatchAs(self._span(meta), None, name)

    def literal_pattern(self, meta, children):
        return A.MatchValue(self._span(meta), children[0])

    def negative_pattern(self, meta, children):
        number = children[0]
        if not isinstance(number, A.Const):  # (a complex literal: not supported)
            return number
        return A.MatchValue(self._span(meta), A.Const(self._span(meta), -number.value))

    def complex_pattern(self, meta, children):
        real, imaginary = children
        if isinstance(real, A.Unsupported):  # (an imaginary literal: `number` refuses it)
            raise KernelSyntaxError("real number required in complex literal", real.span)
        if not isinstance(imaginary, A.Unsupported):
            raise KernelSyntaxError("imaginary number required in complex literal", imaginary.span)
        return A.Unsupported(self._span(meta), "complex numbers")

    def string_pattern(self, meta, children):
        span = self._span(meta)
        values = []
        for token in children:  # (tokens: an f-string is refused even without fields)
            text = str(token)
            if "f" in text[: len(text) - len(text.lstrip("rRbBuUfF"))].lower():
                raise KernelSyntaxError(
                    "patterns may only match literals and attribute lookups", span
                )
            const = self._string(text, span)
            assert isinstance(const, A.Const)  # (not an f-string)
            values.append(const.value)
        if len({type(v) for v in values}) > 1:
            raise KernelSyntaxError("cannot mix bytes and str literals", span)
        return A.MatchValue(span, A.Const(span, values[0][:0].join(values)))

    def none_pattern(self, meta, children):
        return A.MatchSingleton(self._span(meta), None)

    def true_pattern(self, meta, children):
        return A.MatchSingleton(self._span(meta), True)

    def false_pattern(self, meta, children):
        return A.MatchSingleton(self._span(meta), False)


def irrefutable(pattern: A.Node) -> bool:
    """Does `pattern` match every subject (a capture, the wildcard, or one of them in `|`)?"""
    if isinstance(pattern, A.MatchAs):
        return pattern.pattern is None or irrefutable(pattern.pattern)
    if isinstance(pattern, A.MatchOr):
        return any(irrefutable(p) for p in pattern.patterns)
    return False


def unreachable(pattern: A.Node) -> str:
    """CPython's message for an irrefutable pattern that is not the last one."""
    while isinstance(pattern, A.MatchAs) and pattern.pattern is not None:
        pattern = pattern.pattern
    if isinstance(pattern, A.MatchOr):
        return unreachable(next(p for p in pattern.patterns if irrefutable(p)))
    if isinstance(pattern, A.MatchAs) and pattern.name is not None:
        return f"name capture {pattern.name!r} makes remaining patterns unreachable"
    return "wildcard makes remaining patterns unreachable"


def check_bindings(pattern: A.Node) -> list[str]:
    """The names `pattern` binds, in order; CPython's compile-time errors for a name bound
    twice, or for alternatives of `|` that bind different names."""
    names: list[str] = []
    taken: set[str] = set()
    stack: list[A.Node] = [pattern]
    while stack:
        p = stack.pop()
        own: str | None = None
        if isinstance(p, A.MatchOr):
            bound = [sorted(check_bindings(q)) for q in p.patterns]
            if any(b != bound[0] for b in bound[1:]):
                raise KernelSyntaxError("alternative patterns bind different names", p.span)
            for name in bound[0]:
                if name in taken:
                    raise KernelSyntaxError(
                        f"multiple assignments to name {name!r} in pattern", p.span
                    )
                names.append(name)
                taken.add(name)
            continue
        if isinstance(p, A.MatchAs):
            own = p.name
            if p.pattern is not None:
                stack.append(p.pattern)
        elif isinstance(p, A.MatchStar):
            own = p.name
        elif isinstance(p, A.MatchMapping):
            own = p.rest
            stack.extend(reversed(p.patterns))
        elif isinstance(p, A.MatchSequence):
            stack.extend(reversed(p.patterns))
        elif isinstance(p, A.MatchClass):
            stack.extend(reversed(p.kwd_patterns))
            stack.extend(reversed(p.patterns))
        if own is not None:
            if own in taken:
                raise KernelSyntaxError(f"multiple assignments to name {own!r} in pattern", p.span)
            names.append(own)
            taken.add(own)
    return names
