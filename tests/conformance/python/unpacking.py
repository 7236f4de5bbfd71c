# ruff: noqa: E501 - program text: long lines are the programs' own
"""Unpacking: tuple and list targets, starred targets, nested targets, `*` and `**` in calls
and displays, unpacking in `for` loops and comprehensions."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["starred_target_middle"] = """
def main():
    first, *middle, last = range(6)
    print(first, middle, last)
"""

PROGRAMS["starred_target_first_and_last"] = """
def main():
    *init, tail = [1, 2, 3]
    head, *rest = "abc"
    *everything, = (4, 5)
    print(init, tail, head, rest, everything)
"""

PROGRAMS["starred_target_empty"] = """
def main():
    a, *b, c = (1, 2)
    print(a, b, c)
"""

PROGRAMS["nested_targets"] = """
def main():
    (a, b), [c, (d, e)] = (1, 2), [3, (4, 5)]
    print(a, b, c, d, e)
"""

PROGRAMS["unpack_in_for_loop"] = """
def main():
    pairs = [(1, "a"), (2, "b")]
    for n, ch in pairs:
        print(n, ch)
    for i, (n, ch) in enumerate(pairs):
        print(i, n * ch)
"""

PROGRAMS["starred_in_for_target"] = """
def main():
    for first, *rest in [(1, 2, 3), (4,), (5, 6)]:
        print(first, rest)
"""

PROGRAMS["unpack_dict_items"] = """
def main():
    d = {"x": 1, "y": 2}
    for k, v in d.items():
        print(k, v)
    print([f"{k}={v}" for k, v in d.items()])
"""

PROGRAMS["unpack_wrong_count_errors"] = """
def main():
    for value in ((1, 2, 3), (1,)):
        try:
            a, b = value
        except ValueError as e:
            print(e)
"""

PROGRAMS["starred_too_few_errors"] = """
def main():
    try:
        a, b, *c = [1]
    except ValueError as e:
        print(e)
"""

PROGRAMS["call_with_star_args"] = """
def f(a, b, c):
    return a * 100 + b * 10 + c

def main():
    args = [1, 2]
    print(f(*args, 3), f(*"", 4, 5, 6), f(*(7,), *[8], 9))
"""

PROGRAMS["call_with_double_star_kwargs"] = """
def f(a, b=0, **rest):
    return a, b, sorted(rest.items())

def main():
    opts = {"b": 5, "z": 1}
    print(f(1, **opts), f(**{"a": 2}), f(3, **{"y": 0}, **{"x": 9}))
"""

PROGRAMS["call_duplicate_keyword_error"] = """
def f(a):
    return a

def main():
    try:
        f(1, **{"a": 2})
    except TypeError:
        print("multiple values for a")
"""

PROGRAMS["star_in_list_tuple_set_displays"] = """
def main():
    a = [1, 2]
    b = (3,)
    print([*a, *b, 4], (*a, *"xy"), sorted({*a, *a, 5}), [*range(3)])
"""

PROGRAMS["double_star_in_dict_display"] = """
def main():
    base = {"a": 1, "b": 2}
    print({**base, "b": 3}, {"z": 0, **base}, dict(**base, c=4))
"""

PROGRAMS["swap_via_unpacking_in_list"] = """
def main():
    xs = [1, 2, 3]
    xs[0], xs[2] = xs[2], xs[0]
    print(xs)
"""

PROGRAMS["unpack_generator_and_string"] = """
def gen():
    yield 1
    yield 2

def main():
    a, b = gen()
    c, d, e = "xyz"
    print(a, b, c, d, e)
"""

PROGRAMS["unpack_in_comprehension"] = """
def main():
    pts = [(1, 2), (3, 4)]
    print([x + y for x, y in pts], {x: y for x, y in pts}, [(b, a) for a, b in pts])
"""

PROGRAMS["varargs_receive_tuple"] = """
def f(*args, **kwargs):
    return type(args).__name__, args, type(kwargs).__name__, kwargs

def main():
    print(f(), f(1, 2, k=3))
"""

PROGRAMS["return_multiple_and_unpack"] = """
def stats(xs):
    return min(xs), max(xs), sum(xs) / len(xs)

def main():
    lo, hi, mean = stats([4, 8, 6])
    print(lo, hi, mean)
"""

PROGRAMS["zip_star_transpose"] = """
def main():
    rows = [(1, 2, 3), (4, 5, 6)]
    cols = list(zip(*rows))
    a, b, c = zip(*rows)
    print(cols, a, c)
"""

PROGRAMS["print_star_args"] = """
def main():
    xs = [1, 2, 3]
    print(*xs)
    print(*xs, sep="-")
    print(*"ab", 3, sep=", ")
"""

PROGRAMS["unpack_range_and_enumerate"] = """
def main():
    a, b, c = range(3)
    (i, x), (j, y) = enumerate("pq")
    print(a, b, c, i, x, j, y)
"""

PROGRAMS["keyword_arguments_order_and_defaults"] = """
def f(a, b=2, *, c=3, d):
    return [a, b, c, d]

def main():
    print(f(1, d=4), f(1, 5, d=6, c=7), f(d=0, a=9))
"""

PROGRAMS["missing_argument_error"] = """
def f(a, b):
    return a + b

def main():
    try:
        f(1)
    except TypeError:
        print("missing b")
    try:
        f(1, 2, 3)
    except TypeError:
        print("too many")
"""

PROGRAMS["double_star_call_keys_are_names_given_once"] = """
def f(**kw):
    return sorted(kw.items())

def main():
    print(f(**{'a': 1}, b=2))
    for bad in ({1: 2}, {'b': 3}):
        try:
            f(b=2, **bad)
        except TypeError as e:
            print('TypeError', 'strings' in str(e) or 'multiple values' in str(e))
"""
