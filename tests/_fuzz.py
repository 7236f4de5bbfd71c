"""The fuzz campaign's parts, shared by the property tests (`tests/property/test_fuzz_*.py`)
and the thorough campaign (`benches/fuzz.py`):

- generators of kernel files: grammar-level generated kernels and mutants of every kernel in
  `kernels/` (token edits, byte edits, inserted statements), including what untrusted files
  try: trace-time NumPy methods that write files (`.dump`, `.tofile`), `str.format` and `%`
  formatting that follow attributes, huge literals, powers, shifts and repetitions, deep
  nesting, non-UTF-8 bytes, f-strings with odd fields;
- `REGRESSIONS`: one fixed example per class of trust bug found so far;
- `run_example`: runs one example in a forked child of the calling (warmed-up) process, with
  the real default caps, the host-effect guard armed, a wall-clock limit and the child's peak
  resident set measured, and classifies the outcome.

Each generator is written once against a tiny `Draw` interface, so that Hypothesis drives
it in the tests (`HypothesisDraw`: shrinking, explicit examples) and a seeded
`random.Random` drives it in the bench (`RandomDraw`: example N of seed S is reproducible
without Hypothesis).

Outcomes: `ran`, `located` (a NeuronEmuError rendered `path:line:col: error: ...`, line and
col >= 1), `usage` (a UsageError with no file position: allowed only when no position in the
kernel files applies, so never for a file that is not UTF-8) are fine. `unlocated`,
`internal` (any other exception), `host-effect` (the audit-hook guard saw a write, a process,
a socket, code loaded from a pickle...; or the kernel printed a host object), `timeout`
(over the time limit), `over-memory` (peak RSS over the limit) and `crash` (the child died)
are failures.
"""

from __future__ import annotations

import builtins
import faulthandler
import importlib.util
import json
import os
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
KERNELS = ROOT / "kernels"


def _load_sibling(name: str) -> Any:
    """A helper module next to this file, by path (no sys.path change: `tests/isa` would
    shadow the `isa` package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_host_guard = _load_sibling("_host_guard")
HostGuard = _host_guard.HostGuard

TIME_LIMIT_S = 30.0  # an example running longer is a failure (and is killed)
RSS_LIMIT = 2 << 30  # an example whose peak resident set passes this is a failure
FAILURES = ("host-effect", "timeout", "over-memory", "crash", "internal", "unlocated")
FINE = ("ran", "located", "usage")
OUTCOMES = FINE + FAILURES

LOCATED = re.compile(r"^(?P<path>\S(?:.*?\S)?):(?P<line>\d+):(?P<col>\d+): error: ")
# Printed text that only a host object gives (a kernel's own values never print like this).
CANARY = "NEURONEMU-HOST-CANARY-7f3a"
_LEAKS = (
    re.compile(re.escape(CANARY)),
    re.compile(r"<function \S+ at 0x"),
    re.compile(r"<module '"),
    re.compile(r"environ\(\{"),
    re.compile(r"__builtins__"),
)


# -- drawing choices -------------------------------------------------------------------------


class Draw:
    """The choices a generator makes; subclasses take them from Hypothesis or a Random."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def boolean(self, percent: int = 50) -> bool:
        return self.integer(0, 99) < percent


class RandomDraw(Draw):
    def __init__(self, rng: Any):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisDraw(Draw):
    def __init__(self, draw: Callable[[Any], Any]):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.draw(st.integers(lo, hi))

    def choice(self, options: Sequence[Any]) -> Any:
        from hypothesis import strategies as st

        return self.draw(st.sampled_from(list(options)))


# -- examples --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """A kernel file (bytes: it need not be UTF-8), the files beside it, and its inputs."""

    kind: str
    name: str
    source: bytes
    case: tuple[tuple[str, str], ...]
    helpers: tuple[tuple[str, bytes], ...] = ()
    label: str = ""

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        text = self.source.decode("utf-8", "backslashreplace")
        if len(text) > 6000:
            text = text[:3000] + f"\n... [{len(text) - 6000} characters] ...\n" + text[-3000:]
        helpers = "".join(
            f"\n--- {n} ---\n{d.decode('utf-8', 'backslashreplace')[:3000]}"
            for n, d in self.helpers
        )
        return (
            f"Example({self.kind}{' ' + self.label if self.label else ''}, {self.name}, "
            f"inputs {dict(self.case)})\n--- {self.name} ---\n{text}{helpers}"
        )

    def utf8(self) -> bool:
        try:
            for data in (self.source, *(d for _, d in self.helpers)):
                data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "name": self.name,
            "source": self.source.decode("utf-8", "surrogateescape"),
            "case": dict(self.case),
            "helpers": {n: d.decode("utf-8", "surrogateescape") for n, d in self.helpers},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Example:
        return cls(
            data["kind"],
            data["name"],
            data["source"].encode("utf-8", "surrogateescape"),
            tuple(data["case"].items()),
            tuple(
                (n, d.encode("utf-8", "surrogateescape"))
                for n, d in data.get("helpers", {}).items()
            ),
            data.get("label", ""),
        )


def _encode(text: str) -> bytes:
    # Lone surrogates U+DC80..U+DCFF stand for raw bytes (non-UTF-8 files).
    return text.encode("utf-8", "surrogateescape")


# -- the kernels of kernels/ -----------------------------------------------------------------


