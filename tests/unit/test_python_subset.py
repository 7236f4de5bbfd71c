"""The Python subset kernels use at trace time, one small kernel per construct; each kernel
prints what it computed, and the test compares with Python's own answer."""

from __future__ import annotations

import collections
import functools
import itertools
import operator

import numpy as np
import pytest

import neuronemu

HEADER = (
    "import collections\nimport copy\nimport functools\nimport itertools\nimport math\n"
    "import operator\nfrom typing import NamedTuple\n"
    "import numpy as np\nimport nki\nimport nki.language as nl\n\n"
)

CASES = {
    "varargs_and_kwargs": (
        """
def f(a, b=2, *rest, scale=1, **opts):
    return (a + b) * scale, rest, sorted(opts.items())
""",
        "f(1), f(1, 3, 4, 5, scale=2, z=1, y=0), f(*[1, 2], **{'scale': 3})",
        lambda: ((3, (), []), (8, (4, 5), [("y", 0), ("z", 1)]), (9, (), [])),
    ),
    "nested_function_and_closure": (
        """
def outer(n):
    k = n * 2
    def inner(m):
        return m + k
    return inner
""",
        "outer(3)(4), [outer(i)(1) for i in range(3)]",
        lambda: (10, [1, 3, 5]),
    ),
    "list_tuple_dict_methods": (
        """
def build():
    xs = [3, 1, 2]
    xs.append(4)
    xs.extend([0])
    xs.sort()
    d = {"a": 1}
    d.update(b=2)
    return (xs, xs.index(2), d.get("c", 9), list(d.keys()), tuple(xs[1:3]), xs.pop(),
            "-".join(["p", "q"]))
""",
        "build()",
        lambda: (([0, 1, 2, 3], 2, 9, ["a", "b"], (1, 2), 4, "p-q"),),
    ),
    "operators": (
        "",
        "7 // 2, -7 % 3, 2 ** 10, 7 / 2, 1 << 3, 6 & 3, 5 | 2, 5 ^ 1, ~0",
        lambda: (3, 2, 1024, 3.5, 8, 2, 7, 4, -1),
    ),
    "ternary_is_none_in_chains": (
        """
def g(x=None):
    return ("none" if x is None else "some", 2 in [1, 2], 3 not in (1, 2), 1 < 2 <= 2 < 3,
            1 < 2 > 5, not x)
""",
        "g(), g(0)",
        lambda: (("none", True, True, True, False, True), ("some", True, True, True, False, True)),
    ),
    "augmented_assignment": (
        """
def h():
    a = 5
    a += 2
    a *= 3
    a //= 4
    a -= 1
    a **= 2
    s = [1]
    s += [2]
    return a, s
""",
        "h()",
        lambda: ((16, [1, 2]),),
    ),
    "while_break_continue_for_else": (
        """
def w():
    i, out = 0, []
    while True:
        i += 1
        if i % 2:
            continue
        if i > 6:
            break
        out.append(i)
    for j in range(2):
        pass
    else:
        out.append("done")
    return out
""",
        "w()",
        lambda: ([2, 4, 6, "done"],),
    ),
    "fstrings_and_docstrings": (
        '''
def fmt(x):
    """A docstring is not an expression that runs."""
    return f"{x:>6.2f}|{x!r}|{'q'}|{x=}|{{braces}}"
''',
        "fmt(3.14159)",
        lambda: (f"{3.14159:>6.2f}|{3.14159!r}|{'q'}|x=3.14159|{{braces}}",),
    ),
    "annotations": (
        """
def ann(n: int) -> int:
    total: int = 0
    for i in range(n):
        total += i
    return total
""",
        "ann(5)",
        lambda: (10,),
    ),
    "math_and_numpy_names": (
        "",
        "math.ceil(7 / 2), math.sqrt(16), np.prod((2, 3, 4)), "
        "int(np.float32(2.5) * 2), math.pi > 3, np.float32 == nl.float32",
        lambda: (4, 4.0, 24, 5, True, True),
    ),
    "comprehensions_all_kinds": (
        "",
        "[i * i for i in range(4) if i % 2], "
        "{k: v for k, v in zip('ab', (1, 2))}, "
        "tuple(i for i in range(3)), "
        "[(i, j) for i in range(2) for j in range(i, 2)]",
        lambda: ([1, 9], {"a": 1, "b": 2}, (0, 1, 2), [(0, 0), (0, 1), (1, 1)]),
    ),
    "builtins": (
        "",
        "len([1, 2]), min(3, 1), max([4, 9]), abs(-2), sum(range(5)), "
        "list(enumerate('ab')), list(reversed([1, 2])), round(2.567, 1), "
        "divmod(7, 2), any([0, 1]), all([]), isinstance(3, int)",
        lambda: (2, 1, 9, 2, 10, [(0, "a"), (1, "b")], [2, 1], 2.6, (3, 1), True, True, True),
    ),
    "lambdas": (
        "scale = lambda x, k=2, *rest, **kw: x * k + len(rest) + len(kw)\n",
        "scale(3), scale(3, 3, 9, 9, z=1), sorted([3, -4, 1], key=lambda v: abs(v)), "
        "(lambda: 7)(), [f(2) for f in [lambda x, i=i: x + i for i in range(3)]]",
        lambda: (6, 12, [1, 3, -4], 7, [2, 3, 4]),
    ),
    "functools": (
        """
@functools.lru_cache(maxsize=None)
def square(n):
    return n * n
add3 = functools.partial(operator.add, 3)
""",
        "functools.reduce(operator.mul, [1, 2, 3, 4]), functools.reduce(lambda a, b: a - b, "
        "[1, 2], 10), add3(4), square(7), functools.partial(max, 5)(1, 9)",
        lambda: (
            functools.reduce(operator.mul, [1, 2, 3, 4]),
            functools.reduce(lambda a, b: a - b, [1, 2], 10),
            7,
            49,
            9,
        ),
    ),
    "itertools": (
        "",
        "list(itertools.product([1, 2], repeat=2)), list(itertools.accumulate([1, 2, 3])), "
        "list(itertools.islice(itertools.count(5), 3)), list(itertools.chain([1], (2, 3))), "
        "list(itertools.combinations(range(4), 2)), list(itertools.zip_longest('ab', 'c'))",
        lambda: (
            list(itertools.product([1, 2], repeat=2)),
            list(itertools.accumulate([1, 2, 3])),
            [5, 6, 7],
            [1, 2, 3],
            list(itertools.combinations(range(4), 2)),
            list(itertools.zip_longest("ab", "c")),
        ),
    ),
    "collections_and_copy": (
        """
def build():
    d = collections.deque([1, 2, 3], maxlen=5)
    d.appendleft(0)
    d.append(4)
    d.rotate(1)
    groups = collections.defaultdict(list)
    for w in ["ab", "c", "de"]:
        groups[len(w)].append(w)
    nested = [[1], [2]]
    deep = copy.deepcopy(nested)
    deep[0].append(9)
    return (list(d), d.popleft(), sorted(collections.Counter("abracadabra").items()),
            dict(groups), nested, deep)
""",
        "build()",
        lambda: (
            (
                [4, 0, 1, 2, 3],
                4,
                sorted(collections.Counter("abracadabra").items()),
                {2: ["ab", "de"], 1: ["c"]},
                [[1], [2]],
                [[1, 9], [2]],
            ),
        ),
    ),
    "operator_and_named_tuple": (
        """
class Point(NamedTuple):
    x: int
    y: int = 3
""",
        "operator.itemgetter(1)([5, 6]), operator.itemgetter(0, 2)('xyz'), operator.neg(4), "
        "operator.lt(1, 2), Point(1).y, Point(1, y=5).y, None != 0, [] == None",
        lambda: (6, ("x", "z"), -4, True, 3, 5, True, False),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_construct(kernel_file, name):
    defs, expr, expected = CASES[name]
    src = (
        HEADER
        + defs
        + f"""

@nki.jit
def k(a):
    print(repr(({expr},)))
    return a
"""
    )
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == [repr(expected())]
