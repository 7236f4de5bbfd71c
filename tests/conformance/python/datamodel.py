# ruff: noqa: E501 - program text: long lines are the programs' own
"""The data model kernels use: classes, inheritance and the MRO, `super()`, properties, class
and static methods, dunder operators on user classes, dataclasses and `__post_init__`."""

PROGRAMS: dict[str, str] = {}

# Refused by the trust rules (docs/limitations.md): the located error neuronemu gives.
REFUSED: dict[str, tuple[str, str]] = {}

# Dunder and private names are never reachable by name: getattr/setattr take public ones.
REFUSED["getattr_of_a_dunder_name"] = (
    """
class C:
    pass

def main():
    print(getattr(C(), "__class__").__name__)
""",
    "getattr\\(\\) takes a public attribute name",
)
REFUSED["setattr_of_a_private_name"] = (
    """
class C:
    pass

def main():
    c = C()
    setattr(c, "_hidden", 1)
    print(c._hidden)
""",
    "setattr\\(\\) takes a public attribute name",
)

PROGRAMS["class_and_instance_attributes"] = """
class Tile:
    count = 0
    def __init__(self, p, f):
        self.p, self.f = p, f
        Tile.count += 1
    def size(self):
        return self.p * self.f

def main():
    a, b = Tile(128, 4), Tile(2, 3)
    print(a.size(), b.size(), Tile.count, a.count, a.p)
"""

PROGRAMS["instance_attribute_shadows_class"] = """
class C:
    v = "class"

def main():
    c = C()
    print(c.v)
    c.v = "instance"
    print(c.v, C.v)
"""

PROGRAMS["single_inheritance_override"] = """
class Base:
    def name(self):
        return "base"
    def greet(self):
        return "I am " + self.name()

class Child(Base):
    def name(self):
        return "child"

def main():
    print(Base().greet(), Child().greet())
"""

PROGRAMS["super_in_init_chain"] = """
class A:
    def __init__(self):
        self.trail = ["A"]

class B(A):
    def __init__(self):
        super().__init__()
        self.trail.append("B")

class C(B):
    def __init__(self):
        super().__init__()
        self.trail.append("C")

def main():
    print(C().trail)
"""

PROGRAMS["diamond_mro_and_super"] = """
class Root:
    def who(self):
        return ["Root"]

class Left(Root):
    def who(self):
        return ["Left"] + super().who()

class Right(Root):
    def who(self):
        return ["Right"] + super().who()

class Bottom(Left, Right):
    def who(self):
        return ["Bottom"] + super().who()

def main():
    print(Bottom().who(), [k.__name__ for k in Bottom.__mro__])
"""

PROGRAMS["mro_attribute_lookup_order"] = """
class A:
    x = "A"

class B(A):
    pass

class C(A):
    x = "C"

class D(B, C):
    pass

def main():
    print(D.x, D().x, [k.__name__ for k in D.mro()])
"""

PROGRAMS["super_with_explicit_arguments"] = """
class A:
    def f(self):
        return "A.f"

class B(A):
    def f(self):
        return "B.f"

class C(B):
    def f(self):
        return super(B, self).f() + "|" + super(C, self).f()

def main():
    print(C().f())
"""

PROGRAMS["super_in_classmethod"] = """
class Base:
    @classmethod
    def create(cls, n):
        return cls.__name__ + str(n)

class Sub(Base):
    @classmethod
    def create(cls, n):
        return "sub:" + super().create(n * 2)

def main():
    print(Sub.create(3), Base.create(1))
"""

PROGRAMS["property_getter_setter"] = """
class Temp:
    def __init__(self):
        self._c = 0.0
    @property
    def fahrenheit(self):
        return self._c * 9 / 5 + 32
    @fahrenheit.setter
    def fahrenheit(self, v):
        self._c = (v - 32) * 5 / 9

def main():
    t = Temp()
    print(t.fahrenheit)
    t.fahrenheit = 212
    print(t._c, t.fahrenheit)
"""

PROGRAMS["property_without_setter_is_read_only"] = """
class P:
    @property
    def v(self):
        return 1

def main():
    p = P()
    try:
        p.v = 2
    except AttributeError:
        print("read-only")
    print(p.v)
"""