def _kernel_sources() -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """Every kernel of kernels/ with its smallest reference case."""
    from neuronemu.reference import discover_cases

    def size(case: dict[str, str]) -> int:
        total = 0
        for spec in case.values():
            m = re.search(r"\[([\d,\s]+)\]", spec)
            if m:
                n = 1
                for d in m.group(1).split(","):
                    n *= int(d)
                total += n
        return total

    found: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}
    for path, _ref, case in discover_cases(KERNELS):
        old = found.get(path.name)
        if old is None or size(case) < size(dict(old[1])):
            found[path.name] = (path.read_text(), tuple(case.items()))
    return dict(sorted(found.items()))


SOURCES = _kernel_sources()
# Helper modules of kernels/ (imported by kernels, not kernels themselves).
HELPERS = {p.name: p.read_bytes() for p in sorted(KERNELS.glob("_*.py"))}


def _helpers_for(text: str) -> tuple[tuple[str, bytes], ...]:
    return tuple((n, d) for n, d in HELPERS.items() if n[:-3] in text)


# -- trust statements: what untrusted kernel files try ---------------------------------------

# Names a statement may use: in generated kernels these exist; in mutants of real kernels
# only builtins and literals do.
GENERATED_NAMES = (
    "n",
    "rows",
    "tiles",
    "tiles[0]",
    "a",
    "i",
    "len",
    "max",
    "print",
    "1.5",
    "'s'",
    "nl",
    "np",
    "nl.add",
    "range(3)",
)
BUILTIN_NAMES = (
    "len",
    "max",
    "print",
    "sum",
    "1.5",
    "'s'",
    "7",
    "nl",
    "np",
    "nl.add",
    "range(3)",
    "[1, 2]",
    "{'k': 1}",
)

_NP_OBJECTS = (
    "np.arange(4)",
    "np.zeros((2, 2))",
    "np.ones(3, dtype=np.float32)",
    "np.array([1, 2, 3])",
    "np.eye(2)",
    "np.full((2,), 7)",
)
_PATHS = (
    "'written.npy'",
    "'/tmp/neuronemu-fuzz-written'",
    "'../escaped.bin'",
    "'sub/dir/x.bin'",
    "f'{7}.bin'",
    "'/dev/null'",
    "''",
)
_NP_CALLS = (
    ".dump({p})",
    ".tofile({p})",
    ".tofile({p}, sep=',')",
    ".dump(file={p})",
    ".tolist()",
    ".sum()",
    ".max()",
    ".mean()",
    ".reshape(-1)",
    ".astype(np.float32)",
    ".tobytes()",
    ".dumps()",
    ".copy()",
    ".fill(0)",
    ".T",
    ".shape",
    ".nbytes",
    ".byteswap()",
    ".view(np.int8)",
    ".setflags(write=False)",
    ".ctypes",
    ".data",
    ".base",
    ".flags",
    ".item(0)",
    ".repeat(10**9)",
    ".resize(10**9)",
    ".tolist().__class__",
    ".__reduce__()",
    ".__array_interface__",
    ".dtype.type",
)
_FORMATS = (
    "'{0.fn.__globals__}'",
    "'{0.fn.__globals__[os].environ}'",
    "'{0.__class__}'",
    "'{0.__class__.__mro__}'",
    "'{0.__init__.__globals__}'",
    "'{0[0]}'",
    "'{0.shape}'",
    "'{0!r:>20}'",
    "'{0.fn.__code__.co_filename}'",
    "'{0.__dict__}'",
    "'{0.real}'",
    "'{0:,}'",
    "'{0:>{1}}'",
    "'{0:>1000000000}'",
    "'{}'",
    "'{0}{1}'",
    "'{0.fn.__closure__}'",
    "'{0.__self__}'",
    "'{0.fn.__module__}'",
    "'{0.__class__.__init__.__globals__[sys].modules}'",
    "'{x.fn.__globals__}'",
)
_PERCENT = (
    "'%s %r' % ({a}, {b})",
    "'%(x)s' % {{'x': {a}}}",
    "'%*d' % (10**9, 1)",
    "'%.1000000000f' % 1.5",
    "'%c' % 10**9",
    "'%d' % {a}",
    "'%s' % ({a},)",
    "'%-1000000000s' % 'x'",
    "'%r' % ({a},)",
)
_POWERS = (
    "10 ** 10 ** 10",
    "pow(7, 10**8)",
    "2 ** 10**9",
    "7 ** 10**7",
    "10 ** 100",
    "2 ** 64",
    "pow(7, 10**100, 1000)",
    "1 << 10**10",
    "1 << 10**6",
    "1 << 64",
    "-1 ** 10**18",
    "(-2) ** 10**9",
    "1.5 ** 10**9",
    "10.0 ** 400",
    "2 ** -10**9",
    "n ** n ** n",
    "9 ** 9 ** 9",
    "math.comb(10**6, 5 * 10**5)",
    "math.isqrt(10**(10**6))",
    "math.perm(10**6)",
    "math.lcm(*range(1, 10**5))",
    "(10**100) >> 10**18",
    "int('9' * 10**5)",
    "float('1e400')",
    "divmod(10**(10**7), 7)",
)
_REPEATS = (
    "'x' * 10**9",
    "'x' * 3 * 10**9",
    "[0] * 10**9",
    "(1, 2) * 10**8",
    "[[0] * 10**4] * 10**5",
    "'ab' * 10**5",
    "'x'.ljust(10**9)",
    "'x'.center(10**9)",
    "'x'.zfill(10**9)",
    "'-'.join(['x'] * 10**8)",
    "'x' * -1",
    "[0] * 10**100",
    "'x' * 10**100",
    "'{0}'.format('x') * 10**9",
    "str(10 ** 10000)",
    "'a b' * 10**7",
    "'x'.expandtabs(10**9)",
    "'\\t'.expandtabs(10**9)",
    "'x' * 10**8 + 'y' * 10**8",
)
_ITERATES = (
    "sum(range({k}))",
    "sorted(range({k}))",
    "list(range({k}))",
    "max(range({k}))",
    "len(list(range({k})))",
    "[i for i in range({k})]",
    "{{i: i for i in range({k})}}",
    "tuple(range({k}))",
    "set(range({k}))",
    "sum([1] * {k})",
    "len(range({k}))",
    "min(range({k}), key=len)",
    "sorted(range({k}), reverse=True)",
    "list(reversed(range({k})))",
    "any(x < 0 for x in range({k}))",
    "list(zip(range({k}), range({k})))",
    "dict.fromkeys(range({k}))",
    "list(enumerate(range({k})))",
    "'x' in str(list(range({k})))",
)
_SIZES = ("10", "10**3", "10**5", "10**6", "10**7", "10**8", "10**9", "10**12", "10**18")
_FSTRINGS = (
    "f'{n\x00}'",
    "f'{n\\}'",
    "f'x\x00{n}'",
    "f'\\{n}'",
    "f'\\N{{n}}'",
    "f'\\x{n}'",
    "f'{n\\\\}'",
    "f'\\\\{n}'",
    "f'{n!z}'",
    "f'{n:{n}}'",
    "f'{n=}'",
    "f'{ {n} }'",
    "f'{n:\x00}'",
    "f'{{{n}}}'",
    "f'{\"x\" * 10**9}'",
    "f'{n:>1000000000}'",
    "f'{len.fn}'",
    "f'{n!r:{\"{\"}}'",
    "f'{'",
    "f'}'",
    "f'{}'",
    "f'{n!}'",
    "f'{n:{n:{n}}}'",
    "f'{n}' * 10**9",
    "f'''{n\n}'''",
    "f'{n # comment}'",
    "f'{(lambda: 1)()}'",
    "f'{n:%Y}'",
    "f'{{}}'",
    "rf'\\{n}'",
    "f'{n:\\\\}'",
    "f'{\\\\n}'",
    "f'\\\\'",
    "fr'{n}\\\\'",
)


