"""More of the Python kernels use at trace time (issue 41): `super()`, named tuples, `type()`,
`global`/`nonlocal`, `yield from` and `send()`, `with` on a kernel's own class, and a kernel's
`**kwargs` taking inputs by name. Each definition runs in CPython (the oracle) and in the
tracer, and both print the same."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu

HEADER = (
    "import collections\nfrom collections import namedtuple\nimport typing\n"
    "from typing import NamedTuple\nimport nki\nimport nki.language as nl\n\n"
)

CASES: dict[str, tuple[str, str]] = {}

CASES["super_zero_argument_and_explicit"] = (
    """
class Base:
    def __init__(self, n):
        self.n = n
    def emit(self, dst, src):
        return ["Base", dst, src, self.n]
    @classmethod
    def make(cls, n):
        return cls(n)

class Middle(Base):
    def __init__(self, n):
        super().__init__(n * 2)
    def emit(self, dst, src):
        return ["Middle"] + super().emit(dst, src)

class Leaf(Middle):
    def emit(self, dst, src):
        return ["Leaf"] + super(Leaf, self).emit(dst, src)
    @classmethod
    def make(cls, n):
        return super().make(n + 1)

class Plain:
    def __init__(self):
        super().__init__()
        self.ok = True

class ShapeError(ValueError):
    def __init__(self, what):
        super().__init__(f"bad {what}", 2)
        self.what = what

class Quiet(KeyError):
    def __init__(self, n):
        self.n = n

def raised():
    out = []
    for cls, arg in ((ShapeError, "x"), (Quiet, 3)):
        try:
            raise cls(arg)
        except LookupError as e:
            out.append((str(e), e.args, e.n))
        except ValueError as e:
            out.append((str(e), e.args, repr(e), e.what))
    return out

class D0:
    def who(self):
        return ["D0"]

class D1(D0):
    def who(self):
        return ["D1"] + super().who()

class D2(D0):
    def who(self):
        return ["D2"] + super().who()

class D3(D1, D2):
    def who(self):
        return ["D3"] + super().who()

def lattice(levels):
    # Each level's two classes both derive from the two below: every class's order is merged
    # once (following each base's bases again would take 2**levels steps).
    class Left(D1, D2):
        pass
    class Right(D1, D2):
        def who(self):
            return ["R"] + super().who()
    for _ in range(levels):
        class NewLeft(Left, Right):
            pass
        class NewRight(Left, Right):
            def who(self):
                return ["R"] + super().who()
        Left, Right = NewLeft, NewRight
    return len(Right().who()), isinstance(Left(), D0), isinstance(Right(), NewLeft)

def run():
    leaf = Leaf(3)
    return (leaf.emit(1, 2), super(Middle, leaf).emit(0, 0), Leaf.make(1).n,
            type(Leaf.make(1)).__name__, Plain().ok, D3().who(), super(D1, D3()).who(),
            lattice(40), raised())
""",
    "run()",
)

CASES["collections_namedtuple"] = (
    """
Point = namedtuple("Point", ["x", "y"])
Tile = namedtuple("Tile", "par free dtype", defaults=["f32"])

def run():
    p = Point(1, y=2)
    x, y = p
    q = p._replace(x=5)
    seen = {p: "p"}
    t = Tile(128, 512)
    return (p, p[0], p[-1], p[:1], x, y, q, q.x, Point._fields, p == (1, 2), p == Point(1, 2),
            seen[(1, 2)], len({p, (1, 2), q}), len(p), isinstance(p, tuple), isinstance(p, Point),
            t, t.dtype, list(t), p._asdict(), p.count(1), tuple(p) + (3,), sorted([q, p]))
""",
    "run()",
)

CASES["typing_namedtuple_is_a_tuple"] = (
    """
class Shape(NamedTuple):
    par: int
    free: int = 512

    def size(self):
        return self.par * self.free