PROGRAMS["property_inherited_and_overridden"] = """
class Shape:
    @property
    def area(self):
        return 0
    @property
    def label(self):
        return f"{type(self).__name__} {self.area}"

class Square(Shape):
    def __init__(self, s):
        self.s = s
    @property
    def area(self):
        return self.s * self.s

def main():
    print(Shape().label, Square(3).label)
"""

PROGRAMS["classmethod_and_staticmethod"] = """
class Cfg:
    scale = 2
    def __init__(self, n):
        self.n = n
    @classmethod
    def default(cls):
        return cls(cls.scale * 64)
    @staticmethod
    def clamp(v, lo, hi):
        return max(lo, min(v, hi))

def main():
    c = Cfg.default()
    print(c.n, Cfg.clamp(500, 0, 128), c.clamp(-1, 0, 9))
"""

PROGRAMS["classmethod_on_subclass_gets_subclass"] = """
class Base:
    @classmethod
    def make(cls):
        return cls()
    def kind(self):
        return type(self).__name__

class Sub(Base):
    pass

def main():
    print(Base.make().kind(), Sub.make().kind(), isinstance(Sub.make(), Sub))
"""

PROGRAMS["dunder_arithmetic"] = """
class V:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __add__(self, o):
        return V(self.x + o.x, self.y + o.y)
    def __sub__(self, o):
        return V(self.x - o.x, self.y - o.y)
    def __mul__(self, k):
        return V(self.x * k, self.y * k)
    def __rmul__(self, k):
        return self * k
    def __neg__(self):
        return V(-self.x, -self.y)
    def __repr__(self):
        return f"V({self.x}, {self.y})"

def main():
    a, b = V(1, 2), V(3, 5)
    print(a + b, b - a, a * 3, 2 * a, -a)
"""

PROGRAMS["dunder_comparison_and_sorting"] = """
class Ver:
    def __init__(self, *parts):
        self.parts = parts
    def __eq__(self, o):
        return self.parts == o.parts
    def __lt__(self, o):
        return self.parts < o.parts
    def __repr__(self):
        return ".".join(map(str, self.parts))

def main():
    vs = [Ver(1, 2), Ver(1, 0, 5), Ver(0, 9)]
    print(sorted(vs), Ver(1) == Ver(1), Ver(1) != Ver(2), max(vs), Ver(2) > Ver(1))
"""

PROGRAMS["dunder_container_protocol"] = """
class Grid:
    def __init__(self, n):
        self.cells = {}
        self.n = n
    def __getitem__(self, key):
        return self.cells.get(key, 0)
    def __setitem__(self, key, value):
        self.cells[key] = value
    def __len__(self):
        return self.n
    def __contains__(self, key):
        return key in self.cells
    def __iter__(self):
        return iter(sorted(self.cells))

def main():
    g = Grid(4)
    g[1, 2] = 5
    g[0, 0] = 1
    print(g[1, 2], g[3, 3], len(g), (1, 2) in g, (9, 9) in g, list(g))
"""

PROGRAMS["dunder_bool_and_len_truthiness"] = """
class Empty:
    def __len__(self):
        return 0

class No:
    def __bool__(self):
        return False

class Plain:
    pass

def main():
    print(bool(Empty()), bool(No()), bool(Plain()), "yes" if Empty() else "no", not No())
"""

PROGRAMS["dunder_str_and_repr"] = """
class A:
    def __repr__(self):
        return "A()"

class B(A):
    def __str__(self):
        return "a B"

def main():
    print(A(), str(A()), repr(B()), str(B()), [A(), B()], f"{B()} {B()!r}")
"""

PROGRAMS["dunder_call"] = """
class Scale:
    def __init__(self, k):
        self.k = k
    def __call__(self, x):
        return x * self.k

def main():
    double = Scale(2)
    print(double(21), list(map(double, [1, 2])), callable(double))
"""

PROGRAMS["dunder_iter_and_next"] = """
class Countdown:
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        return self
    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n + 1

def main():
    print(list(Countdown(4)), [x * 2 for x in Countdown(2)], sum(Countdown(3)))
"""

PROGRAMS["dunder_eq_and_hash_in_sets"] = """
class Key:
    def __init__(self, k):
        self.k = k
    def __eq__(self, o):
        return isinstance(o, Key) and self.k == o.k
    def __hash__(self):
        return hash(self.k)

def main():
    s = {Key(1), Key(1), Key(2)}
    d = {Key("a"): 1}
    print(len(s), d[Key("a")], Key(3) in s, Key(1) in s)
"""

