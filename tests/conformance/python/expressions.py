# ruff: noqa: E501 - program text: long lines are the programs' own
"""Expressions: arithmetic on ints and floats, comparisons, boolean operators, slicing,
membership and identity, the builtins and the methods of str, list, dict, set and tuple."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["floor_division_and_modulo_signs"] = """
def main():
    for a, b in ((7, 2), (-7, 2), (7, -2), (-7, -2)):
        print(a // b, a % b, divmod(a, b))
    print(7.5 // 2, -7.5 % 2, divmod(-7.5, 2))
"""

PROGRAMS["true_division_and_float_repr"] = """
def main():
    print(1 / 3, 2 / 2, 10 / 4, 0.1 + 0.2, 1e16, 1e-5, 123456789.0 * 10, -0.0)
"""

PROGRAMS["power_forms"] = """
def main():
    print(2 ** 10, 2 ** -1, (-2) ** 3, -2 ** 2, 4 ** 0.5, pow(3, 4), pow(3, 4, 5), 2 ** 100)
"""

PROGRAMS["big_integers"] = """
def main():
    n = 1
    for i in range(1, 25):
        n *= i
    print(n, n % 1000007, n.bit_length(), -n // 7)
"""

PROGRAMS["int_and_float_conversions"] = """
def main():
    print(int(3.9), int(-3.9), int("42"), int("ff", 16), int("0b101", 0), float("1.5"),
          float(3), int(True), round(2.5), round(3.5), round(-0.5), round(1.25, 1))
"""

PROGRAMS["float_special_values"] = """
import math

def main():
    inf = float("inf")
    nan = float("nan")
    print(inf, -inf, nan == nan, math.isnan(nan), inf > 1e308, math.isinf(-inf))
"""

PROGRAMS["bitwise_operators"] = """
def main():
    a, b = 0b1100, 0b1010
    print(a & b, a | b, a ^ b, ~a, a << 2, a >> 2, -16 >> 2, bin(a), hex(255), oct(8))
"""

PROGRAMS["comparison_chains"] = """
def main():
    x = 5
    print(1 < x < 10, 1 < x > 10, x == 5 != 6, 0 <= x <= 5 < 6, [1, 2] < [1, 3], (1, 2) == (1, 2),
          "a" < "b" < "ba")
"""

PROGRAMS["boolean_operators_return_operands"] = """
def main():
    print(0 or "x", "" or [] or 0, 3 and 4, 0 and 4, None or "d", not [], not [0], [] and 1)
"""

PROGRAMS["short_circuit_skips_evaluation"] = """
calls = []

def f(v):
    calls.append(v)
    return v

def main():
    r = f(0) and f(1)
    s = f(2) or f(3)
    t = f(0) or f(0) or f(4)
    print(r, s, t, calls)
"""

PROGRAMS["identity_and_membership"] = """
def main():
    a = [1, 2]
    b = a
    c = [1, 2]
    print(a is b, a is c, a == c, a is not c, 2 in a, 3 not in a, "ab" in "cabd",
          "k" in {"k": 1}, 1 in {1: "v"}.values() if False else None is None)
"""

PROGRAMS["truthiness_of_values"] = """
def main():
    vals = [0, 1, -1, 0.0, 0.5, "", "a", [], [0], (), (0,), {}, {0: 0}, set(), None]
    print([bool(v) for v in vals])
"""

PROGRAMS["string_slicing"] = """
def main():
    s = "abcdefgh"
    print(s[1:4], s[:3], s[5:], s[-3:], s[::2], s[::-1], s[1:-1:3], s[10:], s[-100:2])
"""

PROGRAMS["list_slicing_and_negative_steps"] = """
def main():
    xs = list(range(10))
    print(xs[8:2:-2], xs[-1:-4:-1], xs[::-3], xs[3:3], xs[slice(1, 5, 2)])
"""

PROGRAMS["string_methods"] = """
def main():
    s = "  Hello, World  "
    print(s.strip(), s.lower(), s.upper(), s.split(","), s.strip().replace("l", "L", 2),
          s.find("o"), s.rfind("o"), s.count("l"), s.strip().startswith("He"),
          s.strip().endswith(("x", "d")), "-".join("abc"), "a,b,,c".split(","),
          "a b  c".split(), "abc".center(7, "*"), "42".zfill(5), "x".ljust(3) + "|")
"""

PROGRAMS["string_predicates_and_case"] = """
def main():
    print("abc".isalpha(), "123".isdigit(), "a1".isalnum(), " ".isspace(), "Ab".istitle(),
          "hello world".title(), "Hello".swapcase(), "hello".capitalize(), "ABC".casefold())
"""

PROGRAMS["string_partition_and_split_limits"] = """
def main():
    print("a=b=c".partition("="), "a=b=c".rpartition("="), "a.b.c".split(".", 1),
          "a.b.c".rsplit(".", 1), "l1\\nl2\\n".splitlines(), "xxabxx".strip("x"),
          "prefix_name".removeprefix("prefix_"), "file.py".removesuffix(".py"))
"""

PROGRAMS["string_multiplication_and_concatenation"] = """
def main():
    print("ab" * 3, 3 * "-", "a" + "b", "" * 5 == "", [0] * 3, [[0]] * 2, (1, 2) * 2)
"""

PROGRAMS["string_ordinals_and_escapes"] = """
def main():
    print(ord("A"), chr(97), "tab\\there", len("\\n"), "quote's", 'dq"', r"raw\\n", "\\u00e9")
"""

PROGRAMS["list_methods"] = """
def main():
    xs = [5, 3, 8]
    xs.insert(1, 4)
    xs.remove(8)
    xs.append(3)
    print(xs, xs.count(3), xs.index(3), xs.index(3, 2))
    xs.reverse()
    print(xs, xs.pop(0), xs.pop(), xs)
    ys = xs.copy()
    ys.clear()
    print(xs, ys)
"""

PROGRAMS["list_sort_key_and_stability"] = """
def main():
    words = ["bb", "a", "ccc", "dd", "e"]
    print(sorted(words, key=len), sorted(words, key=len, reverse=True), sorted(words))
    words.sort(key=lambda w: (-len(w), w))
    print(words)
"""

PROGRAMS["dict_methods"] = """
def main():
    d = {"b": 2, "a": 1}
    d.setdefault("c", 3)
    d.setdefault("a", 99)
    print(d, list(d), list(d.values()), list(d.items()), d.pop("b"), d.pop("z", None))
    e = dict(d, z=0)
    e.update([("y", 5)])
    print(e, d.get("a"), len(e), dict.fromkeys("xy", 0), e.popitem())
"""

PROGRAMS["dict_order_and_merge"] = """
def main():
    a = {"x": 1, "y": 2}
    b = {"y": 20, "z": 30}
    print({**a, **b}, a | b, b | a)
    a |= {"w": 0}
    print(a, list(reversed(a)))
"""

PROGRAMS["dict_comprehension_and_views"] = """
def main():
    d = {k: k * k for k in range(5) if k != 2}
    keys = d.keys()
    d[9] = 81
    print(d, len(keys), 9 in keys, sorted(d.values(), reverse=True))
"""

PROGRAMS["set_operations"] = """
def main():
    a = {1, 2, 3, 4}
    b = {3, 4, 5}
    print(sorted(a | b), sorted(a & b), sorted(a - b), sorted(a ^ b), a >= {1, 2}, {1} < a,
          a.isdisjoint({9}), sorted(a.union([7], (8,))), sorted(a.intersection(b)))
"""

PROGRAMS["set_mutation"] = """
def main():
    s = set()
    s.add(3)
    s.add(1)
    s.update([2, 3])
    s.discard(9)
    s.remove(1)
    t = frozenset([1, 2])
    print(sorted(s), len(s), 2 in s, sorted(t), sorted(s | t), {x % 3 for x in range(10)})
"""

PROGRAMS["tuple_methods_and_comparison"] = """
def main():
    t = (3, 1, 3, 2)
    print(t.count(3), t.index(2), max(t), min(t), sorted(t), t + (5,), t[1:], (1, 2) < (1, 2, 0))
"""

PROGRAMS["builtins_min_max_key_default"] = """
def main():
    words = ["apple", "fig", "banana"]
    print(max(words, key=len), min(words, key=len), max([], default="none"),
          min(3, 1, 2), max((1, "b"), (1, "a")), min([[2], [1, 5]]))
"""

PROGRAMS["builtins_sum_any_all"] = """
def main():
    print(sum([1, 2, 3]), sum([1, 2], 10), sum([0.1] * 10), sum([[1], [2]], []), any([]),
          all([1, 0]), any(x > 2 for x in range(4)), all(x < 9 for x in range(4)))
"""

PROGRAMS["builtins_zip_map_filter"] = """
def main():
    print(list(zip("abc", range(5))), list(map(str, [1, 2])), list(map(lambda a, b: a * b, [1, 2], [3, 4])),
          list(filter(None, [0, 1, "", "x"])), list(filter(lambda v: v % 2, range(6))),
          dict(zip(["k1", "k2"], [1, 2])))
"""

PROGRAMS["builtins_enumerate_reversed_range"] = """
def main():
    print(list(enumerate("ab", start=5)), list(reversed(range(3))), list(range(10, 0, -3)),
          range(5)[2], len(range(0, 10, 3)), 7 in range(0, 10, 7), list(range(5)[1:3]))
"""

PROGRAMS["builtins_abs_round_divmod"] = """
def main():
    print(abs(-3), abs(-2.5), round(3.14159, 2), round(1234, -2), round(-2.675, 2), divmod(17, 5),
          divmod(-17, 5), round(7 / 2))
"""

PROGRAMS["builtins_isinstance_issubclass"] = """
class A:
    pass

class B(A):
    pass

def main():
    print(isinstance(B(), A), isinstance(A(), B), issubclass(B, A), issubclass(B, (int, A)),
          isinstance(3, (str, int)), isinstance(True, int), isinstance(3.0, int),
          isinstance([], list), isinstance((), tuple), isinstance({}, dict))
"""

PROGRAMS["builtins_len_of_containers"] = """
def main():
    print(len("abc"), len([1, 2]), len({}), len({1, 2, 2}), len(range(3, 9)), len((1,)),
          len({"a": 1}))
"""

PROGRAMS["builtins_str_repr_of_values"] = """
def main():
    vals = [1, 1.0, "s", None, True, [1, "a"], (1,), {"k": (2, 3)}, 2.5e-7, 1e22]
    print([str(v) for v in vals])
    print([repr(v) for v in vals])
"""

PROGRAMS["builtins_hash_equal_values"] = """
def main():
    print(hash(1) == hash(1.0), hash((1, 2)) == hash((1, 2)), {1: "a", 1.0: "b"}, {True, 1, 1.0})
"""

PROGRAMS["builtins_sorted_mixed_keys"] = """
def main():
    pairs = [(2, "b"), (1, "z"), (2, "a"), (1, "a")]
    print(sorted(pairs), sorted(pairs, key=lambda p: p[1]), sorted("hello"), sorted({3: 0, 1: 0}))
"""

PROGRAMS["builtins_iter_next_default"] = """
def main():
    it = iter([1, 2])
    print(next(it), next(it), next(it, "done"))
    try:
        next(it)
    except StopIteration:
        print("stopped")
"""

PROGRAMS["builtins_callable_and_type_names"] = """
def f():
    pass

class C:
    pass

def main():
    print(callable(f), callable(C), callable(3), type(3).__name__, type("s").__name__,
          type([]).__name__, type(C()).__name__, type(None).__name__, type(f).__name__)
"""

PROGRAMS["list_comprehension_nested"] = """
def main():
    m = [[i * 3 + j for j in range(3)] for i in range(3)]
    t = [list(row) for row in zip(*m)]
    flat = [x for row in m for x in row if x % 2 == 0]
    print(m, t, flat)
"""

PROGRAMS["set_and_generator_comprehensions"] = """
def main():
    print(sorted({c.lower() for c in "AbBa"}), sum(i * i for i in range(5)),
          tuple(c for c in "xyz" if c != "y"), max(len(w) for w in ["a", "bcd"]))
"""

PROGRAMS["lambda_defaults_and_sorting"] = """
def main():
    fs = [lambda x, k=k: x + k for k in range(3)]
    key = lambda s: (len(s), s)
    print([f(10) for f in fs], sorted(["bb", "a", "ab"], key=key), (lambda *a, **k: (a, k))(1, z=2))
"""

PROGRAMS["chr_ord_and_string_building"] = """
def main():
    letters = "".join(chr(ord("a") + i) for i in range(5))
    print(letters, letters.upper(), [ord(c) - 96 for c in letters])
"""

PROGRAMS["string_format_method"] = """
def main():
    print("{} + {} = {}".format(1, 2, 3), "{1}{0}".format("a", "b"), "{x:>4}|".format(x=7),
          "{:.3f}".format(3.14159), "{:,}".format(1234567), "{:08.2f}".format(-3.5),
          "{0!r}".format("q"), "{:x}".format(255))
"""

PROGRAMS["percent_formatting"] = """
def main():
    print("%d items" % 5, "%s-%s" % ("a", "b"), "%.2f" % 3.14159, "%5d|" % 42, "%-5s|" % "ab",
          "%x" % 255, "%r" % "s", "%(k)s" % {"k": "v"}, "%%")
"""

PROGRAMS["int_float_mixing"] = """
def main():
    print(1 + 2.0, 3 * 0.5, 7 // 2.0, 2 ** 0.5 * 2 ** 0.5, 10 / 5, True + True, 3 == 3.0, 0.1 * 3 == 0.3)
"""

PROGRAMS["integer_methods"] = """
def main():
    print((255).bit_length(), (10).to_bytes(2, "big") == bytes([0, 10]), int.from_bytes(b"\\x01\\x00", "big"),
          (7).__index__() if False else 7, abs(-7), (3).conjugate() if False else 3, (-5).bit_count())
"""

PROGRAMS["float_methods"] = """
def main():
    print((2.5).is_integer(), (3.0).is_integer(), float.fromhex("0x1p-1") if False else 0.5,
          (1.5).as_integer_ratio(), int(2.999), float("-inf") < 0)
"""

PROGRAMS["conditional_and_unary"] = """
def main():
    x = -3
    print(-x, +x, not x, ~x, -(-x), x if x > 0 else -x, abs(x) == -x)
"""
