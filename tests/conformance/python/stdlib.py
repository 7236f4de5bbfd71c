# ruff: noqa: E501 - program text: long lines are the programs' own
"""The standard modules the trust rules allow at trace time: math, itertools, functools,
operator, collections (namedtuple included), copy, typing, dataclasses and enum."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["math_rounding_functions"] = """
import math

def main():
    print(math.ceil(2.1), math.floor(-2.1), math.trunc(-2.7), math.ceil(-0.5), math.floor(3))
"""

PROGRAMS["math_power_and_logs"] = """
import math

def main():
    print(math.sqrt(2), math.log(math.e), math.log2(1024), math.log10(1000), math.log(8, 2),
          math.exp(0), math.pow(2, 0.5))
"""

PROGRAMS["math_integer_functions"] = """
import math

def main():
    print(math.gcd(12, 18), math.lcm(4, 6), math.factorial(10), math.comb(10, 3), math.perm(5, 2),
          math.isqrt(99), math.prod([1, 2, 3, 4]), math.prod([]))
"""

PROGRAMS["math_trig_and_constants"] = """
import math

def main():
    print(round(math.sin(math.pi / 2), 12), round(math.cos(0), 12), round(math.atan2(1, 1), 12),
          math.degrees(math.pi), math.radians(180) == math.pi, math.tau == 2 * math.pi, math.hypot(3, 4))
"""

PROGRAMS["math_float_predicates"] = """
import math

def main():
    print(math.isfinite(1.0), math.isinf(math.inf), math.isnan(math.nan), math.isclose(0.1 + 0.2, 0.3),
          math.copysign(3, -0.0), math.fabs(-2), math.fsum([0.1] * 10), math.modf(2.5))
"""

PROGRAMS["math_ceil_division_idiom"] = """
import math