PROGRAMS["dunder_inplace_operator"] = """
class Acc:
    def __init__(self):
        self.items = []
    def __iadd__(self, v):
        self.items.append(v)
        return self

def main():
    a = Acc()
    b = a
    a += 1
    a += 2
    print(a.items, a is b)
"""

PROGRAMS["dunder_reflected_operators"] = """
class N:
    def __init__(self, v):
        self.v = v
    def __radd__(self, o):
        return N(o + self.v)
    def __rsub__(self, o):
        return N(o - self.v)
    def __repr__(self):
        return f"N{self.v}"

def main():
    print(1 + N(2), 10 - N(3), sum([N(1)]))
"""

PROGRAMS["dunder_matmul_and_pow"] = """
class M:
    def __init__(self, v):
        self.v = v
    def __matmul__(self, o):
        return M(self.v * o.v)
    def __pow__(self, e):
        return M(self.v ** e)
    def __repr__(self):
        return f"M({self.v})"

def main():
    print(M(3) @ M(4), M(2) ** 5)
"""

PROGRAMS["dunder_getattr_fallback"] = """
class Defaults:
    def __init__(self):
        self.set_here = 1
    def __getattr__(self, name):
        return f"default-{name}"

def main():
    d = Defaults()
    print(d.set_here, d.other, getattr(d, "third"))
"""

PROGRAMS["dunder_eq_default_identity"] = """
class P:
    pass

def main():
    a = P()
    b = P()
    print(a == a, a == b, a != b, a in [b, a], [a].count(a))
"""

PROGRAMS["dunder_not_implemented_fallback"] = """
class A:
    def __eq__(self, o):
        if not isinstance(o, A):
            return NotImplemented
        return True

def main():
    print(A() == A(), A() == 3, 3 == A(), A() != 3)
"""

PROGRAMS["dataclass_basics"] = """
from dataclasses import dataclass

@dataclass
class Point:
    x: int
    y: int = 0

def main():
    p = Point(1)
    q = Point(1, 0)
    print(p, p == q, Point(y=2, x=3), p.x + p.y)
"""

PROGRAMS["dataclass_post_init"] = """
from dataclasses import dataclass, field

@dataclass
class Plan:
    n: int
    tile: int = 128
    tiles: int = field(init=False)
    def __post_init__(self):
        self.tiles = (self.n + self.tile - 1) // self.tile

def main():
    print(Plan(300), Plan(512, 256).tiles)
"""

PROGRAMS["dataclass_default_factory"] = """
from dataclasses import dataclass, field

@dataclass
class Bag:
    name: str
    items: list = field(default_factory=list)

def main():
    a, b = Bag("a"), Bag("b")
    a.items.append(1)
    print(a, b)
"""

PROGRAMS["dataclass_frozen"] = """
from dataclasses import dataclass

@dataclass(frozen=True)
class Shape:
    p: int
    f: int

def main():
    s = Shape(128, 512)
    try:
        s.p = 1
    except Exception as e:
        print(type(e).__name__)
    print(s, hash(s) == hash(Shape(128, 512)), {s: 1}[Shape(128, 512)])
"""

PROGRAMS["dataclass_order"] = """
from dataclasses import dataclass

@dataclass(order=True)
class Job:
    prio: int
    name: str

def main():
    print(sorted([Job(2, "b"), Job(1, "z"), Job(2, "a")]), Job(1, "a") < Job(1, "b"))
"""

PROGRAMS["dataclass_inheritance"] = """
from dataclasses import dataclass

@dataclass
class Base:
    a: int

@dataclass
class Derived(Base):
    b: int = 5

def main():
    print(Derived(1), Derived(1, 2).b, isinstance(Derived(1), Base))
"""

PROGRAMS["dataclass_methods_and_replace"] = """
import dataclasses
from dataclasses import dataclass

@dataclass
class Cfg:
    m: int
    n: int
    def area(self):
        return self.m * self.n

def main():
    c = Cfg(2, 3)
    d = dataclasses.replace(c, n=10)
    print(c.area(), d, dataclasses.asdict(d), [f.name for f in dataclasses.fields(c)])
"""

PROGRAMS["class_attribute_mutable_shared"] = """
class Reg:
    items = []
    def add(self, v):
        self.items.append(v)

def main():
    a, b = Reg(), Reg()
    a.add(1)
    b.add(2)
    print(Reg.items, a.items is b.items)
"""

