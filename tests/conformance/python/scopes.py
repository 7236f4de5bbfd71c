# ruff: noqa: E501 - program text: long lines are the programs' own
"""Scopes: closures, late binding, `global`, `nonlocal`, comprehension scopes, class scopes,
shadowing of builtins."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["closure_captures_variable"] = """
def make(n):
    def add(x):
        return x + n
    return add

def main():
    add2, add5 = make(2), make(5)
    print(add2(1), add5(1), make(0)(0))
"""

PROGRAMS["closure_late_binding_in_loop"] = """
def main():
    fs = []
    for i in range(3):
        fs.append(lambda: i)
    print([f() for f in fs])
"""

PROGRAMS["closure_late_binding_sees_rebinding"] = """
def main():
    x = 1
    def get():
        return x
    x = 2
    print(get())
"""

PROGRAMS["closure_default_argument_binds_early"] = """
def main():
    fs = [lambda i=i: i * 10 for i in range(3)]
    print([f() for f in fs])
"""

PROGRAMS["nonlocal_counter"] = """
def counter():
    n = 0
    def inc(by=1):
        nonlocal n
        n += by
        return n
    return inc

def main():
    c = counter()
    c()
    c(5)
    d = counter()
    print(c(), d())
"""

PROGRAMS["nonlocal_through_two_levels"] = """
def outer():
    v = "outer"
    def middle():
        def inner():
            nonlocal v
            v = "inner"
        inner()
        return v
    return middle(), v

def main():
    print(outer())
"""

PROGRAMS["global_statement_rebinds_module_name"] = """
total = 0

def add(v):
    global total
    total += v

def main():
    add(3)
    add(4)
    print(total)
"""

PROGRAMS["global_creates_new_module_name"] = """
def define():
    global created
    created = "yes"

def main():
    define()
    print(created)
"""

PROGRAMS["local_shadows_global"] = """
x = "global"

def f():
    x = "local"
    return x

def main():
    print(f(), x)
"""

PROGRAMS["unbound_local_error"] = """
x = 1

def f():
    try:
        print(x)
    except UnboundLocalError:
        print("unbound")
    x = 2
    return x

def main():
    print(f())
"""

PROGRAMS["comprehension_has_its_own_scope"] = """
def main():
    i = "kept"
    squares = [i * i for i in range(4)]
    print(i, squares)
"""

PROGRAMS["comprehension_sees_enclosing_names"] = """
def main():
    k = 3
    print([k * x for x in range(3)], {x: k for x in "ab"}, sum(x + k for x in range(2)))
"""

PROGRAMS["nested_comprehension_scopes"] = """
def main():
    n = 3
    print([[i * n + j for j in range(n)] for i in range(n)])
"""

PROGRAMS["class_scope_not_visible_in_methods"] = """
x = "module"

class C:
    x = "class"
    def get(self):
        return x
    def get_attr(self):
        return self.x

def main():
    print(C().get(), C().get_attr())
"""

PROGRAMS["builtin_shadowed_locally"] = """
def main():
    len = lambda v: "mine"
    print(len([1, 2]))
    def inner():
        return max([1, 5])
    print(inner())
"""

PROGRAMS["builtin_shadowed_at_module_level"] = """
def sum(xs):
    return "shadowed"

def main():
    print(sum([1, 2]))
"""

PROGRAMS["function_attribute_names"] = """
def helper():
    pass

def main():
    print(helper.__name__, (lambda: 0).__name__)
"""

PROGRAMS["closures_share_a_cell"] = """
def pair():
    v = [0]
    def get():
        return v[0]
    def put(x):
        v[0] = x
    return get, put

def main():
    get, put = pair()
    put(9)
    print(get())
"""

PROGRAMS["nonlocal_shared_between_closures"] = """
def pair():
    v = 0
    def get():
        return v
    def put(x):
        nonlocal v
        v = x
    return get, put

def main():
    get, put = pair()
    put(7)
    print(get())
"""

PROGRAMS["recursive_inner_function"] = """
def main():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    print(fact(10))
"""

PROGRAMS["mutually_recursive_functions"] = """
def is_even(n):
    return True if n == 0 else is_odd(n - 1)

def is_odd(n):
    return False if n == 0 else is_even(n - 1)

def main():
    print(is_even(10), is_odd(7), is_even(3))
"""

PROGRAMS["decorator_with_closure"] = """
def trace(fn):
    calls = []
    def wrapper(*args):
        calls.append(args)
        return fn(*args)
    wrapper.calls = calls
    return wrapper

@trace
def add(a, b):
    return a + b

def main():
    add(1, 2)
    add(3, 4)
    print(add(5, 6), add.calls)
"""

PROGRAMS["decorator_with_arguments"] = """
def times(n):
    def deco(fn):
        def wrapper(x):
            for _ in range(n):
                x = fn(x)
            return x
        return wrapper
    return deco

@times(3)
def double(x):
    return x * 2

def main():
    print(double(1))
"""

PROGRAMS["stacked_decorators_order"] = """
def tag(name):
    def deco(fn):
        def wrapper():
            return f"<{name}>{fn()}</{name}>"
        return wrapper
    return deco

@tag("b")
@tag("i")
def text():
    return "hi"

def main():
    print(text())
"""

PROGRAMS["global_in_nested_function"] = """
state = {"n": 0}
level = 0

def outer():
    def inner():
        global level
        level += 1
    inner()
    inner()

def main():
    outer()
    state["n"] += 1
    print(level, state)
"""

PROGRAMS["function_as_value_in_dict"] = """
def add(a, b):
    return a + b

def mul(a, b):
    return a * b

OPS = {"add": add, "mul": mul}

def main():
    print({k: f(3, 4) for k, f in OPS.items()})
"""

PROGRAMS["closure_over_loop_with_factory"] = """
def main():
    def make(i):
        return lambda: i
    fs = [make(i) for i in range(3)]
    print([f() for f in fs])
"""

PROGRAMS["lambda_in_class_body_and_default"] = """
class K:
    scale = 3
    f = staticmethod(lambda x: x + 1)

def main():
    print(K.f(1), K().f(2))
"""

PROGRAMS["module_constant_used_in_default"] = """
TILE = 128

def split(n, tile=TILE):
    return n // tile

def main():
    print(split(512), split(512, 64))
"""