def main():
    print([math.ceil(n / 128) for n in (1, 128, 129, 1000)], [-(-n // 128) for n in (1, 128, 129)])
"""

PROGRAMS["itertools_product_and_permutations"] = """
import itertools

def main():
    print(list(itertools.product("ab", [0, 1])), list(itertools.permutations([1, 2, 3], 2)),
          len(list(itertools.product(range(3), repeat=3))))
"""

PROGRAMS["itertools_combinations"] = """
import itertools

def main():
    print(list(itertools.combinations("abcd", 3)),
          list(itertools.combinations_with_replacement([1, 2], 2)))
"""

PROGRAMS["itertools_accumulate_and_chain"] = """
import itertools
import operator

def main():
    print(list(itertools.accumulate([1, 2, 3, 4])), list(itertools.accumulate([1, 2, 3], operator.mul)),
          list(itertools.accumulate([5, 1, 3], max)), list(itertools.chain.from_iterable([[1], [2, 3]])),
          list(itertools.accumulate([1, 2], initial=10)))
"""

PROGRAMS["itertools_groupby"] = """
import itertools

def main():
    data = "aaabccdd"
    print([(k, len(list(g))) for k, g in itertools.groupby(data)])
    words = ["apple", "avocado", "banana", "blueberry", "cherry"]
    print({k: list(g) for k, g in itertools.groupby(words, key=lambda w: w[0])})
"""

PROGRAMS["itertools_islice_count_cycle_repeat"] = """
import itertools

def main():
    print(list(itertools.islice(itertools.count(10, 5), 4)), list(itertools.islice(itertools.cycle("ab"), 5)),
          list(itertools.repeat("x", 3)), list(itertools.islice(range(10), 2, 8, 2)))
"""

PROGRAMS["itertools_takewhile_dropwhile_filterfalse"] = """
import itertools

def main():
    xs = [1, 3, 5, 2, 7]
    print(list(itertools.takewhile(lambda x: x < 4, xs)), list(itertools.dropwhile(lambda x: x < 4, xs)),
          list(itertools.filterfalse(lambda x: x % 2, xs)))
"""

PROGRAMS["itertools_starmap_zip_longest_pairwise"] = """
import itertools

def main():
    print(list(itertools.starmap(pow, [(2, 3), (3, 2)])), list(itertools.zip_longest([1, 2], "a", fillvalue="-")),
          list(itertools.pairwise([1, 2, 4, 7])))
"""

PROGRAMS["itertools_compress_and_tee"] = """
import itertools

def main():
    print(list(itertools.compress("abcdef", [1, 0, 1, 0, 1, 1])))
"""

PROGRAMS["functools_reduce_forms"] = """
import functools
import operator

def main():
    print(functools.reduce(operator.add, [1, 2, 3]), functools.reduce(lambda a, b: a * 10 + b, [1, 2, 3], 0),
          functools.reduce(max, [3, 9, 2]))
"""

PROGRAMS["functools_partial_keywords"] = """
import functools

def scale(x, factor=1, offset=0):
    return x * factor + offset

def main():
    double = functools.partial(scale, factor=2)
    shifted = functools.partial(scale, 10, offset=1)
    print(double(4), double(4, offset=3), shifted(), shifted(factor=3))
"""

PROGRAMS["functools_lru_cache_results"] = """
import functools

@functools.lru_cache(maxsize=None)
def ways(n):
    return 1 if n < 2 else ways(n - 1) + ways(n - 2)

@functools.cache
def sq(n):
    return n * n

def main():
    print(ways(30), sq(12))
"""

PROGRAMS["functools_wraps_keeps_name"] = """
import functools

def logged(fn):
    @functools.wraps(fn)
    def wrapper(*a):
        return fn(*a)
    return wrapper

@logged
def compute(x):
    return x + 1

def main():
    print(compute(1), compute.__name__)
"""

PROGRAMS["functools_cmp_to_key_and_total_ordering"] = """
import functools

def cmp(a, b):
    return (a > b) - (a < b)

def main():
    print(sorted([3, 1, 2], key=functools.cmp_to_key(cmp)), sorted(["b", "a"], key=functools.cmp_to_key(lambda a, b: -cmp(a, b))))
"""

PROGRAMS["operator_functions"] = """
import operator

def main():
    print(operator.add(2, 3), operator.sub(5, 1), operator.mul(3, 4), operator.truediv(1, 4),
          operator.floordiv(7, 2), operator.mod(7, 3), operator.pow(2, 5), operator.neg(3),
          operator.eq(1, 1), operator.ne(1, 2), operator.not_(0), operator.abs(-3), operator.index(5))
"""

PROGRAMS["operator_itemgetter_attrgetter"] = """
import operator

class P:
    def __init__(self, n):
        self.n = n

def main():
    rows = [(1, "b"), (0, "a")]
    print(sorted(rows, key=operator.itemgetter(1)), operator.itemgetter(0, 1)("xyz"),
          [operator.attrgetter("n")(P(3))])
"""

PROGRAMS["operator_methodcaller_and_contains"] = """
import operator

def main():
    print(operator.contains([1, 2], 2), operator.getitem({"k": 1}, "k"), operator.truth([]),
          operator.is_(None, None), operator.concat([1], [2]))
"""

PROGRAMS["collections_counter"] = """
from collections import Counter

def main():
    c = Counter("mississippi")
    print(c.most_common(2), c["s"], c["z"], sorted(c.elements())[:5], sum(c.values()))
    c.update("ss")
    print(c["s"], (Counter(a=3, b=1) - Counter(a=1)), Counter([1, 1, 2]) + Counter([2]))
"""

PROGRAMS["collections_defaultdict"] = """
from collections import defaultdict

def main():
    d = defaultdict(int)
    for w in "the cat the hat".split():
        d[w] += 1
    g = defaultdict(list)
    g["a"].append(1)
    print(dict(d), dict(g), d["missing"], "missing" in d)
"""

PROGRAMS["collections_deque"] = """
from collections import deque

def main():
    q = deque([1, 2, 3], maxlen=4)
    q.append(4)
    q.append(5)
    q.appendleft(0)
    print(list(q), q.pop(), q.popleft(), list(q), len(q), q[0], q.maxlen)
    q.rotate(-1)
    print(list(q))
"""

PROGRAMS["collections_ordereddict"] = """
from collections import OrderedDict

def main():
    d = OrderedDict()
    d["b"] = 1
    d["a"] = 2
    d.move_to_end("b")
    print(list(d.items()), d.popitem(last=False))
"""

PROGRAMS["collections_namedtuple_features"] = """
import collections

Tile = collections.namedtuple("Tile", "p f dtype", defaults=["fp32"])

def main():
    t = Tile(128, 512)
    p, f, dt = t
    print(t, t.dtype, p * f, t._replace(f=1), Tile._make([1, 2, 3]), t._fields, t == Tile(128, 512, "fp32"))
    print(t._asdict(), t.index(512), t.count(128), t[:2], sorted([Tile(2, 1), Tile(1, 2)]))
"""

PROGRAMS["collections_namedtuple_in_dict_and_set"] = """
from collections import namedtuple

Key = namedtuple("Key", ["a", "b"])

def main():
    d = {Key(1, 2): "x"}
    print(d[Key(1, 2)], d[(1, 2)], Key(1, 2) in {Key(1, 2)}, hash(Key(1, 2)) == hash((1, 2)))
"""

PROGRAMS["collections_chainmap"] = """
from collections import ChainMap

def main():
    c = ChainMap({"a": 1}, {"a": 2, "b": 3})
    print(c["a"], c["b"], sorted(c))
"""

PROGRAMS["copy_copy_and_deepcopy"] = """
import copy

def main():
    a = [[1, 2], {"k": [3]}]
    s = copy.copy(a)
    d = copy.deepcopy(a)
    a[0].append(9)
    a[1]["k"].append(4)
    print(s, d, s[0] is a[0], d[0] is a[0])
"""

PROGRAMS["copy_of_user_object"] = """
import copy

class Cfg:
    def __init__(self):
        self.items = [1]

def main():
    a = Cfg()
    b = copy.copy(a)
    c = copy.deepcopy(a)
    a.items.append(2)
    print(b.items, c.items, b is a)
"""

PROGRAMS["typing_annotations_are_inert"] = """
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

def f(x: Optional[int] = None, xs: List[int] = (), m: Dict[str, Any] = None,
      cb: Callable[[int], int] = abs, u: Union[int, str] = 0) -> Tuple[int, ...]:
    return (x or 0, len(xs), cb(-3))

def main():
    print(f(), f(2, [1, 2]))
"""

PROGRAMS["typing_type_checking_and_cast"] = """
import typing
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import numpy

def main():
    print(TYPE_CHECKING, cast(int, "kept"), typing.cast("str", 5))
"""

PROGRAMS["typing_typevar_generic_class"] = """
from typing import Generic, TypeVar

T = TypeVar("T")

class Box(Generic[T]):
    def __init__(self, v: T):
        self.v = v
    def get(self) -> T:
        return self.v

def main():
    print(Box(3).get(), Box[int](4).get())
"""

PROGRAMS["dataclasses_field_and_fields"] = """
from dataclasses import dataclass, field, fields

@dataclass
class Cfg:
    a: int
    b: str = "x"
    c: list = field(default_factory=lambda: [0])

def main():
    print([f.name for f in fields(Cfg)], Cfg(1), Cfg(2, c=[5]))
"""

PROGRAMS["dataclasses_asdict_astuple"] = """
from dataclasses import asdict, astuple, dataclass

@dataclass
class P:
    x: int
    y: int

def main():
    print(asdict(P(1, 2)), astuple(P(3, 4)))
"""

PROGRAMS["enum_iteration_and_lookup"] = """
import enum

class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"

def main():
    print([m.name for m in Mode], Mode("safe").name, Mode.FAST.value, Mode.FAST in Mode, len(Mode))
"""

PROGRAMS["enum_auto_and_comparison"] = """
from enum import Enum, auto

class Stage(Enum):
    LOAD = auto()
    COMPUTE = auto()
    STORE = auto()

def main():
    print([s.value for s in Stage], Stage.LOAD != Stage.STORE, Stage.COMPUTE.name)
"""

PROGRAMS["enum_methods_and_properties"] = """
from enum import Enum

class Dt(Enum):
    F32 = 4
    BF16 = 2
    def bits(self):
        return self.value * 8

def main():
    print(Dt.F32.bits(), [d.bits() for d in Dt], Dt.BF16 == Dt(2))
"""

PROGRAMS["math_inf_and_nan_in_minmax"] = """
import math

def main():
    best = math.inf
    for v in (5, 3, 9):
        best = min(best, v)
    print(best, max(-math.inf, 2), math.inf - math.inf == math.inf - math.inf)
"""

PROGRAMS["sorted_with_multiple_keys_via_operator"] = """
import operator

def main():
    rows = [{"n": "b", "v": 2}, {"n": "a", "v": 2}, {"n": "c", "v": 1}]
    print([r["n"] for r in sorted(rows, key=operator.itemgetter("v", "n"))])
"""

PROGRAMS["itertools_product_for_tiling"] = """
import itertools

def main():
    tiles = [(i, j) for i, j in itertools.product(range(2), range(3)) if (i + j) % 2 == 0]
    print(tiles)
"""

PROGRAMS["collections_chainmap_and_deque"] = """
import collections
import copy

def main():
    c = collections.ChainMap({"a": 1}, {"b": 2, "a": 3})
    print(c["a"], c["b"], len(c), sorted(c), dict(c), "b" in c, c)
    d = collections.deque([1, [2]], 3)
    e = copy.deepcopy(d)
    e[1].append(3)
    print(len(d), max(d[0], 0), d, e, e.maxlen)
    x = [1]
    x.append(x)
    y = copy.deepcopy(x)
    print(y, y[1] is y, y is x)
"""