def trust_statement(d: Draw, names: Sequence[str] = GENERATED_NAMES) -> list[str]:
    """One statement (or block) of the kinds untrusted kernel files use to reach the host or
    exhaust the machine; unindented lines."""
    kind = d.choice(
        [
            "np-method",
            "format",
            "percent",
            "literal",
            "power",
            "repeat",
            "iterate",
            "loop",
            "brackets",
            "if-nest",
            "chain",
            "fstring",
            "non-utf8",
            "nl-values",
            "python",
        ]
    )

    def arg() -> str:
        return d.choice(names)

    if kind == "np-method":
        call = d.choice(_NP_CALLS).format(p=d.choice(_PATHS))
        lines = [f"v = {d.choice(_NP_OBJECTS)}{call}"]
        return lines + (["print(v)"] if d.boolean() else [])
    if kind == "format":
        template = d.choice(_FORMATS)
        how = d.choice(["call", "call", "map", "unbound", "builtin"])
        if how == "map":
            expr = f"{template}.format_map({{'x': {arg()}}})"
        elif how == "unbound":
            expr = f"str.format({template}, {arg()}, {arg()})"
        elif how == "builtin":
            expr = f"format({arg()}, {template})"
        else:
            expr = f"{template}.format({arg()}, {arg()}, x={arg()})"
        return [f"s = {expr}", "print(s)"]
    if kind == "percent":
        return [f"s = {d.choice(_PERCENT).format(a=arg(), b=arg())}", "print(s)"]
    if kind == "literal":
        what = d.choice(["str", "str", "int", "hex", "bytes", "float", "docstring"])
        size = int(d.choice(["10", "1000", "4300", "4301", "100000", "2000000"]))
        if what == "str":
            return [f"s = '{'x' * size}'", "n = len(s)"]
        if what == "int":
            return [f"n = {'9' * size}"]
        if what == "hex":
            return [f"n = 0x{'f' * size}"]
        if what == "bytes":
            return [f"b = b'{'x' * size}'"]
        if what == "float":
            return [f"x = 1e{d.choice(['300', '400', '-400', str(size)])}"]
        return ['"""' + "y" * size + '"""']
    if kind == "power":
        return [f"n = {d.choice(_POWERS)}"]
    if kind == "repeat":
        return [f"s = {d.choice(_REPEATS)}"]
    if kind == "iterate":
        return [f"s = {d.choice(_ITERATES).format(k=d.choice(_SIZES))}"]
    if kind == "loop":
        k = d.choice(_SIZES[:7])
        if d.boolean():
            return [f"for _ in range({k}):", "    pass"]
        return ["j = 0", f"while j < {k}:", "    j += 1"]
    if kind == "brackets":
        depth = int(d.choice(["10", "50", "100", "200", "500", "1000", "5000"]))
        opener, closer = d.choice(
            [("[", "]"), ("(", ")"), ("{", "}"), ("len([", "])"), ("-(", ")"), ("not (", ")")]
        )
        return [f"x = {opener * depth}{d.choice(['', '1', '0'])}{closer * depth}"]
    if kind == "if-nest":
        depth = int(d.choice(["5", "50", "100", "200", "1000"]))
        return [" " * k + "if True:" for k in range(depth)] + [" " * depth + "pass"]
    if kind == "chain":
        terms = int(d.choice(["10", "1000", "10000", "100000"]))
        op = d.choice(["+", "*", "-", " and ", " or ", "<", "|", "**"])
        return [f"n = {op.join(['1'] * terms)}"]
    if kind == "fstring":
        return [f"s = {d.choice(_FSTRINGS)}", "print(s)"]
    if kind == "python":  # the whole trace-time Python of NKI 0.7: try, generators, stdlib
        return d.choice(_PYTHON_FORMS).format(a=arg(), k=d.choice(_SIZES)).split("\n")
    if kind == "non-utf8":
        raw = d.choice(
            ["\udcff", "\udcc3(", "\udced\udca0\udc80", "\udcfe\udcff", "\udcc0\udc80", "\x00"]
        )
        where = d.choice(["string", "comment", "code", "name"])
        if where == "string":
            return [f"s = 'a{raw}b'"]
        if where == "comment":
            return [f"pass  # {raw}"]
        if where == "name":
            return [f"x{raw} = 1"]
        return [f"n = 1 {raw} 2"]
    # values that do not fit where NKI expects small numbers
    bad = d.choice(
        [
            "float('nan')",
            "float('inf')",
            "10**23",
            "-10**23",
            "10**9",
            "-1",
            "0",
            "2.5",
            "None",
            "'x'",
            "True",
        ]
    )
    return [
        d.choice(
            [
                f"x = nl.par_dim({bad})",
                f"t = nl.ndarray(({bad}, 64), dtype=nl.float32, buffer=nl.sbuf)",
                f"t = nl.ndarray((10**9, {bad}), dtype=nl.float32, buffer=nl.shared_hbm)",
                f"i = nl.mgrid[{bad}:4, 0:4]",
                f"i = nl.arange({bad})[:, None]",
                f"r = nl.affine_range({bad})",
                f"v = nl.ds({bad}, {bad})",
                f"m = nl.max(nl.load(a), axis={bad})"
                if "a" in names
                else f"m = nl.max(0, axis={bad})",
                f"t = nl.zeros(({bad}, {bad}), dtype=nl.float32)",
            ]
        )
    ]


