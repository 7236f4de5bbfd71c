"""A sweep's configurations: `--param` values, the `--where` filter (a small expression
language that runs no Python) and their cross product, within its cap."""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from neuronemu.errors import UsageError, shown


def parse_param(text: str) -> tuple[str, list[Any]]:
    """`NAME=v1,v2,...` (Python literals) or `NAME=lo..hi` / `NAME=lo..hi:step` (ints,
    `hi` included)."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(
            f"--param {text!r}: expected NAME=VALUES", hint="e.g. --param TILE_N=128,256"
        )
    m = _RANGE.fullmatch(values)
    if m:
        return name, _range(text, m)
    out = []
    for part in _split_top_level(values):
        try:
            value = ast.literal_eval(part.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise UsageError(
                f"--param {text!r}: cannot read {part.strip()!r}",
                hint="values are Python literals: 128, 0.5, 'causal', (2, 4)",
            ) from None
        if not recordable(value):
            raise UsageError(
                f"--param {shown(text)}: {shown(part.strip())} is of type "
                f"{type(value).__name__}, which a sweep cannot record (its results name each "
                "configuration in JSON)",
                hint=RECORDABLE,
            )
        out.append(value)
    if not out:
        raise UsageError(f"--param {text!r} has no values")
    return name, out


RECORDABLE = "values are numbers, strings, True, False, None, or lists or tuples of them"


def recordable(value: Any, depth: int = 0) -> bool:
    """Can a configuration hold `value` (a number, string, bool or None, or a list or tuple
    of such, nested at most 20 deep): what the JSON of a result can say as it is."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) in (list, tuple) and depth < 20:
        return all(recordable(v, depth + 1) for v in value)
    return False


# `lo..hi` or `lo..hi:step`, in ASCII digits (`\d` takes any script's, and `int` reads them).
_RANGE = re.compile(r"\s*([+-]?[0-9]+)\s*\.\.\s*([+-]?[0-9]+)\s*(?::\s*([+-]?[0-9]+))?\s*")
# The most digits of a range's lo, hi or step (Python reads no int of over 4,300 digits) and
# the most values one range may make (as many as a sweep's default cap of configurations).
RANGE_DIGITS = 100
RANGE_VALUES = 100_000


def _range(text: str, m: re.Match[str]) -> list[int]:
    """The values of a matched `lo..hi[:step]`, each way it can be wrong said as it is."""
    bounds = {"lo": m.group(1), "hi": m.group(2), "step": m.group(3) or "1"}
    for what, digits in bounds.items():
        if len(digits.lstrip("+-").lstrip("0")) > RANGE_DIGITS:
            raise UsageError(
                f"--param {shown(text)}: {what} has more than {RANGE_DIGITS} digits",
                hint="a range's lo, hi and step are integers of at most 100 digits",
            )
    lo, hi, step = (int(d) for d in bounds.values())
    if step <= 0:
        raise UsageError(
            f"--param {shown(text)}: the step is {step}; a range's step is a positive integer",
            hint="for the values downwards, list them: --param N=8,4,2",
        )
    if hi < lo:
        raise UsageError(f"--param {shown(text)}: hi {hi} is below lo {lo}: the range is empty")
    count = (hi - lo) // step + 1
    if count > RANGE_VALUES:
        raise UsageError(
            f"--param {shown(text)}: the range makes {count:,} values, over the "
            f"{RANGE_VALUES:,} one range may make",
            hint="take fewer with a step: lo..hi:step",
        )
    return list(range(lo, hi + 1, step))


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}

# What a `--where` expression may be: its text, its nesting, and an integer it computes
# (a `**` tower such as `(9**64)**64**...` would otherwise compute for hours).
WHERE_CHARS = 10_000
WHERE_DEPTH = 100
WHERE_INT_BITS = 8192