class Shape3(Shape):
    def size(self):
        return super().size() * 3

def run():
    s = Shape(128)
    par, free = s
    first, *rest = Shape3(2, 4)
    return (s, s[0], s[1], par, free, first, rest, s.size(), Shape3(2, 4).size(), tuple(s),
            s == (128, 512), s._replace(free=4), Shape._fields, len({s, (128, 512)}),
            isinstance(s, tuple), [a * 2 for a in s])
""",
    "run()",
)

CASES["type_of_values"] = (
    """
class Kind:
    pass

class Sub(Kind):
    pass

Pair = namedtuple("Pair", "a b")

def describe(x):
    return type(x).__name__

def run():
    k = Sub()
    return (type(3) is int, type(True) is bool, type(True) == int, type(2.5) == float,
            type("s") is str, type([]) is list, type(()) is tuple, type({}) is dict,
            type(k) is Sub, type(k) is Kind, type(k) == Sub, isinstance(k, Kind),
            [describe(v) for v in (1, 1.5, "s", [], (), {}, None, k, Pair(1, 2))],
            type(Pair(1, 2)) is Pair, type(Sub) is type, type(None).__name__,
            type(3)("7"), type(k).__name__, type(ValueError("x")).__name__,
            type(1) is type(2), type(None) is type(None), type(describe).__name__,
            describe(type))
""",
    "run()",
)

CASES["global_and_nonlocal"] = (
    """
COUNT = 0
TABLE = {}

def bump(by):
    global COUNT
    COUNT += by
    TABLE[by] = COUNT
    return COUNT

def counter():
    n = 0
    def inc(k=1):
        nonlocal n
        n += k
        return n
    def peek():
        return n
    return inc, peek

def outer():
    total = 0
    def add(xs):
        nonlocal total
        for x in xs:
            total += x
    add([1, 2])
    add([3])
    return total

def install():
    global helper, Made
    def helper():
        return "helper"
    class Made:
        pass

def run():
    install()
    inc, peek = counter()
    a = [inc(), inc(5), peek()]
    inc2, peek2 = counter()
    b = [inc2(), peek(), peek2()]
    return (bump(2), bump(3), COUNT, sorted(TABLE.items()), a, b, outer(), helper(),
            Made.__name__)
""",
    "run()",
)

CASES["yield_from_and_send"] = (
    """
def inner(n):
    for i in range(n):
        yield i
    return n * 10

def outer():
    got = yield from inner(2)
    yield got
    yield from [7, 8]
    yield from (c for c in "ab")
    return "done"

def accumulate():
    total = 0
    while True:
        x = yield total
        if x is None:
            return total
        total += x

def relay():
    result = yield from accumulate()
    yield ("relayed", result)

def run():
    g = accumulate()
    sums = [next(g), g.send(2), g.send(3)]
    r = relay()
    relayed = [next(r), r.send(4), r.send(6), r.send(None)]
    try:
        g.send(None)
    except StopIteration as stop:
        ended = stop.args
    try:
        accumulate().send(1)
    except TypeError:
        fresh = "TypeError"
    return list(outer()), sums, relayed, ended, fresh
""",
    "run()",
)

CASES["with_on_a_kernel_class"] = (
    """
class Recorder:
    def __init__(self, log, name, swallow=False):
        self.log, self.name, self.swallow = log, name, swallow
    def __enter__(self):
        self.log.append(("enter", self.name))
        return self.name.upper()
    def __exit__(self, kind, value, tb):
        self.log.append(("exit", self.name, None if kind is None else kind.__name__,
                         None if value is None else value.args))
        return self.swallow

def body(log):
    with Recorder(log, "a") as a, Recorder(log, "b") as b:
        log.append((a, b))
    with Recorder(log, "quiet", swallow=True):
        raise ValueError("swallowed")
    try:
        with Recorder(log, "loud"):
            raise KeyError("k")
    except KeyError as e:
        log.append(("caught", e.args))
    for i in range(3):
        with Recorder(log, f"loop{i}"):
            if i == 1:
                break
    return log