# Trace-time Python that must stay inside the budgets and the allow-list: exceptions that
# try to swallow a budget, generators that never end or pile up, the standard modules'
# combinatorics, getattr with names the allow-list refuses.
_PYTHON_FORMS = [
    "try:\n    s = sum(range({k}))\nexcept Exception:\n    s = 0",
    "try:\n    s = 'x' * {k} * {k}\nexcept BaseException as e:\n    s = str(e)",
    "try:\n    raise ValueError({a})\nexcept ValueError as e:\n    s = e.args",
    "try:\n    pass\nfinally:\n    raise KeyError({a})",
    "raise {a}",
    "raise",
    "def g():\n    while True:\n        yield {a}\ns = list(g())",
    "def g():\n    yield {a}\n    yield\ngs = [g() for _ in range({k})]\ns = [next(x) for x in gs]",
    "def g():\n    try:\n        yield 1\n    finally:\n        yield 2\nh = g()\ns = next(h)",
    "def g():\n    yield from range({k})",
    "f = lambda x, y={a}: x * y\ns = f({k})",
    "s = getattr({a}, '__class__')",
    "s = getattr(np, '_{a}', None)",
    "s = getattr(nl, 'float32')",
    "s = hasattr({a}, 'tofile')",
    "import itertools\ns = itertools.product([{a}], repeat={k})",
    "import itertools\ns = list(itertools.permutations(range(12)))",
    "import itertools\ns = itertools.combinations_with_replacement([1, 2], {k})",
    "import functools\ns = functools.reduce(lambda x, y: x + [y], range({k}), [])",
    "import functools\nf = functools.partial(print, {a})\nf()",
    "import collections\nd = collections.deque(range(1000)) * {k}",
    "import collections\nd = collections.defaultdict(lambda: [0] * {k})\ns = d[1]",
    "import copy\ns = copy.deepcopy([[{a}] * 1000] * 1000)",
    # device loops and scalars: endless or huge ones must end on the budgets
    "nl.fori_loop(0, {k}, lambda i: None)",
    "nl.fori_loop(0, {k}, lambda i: nl.fori_loop(0, {k}, lambda j: None))",
    "nl.while_loop({a}, lambda r: r)",
    "r = nisa.register_alloc({a})\nwhile r:\n    pass",
    "s = nisa.scalar_alu(nisa.register_alloc({a}), {k}, nl.divide)",
    "nl.if_else(nisa.register_alloc({a}), lambda: None, lambda: None)",
]


def _indent(lines: list[str], pad: str) -> list[str]:
    return [pad + line for line in lines]


# -- grammar-level generated kernels ---------------------------------------------------------

