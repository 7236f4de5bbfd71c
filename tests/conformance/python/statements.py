# ruff: noqa: E501 - program text: long lines are the programs' own
"""Statements of the language reference: assignment forms, `if`/`while`/`for` with `else`,
`break`/`continue`, `del`, `assert`, `return`, `pass`, augmented and annotated assignment."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["chained_assignment"] = """
def main():
    a = b = c = 3
    x = y = []
    x.append(1)
    print(a, b, c, y, x is y)
"""

PROGRAMS["swap_and_tuple_assignment"] = """
def main():
    a, b = 1, 2
    a, b = b, a
    (c, d), e = (3, 4), 5
    print(a, b, c, d, e)
"""

PROGRAMS["assignment_order_of_targets"] = """
def main():
    xs = [0, 0, 0]
    i = 0
    i, xs[i] = 1, 9
    print(i, xs)
"""

PROGRAMS["subscript_and_attribute_targets"] = """
class Box:
    pass

def main():
    b = Box()
    b.items = {}
    b.items["k"] = [1, 2]
    b.items["k"][0] = 7
    b.n = 0
    b.n += 5
    print(b.items, b.n)
"""

PROGRAMS["slice_assignment"] = """
def main():
    xs = list(range(8))
    xs[2:4] = ["a", "b", "c"]
    xs[::3] = [0, 0, 0]
    xs[-1:] = []
    print(xs)
"""

PROGRAMS["del_statement"] = """
def main():
    xs = [1, 2, 3, 4, 5]
    del xs[0]
    del xs[1:3]
    d = {"a": 1, "b": 2}
    del d["a"]
    x = 5
    del x
    try:
        print(x)
    except NameError:
        print("x deleted")
    print(xs, d)
"""

PROGRAMS["del_attribute"] = """
class C:
    pass

def main():
    c = C()
    c.v = 1
    print(hasattr(c, "v"))
    del c.v
    print(hasattr(c, "v"))
"""

PROGRAMS["if_elif_else"] = """
def classify(n):
    if n < 0:
        return "neg"
    elif n == 0:
        return "zero"
    elif n < 10:
        return "small"
    else:
        return "big"

def main():
    print([classify(n) for n in (-3, 0, 4, 50)])
"""

PROGRAMS["while_else_runs_without_break"] = """
def main():
    i = 0
    while i < 3:
        i += 1
    else:
        print("else", i)
    while True:
        break
    else:
        print("not printed")
    print("end")
"""

PROGRAMS["for_else_with_break"] = """
def find(xs, v):
    for i, x in enumerate(xs):
        if x == v:
            print("found at", i)
            break
    else:
        print("missing", v)

def main():
    find([3, 4, 5], 4)
    find([3, 4, 5], 9)
"""

PROGRAMS["nested_loops_break_continue"] = """
def main():
    out = []
    for i in range(4):
        for j in range(4):
            if j > i:
                break
            if (i + j) % 2:
                continue
            out.append((i, j))
    print(out)
"""

PROGRAMS["loop_variable_after_loop"] = """
def main():
    for i in range(5):
        pass
    print(i)
    for k in []:
        pass
    print("k" in dir() if False else "ok")
"""

PROGRAMS["assert_passes_and_fails"] = """
def main():
    assert 1 + 1 == 2
    assert [1], "non-empty is true"
    try:
        assert 0, "zero is false"
    except AssertionError as e:
        print("caught", e)
    try:
        assert False
    except AssertionError as e:
        print("empty", repr(str(e)))
"""

PROGRAMS["pass_and_ellipsis"] = """
class Empty:
    pass

def nothing():
    ...

def main():
    print(nothing(), type(Empty()).__name__, ...)
"""

PROGRAMS["return_forms"] = """
def none_implicit():
    x = 1

def none_bare():
    return

def many():
    return 1, 2

def early(n):
    for i in range(n):
        if i == 2:
            return i
    return -1

def main():
    print(none_implicit(), none_bare(), many(), early(5), early(1))
"""

PROGRAMS["augmented_assignment_all_operators"] = """
def main():
    a = 100
    a += 3; print(a)
    a -= 5; print(a)
    a *= 2; print(a)
    a //= 3; print(a)
    a %= 50; print(a)
    a **= 2; print(a)
    a >>= 2; print(a)
    a <<= 1; print(a)
    a &= 0xFF; print(a)
    a |= 0x100; print(a)
    a ^= 0x11; print(a)
    a /= 4; print(a)
"""

PROGRAMS["augmented_assignment_mutates_list_in_place"] = """
def main():
    a = [1]
    b = a
    a += [2]
    print(a, b, a is b)
    t = (1,)
    u = t
    t += (2,)
    print(t, u, t is u)
