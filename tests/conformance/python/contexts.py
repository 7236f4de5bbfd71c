# ruff: noqa: E501 - program text: long lines are the programs' own
"""`with` on the kernel's own classes and on `contextlib.contextmanager` functions: enter and
exit order, the value `as` binds, exceptions seen and suppressed by `__exit__`."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["with_enter_exit_order"] = """
class Ctx:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        print("enter", self.name)
        return self.name.upper()
    def __exit__(self, et, ev, tb):
        print("exit", self.name, et is None)
        return False

def main():
    with Ctx("a") as v:
        print("body", v)
    print("after")
"""

PROGRAMS["with_multiple_managers_nest"] = """
class Ctx:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        print("enter", self.name)
        return self
    def __exit__(self, *exc):
        print("exit", self.name)

def main():
    with Ctx("outer") as a, Ctx("inner") as b:
        print("body", a.name, b.name)
"""

PROGRAMS["with_exit_sees_exception"] = """
class Watch:
    def __enter__(self):
        return self
    def __exit__(self, et, ev, tb):
        print("exit saw", et.__name__ if et else None, ev)
        return False

def main():
    try:
        with Watch():
            raise ValueError("boom")
    except ValueError as e:
        print("propagated", e)
"""

PROGRAMS["with_exit_suppresses_exception"] = """
class Suppress:
    def __init__(self, kind):
        self.kind = kind
    def __enter__(self):
        return None
    def __exit__(self, et, ev, tb):
        return et is not None and issubclass(et, self.kind)

def main():
    with Suppress(KeyError):
        {}["missing"]
    print("suppressed")
    try:
        with Suppress(KeyError):
            raise ValueError("not suppressed")
    except ValueError as e:
        print("escaped", e)
"""

PROGRAMS["with_exit_on_return"] = """
class Ctx:
    def __enter__(self):
        return self
    def __exit__(self, *a):
        print("exit on return")

def f():
    with Ctx():
        return "returned"

def main():
    print(f())
"""

PROGRAMS["with_exit_on_break_and_continue"] = """
class Ctx:
    def __init__(self, i):
        self.i = i
    def __enter__(self):
        return self.i
    def __exit__(self, *a):
        print("exit", self.i)

def main():
    for i in range(4):
        with Ctx(i) as v:
            if v == 1:
                continue
            if v == 2:
                break
            print("body", v)
"""

PROGRAMS["with_as_tuple_target"] = """
class Pair:
    def __enter__(self):
        return (1, 2)
    def __exit__(self, *a):
        return False

def main():
    with Pair() as (a, b):
        print(a + b)
"""

PROGRAMS["with_manager_reused"] = """
class Counter:
    def __init__(self):
        self.entered = 0
    def __enter__(self):
        self.entered += 1
        return self
    def __exit__(self, *a):
        return False

def main():
    c = Counter()
    with c:
        pass
    with c:
        pass
    print(c.entered)
"""

PROGRAMS["contextmanager_basic"] = """
from contextlib import contextmanager

@contextmanager
def tag(name):
    print(f"<{name}>")
    yield name.upper()
    print(f"</{name}>")

def main():
    with tag("p") as t:
        print("inside", t)
"""

PROGRAMS["contextmanager_finally_on_exception"] = """
import contextlib

@contextlib.contextmanager
def guarded():
    try:
        yield
    finally:
        print("released")

def main():
    try:
        with guarded():
            raise RuntimeError("fail")
    except RuntimeError as e:
        print("caught", e)
"""

PROGRAMS["contextmanager_suppresses_by_catching"] = """
from contextlib import contextmanager

@contextmanager
def ignoring(kind):
    try:
        yield
    except kind as e:
        print("ignored", type(e).__name__)

def main():
    with ignoring(ZeroDivisionError):
        1 / 0
    print("continued")
"""

PROGRAMS["contextmanager_nested_with_class"] = """
from contextlib import contextmanager

log = []

@contextmanager
def scope(name):
    log.append("+" + name)
    yield
    log.append("-" + name)

class Mark:
    def __enter__(self):
        log.append("+mark")
    def __exit__(self, *a):
        log.append("-mark")

def main():
    with scope("a"):
        with Mark():
            with scope("b"):
                log.append("body")
    print(log)
"""

PROGRAMS["contextlib_suppress"] = """
import contextlib

def main():
    with contextlib.suppress(KeyError, IndexError):
        [][1]
    print("ok")
"""

PROGRAMS["contextlib_nullcontext"] = """
import contextlib

def main():
    with contextlib.nullcontext(5) as v:
        print(v)
"""

PROGRAMS["with_exit_order_on_exception_in_nested"] = """
class C:
    def __init__(self, n):
        self.n = n
    def __enter__(self):
        print("enter", self.n)
    def __exit__(self, et, ev, tb):
        print("exit", self.n, et.__name__ if et else "-")

def main():
    try:
        with C(1), C(2):
            raise IndexError
    except IndexError:
        print("handled")
"""

PROGRAMS["with_enter_value_is_not_manager"] = """
class Opener:
    def __enter__(self):
        return {"handle": 1}
    def __exit__(self, *a):
        pass

def main():
    m = Opener()
    with m as h:
        print(h, h is m)
"""

PROGRAMS["with_inside_generator"] = """
class C:
    def __enter__(self):
        print("enter")
    def __exit__(self, *a):
        print("exit")

def gen():
    with C():
        yield 1
        yield 2

def main():
    print(list(gen()))
"""