PROGRAMS["class_body_uses_earlier_names"] = """
class Consts:
    A = 2
    B = A * 3
    NAMES = ["x", "y"]
    INDEX = {n: i for i, n in enumerate(NAMES)}

def main():
    print(Consts.B, Consts.INDEX)
"""

PROGRAMS["method_bound_and_unbound"] = """
class C:
    def __init__(self, v):
        self.v = v
    def get(self):
        return self.v

def main():
    c = C(4)
    m = c.get
    print(m(), C.get(c), list(map(C.get, [C(1), C(2)])))
"""

PROGRAMS["isinstance_with_user_hierarchy"] = """
class A: pass
class B(A): pass
class C: pass

def main():
    objs = [A(), B(), C()]
    print([isinstance(o, A) for o in objs], [type(o).__name__ for o in objs],
          [isinstance(o, (B, C)) for o in objs], issubclass(B, A), issubclass(A, B))
"""

PROGRAMS["type_of_instance_is_its_class"] = """
class Cell:
    def clone(self):
        return type(self)()

class Sub(Cell):
    pass

def main():
    s = Sub()
    print(type(s) is Sub, type(s.clone()).__name__, type(s) == Cell, type(3) is int)
"""

PROGRAMS["class_name_and_qualname"] = """
class Outer:
    class Inner:
        pass

def main():
    print(Outer.__name__, Outer.Inner.__name__, Outer.Inner.__qualname__, Outer().__class__.__name__)
"""

PROGRAMS["abstract_base_with_abc"] = """
from abc import ABC, abstractmethod

class Op(ABC):
    @abstractmethod
    def apply(self, x):
        ...
    def twice(self, x):
        return self.apply(self.apply(x))

class Inc(Op):
    def apply(self, x):
        return x + 1

def main():
    print(Inc().twice(5))
"""

PROGRAMS["exception_subclass_with_fields"] = """
class ShapeError(ValueError):
    def __init__(self, shape, limit):
        super().__init__(f"shape {shape} over {limit}")
        self.shape = shape
        self.limit = limit

def main():
    try:
        raise ShapeError((256, 8), 128)
    except ValueError as e:
        print(e, e.shape, e.limit, e.args)
"""

PROGRAMS["instance_dict_and_vars"] = """
class P:
    def __init__(self):
        self.a = 1
        self.b = 2

def main():
    p = P()
    print(sorted(p.__dict__), vars(p) == p.__dict__)
"""

PROGRAMS["setattr_and_getattr_builtins"] = """
class Cfg:
    pass

def main():
    c = Cfg()
    for name, value in (("m", 1), ("n", 2)):
        setattr(c, name, value)
    print(getattr(c, "m"), getattr(c, "n"), getattr(c, "k", None), hasattr(c, "m"))
"""

PROGRAMS["slots_like_plain_class_with_defaults"] = """
class Opts:
    verbose = False
    level = 1
    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

def main():
    o = Opts(level=3)
    print(o.verbose, o.level, Opts.level)
"""

PROGRAMS["enum_members"] = """
from enum import Enum

class Color(Enum):
    RED = 1
    GREEN = 2

def main():
    print(Color.RED, Color.RED.name, Color.GREEN.value, Color(2), Color["RED"], list(Color),
          Color.RED == Color.RED, Color.RED is Color(1))
"""

PROGRAMS["intenum_arithmetic"] = """
from enum import IntEnum

class Axis(IntEnum):
    P = 0
    F = 1

def main():
    print(Axis.F + 1, Axis.P == 0, [1, 2][Axis.F], sorted([Axis.F, Axis.P]))
"""

PROGRAMS["namedtuple_collections"] = """
from collections import namedtuple

Pt = namedtuple("Pt", ["x", "y"])
Rec = namedtuple("Rec", "a b c", defaults=[0])

def main():
    p = Pt(1, 2)
    print(p, p.x, p[1], p._replace(x=5), p._asdict(), Rec(1, 2), tuple(p), len(p), p == (1, 2))
    x, y = p
    print(x + y, Pt._fields)
"""

PROGRAMS["namedtuple_typing"] = """
from typing import NamedTuple

class Shape(NamedTuple):
    p: int
    f: int = 1
    def size(self):
        return self.p * self.f

def main():
    s = Shape(4, 3)
    print(s, s.size(), s[0], s[-1], Shape(2), s._replace(f=10).size(), list(s))
"""