_DTYPES = ["nl.float32", "nl.float32", "nl.bfloat16", "nl.float16", "nl.int32"]
_SHAPES = ["(128, 64)", "(128, 64)", "(128, 64)", "(64, 64)", "(256, 64)", "(128, 1)"]
_BUFFERS = ["nl.sbuf", "nl.sbuf", "nl.sbuf", "nl.psum", "nl.hbm"]
HEADER = [
    "import nki",
    "import nki.isa as nisa",
    "import nki.language as nl",
    "import numpy as np",
    "import math",
    "import os",
    "",
]
KERNEL_PROLOGUE = [
    "@nki.jit",
    "def k(a):",
    "    rows = a.shape[0]",
    "    n = 1",
    "    i = 0",
    "    tiles = [nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)]",
    "    nisa.dma_copy(dst=tiles[0], src=a[0:128, 0:64])",
    "    acc = [nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)]",
]
GENERATED_CASE = (("a", "float32[256,128]"),)


def expression(d: Draw, depth: int = 0) -> str:
    if depth > 2 or d.boolean():
        return d.choice(["i", "n", "3", "0", "-2", "rows", "len(tiles)", "2.5"])
    op = d.choice(["+", "-", "*", "//", "%", "**", "<", "==", "and", "or"])
    return f"({expression(d, depth + 1)} {op} {expression(d, depth + 1)})"


def statement(d: Draw, depth: int = 0, trust: int = 0) -> list[str]:
    """A kernel-body statement over two pools of tiles, SBUF `tiles` of [128, 64] and PSUM
    `acc` of [64, 64] fp32, mostly used as the ISA expects (so that many kernels run) and
    sometimes not; with `trust` percent chance, a trust statement instead."""
    if trust and d.boolean(trust):
        return trust_statement(d)
    kind = d.choice(
        [
            "alloc",
            "copy",
            "binary",
            "binary",
            "scalar",
            "act",
            "matmul",
            "evict",
            "loop",
            "if",
            "assert",
            "assign",
            "store",
        ]
    )
    sb = f"tiles[{d.choice([0, -1, -1, 1, 5])}]"
    sb2 = f"tiles[{d.choice([0, -1, 0, 2])}]"
    ps = f"acc[{d.choice([0, 0, -1, 3])}]"
    if kind == "alloc":
        return [
            f"tiles.append(nl.ndarray({d.choice(_SHAPES)}, dtype={d.choice(_DTYPES)}, "
            f"buffer={d.choice(_BUFFERS)}))"
        ]
    if kind == "copy":
        return [f"nisa.tensor_copy(dst={sb}, src={sb2})"]
    if kind == "binary":
        op = d.choice(["nl.add", "nl.multiply", "nl.maximum", "nl.bitwise_and"])
        return [f"nisa.tensor_tensor(dst={sb}, data1={sb2}, data2={sb}, op={op})"]
    if kind == "scalar":
        return [
            f"nisa.tensor_scalar(dst={sb}, data={sb2}, op0=nl.multiply, operand0={expression(d)})"
        ]
    if kind == "act":
        return [
            f"nisa.activation(dst={sb}, op=nl.{d.choice(['exp', 'tanh'])}, data={sb2}, scale=0.5)"
        ]
    if kind == "matmul":
        return [f"nisa.nc_matmul(dst={ps}, stationary={sb2}, moving={sb})"]
    if kind == "evict":
        return [f"nisa.tensor_copy(dst=tiles[0][0:64, :], src={ps})"]
    if kind == "store":
        return [f"nisa.dma_copy(dst=a[0:{d.choice([128, 128, 64, 300])}, 0:64], src={sb})"]
    if kind == "assign":
        return [f"n = {expression(d)}"]
    if kind == "assert":
        return [f"assert {expression(d)}, f'n={{n}}'"]
    if depth >= 2:
        return ["pass"]
    body = [s for _ in range(d.integer(1, 3)) for s in statement(d, depth + 1, trust)]
    head = (
        f"for i in nl.affine_range({d.integer(0, 3)}):"
        if kind == "loop"
        else f"if {expression(d)}:"
    )
    return [head] + _indent(body, "    ")


def plain_kernel(d: Draw) -> str:
    """A generated kernel of tile statements only (valid syntax; no trust statements)."""
    body = [s for _ in range(d.integer(1, 8)) for s in statement(d)]
    lines = HEADER + KERNEL_PROLOGUE + _indent(body, "    ") + ["    return a"]
    return "\n".join(lines) + "\n"


def generated_example(d: Draw) -> Example:
    """A generated kernel with trust statements in its body, at module level (a constant
    the kernel uses) or in a helper module it imports."""
    body = [s for _ in range(d.integer(1, 6)) for s in statement(d, trust=35)]
    top: list[str] = []
    helpers: tuple[tuple[str, bytes], ...] = ()
    where = d.choice(["body", "body", "module", "helper"])
    if where == "module":
        stmt = trust_statement(d, BUILTIN_NAMES)
        top = stmt + [f"X = {_last_name(stmt)}", ""]
        body = ["y = X"] + body
    elif where == "helper":
        stmt = trust_statement(d, BUILTIN_NAMES)
        helper = "\n".join(HEADER + stmt + [f"X = {_last_name(stmt)}"]) + "\n"
        helpers = (("helper.py", _encode(helper)),)
        top = ["from helper import X", ""]
        body = ["y = X"] + body
    lines = HEADER + top + KERNEL_PROLOGUE + _indent(body, "    ") + ["    return a"]
    return Example(
        "generated",
        "generated.py",
        _encode("\n".join(lines) + "\n"),
        GENERATED_CASE,
        helpers,
        label=where,
    )


