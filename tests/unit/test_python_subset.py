"""The Python subset kernels use at trace time, one small kernel per construct; each kernel
prints what it computed, and the test compares with Python's own answer."""

from __future__ import annotations

import collections
import functools
import itertools
import math
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


# Constructs checked against CPython running the same definitions and expression.
PYTHON_CASES = {
    "try_except_else_finally": (
        """
class ShapeError(ValueError):
    pass

class Detailed(Exception):
    def __init__(self, what):
        self.what = what

def tiles(n):
    if n % 128:
        raise ShapeError(f"{n} is not a multiple of 128")
    return n // 128

def run():
    out = []
    for n in (256, 100):
        try:
            out.append(tiles(n))
        except ValueError as e:
            out.append((str(e), e.args))
        else:
            out.append("else")
        finally:
            out.append("finally")
    try:
        {}["x"]
    except (IndexError, KeyError) as e:
        out.append(("key", e.args))
    try:
        raise Detailed("w")
    except Detailed as d:
        out.append(d.what)
    try:
        try:
            assert 1 > 2, "inner"
        except AssertionError:
            raise
    except Exception as e:
        out.append(str(e))
    try:
        [1][3]
    except LookupError:
        out.append("lookup")
    return out

def returns_in_finally():
    try:
        return "body"
    finally:
        pass
""",
        "run(), returns_in_finally()",
    ),
}

PYTHON_CASES["getattr_hasattr"] = (
    """
class Config:
    tile = 128

def run():
    return (getattr(Config, "tile"), getattr(Config, "missing", 7), hasattr(Config, "tile"),
            hasattr(Config, "nope"), getattr(math, "pi") > 3)
""",
    "run()",
)

PYTHON_CASES["object_dict"] = (
    """
class Config:
    def __init__(self, n):
        self.n = n
        self.tiles = n // 128

def run():
    c = Config(512)
    c.__dict__["n"] = 0  # the object's own dict: the write is the object's
    return sorted(Config(256).__dict__.items()), c.n
""",
    "run()",
)

PYTHON_CASES["generators"] = (
    """
def tiles(n, size):
    for start in range(0, n, size):
        yield start, min(size, n - start)

def naturals():
    i = 0
    while True:
        yield i
        i += 1

def pairs():
    yield 1
    yield
    return 7

def evens(limit):
    for i in naturals():
        if i >= limit:
            return
        if i % 2 == 0:
            yield i

def nested():
    for a in tiles(5, 2):
        for b in evens(a[1] + 1):
            yield a[0], b

def run():
    n = naturals()
    firsts = [next(n), next(n), next(n)]
    return (list(tiles(300, 128)), sum(x for _, x in tiles(10, 3)), firsts, list(pairs()),
            list(evens(9)), list(nested()), [x for x in zip(naturals(), "ab")])
""",
    "run()",
)


@pytest.mark.parametrize("name", sorted(PYTHON_CASES))
def test_construct_as_cpython(kernel_file, name):
    defs, expr = PYTHON_CASES[name]
    expected: dict = {"math": math, "functools": functools, "itertools": itertools}
    exec(defs, expected)  # the test's own definitions, run by CPython as the oracle
    src = HEADER + defs + f"\n\n@nki.jit\ndef k(a):\n    print(repr(({expr},)))\n    return a\n"
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == [repr(eval(f"({expr},)", expected))]


def test_an_uncaught_kernel_exception_is_a_located_error(kernel_file):
    src = HEADER + (
        "class ShapeError(ValueError):\n    pass\n\n"
        "@nki.jit\ndef k(a):\n    raise ShapeError('bad shape')\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError) as info:
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    assert info.value.message == "ShapeError: bad shape"
    raise_line = next(n for n, text in enumerate(src.splitlines(), 1) if "raise " in text)
    assert (info.value.span.line, info.value.span.col) == (raise_line, 5)


def test_budgets_are_not_caught_by_kernel_code(kernel_file):
    src = HEADER + (
        "@nki.jit\ndef k(a):\n    try:\n        for i in range(10**9):\n            pass\n"
        "    except Exception:\n        pass\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="loop_iterations"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_a_failed_import_inside_try_is_an_import_error(kernel_file):
    printed: list[str] = []
    src = HEADER + (
        "try:\n    import torch\n    HAVE = True\nexcept ImportError:\n    HAVE = False\n\n"
        "@nki.jit\ndef k(a):\n    print(HAVE)\n    return a\n"
    )
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == ["False"]


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


def test_a_generators_instructions_interleave_with_its_consumers(kernel_file):
    """The generator loads each row block into one shared buffer and yields it; the consumer
    must see each block before the next load overwrites it (run eagerly, it would not)."""
    src = (
        "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"
        "def blocks(a, buf, n):\n"
        "    for i in range(n):\n"
        "        nisa.dma_copy(dst=buf, src=a[i * 128:(i + 1) * 128, :])\n"
        "        yield i, buf\n\n"
        "@nki.jit\ndef k(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    buf = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)\n"
        "    res = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)\n"
        "    for i, t in blocks(a, buf, 3):\n"
        "        nisa.tensor_scalar(dst=res, data=t, op0=nl.multiply, operand0=float(i + 1))\n"
        "        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=res)\n"
        "    return out\n"
    )
    a = np.random.default_rng(5).standard_normal((384, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(src), {"a": a})
    scale = np.repeat(np.arange(1, 4, dtype=np.float32), 128)[:, None]
    np.testing.assert_array_equal(result.outputs["out"], a * scale)


def test_an_unfinished_generator_is_closed_when_the_trace_ends(kernel_file):
    printed: list[str] = []
    src = HEADER + (
        "def counter():\n    i = 0\n    try:\n        while True:\n            yield i\n"
        "            i += 1\n    finally:\n        print('closed at', i)\n\n"
        "@nki.jit\ndef k(a):\n    c = counter()\n    print(next(c), next(c))\n    return a\n"
    )
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == ["0 1", "closed at 1"]
    import threading

    assert not [t for t in threading.enumerate() if t.name.startswith("kernel-")]


def test_an_endless_generator_is_bounded_by_the_loop_budget(kernel_file):
    src = HEADER + (
        "def naturals():\n    i = 0\n    while True:\n        yield i\n        i += 1\n\n"
        "@nki.jit\ndef k(a):\n    xs = list(naturals())\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="loop_iterations"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_too_many_suspended_generators_is_a_located_error(kernel_file):
    src = HEADER + (
        "def one():\n    yield 1\n    yield 2\n\n"
        "@nki.jit\ndef k(a):\n    gens = [one() for _ in range(100)]\n"
        "    firsts = [next(g) for g in gens]\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="generators are suspended") as info:
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span is not None and info.value.span.line > 1


def test_getattr_refuses_dunder_names(kernel_file):
    src = HEADER + "@nki.jit\ndef k(a):\n    g = getattr(k, '__globals__')\n    return a\n"
    with pytest.raises(neuronemu.NeuronEmuError, match="public attribute name"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_getattr_of_nl_finds_a_dtype_by_name(kernel_file):
    printed: list[str] = []
    src = HEADER + (
        "@nki.jit\ndef k(a):\n    print(getattr(nl, str(a.dtype).split('.')[-1]) == a.dtype)\n"
        "    return a\n"
    )
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == ["True"]
