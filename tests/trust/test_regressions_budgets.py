"""Trust-boundary regressions of issue 38: values nested deep enough to crash C code, work no
budget stopped, and budget errors a kernel swallowed. Same rules as test_regressions.py: a
located error naming the budget, within 10 s (the sandbox kills the run then: a deadlock
cannot hang the suite) and 1 GiB, writing nothing."""

from __future__ import annotations

import pytest
from _guard import Sandbox
from test_regressions import kernel, run_kernel


@pytest.fixture
def box(tmp_path):
    return Sandbox(tmp_path)


def _chain(make: str, use: str = "", top: str = "") -> str:
    return kernel(f"x = ()\nfor i in range(400000):\n    {make}\n{use}", top)


_DATACLASS = "from dataclasses import dataclass\n\n@dataclass\nclass N:\n    c: object\n"

# Each killed the process with SIGSEGV (hashing recursed in C past the stack), or with the
# interpreter's recursion limit raised, could: every way of making a container is bounded.
_NESTED = {
    "tuple-in-set": _chain("x = (x,)", "y = {x}"),
    "tuple-as-dict-key": _chain("x = (x,)", "y = {x: 1}"),
    "tuple-printed": _chain("x = (x,)", "print(x)"),
    "list": _chain("x = [x]", "y = [x] == [x]"),
    "list-append": _chain("y = []\n    y.append(x)\n    x = y"),
    "dict-item": _chain("y = {}\n    y[0] = x\n    x = y"),
    "set-literal": _chain("x = {(x,)}\n    x = tuple(x)"),
    "concatenation": _chain("x = (x,) + ()"),
    "varargs": _chain("x = f(x)", top="def f(*a):\n    return a"),
    "dataclass-field": _chain("x = N(x)", "print(x)", top=_DATACLASS),
    "attribute": _chain("n = N(0)\n    n.c = x\n    x = n", top=_DATACLASS),
    "zip": _chain("x = next(zip([x]))"),
}


@pytest.mark.parametrize("case", list(_NESTED))
def test_values_nested_past_the_budget_are_refused_where_made(box, case):
    out = run_kernel(box, _NESTED[case])
    out.assert_located("k.py")
    assert "nesting_depth" in out.stderr, out.describe()
    out.assert_budget_message()


# Work no clock saw: each ran unbounded (a deadlock at 0% CPU, an exponential walk in C, a
# list growing to 7 GB, a 720 MB message), past trace_seconds and run_seconds.
_DAG_TOP_DOWN = (  # shared twice at every level through aliases: 2**40 items, never re-made
    "def dag():\n    top = []\n    cur = top\n    for i in range(40):\n        nxt = [1]\n"
    "        cur.append(nxt)\n        cur.append(nxt)\n        cur = nxt\n    return top\n"
)
_UNMETERED = {
    "generators-resuming-each-other": (
        kernel(
            "print(next(ga))",
            "def ping():\n    yield next(gb)\n\ndef pong():\n    yield next(ga)\n\n"
            "ga = ping()\ngb = pong()\n",
        ),
        "already running",
    ),
    "recursive-call-tree": (
        kernel(
            "y = f(40)",
            "def f(n):\n    if n == 0:\n        return 0\n    return f(n - 1) + f(n - 1)",
        ),
        "trace_seconds",
    ),
    "dag-of-lists-compared": (
        kernel("x = [1]\ny = [1]\nfor i in range(40):\n    x = [x, x]\n    y = [y, y]\nz = x == y"),
        "sequence_items",
    ),
    "dag-of-tuples-hashed": (
        kernel("x = 1\nfor i in range(40):\n    x = (x, x)\ny = {x}"),
        "sequence_items",
    ),
    "dag-of-dataclasses-printed": (
        kernel("x = N(1)\nfor i in range(40):\n    x = N([x, x])\nprint(x)", _DATACLASS),
        "sequence_items",
    ),
    "aliased-dag-compared": (kernel("z = dag() == dag()", _DAG_TOP_DOWN), "loop_iterations"),
    "aliased-dag-printed": (kernel("print(dag())", _DAG_TOP_DOWN), "sequence_items"),
    "star-unpacked-count": (
        kernel("y = [*itertools.count()]", "import itertools"),
        "loop_iterations",
    ),
    "unpacked-count": (kernel("a, *b = itertools.count()", "import itertools"), "loop_iterations"),
    "in-count": (kernel("y = -1 in itertools.count()", "import itertools"), "loop_iterations"),
    "raised-720MB-message": (
        kernel("big = 'x' * 4000000\nraise ValueError([big] * 60)"),
        "sequence_items",
    ),
    "assert-720MB-message": (
        kernel("big = 'x' * 4000000\nassert False, [big] * 60"),
        "sequence_items",
    ),
}


@pytest.mark.parametrize("case", list(_UNMETERED))
def test_unmetered_work_ends_on_a_budget(box, case):
    source, words = _UNMETERED[case]
    out = run_kernel(box, source, "--limit", "trace_seconds=2")
    out.assert_located("k.py")
    assert words in out.stderr, out.describe()


def test_a_zero_trip_device_loop_around_a_long_chain_runs_in_linear_time(box):
    """6,000 readers after a device loop run zero times around a 6,000-instruction chain: the
    pass that finds what each reader follows walked the chain once per reader (35-46 s)."""
    body = (
        "reg = nisa.register_alloc(0)\n"
        "acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "nisa.dma_copy(dst=acc, src=a)\n"
        "for i in nl.dynamic_range(reg):\n"
        "    for j in range(6000):\n"
        "        if j >= 0:\n"
        "            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)\n"
        "for j in range(6000):\n"
        "    if j >= 0:\n"
        "        nisa.tensor_copy(dst=u, src=acc)\n"
    )
    out = run_kernel(box, kernel(body))
    out.assert_confined()
    assert out.returncode == 0, out.describe()


# Budget errors a kernel swallowed (exit 0): through a `finally` that leaves its block, and
# through a generator's `finally` run as the trace closes it.
_SWALLOWED = {
    "return-in-finally": "def f():\n    try:\n        while True:\n            pass\n"
    "    finally:\n        return 1\n",
    "break-in-finally": "def f():\n    for k in range(2):\n        try:\n            while True:\n"
    "                pass\n        finally:\n            break\n",
    "raise-caught-in-finally": "def f():\n    try:\n        try:\n            while True:\n"
    "                pass\n        finally:\n            raise ValueError('x')\n"
    "    except ValueError:\n        pass\n",
    "generator-closed-at-the-end": "def f():\n    g = gen()\n    next(g)\n\n"
    "def gen():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n",
}


@pytest.mark.parametrize("case", list(_SWALLOWED))
@pytest.mark.parametrize("budget", ["loop_iterations", "trace_seconds"])
def test_budgets_go_past_finally_and_generator_close(box, case, budget):
    # (each budget lowered for a quick end, the other raised past it: whichever it is, the
    # finally must not swallow it)
    limits = {
        "trace_seconds": ("loop_iterations=100000000", "trace_seconds=1"),
        "loop_iterations": ("loop_iterations=200000",),
    }[budget]
    extra = [a for x in limits for a in ("--limit", x)]
    out = run_kernel(box, kernel("f()", _SWALLOWED[case]), *extra)
    out.assert_located("k.py")
    assert budget in out.stderr, out.describe()