def _last_name(stmt: list[str]) -> str:
    """The name the statement binds (so that a constant built from it gets used)."""
    for line in reversed(stmt):
        m = re.match(r"^(\w+) = ", line)
        if m:
            return m.group(1)
    return "None"


# -- mutants of the kernels of kernels/ ------------------------------------------------------

TOKENS = [
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    ".",
    "=",
    "==",
    "+",
    "-",
    "*",
    "//",
    "%",
    "**",
    "0",
    "1",
    "-1",
    "128",
    "256",
    "513",
    "0.5",
    "None",
    "True",
    "'s'",
    'f"{x}"',
    "a",
    "nl",
    "nisa",
    "nl.psum",
    "nl.sbuf",
    "nl.float32",
    "nl.int8",
    "nl.add",
    "nl.exp",
    "\n",
    "    ",
    "\t",
    "if",
    "for",
    "in",
    "return",
    "lambda",
    "def",
    "class",
    "try:",
    "except:",
    "finally:",
    "raise",
    "yield",
    "lambda x=a: x",
    "nl.fori_loop",
    "nl.while_loop",
    "nisa.scalar_load",
    "nisa.register_alloc()",
    "getattr(a, 'shape')",
    "import itertools",
    "@",
    "#",
    "\\",
    '"""',
    "nisa.nc_matmul",
    "nisa.tensor_copy",
    "mask=",
    "dst=",
    "[:, None]",
    # what untrusted files try
    ".dump('x.npy')",
    ".tofile('x.bin')",
    ".tolist()",
    ".sum()",
    "np.arange(4)",
    ".format(len)",
    "'{0.fn.__globals__}'",
    "'{0.__class__}'",
    "% (len,)",
    " ** 10 ** 10",
    " * 10**9",
    "10**12",
    "range(10**9)",
    "sorted(range(10**8))",
    "'\x00'",
    "\x00",
    "'\\'",
    "f'{\\}'",
    "f'\\{1}'",
    "[" * 200,
    "(" * 200,
    "9" * 5000,
    "'" + "x" * 100000 + "'",
    "1+" * 2000,
    "\udcff",
    "\udcc3(",
    "nl.par_dim(",
    "float('nan')",
    "float('inf')",
    "10**23",
    "nl.mgrid[",
    "os.environ",
    "print(",
]


def token_mutant(d: Draw) -> Example:
    name = d.choice(sorted(SOURCES))
    text, case = SOURCES[name]
    for _ in range(d.integer(1, 4)):
        at = d.integer(0, len(text))
        cut = d.integer(0, 8)
        text = text[:at] + d.choice(TOKENS + [""]) + text[at + cut :]
    return Example("token", name, _encode(text), case, _helpers_for(text))


def byte_mutant(d: Draw) -> Example:
    name = d.choice(sorted(SOURCES))
    text, case = SOURCES[name]
    data = bytearray(text.encode())
    for _ in range(d.integer(1, 6)):
        data[d.integer(0, len(data) - 1)] = d.integer(0, 255)
    return Example("byte", name, bytes(data), case, _helpers_for(text))


def insertion_mutant(d: Draw) -> Example:
    """A real kernel (or its helper module) with trust statements inserted at a random line,
    indented like that line."""
    name = d.choice(sorted(SOURCES))
    text, case = SOURCES[name]
    helpers = dict(_helpers_for(text))
    target = name
    if helpers and d.boolean(30):
        target = d.choice(sorted(helpers))
    lines = (text if target == name else helpers[target].decode()).split("\n")
    for _ in range(d.integer(1, 2)):
        at = d.integer(0, len(lines) - 1)
        pad = re.match(r"[ \t]*", lines[at]).group(0)
        lines[at:at] = _indent(trust_statement(d, BUILTIN_NAMES), pad)
    new = _encode("\n".join(lines))
    if target == name:
        return Example("insert", name, new, case, tuple(helpers.items()))
    helpers[target] = new
    return Example("insert", name, _encode(text), case, tuple(helpers.items()), label=target)


def mutant(d: Draw) -> Example:
    return d.choice([token_mutant, byte_mutant, insertion_mutant, insertion_mutant])(d)


def any_example(d: Draw) -> Example:
    """Half generated kernels, half mutants of kernels/ (what the thorough campaign runs)."""
    return generated_example(d) if d.boolean() else mutant(d)


# -- regression examples: one per class of trust bug found -----------------------------------


def _kernel(
    body: list[str],
    top: list[str] = (),
    helper: str | None = None,
    label: str = "",
    raw: bytes | None = None,
) -> Example:
    lines = (
        HEADER
        + list(top)
        + ["", "@nki.jit", "def k(a):"]
        + _indent(body, "    ")
        + [
            "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)",
            "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)",
            "    nisa.dma_copy(dst=t, src=a)",
            "    nisa.dma_copy(dst=out, src=t)",
            "    return out",
        ]
    )
    source = raw if raw is not None else _encode("\n".join(lines) + "\n")
    helpers = (("helper.py", _encode(helper)),) if helper else ()
    return Example("regression", "k.py", source, (("a", "float32[128,64]"),), helpers, label)