"""

PROGRAMS["augmented_assignment_subscript_evaluates_once"] = """
calls = []

def key(k):
    calls.append(k)
    return k

def main():
    d = {"a": 1}
    d[key("a")] += 10
    print(d, calls)
"""

PROGRAMS["annotated_assignment"] = """
from typing import List

def main():
    n: int = 4
    xs: List[int] = [1, 2]
    later: str
    n += len(xs)
    print(n, xs)
"""

PROGRAMS["walrus_in_comprehension_and_while"] = """
def main():
    data = [1, 5, 2, 8, 3]
    big = [y for x in data if (y := x * 2) > 5]
    it = iter(data)
    seen = []
    while (v := next(it, None)) is not None:
        seen.append(v)
    print(big, seen)
"""

PROGRAMS["walrus_in_if"] = """
def main():
    d = {"k": 3}
    if (v := d.get("k")) is not None:
        print("got", v)
    if (w := d.get("z")):
        print("unexpected")
    print(w)
"""

PROGRAMS["conditional_expression_nesting"] = """
def sign(n):
    return "neg" if n < 0 else "zero" if n == 0 else "pos"

def main():
    print([sign(n) for n in (-1, 0, 1)])
"""

PROGRAMS["while_with_counter_and_continue"] = """
def main():
    n, total = 0, 0
    while n < 10:
        n += 1
        if n % 3 == 0:
            continue
        total += n
    print(n, total)
"""

PROGRAMS["function_defaults_evaluated_once"] = """
def append(v, acc=[]):
    acc.append(v)
    return acc

def main():
    print(append(1), append(2), append(3, []))
"""

PROGRAMS["keyword_only_and_positional_only"] = """
def f(a, b, /, c, *, d=4):
    return a, b, c, d

def main():
    print(f(1, 2, 3), f(1, 2, c=5, d=6))
    try:
        f(1, b=2, c=3)
    except TypeError:
        print("b is positional-only")
"""

PROGRAMS["recursion"] = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def hanoi(n, a, b, c, moves):
    if n:
        hanoi(n - 1, a, c, b, moves)
        moves.append((a, c))
        hanoi(n - 1, b, a, c, moves)
    return moves

def main():
    print([fib(i) for i in range(12)], len(hanoi(4, "a", "b", "c", [])))
"""

PROGRAMS["match_literal_and_capture"] = """
def describe(v):
    match v:
        case 0:
            return "zero"
        case 1 | 2:
            return "small"
        case [x, y]:
            return f"pair {x} {y}"
        case {"k": k}:
            return f"dict {k}"
        case str() as s:
            return "str " + s
        case _:
            return "other"

def main():
    print([describe(v) for v in (0, 2, [3, 4], {"k": 5}, "s", 9.5)])
"""

PROGRAMS["match_class_pattern_and_guard"] = """
from dataclasses import dataclass

@dataclass
class Point:
    x: int
    y: int

def where(p):
    match p:
        case Point(x=0, y=0):
            return "origin"
        case Point(x=0, y=y):
            return f"y axis {y}"
        case Point(x=x, y=y) if x == y:
            return "diagonal"
        case Point():
            return "somewhere"

def main():
    print([where(Point(a, b)) for a, b in ((0, 0), (0, 3), (2, 2), (1, 5))])
"""

PROGRAMS["match_sequences_and_stars"] = """
def shape(v):
    match v:
        case []:
            return "empty"
        case [x]:
            return f"one {x}"
        case (first, *middle, last):
            return f"{first}..{last} around {middle}"
        case _:
            return "not a sequence"

def main():
    for v in ([], [7], (1, 2), [1, 2, 3, 4], range(5), "abc", {"a": 1}, 3):
        print(shape(v))
"""

PROGRAMS["match_mappings_and_rest"] = """
def route(msg):
    match msg:
        case {"op": "load", "shape": [p, f], **extra}:
            return f"load {p}x{f} {sorted(extra.items())}"
        case {"op": "store"}:
            return "store"
        case {}:
            return f"mapping of {len(msg)}"
    return "no match"

def main():
    print(route({"op": "load", "shape": [128, 512], "dtype": "bf16", "tag": 1}))
    print(route({"op": "load", "shape": [128]}))
    print(route({"op": "store", "x": 1}))
    print(route({"other": 1}))
    print(route([("op", "store")]))
"""

