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