REGRESSIONS: dict[str, Example] = {
    e.label: e
    for e in [
        # 1. host side effects from trace-time objects
        _kernel(["np.arange(3).dump('dumped.npy')"], label="np-dump-in-kernel"),
        _kernel(
            ["y = X"],
            top=["X = np.zeros(1).tofile('written.bin')"],
            label="np-tofile-module-constant",
        ),
        _kernel(
            ["y = X"],
            top=["from helper import X"],
            helper="import numpy as np\n\nX = np.arange(3).dump('dumped.npy')\n",
            label="np-dump-in-helper",
        ),
        _kernel(
            ["np.arange(3).dump('dumped.npy')", "assert False, 'fails after'"],
            label="np-dump-then-fail",
        ),
        # (the issue's example prints $HOME, which a kernel may read anyway through os.environ;
        # printing the globals it reaches shows the host objects themselves)
        _kernel(["print('{0.fn.__globals__}'.format(len))"], label="str-format-attributes"),
        _kernel(
            ["print('%s' % ('{0.fn.__globals__[os]}'.format(max),))"], label="str-format-in-percent"
        ),
        # 3. budgets
        _kernel(["n = 10 ** 10 ** 10"], label="power-tower"),
        _kernel(["n = pow(7, 10**8)"], label="pow-builtin"),
        _kernel(["n = sum(range(10**12))"], label="sum-huge-range"),
        _kernel(["s = 'x' * 3 * 10**9"], label="string-repetition"),
        _kernel(["s = sorted(range(10**8))"], label="sorted-huge-range"),
        _kernel(["s = '" + "x" * 2_000_000 + "'"], label="2MB-string-literal"),
        _kernel(["for _ in range(10**7):", "    pass"], label="empty-loop"),
        _kernel(
            [
                "z = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)",
                "for _ in range(10**6):",
                "    nisa.memset(dst=z, value=0.0)",
            ],
            label="million-memsets",
        ),
        # 4. internal errors
        _kernel(["print(f'x\x00{1}')"], label="fstring-nul"),
        _kernel(["print(f'\\{1}')"], label="fstring-backslash"),
        _kernel(["x = " + "[" * 1000 + "]" * 1000], label="1000-brackets"),
        _kernel(
            [" " * k + "if True:" for k in range(1000)] + [" " * 1000 + "pass"],
            label="1000-deep-if",
        ),
        _kernel(["n = " + "+".join(["1"] * 100_000)], label="100000-term-sum"),
        _kernel(["n = " + "9" * 4301], label="4301-digit-int"),
        _kernel(["x = nl.par_dim(float('nan'))"], label="par-dim-nan"),
        _kernel(["m = nl.max(nl.load(a), axis=10**23)"], label="reduce-axis-10**23"),
        _kernel(["i = nl.mgrid[float('inf'):4, 0:4]"], label="mgrid-inf"),
        _kernel(
            ["z = nl.ndarray((10**9, 10**9), dtype=nl.float32, buffer=nl.shared_hbm)"],
            label="ndarray-10**18",
        ),
        # non-UTF-8 bytes: an error about the file must say where
        _kernel(["s = 'caf\udce9'"], label="latin-1-byte-in-string"),
    ]
}


# -- running one example ---------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str
    message: str = ""
    elapsed: float = 0.0
    peak_rss: int = 0
    effects: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    def __str__(self) -> str:
        text = f"{self.kind} after {self.elapsed:.2f} s, peak RSS {self.peak_rss / 2**20:.0f} MiB"
        if self.effects:
            text += "\nhost effects:\n  " + "\n  ".join(self.effects[:5])
        return text + (f"\n{self.message}" if self.message else "")


def plant_canary() -> None:
    """Put `CANARY` where only a host object leads (builtins and the modules' globals): a
    kernel that prints it has reached the host's objects (e.g. through `str.format`)."""
    builtins.__neuronemu_canary__ = CANARY  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if (
            name.split(".")[0] in ("neuronemu", "isa", "numpy", "os", "sys", "math")
            and module is not None
        ):
            try:
                module._NEURONEMU_HOST_CANARY = CANARY
            except (AttributeError, TypeError):
                pass


def leaked(text: str, source: str) -> str | None:
    """A host-object signature in what the kernel printed (not one the file itself holds)."""
    for pattern in _LEAKS:
        m = pattern.search(text)
        if m and not pattern.search(source):
            start = max(0, m.start() - 80)
            return text[start : m.end() + 80]
    return None


_WARMED = False


def warm_up() -> None:
    """Import and run once what an ordinary kernel run needs (Numba's machine code, lazy
    imports), so that forked examples start warm; then plant the canary."""
    global _WARMED
    if _WARMED:
        return
    import neuronemu
    from neuronemu.errors import NeuronEmuError

    for name, (text, case) in list(SOURCES.items())[:3]:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            for helper, data in _helpers_for(text):
                (Path(tmp) / helper).write_bytes(data)
            neuronemu.run(path, _inputs(dict(case)), print_fn=lambda _: None)
            path.write_text(text + "\n@nki.jit\ndef broken(a):\n    return nosuch\n")
            try:
                neuronemu.run(path, _inputs(dict(case)), kernel="broken", print_fn=lambda _: None)
            except NeuronEmuError:
                pass
    plant_canary()
    _WARMED = True


def _inputs(case: dict[str, str]) -> dict[str, Any]:
    from neuronemu.inputs import parse_spec

    return {k: parse_spec(k, v, seed=0) for k, v in case.items()}