def where_filter(text: str | None) -> Callable[[Mapping[str, Any]], bool]:
    """`--where EXPR`: a condition on the parameters (arithmetic, comparisons, and/or/not,
    min/max/abs), evaluated by neuronemu itself, not by Python's eval."""
    if not text:
        return lambda _config: True
    if len(text) > WHERE_CHARS:
        raise UsageError(
            f"--where: an expression of {len(text):,} characters (at most {WHERE_CHARS:,})"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise UsageError(f"--where {shown(text)}: not an expression") from None
    _check_depth(tree, text)

    def number(value: Any) -> Any:
        if isinstance(value, int) and value.bit_length() > WHERE_INT_BITS:
            raise UsageError(f"--where {shown(text)}: an integer over {WHERE_INT_BITS} bits")
        return value

    def ev(node: ast.AST, names: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body, names)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            return number(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise UsageError(f"--where {shown(text)}: no parameter {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.Tuple):
            return tuple(ev(e, names) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            values = (ev(v, names) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand, names))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev(node.left, names), ev(node.right, names)
            if not all(isinstance(x, (int, float)) for x in (a, b)):
                raise UsageError(
                    f"--where {shown(text)}: arithmetic takes numbers, "
                    f"not {type(a).__name__} and {type(b).__name__}"
                )
            if isinstance(node.op, ast.Pow):
                if abs(b) > 64:
                    raise UsageError(f"--where {shown(text)}: an exponent over 64")
                if isinstance(a, int) and b > 0 and (abs(a).bit_length() - 1) * b > WHERE_INT_BITS:
                    raise UsageError(
                        f"--where {shown(text)}: an integer over {WHERE_INT_BITS} bits"
                    )
            return number(_OPS[type(node.op)](a, b))
        if isinstance(node, ast.Compare):
            left = ev(node.left, names)
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in _OPS:
                    break
                right = ev(right_node, names)
                if not _OPS[type(op)](left, right):
                    return False
                left = right
            else:
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _FUNCTIONS[node.func.id](*(ev(a, names) for a in node.args))
        raise UsageError(
            f"--where {shown(text)}: {type(node).__name__} is not allowed",
            hint="use parameters, numbers, + - * / // % **, comparisons, and/or/not, min/max/abs",
        )

    def keep(config: Mapping[str, Any]) -> bool:
        try:
            return bool(ev(tree, config))
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise UsageError(f"--where {shown(text)} for {_show(config)}: {exc}") from None

    return keep


def _check_depth(tree: ast.AST, text: str) -> None:
    """An expression nested deeper than WHERE_DEPTH (`- - - ... a`) is refused before it is
    evaluated, which recurses once per level."""
    level = [tree]
    for _ in range(WHERE_DEPTH):
        level = [child for node in level for child in ast.iter_child_nodes(node)]
        if not level:
            return
    raise UsageError(f"--where {shown(text)}: nested deeper than {WHERE_DEPTH} levels")


# The configurations a sweep may have, before `where` (whose every test is Python work):
# `--max-configs N` (`max_configs=` in the API) raises it.
MAX_CONFIGS = 100_000


def configurations(
    params: Mapping[str, list[Any]], where: str | None, max_configs: int = MAX_CONFIGS
) -> list[dict[str, Any]]:
    """The cross product of the parameters' values where `where` holds, at most
    `max_configs` of them before the filter."""
    keep = where_filter(where)
    names = list(params)
    total = math.prod(len(params[n]) for n in names)
    if total > max_configs:
        raise UsageError(
            f"the --param values make {total:,} configurations, over the cap of "
            f"{max_configs:,} a sweep may have (max_configs)",
            hint="raise the limit with --max-configs N (max_configs=N in the Python API) "
            "if the sweep really needs them, or take fewer values (lo..hi:step)",
        )
    out = []
    for values in itertools.product(*(params[n] for n in names)):
        config = dict(zip(names, values))
        if keep(config):
            out.append(config)
    return out


def _show(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in config.items())
