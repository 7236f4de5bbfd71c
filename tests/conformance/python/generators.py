# ruff: noqa: E501 - program text: long lines are the programs' own
"""Generators: `yield`, `yield from` (its result), `send`, `close`, `throw`, generator
expressions, and generators as iterators of builtins."""

PROGRAMS: dict[str, str] = {}

PROGRAMS["simple_generator"] = """
def gen():
    yield 1
    yield 2

def main():
    print(list(gen()), [x * 2 for x in gen()], sum(gen()))
"""

PROGRAMS["generator_is_lazy"] = """
log = []

def gen():
    log.append("start")
    yield 1
    log.append("after 1")
    yield 2

def main():
    g = gen()
    print(log)
    print(next(g), log)
    print(next(g), log)
"""

PROGRAMS["generator_return_value_in_stopiteration"] = """
def gen():
    yield 1
    return "done"

def main():
    g = gen()
    next(g)
    try:
        next(g)
    except StopIteration as e:
        print("stopped with", e.value)
"""

PROGRAMS["yield_from_list_and_generator"] = """
def inner():
    yield "a"
    yield "b"

def outer():
    yield from [1, 2]
    yield from inner()
    yield from range(3, 5)

def main():
    print(list(outer()))
"""

PROGRAMS["yield_from_result"] = """
def inner():
    yield 1
    return "inner result"

def outer():
    r = yield from inner()
    yield r

def main():
    print(list(outer()))
"""

PROGRAMS["send_values_in"] = """
def running_total():
    total = 0
    while True:
        v = yield total
        if v is None:
            break
        total += v

def main():
    g = running_total()
    print(next(g), g.send(5), g.send(10), g.send(1))
"""

PROGRAMS["send_through_yield_from"] = """
def echo():
    got = []
    while len(got) < 3:
        v = yield len(got)
        got.append(v)
    return got

def wrapper():
    result = yield from echo()
    yield ("result", result)

def main():
    g = wrapper()
    print(next(g), g.send("a"), g.send("b"), g.send("c"))
"""

PROGRAMS["close_runs_finally"] = """
def gen():
    try:
        yield 1
        yield 2
    finally:
        print("cleanup")

def main():
    g = gen()
    print(next(g))
    g.close()
    print("closed")
    print(next(g, "exhausted"))
"""

PROGRAMS["close_raises_generator_exit_inside"] = """
def gen():
    try:
        yield 1
    except GeneratorExit:
        print("got GeneratorExit")
        raise

def main():
    g = gen()
    next(g)
    g.close()
    print("done")
"""

PROGRAMS["throw_into_generator"] = """
def gen():
    while True:
        try:
            yield "ok"
        except ValueError as e:
            yield f"handled {e}"

def main():
    g = gen()
    print(next(g), g.throw(ValueError("bad")), next(g))
"""

PROGRAMS["generator_expression_laziness"] = """
def main():
    seen = []
    g = (seen.append(x) or x for x in range(3))
    print(seen)
    first = next(g)
    print(first, seen, list(g), seen)
"""

PROGRAMS["generator_exhausted_once"] = """
def main():
    g = (x for x in range(3))
    print(list(g), list(g), sum(x for x in range(4)))
"""

PROGRAMS["infinite_generator_with_islice"] = """
import itertools

def naturals():
    n = 0
    while True:
        yield n
        n += 1

def main():
    print(list(itertools.islice(naturals(), 5)), next(x for x in naturals() if x > 3))
"""

PROGRAMS["generator_pipeline"] = """
def numbers(n):
    yield from range(n)

def squares(xs):
    for x in xs:
        yield x * x

def evens(xs):
    return (x for x in xs if x % 2 == 0)

def main():
    print(list(evens(squares(numbers(7)))))
"""

PROGRAMS["generator_in_zip_and_enumerate"] = """
def letters():
    yield from "abc"

def main():
    print(list(zip(letters(), range(10))), list(enumerate(letters(), 1)), dict(zip(letters(), letters())))
"""

PROGRAMS["generator_method_of_class"] = """
class Tiles:
    def __init__(self, n, size):
        self.n, self.size = n, size
    def __iter__(self):
        for s in range(0, self.n, self.size):
            yield s, min(self.size, self.n - s)

def main():
    print(list(Tiles(300, 128)), [s for s, _ in Tiles(10, 4)])
"""

PROGRAMS["generator_with_early_return"] = """
def upto(xs, stop):
    for x in xs:
        if x == stop:
            return
        yield x

def main():
    print(list(upto([1, 2, 3, 4], 3)), list(upto([], 1)))
"""

PROGRAMS["generator_state_between_nexts"] = """
def fib():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b

def main():
    g = fib()
    print([next(g) for _ in range(10)])
"""

PROGRAMS["generator_try_finally_on_exhaustion"] = """
def gen():
    try:
        yield 1
    finally:
        print("finally on exhaustion")

def main():
    for v in gen():
        print("got", v)
    print("after")
"""

PROGRAMS["generator_break_out_of_for_then_close"] = """
def gen():
    try:
        for i in range(10):
            yield i
    finally:
        print("closed")

def main():
    g = gen()
    for v in g:
        if v == 2:
            break
    print("broke at", v)
    g.close()
"""

PROGRAMS["generator_raises_exception"] = """
def gen():
    yield 1
    raise KeyError("k")

def main():
    out = []
    try:
        for v in gen():
            out.append(v)
    except KeyError as e:
        out.append(("error", e.args))
    print(out)
"""

PROGRAMS["send_none_first_is_next"] = """
def gen():
    x = yield "first"
    yield f"got {x}"

def main():
    g = gen()
    print(g.send(None), g.send(42))
"""

PROGRAMS["yield_from_delegates_to_nested_generators"] = """
def leaf(n):
    for i in range(n):
        yield n * 10 + i

def tree(depth):
    if depth == 0:
        yield from leaf(2)
    else:
        yield depth
        yield from tree(depth - 1)

def main():
    print(list(tree(2)))
"""

PROGRAMS["generator_as_coroutine_averager"] = """
def averager():
    total, n, avg = 0, 0, None
    while True:
        v = yield avg
        total += v
        n += 1
        avg = total / n

def main():
    a = averager()
    next(a)
    print([a.send(v) for v in (10, 20, 60)])
"""

PROGRAMS["generator_in_any_all_stops_early"] = """
def gen(log):
    for i in range(10):
        log.append(i)
        yield i

def main():
    log = []
    print(any(x > 2 for x in gen(log)), log)
"""

PROGRAMS["close_of_a_generator_that_yields_again"] = """
def gen():
    try:
        yield 1
    finally:
        yield 2

def main():
    g = gen()
    next(g)
    try:
        g.close()
    except RuntimeError as e:
        print("caught", repr(e))
    g.close()
    print("closed again")
"""