def early(log):
    with Recorder(log, "ret"):
        return "returned"

def run():
    log = []
    return body(log), early(log), log[-1]
""",
    "run()",
)


@pytest.mark.parametrize("name", sorted(CASES))
def test_construct_as_cpython(kernel_file, name):
    defs, expr = CASES[name]
    expected: dict = {}
    exec(HEADER.replace("import nki\nimport nki.language as nl\n", "") + defs, expected)
    src = HEADER + defs + f"\n\n@nki.jit\ndef k(a):\n    print(repr(({expr},)))\n    return a\n"
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == [repr(eval(f"({expr},)", expected))]


def test_a_kernel_takes_unnamed_inputs_in_its_kwargs(kernel_file):
    src = HEADER + (
        "@nki.jit\ndef k(a, *args, scale=1, **opts):\n"
        "    print(repr((args, scale, sorted(opts.items()))))\n    return a\n"
    )
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(src),
        {"a": np.zeros((1, 1), np.float32), "padding": 2, "mode": "same", "scale": 3},
        print_fn=printed.append,
    )
    assert printed == [repr(((), 3, [("mode", "same"), ("padding", 2)]))]


def test_an_array_in_kwargs_is_an_input_tensor(kernel_file):
    src = HEADER + (
        "@nki.jit\ndef k(a, **extra):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.load(extra['bias'])\n    nl.store(out, t)\n    return out\n"
    )
    bias = np.arange(4, dtype=np.float32).reshape(2, 2)
    result = neuronemu.run(kernel_file(src), {"a": np.zeros((2, 2), np.float32), "bias": bias})
    np.testing.assert_array_equal(list(result.outputs.values())[0], bias)


def test_a_kernel_without_kwargs_still_refuses_an_unknown_input(kernel_file):
    src = HEADER + "@nki.jit\ndef k(a):\n    return a\n"
    with pytest.raises(neuronemu.NeuronEmuError, match="has no parameter 'padding'"):
        neuronemu.compile_kernel(
            kernel_file(src), {"a": np.zeros((1, 1), np.float32), "padding": 2}
        )


@pytest.mark.parametrize(
    "expr",
    ["type(a).mro", "type(3).__dict__", "type(a).__class__", "type(None).__subclasses__"],
)
def test_type_of_a_value_reaches_nothing_of_the_host(kernel_file, expr):
    src = HEADER + f"@nki.jit\ndef k(a):\n    print({expr})\n    return a\n"
    with pytest.raises(neuronemu.NeuronEmuError, match="attribute|not available"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_an_endless_yield_from_is_bounded_by_the_loop_budget(kernel_file):
    src = HEADER + (
        "def forever():\n    while True:\n        yield 1\n\n"
        "def relay():\n    yield from forever()\n\n"
        "@nki.jit\ndef k(a):\n    for _ in relay():\n        pass\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="loop_iterations"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_a_budget_inside_with_is_not_passed_to_exit(kernel_file):
    src = HEADER + (
        "class Swallow:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n\n"
        "@nki.jit\ndef k(a):\n    with Swallow():\n        while True:\n            pass\n"
        "    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="loop_iterations"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})


def test_with_on_a_plain_value_is_a_located_type_error(kernel_file):
    src = HEADER + "@nki.jit\ndef k(a):\n    with 3:\n        pass\n    return a\n"
    with pytest.raises(neuronemu.NeuronEmuError, match="context manager protocol") as info:
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span.line == src.splitlines().index("    with 3:") + 1


def test_nonlocal_without_a_binding_is_a_located_error(kernel_file):
    src = HEADER + (
        "def f():\n    nonlocal zz\n    zz = 1\n\n@nki.jit\ndef k(a):\n    f()\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="no binding for nonlocal 'zz'"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((1, 1), np.float32)})