PROGRAMS["match_values_singletons_and_or"] = """
from enum import Enum

class Engine(Enum):
    TENSOR = 1
    VECTOR = 2
    SCALAR = 3

class Sizes:
    TILE = 128

def kind(v):
    match v:
        case None:
            return "none"
        case True:
            return "true"
        case Engine.TENSOR | Engine.VECTOR as e:
            return f"compute {e.name}"
        case Engine.SCALAR:
            return "scalar"
        case Sizes.TILE:
            return "a tile"
        case -1 | -2.5:
            return "negative"
        case "a" "b":
            return "ab"
        case (1 | 2) as small:
            return f"small {small}"
    return f"unmatched {v!r}"

def main():
    for v in (None, True, 1, 2, 0, Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, 128, -1,
              -2.5, "ab", False, 1.0):
        print(kind(v))
"""

PROGRAMS["match_classes_positional_and_keyword"] = """
from dataclasses import dataclass

class Tile:
    __match_args__ = ("rows", "cols")

    def __init__(self, rows, cols, buffer="sbuf"):
        self.rows, self.cols, self.buffer = rows, cols, buffer

@dataclass
class Pair:
    left: object
    right: object

def describe(v):
    match v:
        case Tile(128, cols, buffer="psum"):
            return f"full psum tile of {cols}"
        case Tile(rows, cols) if rows * cols > 4096:
            return f"big tile {rows}x{cols}"
        case Tile(rows=r):
            return f"tile of {r} rows"
        case Pair(Pair(a, b), c):
            return f"nested {a} {b} {c}"
        case Pair(left=int(n), right=str() as s):
            return f"int {n} and str {s}"
        case int(n) | float(n):
            return f"number {n}"
        case list([x, *_]):
            return f"list from {x}"
        case Pair(missing=1):
            return "never"
    return "other"

def main():
    for v in (Tile(128, 512, "psum"), Tile(64, 128), Tile(32, 8), Pair(Pair(1, 2), 3),
              Pair(4, "s"), Pair(4, 5), 7, 2.5, [9, 8], [], "x"):
        print(describe(v))
"""

PROGRAMS["match_binding_guards_and_scope"] = """
def first_even(values):
    seen = []
    for v in values:
        match v:
            case int(n) if n % 2 == 0:
                return n, seen
            case int(n):
                seen.append(n)
                continue
            case "stop":
                break
    return None, seen

def leak(v):
    match v:
        case [a, b] if a > b:
            return ("gt", a, b)
        case _:
            pass
    return ("bound after a failed guard", a, b)

def main():
    print(first_even([1, 3, 4, 5]))
    print(first_even([1, "stop", 2]))
    print(leak([2, 1]))
    print(leak([1, 2]))
    try:
        leak(5)
    except NameError as e:
        print("NameError" if "a" in str(e) else str(e))
    except UnboundLocalError as e:
        print(type(e).__name__)
"""

PROGRAMS["match_subject_forms_and_soft_keywords"] = """
match = [1, 2]
case = {"case": 3}

def subjects():
    match match:
        case [1, x]:
            print("list", x)
    match 1, 2:
        case (a, b):
            print("tuple", a, b)
    match case:
        case {"case": c}:
            print("dict", c)
    match (-1):
        case -1:
            print("parenthesized")
    match -1:
        case -1: print("one line")
    print(match, case["case"])

def names():
    def case(x):
        return x + 1
    match = case
    print(match(1), case(2))
    match(3)

def main():
    subjects()
    names()
"""

PROGRAMS["match_errors_at_run_time"] = """
from dataclasses import dataclass

class Plain:
    pass

@dataclass
class Point:
    x: int
    y: int

class K:
    a = "x"
    b = "x"

def attempt(label, fn):
    try:
        print(label, fn())
    except (TypeError, ValueError) as e:
        print(label, type(e).__name__, e)

def too_many(v):
    match v:
        case Point(1, 2, 3):
            return "?"

def no_args(v):
    match v:
        case Plain(1):
            return "?"

def not_a_class(v):
    match v:
        case len():
            return "?"

def twice(v):
    match v:
        case Point(1, x=2):
            return "?"

def builtin_two(v):
    match v:
        case int(1, 2):
            return "?"

def dup_keys(v):
    match v:
        case {K.a: 1, K.b: 2}:
            return "?"
    return "no match"

def main():
    attempt("too many", lambda: too_many(Point(1, 2)))
    attempt("no args", lambda: no_args(Plain()))
    attempt("not a class", lambda: not_a_class(1))
    attempt("twice", lambda: twice(Point(1, 2)))
    attempt("builtin two", lambda: builtin_two(1))
    attempt("dup keys", lambda: dup_keys({"x": 1, "y": 2}))
    attempt("dup keys short", lambda: dup_keys({"x": 1}))
"""