def _classify(example: Example, run: Callable[[], Any]) -> dict[str, Any]:
    """In the child: run, and say how it ended (JSON-able)."""
    from neuronemu.errors import NeuronEmuError, UsageError

    printed: list[str] = []
    size = [0]

    def print_fn(text: str) -> None:
        if size[0] < 1 << 20:
            printed.append(str(text)[: 1 << 16])
            size[0] += len(printed[-1])

    message = ""
    with HostGuard() as guard:
        try:
            run(print_fn)
            kind = "ran"
        except NeuronEmuError as err:
            message = err.render()
            first = message.splitlines()[0] if message else ""
            m = LOCATED.match(first)
            if m and int(m["line"]) >= 1 and int(m["col"]) >= 1:
                kind = "located"
            elif isinstance(err, UsageError) and example.utf8():
                kind = "usage"
            else:
                kind = "unlocated"
        except BaseException as exc:  # noqa: BLE001 - anything else is neuronemu's bug
            kind = "internal"
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8)
            message = "".join(tb)[-4000:]
    effects = _host_guard.describe(guard.effects)
    source = example.source.decode("utf-8", "replace") + "".join(
        d.decode("utf-8", "replace") for _, d in example.helpers
    )
    leak = leaked("\n".join(printed) + "\n" + message, source)
    if leak is not None:
        effects.append(f"printed a host object: ...{leak}...")
    if effects:
        kind = "host-effect"
    return {"kind": kind, "message": message[:4000], "effects": effects[:20]}


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_in_child(
    fn: Callable[[], dict[str, Any]],
    time_limit: float = TIME_LIMIT_S,
    rss_limit: int = RSS_LIMIT,
    cwd: str | None = None,
) -> Outcome:
    """Run `fn` in a forked child; its dict result comes back through a pipe.

    The child is killed at `time_limit`. Its peak resident set is the `ru_maxrss` that
    `os.wait4` returns for it (the kernel's high-water mark for that process: exact, nothing
    sampled), less the resident set it started with: a forked child counts its parent's
    pages from the start, and the parent (pytest, late in a long run) may be large. An
    address-space limit of (the parent's size + rss_limit + 1 GiB) in the child is only a
    safety net against taking the machine down.
    """
    read_fd, write_fd = os.pipe()
    vm = _vm_size()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            faulthandler.disable()  # pytest's, writing to a saved copy of stderr
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            cap = vm + rss_limit + (1 << 30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if cwd:
                os.chdir(cwd)
            base_rss = _rss_now()
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001
                result = {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}
            result["base_rss"] = base_rss
            data = json.dumps(result).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        except BaseException:  # noqa: BLE001
            status = 3
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks: list[bytes] = []
    timed_out = False
    deadline = start + time_limit
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
    if timed_out:
        _kill(pid)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.monotonic() - start
    _kill(pid)  # anything the example left behind in its process group
    try:
        result = json.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        result = None
    peak = usage.ru_maxrss * 1024 - int((result or {}).get("base_rss", 0))
    if timed_out:
        return Outcome("timeout", f"killed after {time_limit:.0f} s", elapsed, peak)
    if peak > rss_limit:
        result = result or {}
        return Outcome(
            "over-memory",
            f"peak RSS {peak / 2**20:.0f} MiB > "
            f"{rss_limit >> 20} MiB; the run ended as "
            f"{result.get('kind', '?')}: {result.get('message', '')}"[:4000],
            elapsed,
            peak,
            result.get("effects", []),
        )
    if result is None:
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {-code}" if code < 0 else f"exit {code}"
        return Outcome("crash", f"the child died ({how}) without a result", elapsed, peak)
    return Outcome(
        result["kind"], result.get("message", ""), elapsed, peak, result.get("effects", [])
    )


def _rss_now() -> int:
    """This process's resident set now (bytes; 0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def run_example(
    example: Example, time_limit: float = TIME_LIMIT_S, rss_limit: int = RSS_LIMIT
) -> Outcome:
    """Write the example's files to a fresh directory and run it there (the cwd, too) with
    neuronemu's real default caps, in a forked child under the host-effect guard."""
    warm_up()
    import neuronemu

    workdir = tempfile.mkdtemp(prefix="neuronemu-fuzz-")
    try:
        path = Path(workdir) / example.name
        path.write_bytes(example.source)
        for name, data in example.helpers:
            (Path(workdir) / name).write_bytes(data)

        def child() -> dict[str, Any]:
            inputs = _inputs(dict(example.case))
            return _classify(
                example, lambda print_fn: neuronemu.run(path, inputs, print_fn=print_fn)
            )

        outcome = run_in_child(child, time_limit, rss_limit, cwd=workdir)
        stray = sorted(set(os.listdir(workdir)) - {example.name, *dict(example.helpers)})
        if stray:  # written where the guard did not look (it should have)
            outcome.effects.append(f"new files in the working directory: {stray}")
            if not outcome.failed:
                outcome.kind = "host-effect"
        return outcome
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = [
    "Draw",
    "RandomDraw",
    "HypothesisDraw",
    "Example",
    "Outcome",
    "SOURCES",
    "HELPERS",
    "REGRESSIONS",
    "TOKENS",
    "trust_statement",
    "statement",
    "expression",
    "plain_kernel",
    "generated_example",
    "token_mutant",
    "byte_mutant",
    "insertion_mutant",
    "mutant",
    "any_example",
    "run_example",
    "run_in_child",
    "warm_up",
    "plant_canary",
    "leaked",
    "OUTCOMES",
    "FAILURES",
    "FINE",
    "TIME_LIMIT_S",
    "RSS_LIMIT",
    "asdict",
]