PROGRAMS["match_class_patterns_as_cpython_reads_them"] = """
from dataclasses import dataclass
from enum import IntEnum

@dataclass
class P:
    x: int
    y: int

class Q(P):
    pass

class N(IntEnum):
    A = 1
    B = 2

class Loud:
    __match_args__ = ("a", "b")

    @property
    def a(self):
        print("get a")
        return 0

    @property
    def b(self):
        print("get b")
        return 1

class BadArgs:
    __match_args__ = ["a"]
    a = 1

class OddArgs:
    __match_args__ = ("a", 1)
    a = 1

def main():
    match Q(1, 2):
        case Q(x, y):
            print("inherited match args", x, y)
    match N.B:
        case N(n):
            print("an IntEnum member matches itself", n is N.B)
    match Loud():
        case Loud(0, b=2):
            print("no")
        case Loud(0, 1):
            print("read before matched")
    for cls in (BadArgs, OddArgs):
        try:
            match cls():
                case BadArgs(v) | OddArgs(v):
                    print("matched", v)
        except TypeError as e:
            print(type(e).__name__, e)
    match OddArgs():
        case OddArgs(a=1):
            print("keyword only: the odd element is never read")
"""

PROGRAMS["match_mapping_keys_as_cpython_looks_them_up"] = """
from collections import defaultdict

class K:
    N = float("nan")
    A = "a"

def main():
    match {K.N: 1, 2: 3}:
        case {K.N: 1, **rest}:
            print("nan key found by identity", rest)
    try:
        match {"a": 5, "b": 1}:
            case {"a": 0, K.A: 1}:
                print("no")
    except ValueError as e:
        print(type(e).__name__, e)
    d = defaultdict(list)
    match d:
        case {"missing": _}:
            print("no")
        case _:
            print("a defaultdict makes no key", len(d))
    try:
        match range(10**20):
            case [*_]:
                print("no")
    except OverflowError as e:
        print(type(e).__name__)
"""

PROGRAMS["match_at_module_level"] = """
CONFIG = ("bf16", 512)
match CONFIG:
    case ("fp32", _):
        TILE = 128
    case (dtype, width) if width % 128 == 0:
        TILE = width
    case _:
        TILE = 0

def main():
    print(TILE, dtype, width)
"""

PROGRAMS["global_constant_tables"] = """
SIZES = {"small": 128, "large": 512}
ORDER = tuple(sorted(SIZES, key=SIZES.get))

def main():
    print(ORDER, SIZES["large"] // SIZES["small"])
"""

PROGRAMS["module_level_if_binds_names"] = """
FAST = True
if FAST:
    TILE = 512
else:
    TILE = 128

def main():
    print(TILE)
"""

PROGRAMS["module_level_for_builds_a_table"] = """
TABLE = {}
for _n in range(4):
    TABLE[_n] = _n * _n

def main():
    print(TABLE)
"""

PROGRAMS["del_forms_and_errors"] = """
import collections

class C:
    pass

g = 1

def drop_global():
    global g
    del g

def main():
    x = 1
    del x
    try:
        print(x)
    except NameError as e:
        print(type(e).__name__, e)
    try:
        del x
    except NameError as e:
        print("again:", e)
    d = collections.deque([1, 2, 3])
    del d[1]
    xs = list(range(10))
    del xs[::2], xs[0]
    a, b = [1], {"k": 2}
    del (a[0], b["k"])
    print(d, xs, a, b)
    c = C()
    c.v = 2
    del c.v
    for bad in ("del c.v", "del (1, 2)[0]", "del b['nope']", "del xs[99]"):
        try:
            if bad == "del c.v":
                del c.v
            elif bad == "del (1, 2)[0]":
                del (1, 2)[0]
            elif bad == "del b['nope']":
                del b["nope"]
            else:
                del xs[99]
        except (AttributeError, TypeError, KeyError, IndexError) as e:
            print(type(e).__name__, e)
    drop_global()
    try:
        print(g)
    except NameError as e:
        print("g gone", type(e).__name__)
"""

PROGRAMS["dict_display_unpacking_errors"] = """
class C:
    pass

def main():
    d = {"a": 1}
    print({**d, "b": 2, **{"a": 3}}, {**{}}, {"z": 0, **d})
    for bad in (1, [1], C(), "ab"):
        try:
            x = {**bad}
        except TypeError as e:
            print(e)
"""

PROGRAMS["positional_only_with_kwargs"] = """
def f(a, /, **kw):
    return a, kw

def g(a, b=2, /, c=3):
    return a, b, c

def main():
    print(f(1, a=2), g(1), g(1, 5, c=6), g(1, c=7))
    for call in ("g(a=1)", "g(1, b=2)"):
        try:
            if call == "g(a=1)":
                g(a=1)
            else:
                g(1, b=2)
        except TypeError as e:
            print(call, e)
"""
