"""The fuzz campaign's parts, shared by the property tests (`tests/property/test_fuzz_*.py`)
and the thorough campaign (`benches/fuzz.py`):

- generators of kernel files: grammar-level generated kernels and mutants of every kernel in
  `kernels/` (token edits, byte edits, inserted statements), including what untrusted files
  try: trace-time NumPy methods that write files (`.dump`, `.tofile`), `str.format` and `%`
  formatting that follow attributes, huge literals, powers, shifts and repetitions, deep
  nesting, non-UTF-8 bytes, f-strings with odd fields;
- `REGRESSIONS`: one fixed example per class of trust bug found so far;
- `run_example`: runs one example in a forked child of the calling (warmed-up) process, with
  the default caps (but `FUZZ_LIMITS`), the host-effect guard armed, a wall-clock
  limit and the child's peak resident set measured, and classifies the outcome.

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

from neuronemu.nasm.write import dumps

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
RSS_LIMIT = 3 << 29  # an example whose peak resident set passes 1.5 GiB is a failure
# The budgets every example runs with: neuronemu's defaults but for two named smaller ones
# (issue 38: every attack ends within 10 s and 1.5 GB "with the default limits or the
# smaller one named"). The default data budget, 4 GiB, and trace budget, 20 s, are sized
# for real kernels; fuzz inputs are tiny. A process may hold its data budget plus 1 GiB of
# headroom (neuronemu, NumPy, Numba: limits._PROCESS_HEADROOM_BYTES) before its resident
# set is refused, so the data budget is 256 MiB: the whole then stays inside RSS_LIMIT with
# room for the overshoot between two readings of the resident set (with 1 GiB, a copy loop
# of Python lists may legitimately reach 2 GiB: seed 20261205, example 1150; with 512 MiB
# it ended 66 MiB inside). A trace-time exhauster ends by about 8 s: a pass after tracing
# that no budget stops shows as a timeout.
FUZZ_LIMITS = {"memory_bytes": 1 << 28, "trace_seconds": 8.0}
# A sweep runs each configuration within budgets of its own, so a sweep's work is bounded by
# its configurations times them: at most SWEEP_CONFIGS (more is a usage error), each with
# SWEEP_LIMITS, stays inside two thirds of TIME_LIMIT_S (the rest for starting processes and
# two workers sharing two cores). (With 2 s and 3 s, eight configurations of 66,000
# instructions each took 30 s: seed 20261212, example 17552.)
SWEEP_CONFIGS = 8
SWEEP_LIMITS = {**FUZZ_LIMITS, "trace_seconds": 1.0, "run_seconds": 1.5}
assert SWEEP_CONFIGS * (SWEEP_LIMITS["trace_seconds"] + SWEEP_LIMITS["run_seconds"]) <= (
    TIME_LIMIT_S * 2 / 3
)
FAILURES = ("host-effect", "timeout", "over-memory", "crash", "internal", "unlocated")
FINE = ("ran", "located", "usage")
OUTCOMES = FINE + FAILURES

LOCATED = re.compile(r"^(?P<path>\S(?:.*?\S)?):(?P<line>\d+):(?P<col>\d+): error: ")
# Printed text that only a host object gives (a kernel's own values never print like this).
CANARY = "NEURONEMU-HOST-CANARY-7f3a"
# What the files outside a kernel's folder hold (helpers under OUTSIDE, beside the kernel's
# folder): a kernel that prints it has read a file it must not reach.
HOST_SECRET = "NEURONEMU-HOST-SECRET-91c4"
OUTSIDE = "host/"
# A helper named `name -> target` is a symbolic link: to `target` as written, to a path in
# the example's folder (`@/path`, made absolute), or a FIFO (`|fifo`).
LINK = " -> "
_LEAKS = (
    re.compile(re.escape(CANARY)),
    re.compile(re.escape(HOST_SECRET)),
    re.compile(r"(?<![\w-])(?:PATH|HOME)=/"),  # /proc/self/environ
    re.compile(r"root:x?:0:0:"),  # /etc/passwd
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


# Files beside a kernel that hold data, not code: no position in them is owed in an error.
_DATA_FILES = (".npy", ".npz", ".json", ".jsonl")


@dataclass(frozen=True)
class Example:
    """A kernel file (bytes: it need not be UTF-8), the files beside it, and its inputs."""

    kind: str
    name: str
    source: bytes
    case: tuple[tuple[str, str], ...]
    helpers: tuple[tuple[str, bytes], ...] = ()
    label: str = ""
    # How it is run, besides `neuronemu.run(path, inputs)`: "kernel" (the function to run),
    # "grid" ("2" or "2,1"), "target", "npz" (a file of `helpers` loaded as `--inputs`),
    # "params" (`--param` texts, one a line: a sweep) and "where" (the sweep's `--where`).
    options: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        text = self.source.decode("utf-8", "backslashreplace")
        if len(text) > 6000:
            text = text[:3000] + f"\n... [{len(text) - 6000} characters] ...\n" + text[-3000:]
        helpers = "".join(
            f"\n--- {n} ---\n{d.decode('utf-8', 'backslashreplace')[:3000]}"
            for n, d in self.helpers
        )
        shown = {k: v if len(v) < 300 else v[:300] + "..." for k, v in self.options}
        options = f", options {shown}" if self.options else ""
        return (
            f"Example({self.kind}{' ' + self.label if self.label else ''}, {self.name}, "
            f"inputs {dict(self.case)}{options})\n--- {self.name} ---\n{text}{helpers}"
        )

    def utf8(self) -> bool:
        """Whether its code files (the kernel and helper modules: not data files such as
        `.npy`, `.npz` or a sweep's results) are UTF-8."""
        code = [d for n, d in self.helpers if not n.split(" -> ")[0].endswith(_DATA_FILES)]
        try:
            for data in (self.source, *code):
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
            # (a list of pairs where a name comes twice, which a dict would merge)
            "helpers": (
                {n: d.decode("utf-8", "surrogateescape") for n, d in self.helpers}
                if len({n for n, _ in self.helpers}) == len(self.helpers)
                else [[n, d.decode("utf-8", "surrogateescape")] for n, d in self.helpers]
            ),
            "options": dict(self.options),
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
                for n, d in _pairs(data.get("helpers", {}))
            ),
            data.get("label", ""),
            tuple(data.get("options", {}).items()),
        )


def _pairs(helpers: Any) -> list[tuple[str, str]]:
    """A JSON example's helpers: {name: text}, or [[name, text], ...] (a name twice)."""
    return list(helpers.items()) if isinstance(helpers, dict) else [tuple(p) for p in helpers]


def _encode(text: str) -> bytes:
    # Lone surrogates U+DC80..U+DCFF stand for raw bytes (non-UTF-8 files).
    return text.encode("utf-8", "surrogateescape")


# -- the kernels of kernels/ -----------------------------------------------------------------


def _kernel_sources() -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """Every kernel of kernels/ with its smallest reference case."""
    from neuronemu.report.reference import discover_cases

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


# -- the features added since the first campaign ---------------------------------------------
#
# Each kind makes valid-ish kernels (or files) around one feature, from the syntax of
# tests/unit (test_device_loops, test_lnc, test_sweep, test_inputs...), with odd values in
# its slots; about a third are then mutated with tokens of that feature.

_FEATURE_TOKENS = [
    "nl.fori_loop(0, 3, lambda i: None)",
    "nl.while_loop(",
    "nl.dynamic_range(",
    "nl.if_else(",
    "nisa.scalar_load(",
    "nisa.scalar_store(",
    "nisa.register_alloc(",
    "nisa.register_load(",
    "nisa.register_move(",
    "scalar_offset=",
    "indirect_dim=",
    "nl.program_id(",
    "nl.num_programs(",
    "nl.nc(2)",
    "nisa.core_barrier(",
    "nisa.sendrecv(",
    "nl.shared_hbm",
    "[2]",
    "yield",
    "yield from ",
    "try:",
    "except Exception:",
    "finally:",
    "raise ValueError()",
    "raise",
    "return",
    "break",
    "continue",
    "lambda r: r",
    "2**31",
    "-2**31",
    "10**6",
    "count",
    "i",
    "me",
]


def _mostly(d: Draw, options: Sequence[Any], good: int = 1, percent: int = 84) -> Any:
    """One of the first `good` options (the valid ones) `percent` of the time, else any."""
    return d.choice(options[:good]) if d.boolean(percent) else d.choice(options)


def _feature_mutant(d: Draw, text: str, percent: int = 25) -> tuple[str, str]:
    """`text`, or with `percent` chance a token mutant of it; and which it is."""
    if not d.boolean(percent):
        return text, "valid"
    lines = text.split("\n")
    for _ in range(d.integer(1, 3)):
        at = d.integer(0, len(lines) - 1)
        line = lines[at]
        col = d.integer(0, len(line))
        cut = d.integer(0, 6)
        token = d.choice(_FEATURE_TOKENS + TOKENS[:40] + [""])
        lines[at] = line[:col] + token + line[col + cut :]
    return "\n".join(lines), "mutant"


def _feature_example(
    d: Draw,
    kind: str,
    body: list[str],
    case: tuple[tuple[str, str], ...],
    top: Sequence[str] = (),
    tail: Sequence[str] = (),
    options: tuple[tuple[str, str], ...] = (),
    label: str = "",
) -> Example:
    text = "\n".join(HEADER + list(top) + body + list(tail)) + "\n"
    text, how = _feature_mutant(d, text)
    return Example(kind, f"{kind}.py", _encode(text), case, (), f"{label} {how}".strip(), options)


# Device loops: nl.fori_loop, nl.while_loop, nl.if_else, the older nl.dynamic_range and
# `while reg:` (tests/unit/test_device_loops.py).
_ROW = "[[F, 1], [1, F]]"
_OFFSETS = ["i", "i", "i + 1", "7 - i", "i * 2", "count", "n_sb", "0", "-1", "i // 2", "R"]
_BOUNDS = [
    "count",
    "count",
    "3",
    "0",
    "R",
    "nisa.scalar_load(n_sb)",
    "count + 1",
    "count * 2",
    "reg",
    "10**6",
    "2**31",
    "-2**40",
    "-1",
    "1.5",
    "None",
    "n_sb",
    "True",
]
_STEPS = ["", "", "", ", step=2", ", step=0", ", step=-1", ", step=count", ", step=2**32"]


def _loop_body(d: Draw, var: str, depth: int) -> list[str]:
    off = (
        _mostly(d, _OFFSETS, 2).replace("i", var)
        if var
        else _mostly(d, ["count", "0", "1", "n_sb"], 3)
    )
    lines: list[str] = []
    for _ in range(d.integer(1, 4)):
        what = _mostly(d, ["load", "add", "store", "scale", "memset", "nest", "odd"], 6)
        if what == "load":
            lines += [
                "t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)",
                f"nisa.dma_copy(dst=t, src=data.ap({_ROW}, scalar_offset={off}, indirect_dim=0))",
            ]
        elif what == "add":
            lines.append(
                f"nisa.tensor_tensor(dst=acc, data1=acc, data2={d.choice(['t', 'acc'])}, op=nl.add)"
            )
        elif what == "store":
            lines.append(
                f"nisa.dma_copy(dst=out.ap({_ROW}, scalar_offset={off}, indirect_dim=0), "
                f"src={d.choice(['acc', 't', 'zero'])})"
            )
        elif what == "scale":
            lines.append("nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=0.5)")
        elif what == "memset":
            lines.append("nisa.memset(dst=acc, value=0.0)")
        elif what == "nest" and depth < 2:
            lines += _device_loop(d, depth + 1)
        else:
            lines.append(
                d.choice(
                    [
                        "kept.append(acc)",
                        "return out",
                        "nisa.register_move(reg, reg + 1)",
                        f"print({var or 'count'})",
                        f"x = {var or 'count'} // 2",
                        f"if {var or 'count'} > 0:\n    pass",
                        "nisa.core_barrier(out, (0, 1))",
                        "nl.device_print('acc', acc)",
                        f"y = [{var or 'count'}] * 3",
                    ]
                )
            )
    return [part for line in lines for part in line.split("\n")]


def _device_loop(d: Draw, depth: int = 0) -> list[str]:
    j = d.integer(0, 99)
    form = d.choice(["fori", "fori", "while", "if_else", "dynamic_range", "while_reg", "lambda"])
    if form == "fori":
        lower, upper = _mostly(d, ["0", "1", "count", "-3"], 2), _mostly(d, _BOUNDS, 6)
        return (
            [f"def body{j}(i{j}):"]
            + _indent(_loop_body(d, f"i{j}", depth), "    ")
            + [f"nl.fori_loop({lower}, {upper}, body{j}{_mostly(d, _STEPS, 4)})"]
        )
    if form == "while":
        dec = _mostly(d, ["1", "2", "count", "0", "-1", "None", "0.5"], 3)
        init = _mostly(d, ["nisa.scalar_load(n_sb)", "count", "reg", "count - 1", "3", "n_sb"], 4)
        return (
            [f"def again{j}(r{j}):"]
            + _indent(_loop_body(d, f"r{j}", depth) + [f"return r{j} - {dec}"], "    ")
            + [f"nl.while_loop({init}, again{j})"]
        )
    if form == "if_else":
        cond = _mostly(
            d, ["count > 0", "count", "reg", "count == 2", "count < R", "True", "n_sb"], 5
        )
        other = d.choice(["", f", other{j}", f", other{j}", ", None", ", 3"])
        return (
            [f"def then{j}():"]
            + _indent(_loop_body(d, "", depth), "    ")
            + [f"def other{j}():"]
            + _indent(_loop_body(d, "", depth), "    ")
            + [f"nl.if_else({cond}, then{j}{other})"]
        )
    if form == "dynamic_range":
        args = _mostly(
            d, ["reg", "0, reg, 1", "count", "4", "reg, 10", "0, reg, 0", "0, reg, -1"], 4
        )
        return [f"for i{j} in nl.dynamic_range({args}):"] + _indent(
            _loop_body(d, f"i{j}", depth), "    "
        )
    if form == "while_reg":
        test = _mostly(d, ["flag", "flag < 3", "flag > count", "not flag"], 2)
        return [
            "left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)",
            "nisa.dma_copy(dst=left, src=n)",
            f"flag = nisa.register_alloc({d.choice(['left', 'left', '0', '3', 'n_sb'])})",
            f"while {test}:",
        ] + _indent(
            _loop_body(d, "", depth)
            + [
                "nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1)",
                d.choice(["nisa.register_load(flag, left)", "pass", "nisa.register_move(flag, 0)"]),
            ],
            "    ",
        )
    return [
        f"nl.fori_loop(0, {d.choice(_BOUNDS)}, lambda i{j}: "
        f"{d.choice(['None', 'i' + str(j), 'nisa.memset(dst=acc, value=1.0)'])})"
    ]


def device_loop_example(d: Draw) -> Example:
    rows = d.choice(["8", "8", "16", "128", "1"])
    lo, hi = d.choice([(0, 9), (0, 9), (0, 2), (-3, 3), (0, 10**6), (2**31 - 2, 2**31 - 1)])
    n_spec = _mostly(
        d,
        [
            f"int32[1,1]~randint({lo},{hi})",
            "int32[1,1]~zeros",
            "float32[1,1]",
            "int32[2,2]",
            "int8[1,1]~ones",
        ],
        2,
    )
    body = [
        "@nki.jit",
        "def k(data, n):",
        "    R, F = data.shape",
        "    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)",
        "    zero = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=out, src=zero)",
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=n_sb, src=n)",
        "    count = nisa.scalar_load(n_sb)",
        f"    reg = nisa.register_alloc({_mostly(d, ['n_sb', '0', '2', 'count'], 3)})",
        "    acc = nl.zeros((1, F), dtype=data.dtype, buffer=nl.sbuf)",
        "    t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)",
        "    nisa.memset(dst=t, value=1.0)",
        "    kept = []",
    ]
    for _ in range(d.integer(1, 3)):
        body += _indent(_device_loop(d), "    ")
    body += ["    nisa.dma_copy(dst=out[0:1, :], src=acc)", "    return out"]
    case = (("data", f"float32[{rows},16]"), ("n", n_spec))
    return _feature_example(d, "loops", body, case)


# NkiScalar: scalar_load / scalar_store, register arithmetic, scalar_offset
# (tests/unit/test_device_loops.py SCALARS, the older register API).
_SCALAR_OPS = [
    "+",
    "-",
    "*",
    "<",
    ">",
    "==",
    "!=",
    "<=",
    "&",
    "|",
    "^",
    "<<",
    ">>",
    "//",
    "%",
    "/",
    "**",
    "and",
    "or",
]
_ALU_OPS = [
    "nl.divide",
    "nl.fmod",
    "nl.maximum",
    "nl.minimum",
    "nl.add",
    "nl.subtract",
    "nl.multiply",
    "nl.power",
    "nl.bitwise_and",
    "nl.left_shift",
    "nl.exp",
    "nl.equal",
]


def _scalar_expr(d: Draw, depth: int = 0) -> str:
    if depth > 2 or d.boolean(40):
        return _mostly(
            d,
            [
                "x",
                "y",
                "x",
                "y",
                "3",
                "0",
                "-1",
                "2**31 - 1",
                "-2**31",
                "2**40",
                "1.5",
                "reg",
                "True",
                "None",
                "nl.int32",
            ],
            6,
            95,
        )
    form = _mostly(d, ["op", "alu", "neg", "call"], 2)
    a, b = _scalar_expr(d, depth + 1), _scalar_expr(d, depth + 1)
    if form == "op":
        return f"({a} {_mostly(d, _SCALAR_OPS, 7)} {b})"
    if form == "alu":
        return f"nisa.scalar_alu({a}, {b}, op={_mostly(d, _ALU_OPS, 7)})"
    if form == "neg":
        return f"{d.choice(['-', '~', 'not ', '+'])}{a}"
    return f"{d.choice(['abs', 'int', 'float', 'bool', 'str', 'hash', 'min', 'round'])}({a})"


def scalar_example(d: Draw) -> Example:
    dtype = _mostly(d, ["int32", "float32", "int8", "uint32"])
    shape = _mostly(d, ["1,1", "2,2", "1"])
    lo, hi = d.choice([(-20, 20), (-20, 20), (2**31 - 4, 2**31 - 1), (-(2**31), -(2**31) + 3)])
    spec = f"{dtype}[{shape}]~randint({lo},{hi})" if "int" in dtype else f"{dtype}[{shape}]"
    n = d.integer(1, 4)
    values = ", ".join(_scalar_expr(d) for _ in range(n))
    tile_dtype = _mostly(d, ["nl.int32", "nl.float32", "nl.bfloat16", "nl.int8"])
    load = _mostly(
        d,
        [
            "nisa.scalar_load(sa)",
            "nisa.scalar_load(sa[0:1, 0:1])",
            "nisa.scalar_load(a)",
            "nisa.scalar_load(big)",
            "nisa.scalar_load(3)",
            "nisa.register_alloc(sa)",
        ],
        2,
    )
    store = _mostly(
        d,
        [
            "nisa.scalar_store(cell, v)",
            "nisa.scalar_store(out[0:1, j:j + 1], v)",
            "nisa.scalar_store(big, v)",
            "nisa.register_store(cell, v)",
            "nisa.scalar_store(v, cell)",
            "nisa.register_load(reg, cell)",
        ],
    )
    extra = d.choice(
        [
            [],
            [],
            [
                "data = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf)",
                "nisa.memset(dst=data, value=1.0)",
                "row = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)",
                "nisa.tensor_copy(dst=row, src=data.ap([[8, 1], [1, 8]], "
                f"scalar_offset={_scalar_expr(d)}, indirect_dim=0))",
            ],
            [
                f"reg = nisa.register_alloc({_mostly(d, ['sa', '0', 'x', '2**31', 'None'], 2)})",
                f"nisa.register_move(reg, {_scalar_expr(d)})",
            ],
            [f"nl.fori_loop(0, {_scalar_expr(d)}, lambda i: nisa.scalar_store(cell, i + x))"],
            [f"if {_scalar_expr(d)}:", "    pass"],
            [f"s = [x] * {d.choice(['3', 'x', '10**7'])}"],
            [f"t = nl.ndarray(({_scalar_expr(d)}, 8), dtype=nl.float32, buffer=nl.sbuf)"],
        ]
    )
    body = [
        "@nki.jit",
        "def k(a, b):",
        f"    out = nl.ndarray((1, {n}), dtype={tile_dtype}, buffer=nl.shared_hbm)",
        "    sa = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)",
        "    sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)",
        "    big = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)",
        "    cell = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=sa, src=a)",
        "    nisa.dma_copy(dst=sb, src=b)",
        f"    x = {load}",
        "    y = nisa.scalar_load(sb)",
        "    reg = nisa.register_alloc(0)",
        *_indent(extra, "    "),
        f"    values = [{values}]",
        "    for j, v in enumerate(values):",
        f"        cell = nl.ndarray((1, 1), dtype={tile_dtype}, buffer=nl.sbuf)",
        f"        {store}",
        "        nisa.dma_copy(dst=out[0:1, j:j + 1], src=cell)",
        "    return out",
    ]
    return _feature_example(d, "scalar", body, (("a", spec), ("b", spec)))


# LNC2 launches: `kernel[2]`, nl.nc(2), nl.program_id, core_barrier, sendrecv, shared HBM
# (tests/unit/test_lnc.py).
_GRIDS = [
    "2",
    "2",
    "nl.nc(2)",
    "nl.nc(2)",
    "nl.nc(2) * 2",
    "nl.spmd_dim(nl.nc(2), 2)",
    "2, 1",
    "1",
    "nl.nc(3)",
    "nl.nc(0)",
    "0",
    "-1",
    "4096",
    "4097",
    "10**6",
    "nl.nc(2), nl.nc(2)",
    "'x'",
    "1.5",
    "nl.nc(2.0)",
    "(2,)",
    "None",
]
_RANKS = ["1 - me", "1 - me", "1 - me", "me", "0", "1", "2", "-1", "True", "nl.program_id(0)"]


def _lnc_statement(d: Draw) -> list[str]:
    kind = _mostly(d, ["sendrecv", "barrier", "scratch", "compute", "odd", "loop", "if"], 4)
    if kind == "sendrecv":
        dst = _mostly(d, ["got", "mine", "odd_shape", "hbm_tile"], 2)
        return [
            f"nisa.sendrecv(src={_mostly(d, ['mine', 'got', 'scratch'], 2)}, dst={dst}, "
            f"send_to_rank={_mostly(d, _RANKS)}, recv_from_rank={_mostly(d, _RANKS)}, "
            f"pipe_id={_mostly(d, ['0', '1', '-1', 'me', '2**40'], 2)})"
        ]
    if kind == "barrier":
        call = d.choice(["nisa.core_barrier", "nisa.core_barrier", "nki.lnc.core_barrier"])
        data = _mostly(d, ["scratch", "out", "mine", "a", "None"], 2)
        cores = _mostly(d, ["(0, 1)", "[0, 1]", "(1, 0)", "(0, 1, 2)", "0", "(me, 1 - me)"], 2)
        engine = _mostly(d, ["", ", engine=nisa.vector_engine", ", engine=3"])
        return [f"{call}({data}, {cores}{engine})"]
    if kind == "scratch":
        half = d.choice(["me", "me", "1 - me", "0"])
        return [
            f"nisa.dma_copy(dst=scratch[{half} * half:({half} + 1) * half, :], src=mine)",
            "nisa.dma_copy(dst=got, src=scratch[(1 - me) * half:(2 - me) * half, :])",
        ]
    if kind == "compute":
        return [
            "nisa.tensor_tensor(dst=mine, data1=mine, "
            f"data2={d.choice(['got', 'mine'])}, op=nl.add)"
        ]
    if kind == "loop":
        return (
            ["def body(i):"]
            + _indent(_lnc_statement(d), "    ")
            + [f"nl.fori_loop(0, {d.choice(['2', 'me + 1', '0'])}, body)"]
        )
    if kind == "if":
        return [f"if me == {d.choice(['0', '1'])}:"] + _indent(_lnc_statement(d), "    ")
    return [
        d.choice(
            [
                f"p = nl.program_id({d.choice(['1', '2', '-1', '5', 'None'])})",
                f"p = nl.num_programs({d.choice(['', '0', '1', '(0, 1)'])})",
                "print(me, nl.num_programs(0))",
                "me = 3",
                "half = half + 1",
                "nisa.dma_copy(dst=out, src=a)",
                "s = [nl.program_id(0) for _ in range(3)]",
            ]
        )
    ]


def lnc_example(d: Draw) -> Example:
    rows = _mostly(d, ["256", "128", "130", "512"], 2)
    body = (
        ['os.environ["NEURON_LOGICAL_NC_CONFIG"] = ' + repr(d.choice(["2", "1", "3", "x", ""]))]
        if d.boolean(10)
        else []
    )
    body += [
        "@nki.jit",
        "def k(a):",
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)",
        "    scratch = nl.ndarray(a.shape, dtype=a.dtype, "
        f"buffer={_mostly(d, ['nl.shared_hbm', 'nl.hbm', 'nl.sbuf'])})",
        "    me = nl.program_id(0)",
        f"    half = a.shape[0] // {_mostly(d, ['2', 'nl.num_programs(0)', '3'], 2)}",
        "    mine = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)",
        "    got = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)",
        "    odd_shape = nl.ndarray((half, 8), dtype=a.dtype, buffer=nl.sbuf)",
        "    hbm_tile = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)",
        "    nisa.dma_copy(dst=mine, src=a[me * half:(me + 1) * half, :])",
        "    nisa.memset(dst=got, value=0.0)",
    ]
    for _ in range(d.integer(1, 4)):
        body += _indent(_lnc_statement(d), "    ")
    body += [
        "    nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=got)",
        f"    return {d.choice(['out', 'out, scratch', 'out, scratch'])}",
        "",
        "",
        "def launch(a):",
        f"    return k[{_mostly(d, _GRIDS, 4)}](a)",
    ]
    how = _mostly(d, ["launch", "grid", "trn1"], 2)
    options: tuple[tuple[str, str], ...] = (("kernel", "launch"),)
    if how == "grid":
        options = (("kernel", "k"), ("grid", d.choice(["2", "2", "1", "2,1", "3"])))
    elif how == "trn1":
        options = (("kernel", "launch"), ("target", d.choice(["trn1", "trn3"])))
    return _feature_example(
        d, "lnc", body, (("a", f"float32[{rows},64]"),), options=options, label=how
    )


# Generators and exceptions in trace-time Python: yield, try/except/else/finally, raise;
# caught and uncaught, around NKI calls and tiles; frames and tracebacks they expose.
_EXC_FORMS = """
def gen(n):
    for j in range(n):
        yield j * {v}
s = list(gen({n}))

def gen():
    x = yield 1
    yield x
g = gen()
next(g)
s = g.send({v})

def gen():
    yield 1
g = gen()
g.close()
s = list(g)

def gen():
    try:
        yield 1
    except ValueError:
        yield 2
g = gen()
next(g)
s = g.throw(ValueError)

def gen():
    yield 1
g = gen()
next(g)
s = g.throw({v})

def gen():
    yield from gen2()
def gen2():
    yield {v}
    return 5
s = list(gen())

def gen():
    raise StopIteration
    yield 1
s = list(gen())

def gen():
    yield 1
g = gen()
s = g.gi_frame

def gen():
    yield 1
g = gen()
s = g.gi_frame.f_globals
print(s)

def gen():
    yield 1
s = gen().gi_code

def tiles(n):
    for j in range(n):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=j)
        yield t
for t in tiles({n}):
    nisa.tensor_copy(dst=tt, src=t)

s = sum(x * {v} for x in range({n}))

g = (x for x in range({n}))
s = next(g), next(g, None)

f = lambda: (yield)
s = list(f())

def f(n):
    return f(n + 1)
s = f(0)

def f(n):
    return f(n + 1)
try:
    s = f(0)
except RecursionError:
    s = 0

try:
    raise ValueError({v})
except ValueError as e:
    s = e.args
else:
    s = 1
finally:
    s = 2

try:
    raise KeyError({v})
except (ValueError, KeyError) as e:
    print(repr(e))

try:
    raise ValueError({v})
except Exception as e:
    s = e.__traceback__

try:
    raise ValueError({v})
except Exception as e:
    s = e.__traceback__.tb_frame.f_globals
    print(s)

try:
    raise ValueError({v})
except Exception as e:
    s = e.with_traceback(None)

try:
    raise ValueError({v})
except Exception as e:
    raise RuntimeError('again') from e

try:
    raise ValueError({v})
except ValueError:
    raise

try:
    raise ValueError({v}) from {v}
except TypeError as e:
    s = str(e)

try:
    pass
except (ValueError, nl.float32):
    pass

try:
    raise nl.float32
except Exception as e:
    s = e

try:
    raise {v}
except BaseException as e:
    s = type(e)

try:
    t = nl.ndarray(({v}, 64), dtype=nl.float32, buffer=nl.sbuf)
except Exception as e:
    print(e)

try:
    nisa.nc_matmul(dst=tt, stationary=tt, moving=tt)
except Exception as e:
    s = e.args

try:
    nisa.tensor_copy(dst=tt, src={v})
except:
    pass

try:
    s = 1 / 0
except ZeroDivisionError as e:
    s = e
finally:
    nisa.memset(dst=tt, value=0.0)

for j in range({n}):
    try:
        continue
    finally:
        nisa.memset(dst=tt, value=j)

for j in range({n}):
    try:
        raise ValueError(j)
    except ValueError:
        break
    finally:
        s = j

def f():
    try:
        return 1
    finally:
        return {v}
s = f()

def f():
    try:
        raise ValueError
    finally:
        return 2
s = f()

class E(Exception):
    pass
try:
    raise E({v})
except E as e:
    s = e.args

class E(Exception):
    def __str__(self):
        return {v}
raise E()

class E(BaseException):
    pass
raise E({v})

raise ValueError({v})

raise SystemExit({v})

raise KeyboardInterrupt

raise GeneratorExit

raise MemoryError

raise RecursionError

raise StopIteration({v})

assert {v}, {v}

try:
    assert False, {v}
except AssertionError as e:
    s = e

try:
    raise ExceptionGroup('g', [ValueError({v})])
except* ValueError as e:
    s = e

e = ValueError({v})
e.__cause__ = e
raise e

e = ValueError()
e.args = ({v},) * 10**7
raise e

def gen():
    while True:
        try:
            yield 1
        except GeneratorExit:
            yield 2
g = gen()
next(g)
g.close()

def gen():
    while True:
        try:
            yield 1
        finally:
            continue
s = list(gen())
""".strip().split("\n\n")
_EXC_VALUES = [
    "1",
    "'x'",
    "None",
    "a",
    "tt",
    "nl",
    "nl.add",
    "len",
    "[1, 2]",
    "10**9",
    "ValueError",
    "'{0.__class__}'",
    "np.arange(3)",
    "print",
]


def exceptions_example(d: Draw) -> Example:
    body = [
        "@nki.jit",
        "def k(a):",
        "    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)",
        "    tt = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=tt, src=a[0:128, 0:64])",
        "    s = 0",
    ]
    top: list[str] = []
    for _ in range(d.integer(1, 3)):
        form = d.choice(_EXC_FORMS).format(
            v=d.choice(_EXC_VALUES), n=d.choice(["0", "3", "3", "10**3", "10**7"])
        )
        where = _mostly(d, ["body", "module", "yield-kernel"], 1, 90)
        if where == "module":
            top += form.replace("tt", "1").split("\n")
        elif where == "yield-kernel":
            body.append(
                f"    {d.choice(['yield tt', 'yield', 'x = yield 1', 'yield from range(3)'])}"
            )
        else:
            body += _indent(form.split("\n"), "    ")
    body += ["    nisa.dma_copy(dst=out, src=tt)", "    return out"]
    return _feature_example(d, "exceptions", body, GENERATED_CASE, top=top)


# `.nasm` programs: mutants of the text `neuronemu asm` prints, for kernels of kernels/ and
# for a device loop and an LNC2 exchange written here.
_NASM_KERNELS = {
    "rows_loop": (
        "\n".join(HEADER)
        + """
@nki.jit
def k(data, n):
    R, F = data.shape
    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    count = nisa.scalar_load(n_sb)

    def body(i):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0), src=t)

    nl.fori_loop(0, count, body)
    return out
""",
        (("data", "float32[8,16]"), ("n", "int32[1,1]~randint(0,9)")),
        None,
    ),
    "exchange": (
        "\n".join(HEADER)
        + """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    half = a.shape[0] // 2
    mine = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[me * half:(me + 1) * half, :])
    got = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.dma_copy(dst=scratch[me * half:(me + 1) * half, :], src=got)
    nisa.core_barrier(scratch, (0, 1))
    back = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=scratch[(1 - me) * half:(2 - me) * half, :])
    nisa.dma_copy(dst=out[me * half:(me + 1) * half, :], src=back)
    return out, scratch
""",
        (("a", "float32[256,64]"),),
        (2,),
    ),
}
_NASM_FROM = ("tensor_add.py", "softmax_rows.py", "scaled_rows_v07.py", "matmul_tiled.py")
_NASM: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}


def nasm_programs() -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """The text programs the `.nasm` mutants start from (compiled once, in this process),
    with the inputs they run on; paths in them made relative, so that they do not depend on
    where the repository is."""
    if _NASM:
        return _NASM
    import neuronemu

    kernels = {n: (SOURCES[n][0], SOURCES[n][1], None) for n in _NASM_FROM if n in SOURCES}
    kernels.update({f"{n}.py": v for n, v in _NASM_KERNELS.items()})
    with tempfile.TemporaryDirectory() as tmp:
        for name, (text, case, grid) in sorted(kernels.items()):
            path = Path(tmp) / name
            path.write_text(text)
            for helper, data in _helpers_for(text):
                (Path(tmp) / helper).write_bytes(data)
            program = neuronemu.compile_kernel(
                path, _inputs(dict(case)), grid=grid, print_fn=lambda _: None
            )
            dump = dumps(program).replace(str(path), name).replace(tmp + os.sep, "")
            _NASM[name[:-3] + ".nasm"] = (dump, case)
    return _NASM


_NASM_TOKENS = [
    "@0",
    "@1",
    "@99999",
    "@-1",
    "wait(",
    ")",
    "carry(",
    "dma.q0",
    "vector",
    "scalar",
    "gpsimd",
    "sync",
    "nc1.vector",
    "tensor_tensor",
    "dma_copy",
    "nc_matmul",
    "branch",
    "float32",
    "bfloat16",
    "int32",
    "[128,512]",
    "[0,0]",
    "[99999999,99999999]",
    "[-1]",
    "sbuf",
    "psum",
    "hbm",
    "shared_hbm",
    "input",
    "output",
    "tile",
    ".tensor",
    ".loop",
    ".kernel",
    ".grid 2",
    ".grid 0",
    ".target trn1",
    ".target nosuch",
    '.source "/etc/passwd"',
    "dst=",
    "src=",
    "op=",
    "add",
    "nosuch",
    "=",
    ";",
    ":",
    ",",
    "[",
    "]",
    "(",
    ")",
    "\n",
    "  ",
    "\t",
    "0",
    "-1",
    "4294967296",
    "1e400",
    "nan",
    "'",
    '"',
    "\x00",
    "\udcff",
    "9" * 400,
]


def nasm_example(d: Draw) -> Example:
    programs = nasm_programs()
    name = d.choice(sorted(programs))
    text, case = programs[name]
    lines = text.split("\n")
    how = d.choice(["token", "token", "line", "number", "byte", "valid"])
    if how == "line":
        for _ in range(d.integer(1, 3)):
            at, other = d.integer(0, len(lines) - 1), d.integer(0, len(lines) - 1)
            edit = d.choice(["delete", "duplicate", "swap", "move"])
            if edit == "delete":
                del lines[at]
            elif edit == "duplicate":
                lines.insert(other, lines[at])
            elif edit == "swap":
                lines[at], lines[other] = lines[other], lines[at]
            else:
                lines.insert(other, lines.pop(at))
            if not lines:
                lines = [""]
    elif how == "number":
        for _ in range(d.integer(1, 3)):
            numbers = [(k, m) for k, line in enumerate(lines) for m in re.finditer(r"\d+", line)]
            if numbers:
                k, m = d.choice(numbers)
                new = d.choice(
                    [
                        "0",
                        "1",
                        "2",
                        "3",
                        "7",
                        "128",
                        "511",
                        "513",
                        "65536",
                        str(int(m.group()) + 1),
                        "99999999999",
                        "-1",
                    ]
                )
                lines[k] = lines[k][: m.start()] + new + lines[k][m.end() :]
    elif how == "token":
        for _ in range(d.integer(1, 3)):
            at = d.integer(0, len(lines) - 1)
            col = d.integer(0, len(lines[at]))
            token = d.choice(_NASM_TOKENS + [""])
            lines[at] = lines[at][:col] + token + lines[at][col + d.integer(0, 6) :]
    new = _encode("\n".join(lines))
    if how == "byte":
        data = bytearray(new)
        for _ in range(d.integer(1, 4)):
            data[d.integer(0, len(data) - 1)] = d.integer(0, 255)
        new = bytes(data)
    return Example("nasm", name, new, case, label=how)


# `.npy` / `.npz` inputs, valid and malformed: truncated, headers edited (shapes, dtypes,
# versions, lengths), object arrays, pickles (one that would run a command), huge shapes.
_PICKLE_RUNS = b"cposix\nsystem\n(S'touch pwned-by-pickle'\ntR."


def _npy_bytes(array: Any, pickle: bool = False) -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=pickle)
    return buf.getvalue()


def _npy_file(d: Draw, shape: tuple[int, ...]) -> tuple[bytes, str]:
    import numpy as np

    good = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 7
    how = _mostly(
        d,
        [
            "valid",
            "truncated",
            "header",
            "header",
            "object",
            "pickle",
            "raw-pickle",
            "dtype",
            "empty",
            "garbage",
            "version",
            "big-endian",
        ],
        1,
        30,
    )
    data = _npy_bytes(good)
    if how == "truncated":
        data = data[: d.integer(0, len(data) - 1)]
    elif how == "header":
        text = data.decode("latin-1")
        end = text.index("\n") + 1
        header = text[:end]
        shape_text = d.choice(
            [
                "(10**12, 10**12)",
                "(1000000000000, 1000000000000)",
                "(-1, 64)",
                "()",
                "(0,)",
                "(128,)",
                "(2**63, 2)",
                "(128, 64" + ", 1" * 31 + ")",
                "('a', 'b')",
                "(1.5, 2)",
                "[128, 64]",
                "(4294967296, 4294967296)",
                "(9223372036854775807, 9223372036854775807)",
            ]
        )
        field = d.choice(["shape", "shape", "descr", "fortran", "length", "junk"])
        if field == "shape":
            header = re.sub(r"'shape': \([^)]*\)", f"'shape': {shape_text}", header)
        elif field == "descr":
            header = header.replace(
                "'<f4'",
                d.choice(
                    [
                        "'|O'",
                        "'<U10'",
                        "'|V2'",
                        "'>f8'",
                        "'nosuch'",
                        "[('a', '<f4')]",
                        "'<c16'",
                        "'M8[s]'",
                        "1",
                    ]
                ),
            )
        elif field == "fortran":
            header = header.replace("False", d.choice(["True", "1", "'x'"]))
        elif field == "length":
            header = header[:8] + d.choice(["\xff\xff", "\x00\x00", "\x01\x00"]) + header[10:]
        else:
            header = header[:-1] + d.choice(["__import__('os')", "{", "\x00", " " * 70000]) + "\n"
        data = header.encode("latin-1") + data[end:]
    elif how == "object":
        data = _npy_bytes(np.array([{"k": 1}, None], dtype=object), pickle=True)
    elif how == "pickle":  # an object array's header, then a pickle that runs a command
        end = data.index(b"\n") + 1
        data = data[:end].replace(b"'<f4'", b"'|O' ") + _PICKLE_RUNS
    elif how == "raw-pickle":
        data = _PICKLE_RUNS
    elif how == "dtype":
        data = _npy_bytes(
            good.astype(
                d.choice(
                    [np.float16, np.int8, np.int64, np.complex64, np.bool_, np.uint64, "U3", "V4"]
                )
            )
        )
    elif how == "empty":
        data = b""
    elif how == "garbage":
        data = b"\x93NUMPY" + bytes(d.integer(0, 255) for _ in range(d.integer(0, 40)))
    elif how == "version":
        data = data[:6] + d.choice([b"\x02\x00", b"\x03\x00", b"\x09\x00", b"\x00\x00"]) + data[8:]
    elif how == "big-endian":
        data = _npy_bytes(good.astype(">f4"))
    return data, how


def _npz_file(d: Draw, members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    compression = d.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
    with zipfile.ZipFile(buf, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    data = buf.getvalue()
    if d.boolean(20):
        data = data[: d.integer(0, len(data))]
    return data


def npy_inputs_example(d: Draw) -> Example:
    import numpy as np

    name = "tensor_add.py"
    text, case = SOURCES[name]
    specs = dict(case)
    shape = tuple(int(x) for x in re.findall(r"\d+", specs["a"].split("[")[1]))
    shape = _mostly(d, [shape, (128, 64), (4,), (1, 1, 1)])
    helpers: dict[str, bytes] = {}
    options: tuple[tuple[str, str], ...] = ()
    if d.boolean(60):  # -i a=@a.npy (and maybe b)
        data, how = _npy_file(d, shape)
        helpers["a.npy"] = data
        specs["a"] = "@a.npy" + d.choice(["", "", "", ":bfloat16", ":float16", ":nosuch", ":int8"])
        if d.boolean(30):
            helpers["b.npy"], _ = _npy_file(d, shape)
            specs["b"] = "@b.npy"
        label = f"npy {how}"
    else:  # --inputs inputs.npz
        members: dict[str, bytes] = {}
        hows = []
        for key in d.choice([["a", "b"], ["a", "b"], ["a"], ["a", "b", "c"]]):
            member, how = _npy_file(d, shape)
            hows.append(how)
            members[d.choice([f"{key}.npy", f"{key}.npy", key, f"../{key}.npy"])] = member
        if d.boolean(20):
            members["__neuronemu_dtypes__.npy"] = _npy_bytes(
                np.array([d.choice(["a=bfloat16", "a=nosuch", "b=float8_e4m3", "=", "x"])])
            )
        helpers["inputs.npz"] = _npz_file(d, members)
        for key in ("a", "b"):
            if d.boolean(70):
                specs.pop(key, None)
        options = (("npz", "inputs.npz"),)
        label = "npz " + ",".join(hows)
    return Example(
        "npy", name, _encode(text), tuple(specs.items()), tuple(helpers.items()), label, options
    )


# `neuronemu sweep`: --param values and --where expressions over them.
SWEEP_KERNEL = (
    "\n".join(HEADER)
    + """
@nki.jit
def copy(a, width=512, bufs=1):
    cols = min(width, a.shape[1])
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(a.shape[1] // cols):
        t = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * cols : (j + 1) * cols])
        nisa.dma_copy(dst=out[:, j * cols : (j + 1) * cols], src=t)
    return out
"""
)
_PARAM_VALUES = [
    "128,256",
    "256",
    "1..3",
    "1..4:2",
    "64..512:448",
    "4..1",
    "1..4:0",
    "0..99999:33333",
    "0..100000",
    "'x',None",
    "(1, 2)",
    "10**9",
    "1e400",
    "[1]*3",
    "{'a': 1}",
    "b'x'",
    "1j",
    "...",
    "-1",
    "0",
    "512,",
    ",",
    "",
    "'",
    "1..2..3",
    "9" * 5000,
    "1_000",
    "0x80",
    "True",
    "float('nan')",
    "__import__('os')",
    "256,'256'",
    "(" * 200 + ")" * 200,
]
_WHERE_ATOMS = [
    "width",
    "width",
    "bufs",
    "W",
    "nosuch",
    "1",
    "0",
    "64",
    "65",
    "-65",
    "0.5",
    "'x'",
    "10**18",
    "True",
    "1e308",
    "(1, 2)",
    "''",
]
_WHERE_OPS = [
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "<",
    "<=",
    "==",
    "!=",
    "in",
    "not in",
    "and",
    "or",
    "<<",
    "@",
    "is",
    "&",
]


def _where(d: Draw, depth: int = 0) -> str:
    if depth > 3 or d.boolean(35):
        return d.choice(_WHERE_ATOMS)
    form = d.choice(["op", "op", "op", "not", "call", "odd"])
    a, b = _where(d, depth + 1), _where(d, depth + 1)
    if form == "op":
        return f"({a} {d.choice(_WHERE_OPS)} {b})"
    if form == "not":
        return f"{d.choice(['not ', '-', '+', '~'])}{a}"
    if form == "call":
        return f"{d.choice(['min', 'max', 'abs', 'len', 'print', 'open'])}({a}, {b})"
    return d.choice(
        [
            "((((9 ** 64) ** 64) ** 64) ** 64) ** 64",
            "'x' * width * 10**18",
            "'x' * 10**9",
            "width ** 64 ** 64",
            "not " * 2000 + "width",
            "-" * 5000 + "1",
            "(" * 150 + "width" + ")" * 150,
            "(" * 1000 + "width" + ")" * 1000,
            " + ".join(["width"] * 20000),
            "width.real",
            "width[0]",
            "[width]",
            "{width}",
            "lambda: 1",
            "width if bufs else 1",
            "f'{width}'",
            "(width := 3)",
            "1 < width < 3 > bufs",
            "width\x00",
            "",
            "width;",
            "a.b.c",
        ]
    )


def sweep_example(d: Draw) -> Example:
    names = d.choice([["width"], ["width", "bufs"], ["bufs"], ["W"], ["width", "W"]])
    params = []
    for name in names:
        values = _mostly(d, _PARAM_VALUES, 4, 70)
        params.append(f"{_mostly(d, [name, '2x', '', name + ' ', 'a'], 1, 90)}={values}")
    cols = "{W}" if "W" in names else d.choice(["512", "256"])
    spec = _mostly(
        d,
        [f"float32[128,{cols}]", "float32[128,{W!r}]", "float32[{W.real}]", "{W}", "@{W}.npy"]
        + ["{", "float32[128,{0}]", "float32[128,{W}]~uniform({W},1)"],
        1,
        90,
    )
    options = (("params", "\n".join(params)),)
    if d.boolean(80):
        options += (("where", _where(d)),)
    text, how = _feature_mutant(d, SWEEP_KERNEL, 10)
    return Example("sweep", "sweep.py", _encode(text), (("a", spec),), (), how, options)


# -- the attack classes of issue 38, each a family --------------------------------------------
#
# Each class fixed in issue 38 gets a generator, so that the next campaign looks for more of
# it: helper modules that escape the kernel's folder, deep and aliased values, generators and
# `finally` around budget exhausters, results that exhaust memory, odd command lines and
# result files, and planted parse caches.

_ATTACK_HEADER = "\n".join(HEADER) + "\n"


def _attack_kernel(body: list[str], top: Sequence[str] = ()) -> str:
    """A kernel around `body` (unindented lines) that copies its input out, as `_kernel`."""
    lines = (
        [*top, "", "@nki.jit", "def k(a):"]
        + _indent(body, "    ")
        + [
            "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)",
            "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)",
            "    nisa.dma_copy(dst=t, src=a)",
            "    nisa.dma_copy(dst=out, src=t)",
            "    return out",
        ]
    )
    return _ATTACK_HEADER + "\n".join(lines) + "\n"


_ATTACK_CASE = (("a", "float32[128,64]"),)


def _attack(kind: str, d: Draw, body: list[str], top: Sequence[str] = (), label: str = ""):
    text, how = _feature_mutant(d, _attack_kernel(body, top), 10)
    return Example(kind, "k.py", _encode(text), _ATTACK_CASE, (), f"{label} {how}".strip())


# 1. Helper modules that escape the kernel's folder. The kernel is `work/k.py`; `host/` beside
# `work/` holds what it must never read (a credentials file, a settings module): each holds
# HOST_SECRET, which must never be printed. Links out are relative (`../host/...`), absolute
# (`@/host/...`: the example's folder) or to host files (`/proc/self/environ`, `/etc/passwd`).
_HOST_FILES = (
    (f"{OUTSIDE}credentials", f'aws_secret_access_key = "{HOST_SECRET}"\nx = (\n'),
    (f"{OUTSIDE}settings.py", f'TOKEN = "{HOST_SECRET}"\nX = TOKEN\n'),
    (f"{OUTSIDE}__init__.py", ""),
    (f"{OUTSIDE}broken.py", f"{HOST_SECRET} = = 1\n"),
    (f"{OUTSIDE}pkg/settings.py", f'TOKEN = "{HOST_SECRET}"\nX = TOKEN\n'),
)
_LINK_TARGETS = (
    "../host/credentials",
    "@/host/credentials",
    "../host/settings.py",
    "@/host/settings.py",
    "../host/broken.py",
    "/proc/self/environ",
    "/proc/self/cmdline",
    "/etc/passwd",
    "/dev/zero",
    "/dev/urandom",
    "|fifo",
    "nosuch.py",
    "helper.py",
    "real_helper.py",
    "../../../../../../../../etc/passwd",
)
_DIR_TARGETS = ("../host", "@/host", "/proc/self", "/etc", "..", ".", "../host/pkg", "|fifo")


def helpers_example(d: Draw) -> Example:
    """A kernel that imports helper modules through links out of its folder, relative imports
    with too many dots, `from . import`, packages whose folders are links."""
    helpers: list[tuple[str, bytes]] = [(n, _encode(t)) for n, t in _HOST_FILES]
    where = _mostly(d, ["work", "work/sub", "work/lib/ops"], 1, 60)
    if where == "work/lib/ops":  # a package kernel: work/lib/__init__.py, work/lib/ops/...
        helpers += [("work/lib/__init__.py", b""), ("work/lib/ops/__init__.py", b"")]
    folder = where + "/"
    helpers.append((f"{folder}real_helper.py", b"VALUE = 'helper-ok'\n"))
    imports: list[str] = []
    for j in range(d.integer(1, 3)):
        form = d.choice(["file-link", "file-link", "dir-link", "dots", "from-dot", "absolute"])
        name = d.choice(["creds", "helper", "envleak", "settings", "pkg", f"m{j}"])
        if form == "file-link":
            target = d.choice(_LINK_TARGETS)
            if target.startswith("../") and where != "work":
                target = "../" * where.count("/") + target
            helpers.append((f"{folder}{name}.py{LINK}{target}", b""))
            imports.append(
                d.choice(
                    [
                        f"import {name}",
                        f"from {name} import *",
                        f"from {name} import TOKEN",
                        f"from {name} import aws_secret_access_key as TOKEN",
                        f"from . import {name}",
                        f"from .{name} import X as TOKEN",
                        f"import {name} as m{j}",
                    ]
                )
            )
        elif form == "dir-link":
            target = d.choice(_DIR_TARGETS)
            helpers.append((f"{folder}{name}{LINK}{target}", b""))
            sub = d.choice(["settings", "credentials", "pkg.settings", "environ", "passwd"])
            imports.append(
                d.choice(
                    [
                        f"from {name}.{sub} import TOKEN",
                        f"import {name}.{sub}",
                        f"from {name} import {sub.split('.')[0]}",
                        f"from .{name}.{sub} import X as TOKEN",
                    ]
                )
            )
        elif form == "dots":
            dots = "." * _mostly(d, [2, 3, 4, 5, 1, 40, 200], 4, 80)
            what = d.choice(["host.settings", "host", "host.pkg.settings", "", "work.real_helper"])
            if what:
                imports.append(f"from {dots}{what} import {d.choice(['TOKEN', 'X', '*'])}")
            else:
                imports.append(f"from {dots} import {d.choice(['settings', 'host', 'work'])}")
        elif form == "from-dot":
            imports.append(
                d.choice(
                    [
                        "from . import real_helper",
                        "from . import host",
                        "from .. import host",
                        "from .real_helper import VALUE",
                        "from . import *",
                        f"from .. import {name}",
                    ]
                )
            )
        else:
            imports.append(
                d.choice(
                    [
                        "import host.settings",
                        "import work.real_helper",
                        "from host import settings",
                        "from work import real_helper",
                        "import real_helper",
                        "from real_helper import VALUE",
                        "import credentials",
                        "import passwd",
                    ]
                )
            )
    uses = [name for line in imports for name in _bound(line)]
    how = d.choice(["print", "print", "str", "format", "raise", "try"])
    use = d.choice(uses) if d.boolean(90) else d.choice(["TOKEN", "X", "VALUE", "settings"])
    body = {
        "print": [f"print({use})"],
        "str": [f"s = str({use})", "assert len(s) < 0, s"],
        "format": [f"print('{{0}}'.format({use}))"],
        "raise": [f"raise ValueError({use})"],
        "try": ["try:", f"    print({use})", "except Exception as e:", "    print(e)"],
    }[how]
    text = _attack_kernel(body, imports if d.boolean(80) else [])
    if not d.boolean(80):  # the imports inside the kernel's body
        text = text.replace("def k(a):\n", "def k(a):\n" + "".join(f"    {i}\n" for i in imports))
    unique = {n.partition(LINK)[0]: (n, data) for n, data in reversed(helpers)}
    kept = tuple(v for v in helpers if unique[v[0].partition(LINK)[0]] == v)
    return Example("helpers", f"{folder}k.py", _encode(text), _ATTACK_CASE, kept, where)


def _bound(line: str) -> list[str]:
    """The names an import line binds, as the kernel would use them."""
    if line.startswith("import "):
        what = line[len("import ") :]
        return [what.split(" as ")[1] if " as " in what else what.split(".")[0]]
    module, names = line[len("from ") :].split(" import ")
    if names == "*":
        return ["TOKEN", "X", "aws_secret_access_key", "VALUE"]
    name = names.split(" as ")[-1]
    return [name, f"{name}.TOKEN", f"{name}.X"] if module.strip(".") in ("", "host") else [name]


# 2. Deep and aliased values: nesting in loops to random depths (tuples, lists, dicts, sets,
# dataclasses), DAGs that share each level twice, self-references; then hashed, compared,
# searched, printed, sorted and formatted.
_WRAPS = (
    "x = (x,)",
    "x = [x]",
    "x = {0: x}",
    "x = {'k': x}",
    "x = [x, x]",
    "x = (x, x)",
    "x = {(x,)}",
    "x = {(x,): x}",
    "x = N(x)",
    "x = N([x, x])",
    "y = []\n    y.append(x)\n    x = y",
    "y = {}\n    y[i] = x\n    x = y",
    "x = (x,) + ()",
    "x = [*[x]]",
    "x = f(x)",
    "x = next(zip([x]))",
    "x = (x, i)",
    "x = [x] * 2",
    "x = {'a': x, 'b': x}",
    "x = slice(x)",
    "x = range(3) if x is None else (x,)",
)
_DEPTHS = ("10", "100", "1000", "3000", "10**4", "10**5", "400000", "10**6", "40", "64")
_NEST_USES = (
    "y = {{x: 1}}",
    "y = {{k: 1 for k in [x, z]}}",
    "y = {{k for k in [x, z]}}",
    "d = {{}}\nd[x] = 1",
    "y = {{1: 2}}.get(x)",
    "y = {{1: 2}}[x]",
    "y = x in {{1: 2}}",
    "y = dict([(x, 1)])",
    "y = dict(zip([x], [z]))",
    "y = x == x",
    "y = x == z",
    "y = x != z",
    "y = x < z",
    "y = x in [z]",
    "y = x in {{z: 1}}",
    "y = {{x}}",
    "y = {{x: 1}}",
    "print(x)",
    "y = repr(x)",
    "y = str(x)",
    "y = len(str(x))",
    "y = sorted([x, z])",
    "y = max(x, z)",
    "y = '{{}}'.format(x)",
    "y = '{{0!r:>10}}'.format(x)",
    "y = f'{{x}}'",
    "y = '%s' % (x,)",
    "y = copy.deepcopy(x)",
    "y = [x].count(z)",
    "y = [x].index(x)",
    "y = x is z",
    "y = bool(x)",
    "y = list(x) if isinstance(x, list) else x",
    "assert x != x, x",
    "raise ValueError(x)",
    "y = {{'k': x}} == {{'k': z}}",
    "y = dict.fromkeys([x])",
    "y = set([x, z])",
    "y = sum(1 for _ in str(x))",
)
_SELF_REFS = (
    "x = []\nx.append(x)",
    "x = {}\nx['k'] = x",
    "x = [1]\nx.append([x, x])",
    "x = N(None)\nx.c = x",
    "x = [[]]\nx[0].append(x)",
)


def nesting_example(d: Draw) -> Example:
    init = d.choice(["()", "[]", "1", "{}", "'x'", "None", "N(1)", "[1]"])
    depth = _mostly(d, _DEPTHS, 2, 40)  # (shallow ones reach their use; deep ones end made)
    wraps = [d.choice(_WRAPS) for _ in range(d.integer(1, 2))]
    top = [
        "import copy",
        "from dataclasses import dataclass",
        "",
        "@dataclass",
        "class N:",
        "    c: object",
        "",
        "def f(*a):",
        "    return a",
    ]
    body: list[str] = []
    for name in ["x", "z"] if d.boolean(60) else ["x"]:
        if d.boolean(15):
            body += d.choice(_SELF_REFS).replace("x", name).split("\n")
            continue
        loop = [f"{name} = {init}", f"for i in range({depth}):"]
        loop += ["    " + w.replace("x", name) for w in wraps]
        if d.boolean(15):  # an early stop, so that some runs are shallow enough to finish
            loop += [f"    if i > {d.choice(['5', '50', '500'])}:", "        break"]
        body += loop
    if "z = " not in "\n".join(body):
        body.append("z = x")
    for _ in range(d.integer(1, 2)):
        body += d.choice(_NEST_USES).format().split("\n")
    label = f"{wraps[0].split(chr(10))[0]} x{depth}"
    return _attack("nesting", d, body, top, label)


# 3. Generators that resume each other or themselves, generators left open at the end of the
# trace, `yield from` chains, and `finally` blocks that return/break/continue (or a generator's
# finally run as it is closed) around work that spends a budget.
_EXHAUSTERS = (
    "while True:\n    pass",
    "for _ in range(10**12):\n    pass",
    "x = [0] * 10**10",
    "x = 'x' * 10**10",
    "x = 2 ** 10**9",
    "x = rec(0)",
    "x = sum(range(10**12))",
    "x = sorted(range(10**9))",
    "x = list(itertools.count())",
    "x = [[0] * 10**6 for _ in range(10**4)]",
    "x = np.zeros((10**6, 10**6))",
    "x = tree(40)",
    "x = next(mine)",
    "raise ValueError('x')",
    "x = 1",
)
_GEN_FORMS = (
    # finally with return / break / continue around an exhauster
    "def f():\n    try:\n{E}\n    finally:\n        return 1\ns = f()",
    "def f():\n    for k in range(3):\n        try:\n{E2}\n        finally:\n            break\n"
    "    return 2\ns = f()",
    "def f():\n    for k in range(3):\n        try:\n{E2}\n        finally:\n            continue\n"
    "    return 2\ns = f()",
    "def f():\n    try:\n        try:\n{E2}\n        finally:\n            raise ValueError('x')\n"
    "    except ValueError:\n        return 3\ns = f()",
    "def f():\n    try:\n{E}\n    except BaseException:\n        return 4\ns = f()",
    "def f():\n    try:\n{E}\n    except Exception as e:\n        return str(e)\ns = f()",
    "def f():\n    while True:\n        try:\n{E2}\n        finally:\n            continue\nf()",
    # generators closed at the end of the trace, whose finally spends a budget
    "def gen():\n    try:\n        yield 1\n    finally:\n{E}\nmine = gen()\ns = next(mine)",
    "def gen():\n    try:\n        yield 1\n    finally:\n{E}\nmine = gen()\nnext(mine)\n"
    "mine = None",
    "def gen():\n    try:\n        yield 1\n    finally:\n{E}\nmine = gen()\nnext(mine)\n"
    "mine.close()",
    "def gen():\n    try:\n        yield 1\n    except GeneratorExit:\n{E}\n        yield 2\n"
    "mine = gen()\nnext(mine)",
    "def gen():\n    while True:\n        try:\n            yield 1\n        finally:\n"
    "            continue\nmine = gen()\nnext(mine)",
    "def gen():\n    try:\n        yield 1\n    finally:\n        return 5\nmine = gen()\n"
    "next(mine)\ns = mine.throw(ValueError)",
    "gens = []\nfor k in range({n}):\n    def gen():\n        try:\n            yield 1\n"
    "        finally:\n{E3}\n    g = gen()\n    next(g)\n    gens.append(g)",
    # mutual and re-entrant generators
    "def ping():\n    yield next(gb)\ndef pong():\n    yield next(ga)\nga = ping()\ngb = pong()\n"
    "s = next(ga)",
    "def me():\n    yield next(mine)\nmine = me()\ns = next(mine)",
    "def me():\n    yield from mine\nmine = me()\ns = list(mine)",
    "def me():\n    yield mine.send(None)\nmine = me()\ns = next(mine)",
    "def me():\n    mine.close()\n    yield 1\nmine = me()\ns = next(mine)",
    "def me():\n    yield mine.throw(ValueError)\nmine = me()\ns = next(mine)",
    # yield from chains
    "def g(n):\n    yield n\n    yield from g(n + 1)\ns = sum(g(0))",
    "def g(n):\n    if n:\n        yield from g(n - 1)\n    yield n\ns = list(g({n}))",
    "def g():\n    yield from g()\ns = next(g())",
    "g = iter([1])\nfor k in range({n}):\n    g = (x for x in g)\ns = list(g)",
    "def g(it):\n    yield from it\nit = iter([1])\nfor k in range({n}):\n    it = g(it)\n"
    "s = next(it)",
    "def g():\n    x = yield\n    while True:\n        x = yield x\nh = g()\nnext(h)\n"
    "s = [h.send(k) for k in range({n})]",
    "def g():\n    try:\n        yield from range({n})\n    finally:\n{E}\ns = sum(g())",
)


def generators_example(d: Draw) -> Example:
    form = d.choice(_GEN_FORMS)
    exhauster = d.choice(_EXHAUSTERS).split("\n")
    n = d.choice(["3", "100", "1000", "10**4", "10**5", "10**6"])
    text = form.format(
        E="\n".join("        " + line for line in exhauster),
        E2="\n".join("            " + line for line in exhauster),
        E3="\n".join("            " + line for line in exhauster),
        n=n,
    )
    top = [
        "import itertools",
        "",
        "def rec(n):",
        "    return rec(n + 1)",
        "",
        "def tree(n):",
        "    return 0 if n == 0 else tree(n - 1) + tree(n - 1)",
        "",
        "mine = iter([1])",
    ]
    where = _mostly(d, ["body", "module"], 1, 80)
    if where == "module":
        top += text.split("\n")
        body = ["y = 1"]
    else:
        body = text.split("\n")
    label = f"{form.split(chr(10))[0][:30]} / {exhauster[0][:24]}"
    return _attack("generators", d, body, top, label)


# 4. Results that exhaust memory: copies in comprehensions, wide string arrays, joined text,
# odd codecs.
_BIG = (
    "[0] * 4_000_000",
    "'x' * 4_000_000",
    "{i: i for i in range(200_000)}",
    "{i for i in range(200_000)}",
    "tuple(range(1_000_000))",
    "b'x' * 4_000_000",
    "bytearray(4_000_000)",
    "np.zeros(1_000_000)",
    "np.zeros((1000, 1000), dtype=np.float64)",
    "collections.deque([0] * 4_000_000)",
    "'\\u00e9' * 2_000_000",
    "[[0] * 1000] * 4000",
    "list(range(1_000_000))",
)
_COPY = (
    "big.copy()",
    "big[:]",
    "big[::-1]",
    "list(big)",
    "sorted(big)",
    "tuple(big)",
    "big + big",
    "big * 2",
    "[*big]",
    "{*big}",
    "copy.copy(big)",
    "copy.deepcopy(big)",
    "str(big)",
    "repr(big)",
    "dict.fromkeys(big)",
    "np.copy(big)",
    "np.array(big)",
    "big.upper()",
    "big.swapcase()",
    "big.hex()",
    "big.astype(object)",
    "big.tolist()",
    "big[1:]",
    "list(reversed(big))",
    "bytes(big)",
    "big.replace('x', 'yy')",
    "f'{big}'",
    "'%s' % (big,)",
    "len(big)",
)
_ONE_SHOTS = (
    "x = np.zeros({n}).astype('U{w}')",
    "x = np.zeros({n}).astype('S{w}')",
    "x = np.zeros({n}).astype(np.str_)",
    "x = np.full({n}, 'x' * {w})",
    "x = np.array(['x' * {w}] * {n})",
    "x = np.zeros({n}).astype(object)",
    "x = ''.join(['x' * {w}] * {n})",
    "x = ('x' * {w}).join(['y'] * {n})",
    "x = ','.join(str(i) for i in range({n}))",
    "x = '-'.join(map(str, range({n})))",
    "print(*range({n}), sep='x' * {w})",
    "print(*(['x' * {w}] * {n}))",
    "print('x' * {w}, end='y' * {w})",
    "x = ('\\u00e9' * {n}).encode({codec})",
    "x = ('\\U0001f600' * {n}).encode({codec})",
    "x = (b'\\\\N{{LATIN SMALL LETTER E}}' * {n}).decode({codec})",
    "x = (b'\\xff' * {n}).decode({codec})",
    "x = ('x' * {n}).center({n} * {w})",
    "x = ('\\t' * {n}).expandtabs({w})",
    "x = ('x' * {w}) * {n}",
    "x = [('x' * {w})] * {n}",
    "x = np.zeros({n}).tobytes() * {w}",
    "x = str(np.zeros({n}))",
    "x = repr(np.arange({n}))",
    "x = np.tile(np.zeros({w}), {n})",
    "x = np.broadcast_to(np.zeros({w}), ({n}, {w})).copy()",
    "x = (b'x' * {n}).hex(':')",
    "x = ('\\ufb03' * {n}).upper()",
    "x = bytes({n}) + bytes({n})",
)
_CODECS = (
    "'utf-16'",
    "'utf-32'",
    "'punycode'",
    "'idna'",
    "'unicode_escape'",
    "'raw_unicode_escape'",
    "'rot13'",
    "'hex'",
    "'base64'",
    "'zlib'",
    "'bz2'",
    "'uu'",
    "'quopri'",
    "'ascii', 'namereplace'",
    "'ascii', 'xmlcharrefreplace'",
    "'ascii', 'backslashreplace'",
    "'latin-1', 'replace'",
    "'utf-7'",
    "'cp1252', 'surrogateescape'",
    "'nosuch'",
    "'utf-8', 'surrogatepass'",
    "errors='namereplace', encoding='ascii'",
)


def memory_example(d: Draw) -> Example:
    body: list[str] = []
    form = d.choice(["copies", "copies", "one-shot", "one-shot", "both"])
    if form in ("copies", "both"):
        big = d.choice(_BIG)
        copy = d.choice(_COPY)
        n = d.choice(["10", "100", "1000", "10**4", "10**6"])
        body += [f"big = {big}"]
        body += [
            d.choice(
                [
                    f"xs = [{copy} for _ in range({n})]",
                    f"xs = {{i: {copy} for i in range({n})}}",
                    f"xs = list(map(lambda _: {copy}, range({n})))",
                    f"xs = []\nfor _ in range({n}):\n    xs.append({copy})",
                    f"xs = [[{copy}] for _ in range({n})]",
                    f"xs = sum(len({copy}) for _ in range({n}))",
                ]
            )
        ]
    if form in ("one-shot", "both"):
        body += [
            d.choice(_ONE_SHOTS).format(
                n=d.choice(["1000", "200_000", "1_000_000", "4_000_000", "10**8"]),
                w=d.choice(["10", "1000", "100_000", "10**6"]),
                codec=d.choice(_CODECS),
            )
        ]
    lines = [part for line in body for part in line.split("\n")]
    top = ["import collections", "import copy"]
    return _attack("memory", d, lines, top, form)


# 5. Command lines: odd `-i` SPECs, `--where` deep, long or power towers, sweeps past the
# configuration cap, planted lines in an `--out` results file, an `--out` FIFO, `--trace`,
# `--save` and `--save-inputs` to /dev/full or a FIFO.
_SPEC_DTYPES = ("float32", "float32", "bfloat16", "int8", "float8_e4m3", "bool", "nosuch", "")
_SPEC_DISTS = (
    "uniform(-1e308,1e308)",
    "uniform(1e308,-1e308)",
    "uniform(0,0)",
    "uniform(-1e300,1e300)",
    "uniform(nan,1)",
    "uniform(-inf,inf)",
    "normal(0,1e308)",
    "normal(1e308,1e308)",
    "normal(0,-1)",
    "randint(-2**63,2**63)",
    "randint(-9223372036854775808,9223372036854775807)",
    "randint(0.1,0.2)",
    "randint(-1e300,1e300)",
    "randint(0,1)",
    "randint(5,5)",
    "zeros",
    "ones()",
    "arange",
    "arange(1,2)",
    "nosuch(1)",
    "uniform(" + "9" * 400 + ",1)",
    "uniform(1,2,3)",
    "uniform(1 2)",
    "",
    "uniform((1),2)",
)


def _odd_spec(d: Draw) -> str:
    form = d.choice(["dims", "dist", "dist", "tildes", "long", "literal", "file"])
    dtype = _mostly(d, _SPEC_DTYPES, 2, 70)
    dims = _mostly(
        d,
        [
            "128,64",
            ",".join(["1"] * d.integer(2, 80)),
            "9" * d.integer(10, 5000),
            "10**9",
            "0,64",
            "-1,64",
            "128,64,",
            "",
            "1e3",
            "128," * 2000 + "64",
            "4294967296,4294967296",
            "0x80,64",
            " 128 , 64 ",
            "1_000",
            "128;64",
        ],
        1,
        30,
    )
    spec = f"{dtype}[{dims}]"
    if form == "dims":
        return spec
    if form == "dist":
        return spec + "~" + d.choice(_SPEC_DISTS)
    if form == "tildes":
        return spec + "~" * int(d.choice(["2", "100", "100000"])) + d.choice(["", "zeros"])
    if form == "long":
        return spec + "~uniform(" + "-" * int(d.choice(["100", "10000", "300000"])) + "1,1)"
    if form == "literal":
        return d.choice(
            [
                "(" * 200 + ")" * 200,
                "[" * 100000 + "]" * 100000,
                "9" * 5000,
                "1e999",
                "{'a': " * 1000 + "1" + "}" * 1000,
                "b'" + "x" * 100000 + "'",
                "'x' * 10**9",
                "__import__('os')",
                "(1,) * 10**9",
                "-" * 10000 + "1",
            ]
        )
    return d.choice(["@/dev/zero", "@/proc/self/environ", "@nosuch.npy", "@", "@.", "@/"])


_WHERE_TOWERS = (
    "not " * 2000 + "width",
    "not " * 99 + "width",
    "-" * 99 + "width > 0",
    "-" * 5000 + "width > 0",
    "(" * 99 + "width" + ")" * 99 + " > 0",
    "(" * 150 + "width" + ")" * 150,
    "+".join(["width"] * 5000) + " > 0",
    "+".join(["width"] * 1000) + " > 0",
    " and ".join(["width > 0"] * 1500),
    "width " + "< width " * 3000,
    "((((9**64)**64)**64)**64)**64 > width",
    "9**9**9 > width",
    "2**8192 > width",
    "2**8193 > width",
    "width ** width ** width ** width > 0",
    "(width * 10**2000) ** 4 > 0",
    "10**4000 // 7 > width",
    "1 << 10**9",
    "width << 8190 > 0",
    "'a' * 10**9 > 'b' * width",
    "[width] * 10**9",
    "width.__class__",
    "__import__('os').system('true')",
    "().__class__.__bases__[0].__subclasses__()",
    "(lambda: width)()",
    "[x for x in range(10**9)]",
    "1e308 * 1e308 > width",
    "width / 0",
    "width % 0",
    "-(2**63) // -1",
    "width if width else " * 300 + "0",
)


def cli_example(d: Draw) -> Example:
    """`neuronemu run` with odd `-i` SPECs or output options, or `neuronemu sweep` with odd
    --where expressions, a cross product past the cap, or planted/odd --out files."""
    what = d.choice(["spec", "spec", "output", "where", "cap", "out", "out", "files", "files"])
    kernel = _ATTACK_HEADER + SWEEP_KERNEL[len("\n".join(HEADER)) :]
    helpers: list[tuple[str, bytes]] = []
    if what == "files":
        return _files_example(d, kernel)
    if what == "spec":
        case = [("a", _odd_spec(d))]
        if d.boolean(30):
            case.append((d.choice(["b", "width", "a b", "", "1x"]), _odd_spec(d)))
        options: tuple[tuple[str, str], ...] = (("kernel", "copy"),)
        if d.boolean(30):  # the same SPECs through the command line
            options = (("argv", "--kernel\ncopy"),)
        return Example("cli", "sweep.py", _encode(kernel), tuple(case), (), what, options)
    if what == "output":
        option = d.choice(["--trace", "--trace", "--save", "--save-inputs"])
        target = d.choice(["/dev/full", "/dev/full", "fifo", "/dev/null", "out.bin", "", "."])
        if target == "fifo":
            helpers.append((f"fifo{LINK}|fifo", b""))
        argv = ["--kernel", "copy", option, target]
        if d.boolean(20):
            argv += d.choice([["--json"], ["--timing-only"], ["--seed", "-1"], ["--grid", "0"]])
        spec = _mostly(d, ["float32[128,512]", _odd_spec(d)], 1, 80)
        return Example(
            "cli",
            "sweep.py",
            _encode(kernel),
            (("a", spec),),
            tuple(helpers),
            f"{what} {option} {target}",
            (("argv", "\n".join(argv)),),
        )
    params = ["width=128,256"]
    options = ()
    if what == "where":
        where = _mostly(d, _WHERE_TOWERS, len(_WHERE_TOWERS), 70)
        if d.boolean(30):
            where = f"{where} {d.choice(['and', 'or', '+', '<'])} {_where(d)}"
        options = (("where", where),)
    elif what == "cap":
        params = d.choice(
            [
                ["width=0..99999", "bufs=0..99999"],
                ["width=1..400", "bufs=1..400"],
                ["width=1..100000", "bufs=1"],
                ["width=1..100001"],
                ["width=0..10**18"],
                ["width=0..999999999999:1"],
                ["width=" + ",".join(str(i) for i in range(20000)), "bufs=1..10"],
            ]
        )
        # (a cap raised, or a sweep at the cap, is filtered down by --where: a sweep of
        # 100,000 configurations that all run is work asked for, not an attack)
        if d.boolean(40):
            options += (("max_configs", d.choice(["1", "0", "-1", "100001", "200000"])),)
        if options or d.boolean(40) or params[0] == "width=1..100000":
            options += (("where", d.choice(["width < 0", "width == 1 and bufs == 1"])),)
    else:  # planted lines in an existing --out results file, or an --out that is no file
        name = d.choice(["results.jsonl", "results.jsonl", "results.jsonl", "sub/results.jsonl"])
        form = d.choice(["planted", "planted", "planted", "fifo", "link", "dir", "device"])
        if form == "planted":
            lines = [_planted_line(d) for _ in range(d.integer(1, 6))]
            helpers.append((name, _encode("\n".join(lines) + d.choice(["\n", ""]))))
        elif form == "fifo":
            helpers.append((f"{name}{LINK}|fifo", b""))
        elif form == "link":
            helpers.append((f"{OUTSIDE}results.jsonl", _encode(_planted_line(d) + "\n")))
            target = d.choice(["@/host/results.jsonl", "/dev/zero", "/proc/self/environ"])
            helpers.append((f"{name}{LINK}{target}", b""))
        elif form == "dir":
            helpers.append((f"{name}/x", b"{}\n"))
        else:
            name = d.choice(["/dev/full", "/dev/zero", "/dev/null", "/proc/self/status"])
        options = (("out", name),)
        params = d.choice([["width=128,256"], ["width=128,256", "bufs=1,2"], ["bufs=1"]])
    options = (("params", "\n".join(params)), *options)
    return Example(
        "cli",
        "sweep.py",
        _encode(kernel),
        (("a", "float32[128,512]"),),
        tuple(helpers),
        what,
        options,
    )


# Files the command line reads that are not regular files of the user's: devices that never
# end, a FIFO no one writes, links to host files (the environment, a credentials file beside
# the kernel's folder), a folder; as `--inputs`, as `-i NAME=@FILE`, and as the kernel file
# itself (a link whose target's text must never be quoted in a syntax error).
_FILE_TARGETS = (
    "/dev/zero",
    "/dev/urandom",
    "|fifo",
    "/proc/self/environ",
    "@/host/credentials",
    "@/host/settings.py",
    "/etc/passwd",
    "@/sub",
    "/nosuch.npz",
)


def _files_example(d: Draw, kernel: str) -> Example:
    target = d.choice(_FILE_TARGETS)
    helpers = [(n, _encode(t)) for n, t in _HOST_FILES] + [("sub/x.npy", b"")]
    how = d.choice(["inputs", "at", "at", "kernel", "kernel"])
    if how == "kernel":
        name = f"k.py{LINK}{target}"
        argv = d.choice([["--json"], ["--kernel", "copy"], ["--timing-only"]])
        return Example(
            "cli",
            name,
            b"",
            _ATTACK_CASE,
            tuple(helpers),
            f"files {how} {target}",
            (("argv", "\n".join(argv)),),
        )
    link = d.choice(["data.npz", "data.npy", "data"])
    helpers.append((f"{link}{LINK}{target}", b""))
    if how == "inputs":
        argv = ["--kernel", "copy", "--inputs", link]
        case: tuple[tuple[str, str], ...] = ()
    else:
        argv = ["--kernel", "copy"]
        case = (("a", f"@{link}" + d.choice(["", ":float32", ":a", ":bfloat16"])),)
    return Example(
        "cli",
        "sweep.py",
        _encode(kernel),
        case,
        tuple(helpers),
        f"files {how} {target}",
        (("argv", "\n".join(argv)),),
    )


_RECORD = {
    "config": {"width": 128},
    "status": "ok",
    "time_ns": 1000,
}


def _planted_line(d: Draw) -> str:
    """A line of a results file that no sweep wrote (or one that it did)."""
    status = d.choice(["ok", "error", "skipped", None, 1])
    record: dict[str, Any] = {
        "config": d.choice(
            [
                {"width": 128},
                {"width": 256, "bufs": 1},
                {"width": "128"},
                {"width": [128]},
                [128],
                "width=128",
                {},
                None,
                {"nosuch": 1},
                {"width": 128.0},
                {"width": True},
            ]
        ),
        "status": status,
    }
    if d.boolean(70):
        record["time_ns"] = d.choice(
            [1000, -1, 0, "fast", None, 10**30, 1.5, [1], True, "NaN", 2**63]
        )
    if status == "error" or d.boolean(20):
        record["error"] = d.choice(
            [
                {"kind": "usage", "message": "m", "path": None, "line": None, "col": None},
                {"message": 5},
                "boom",
                None,
                {"kind": "internal", "message": "x" * 10000},
                {"kind": "located", "message": "m", "path": "k.py", "line": -1, "col": 10**20},
            ]
        )
    line = json.dumps(record)
    how = d.choice(["as is", "as is", "cut", "huge", "nan", "brackets", "garbage", "dup", "bom"])
    if how == "cut":
        return line[: d.integer(0, len(line))]
    if how == "huge":
        return line.replace("1000", "1" + "0" * d.choice([400, 4000, 40000]))
    if how == "nan":
        return line.replace("1000", d.choice(["NaN", "Infinity", "-Infinity", "1e999"]))
    if how == "brackets":
        return "[" * 100_000 + "]" * 100_000
    if how == "garbage":
        return d.choice(["\x00\x01", "{", "}", "null", "[]", "1", '"x"', "\udcff\udcfe", " "])
    if how == "dup":
        return '{"config": {"width": 128}, "config": 5, "status": "ok", "time_ns": 1}'
    return "\ufeff" + line


# 6. A planted parse cache: NEURONEMU_CACHE_DIR (set in the child) a folder others can write, a
# link, a FIFO or a device; or a private folder whose entries (made by a first run of the
# kernel) are replaced by FIFOs, links to devices, garbage, entries of another kernel, or
# made writable by others.
CACHE_FORMS = (
    "private",
    "shared",
    "group",
    "sticky",
    "link-dir",
    "fifo-dir",
    "file-dir",
    "dev-null",
    "proc",
    "entries-fifo",
    "entries-zero",
    "entries-urandom",
    "entries-garbage",
    "entries-truncated",
    "entries-huge",
    "entries-writable",
    "entries-swapped",
    "entries-link-out",
    "entries-dir",
)


def cache_example(d: Draw) -> Example:
    name = d.choice(sorted(SOURCES))
    text, case = SOURCES[name]
    form = d.choice(CACHE_FORMS)
    if d.boolean(20):
        text, how = _feature_mutant(d, text, 100)
    return Example(
        "cache",
        name,
        _encode(text),
        case,
        _helpers_for(text),
        form,
        (("cache", form),),
    )


# 7. Held-out classes (issue 38, judged by attacks written apart from its list): arrays of
# Python objects (NumPy falls back to them for an int past 64 bits or mixed lists; their
# elements' operators run in C: an array holding itself compared was a SIGSEGV), text arrays
# grown past their width's budget, and objects of the kernel's own classes used through a
# protocol their class does or does not define (iterated, unpacked, `in`, hashed, sized).
_OBJECT_MAKERS = (
    "np.array([10**30, 1])",
    "np.array([2**64 * 3] * {n})",
    "np.array([[0] * 1000, 'x'], dtype='O')",
    "np.zeros({n}).astype('O')",
    "np.full({n}, 'x', dtype='O')",
    "np.ones(2) + [10**30]",
    "np.power(np.arange(2, 3), [10**30])",
    "np.array([1, 2], dtype=object)",
    "np.array([[1], [2, 3]], dtype='O')",
)
_OBJECT_USES = (
    "z = y == y",
    "z = y.sum()",
    "z = y.prod()",
    "z = y ** 10**6",
    "z = y @ y",
    "print(y)",
    "z = y.tolist()",
    "z = sorted(y)",
    "z = abs(y)",
    "z = y * 1500",
    "z = y + y",
    "y[1] = y\nz = y == y",
    "y[1] = y\nprint(y)",
    "z = copy.deepcopy(y)",
    "for _ in range({n}):\n    y = np.array([y, 1], dtype='O')\nprint(y)",
    "z = nl.full((2, 2), y[0], dtype=nl.float32)",
)
_TEXT_MAKERS = ("np.array(['a' * {w}] * {n})", "np.full({n}, 'a' * {w})", "np.array(['a', 'b'])")
_TEXT_USES = (
    "for _ in range(40):\n    x = x + x",
    "for _ in range(40):\n    x = np.add(x, x)",
    "for _ in range(40):\n    x = x + 'b' * {w}",
    "x = np.where(np.ones(({n}, 1)) > 0, x, x)",
    "x = np.sort(np.repeat(x, {n}))",
    "x = x.astype('U{w}')",
    "x = np.concatenate([x] * {n})",
    "x = np.tile(x, {n})",
    "x = np.unique(np.tile(x, {n}))",
    "x = x[np.zeros(({n}, {n}), dtype=np.int32)]",
    "x = np.stack([x] * {n})",
    "x = str(x.tolist())",
)
_CLASSES = (
    "class C:\n    pass",
    "class C:\n    def __iter__(self):\n        return self",
    "class C:\n    def __iter__(self):\n        return 5",
    "class C:\n    def __iter__(self):\n        return iter([1, 2])",
    "class C:\n    def __iter__(self):\n        yield from self",
    "class C:\n    def __iter__(self):\n        return self\n    def __next__(self):\n"
    "        return 1",
    "class C:\n    def __getitem__(self, i):\n        return i",
    "class C:\n    def __len__(self):\n        return {big}",
    "class C:\n    def __len__(self):\n        return -1",
    "class C:\n    def __hash__(self):\n        return {big}",
    "class C:\n    def __eq__(self, other):\n        return C()",
    "class C:\n    def __bool__(self):\n        return C()",
    "class C:\n    def __contains__(self, x):\n        return C()",
    "class C:\n    def __index__(self):\n        return {big}",
    "class C(list):\n    pass",
    "class C(dict):\n    def __missing__(self, k):\n        return self[k]",
)
_CLASS_USES = (
    "z = [*C()]",
    "z = 1 in C()",
    "z = ''.join(C())",
    "a1, b1 = C()",
    "for i in C():\n    pass",
    "z = [i for i in C()]",
    "z = {{**C()}}",
    "z = len(C())",
    "z = sorted(C())",
    "z = dict(C())",
    "z = max(C())",
    "z = hash(C())",
    "z = {{C()}}",
    "z = C() == C()",
    "z = bool(C())",
    "z = [0] * C()",
    "z = range(10)[C()]",
    "z = C()[1]",
    "print(*C())",
    "z = np.array(C())",
    "z = list(zip(C(), C()))",
    "z = str(C())",
)


def arrays_example(d: Draw) -> Example:
    """Arrays of Python objects, text arrays grown past their width's budget, and objects
    of the kernel's own classes used through protocols their class may not define."""
    form = d.choice(["objects", "objects", "text", "text", "classes", "classes", "classes"])
    n = d.choice(["2", "10", "1000", "100_000", "10**6"])
    w = d.choice(["1", "10", "1000", "100_000"])
    big = d.choice(["10**30", "2**63", "2**31", "-5", "10**6", "'x'"])
    top = ["import copy"]
    if form == "objects":
        body = [f"y = {d.choice(_OBJECT_MAKERS).format(n=n)}"]
        body += [d.choice(_OBJECT_USES).format(n=n) for _ in range(d.integer(1, 2))]
    elif form == "text":
        body = [f"x = {d.choice(_TEXT_MAKERS).format(n=n, w=w)}"]
        body += [d.choice(_TEXT_USES).format(n=n, w=w) for _ in range(d.integer(1, 2))]
    else:
        top += ["", d.choice(_CLASSES).format(big=big)]
        body = [d.choice(_CLASS_USES) for _ in range(d.integer(1, 3))]
        body = [b.replace("{{", "{").replace("}}", "}") for b in body]
    lines = [part for line in body for part in line.split("\n")]
    top = [part for line in top for part in line.split("\n")]
    return _attack("arrays", d, lines, top, form)


# 8. The classes of the held-out attacks (rounds 1 and 2): chains of iterators, comparisons
# and searches over shared graphs, NumPy makers given their sizes by keyword, format widths
# and fills, %-formats, codecs and integer functions whose cost is not their arguments' size.
_GRAPHS = (
    "g = [1]\nfor i in range({n}):\n    g = [g, g]",
    "g = (1,)\nfor i in range({n}):\n    g = (g, g)",
    "g = 1\nfor i in range({n}):\n    g = slice(g, g)",
    "g = {{}}\nfor i in range({n}):\n    g = {{'a': g, 'b': g}}",
    "g = collections.deque([1])\nfor i in range({n}):\n    g = collections.deque([g, g])",
)
_GRAPH_USES = (
    "z = max([g, g])",
    "z = sorted([g, g])",
    "z = operator.eq(g, g)",
    "z = operator.lt(g, g)",
    "z = [g, g].index(1)",
    "z = [g, g].count(g)",
    "z = [g].remove(g)",
    "z = g in [1, g]",
    "z = [g, g].sort()",
    "z = min(g, g)",
    "z = copy.deepcopy(g)",
    "z = '%s' % (g,)",
    "z = '{{}}'.format(g)",
    "z = g == g",
)
_CHAINS = (
    "it = iter([1])\nfor i in range({n}):\n    it = map(abs, it)\nz = list(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = filter(None, it)\nz = next(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = zip(it)\nz = list(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = itertools.chain(it)\nz = list(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = enumerate(it)\nz = list(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = reversed(list(it))\nz = list(it)",
    "it = iter([1])\nfor i in range({n}):\n    it = itertools.islice(it, 5)\nz = list(it)",
)
_KEYWORD_MAKERS = (
    "z = np.zeros(shape=({n}, {n}))",
    "z = np.full(shape={n}, fill_value='x' * {n})",
    "z = np.repeat(np.arange(3), repeats={n})",
    "z = np.linspace(0, 1, num={n})",
    "z = np.tile(np.arange(3), reps=({n}, {n}))",
    "z = np.ones(({n},) * 3)",
    "z = np.arange(start=0, stop={n})",
    "z = np.eye(N={n})",
    "z = np.diff(np.arange(10), n={n})",
    "z = np.concatenate([np.zeros({n})] * {n})",
    "z = np.stack([np.zeros(3)] * {n})",
    "z = np.array(np.zeros(3), dtype='U{n}')",
    "z = np.tril(np.ones({n}))",
    "z = np.clip(np.zeros(({n}, 1)), np.zeros({n}), 1)",
)
_TEXT_COSTS = (
    "z = format(1, '{n}')",
    "z = format(1, 'x<{n}')",
    "z = format(1.5, '.{n}f')",
    "z = f'{{1:{n}}}'",
    "z = '{{:{n}}}'.format(1)",
    "z = '%{n}d' % 1",
    "z = '%.{n}f' % 1.5",
    "z = '%*d' % ({n}, 1)",
    "z = '%-*.*f' % ({n}, {n}, 1.5)",
    "z = ('\u00e9' * {n}).encode('punycode')",
    "z = (b'a' * {n}).decode('punycode')",
    "z = ('x' * {n}).encode('idna')",
    "z = ('\u00e9' * {n}).encode('idna')",
    "z = math.lcm(*range(1, {n}))",
    "z = math.perm({n})",
    "z = math.comb({n} * 2, {n})",
    "z = math.factorial({n})",
    "z = math.isqrt(10 ** {n})",
    "z = str(10 ** {n})",
    "z = int('9' * {n})",
    "z = (1 << {n}).bit_count()",
    "z = pow(3, {n}, 10 ** {n})",
)


def heldout_example(d: Draw) -> Example:
    """The classes of the held-out attacks (a size drawn from small to far past the caps)."""
    n = d.choice(["3", "30", "300", "4000", "10**5", "10**6", "10**9"])
    form = d.choice(["graphs", "chains", "makers", "text"])
    top = ["import copy", "import collections", "import itertools", "import operator"]
    if form == "graphs":
        body = [d.choice(_GRAPHS).format(n=d.choice(["3", "30", "100", "1000"]))]
        body += [d.choice(_GRAPH_USES).format() for _ in range(d.integer(1, 2))]
    elif form == "chains":
        body = [d.choice(_CHAINS).format(n=n)]
    elif form == "makers":
        body = [d.choice(_KEYWORD_MAKERS).format(n=n) for _ in range(d.integer(1, 2))]
    else:
        body = [d.choice(_TEXT_COSTS).format(n=n) for _ in range(d.integer(1, 2))]
    lines = [part for line in body for part in line.split("\n")]
    return _attack("heldout", d, lines, top, form)


FAMILIES = {
    "heldout": heldout_example,
    "helpers": helpers_example,
    "nesting": nesting_example,
    "generators": generators_example,
    "memory": memory_example,
    "cli": cli_example,
    "cache": cache_example,
    "arrays": arrays_example,
}


def family_example(d: Draw) -> Example:
    """An example of one of the attack classes of issue 38."""
    return FAMILIES[d.choice(sorted(FAMILIES))](d)


FEATURES = {
    "loops": device_loop_example,
    "scalar": scalar_example,
    "lnc": lnc_example,
    "exceptions": exceptions_example,
    "nasm": nasm_example,
    "npy": npy_inputs_example,
    "sweep": sweep_example,
}


def feature_example(d: Draw) -> Example:
    """An example of one of the features added since the first campaign."""
    return FEATURES[d.choice(sorted(FEATURES))](d)


def any_example(d: Draw) -> Example:
    """What the thorough campaign runs: 30% generated kernels, 30% mutants of kernels/, 20%
    examples of the features added since the first campaign, 20% of the attack families of
    issue 38."""
    which = d.integer(0, 19)
    if which < 6:
        return generated_example(d)
    if which < 12:
        return mutant(d)
    return feature_example(d) if which < 16 else family_example(d)


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


def _npy_with_header(header: str) -> bytes:
    """A version 1.0 .npy file with this header text (padded as NumPy pads it), then data."""
    text = header.encode("latin1")
    pad = -(10 + len(text) + 1) % 64
    body = text + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + bytes(128 * 64 * 4)


# A register operand one lane wide where the instruction has 128 (the tracer never binds
# that; a .nasm file may say anything).
NASM_REGS_OF_ANOTHER_SHAPE = """\
.kernel k
.target trn2
.tensor x input hbm float32[128,4]
.tensor out output shared_hbm float32[128,1]
.tensor t tile sbuf float32[128,4] at(0, 0)
.tensor e tile sbuf float32[128,4] at(0, 16)
.tensor total tile sbuf float32[128,1] at(0, 32)
.tensor regs tile reg float32[1,1]

scalar:
  @1 activation dst=e data=t reduce_res=total reduce_regs=regs op=exp reduce_op=add \
reduce_cmd=reset_reduce wait(dma.q0@0)
dma.q0:
  @0 dma_copy dst=t src=x
dma.q1:
  @2 dma_copy dst=out src=total wait(scalar@1)
"""


def _sweep(label: str, a: str, params: str, where: str | None = None) -> Example:
    """A sweep of SWEEP_KERNEL through the API: input `a` (a SPEC), `--param` texts one a line,
    and a `--where`."""
    options = (("params", params),) + ((("where", where),) if where is not None else ())
    return Example(
        "sweep", "sweep.py", _encode(SWEEP_KERNEL), (("a", a),), label=label, options=options
    )


def _sweep_out(
    label: str, params: str, out: str, helpers: tuple[tuple[str, bytes], ...]
) -> Example:
    """A sweep of SWEEP_KERNEL through the command line, its results to `out`."""
    return Example(
        "cli",
        "sweep.py",
        _encode(SWEEP_KERNEL),
        (("a", "float32[128,512]"),),
        helpers,
        label=label,
        options=(("params", params), ("out", out)),
    )


# A results file's record of a configuration that failed with neuronemu's own error.
_PLANTED_INTERNAL = (
    '{"config": {"width": 128}, "status": "error", "time_ns": -1, '
    '"error": {"kind": "internal", "message": "planted"}}\n'
)


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
        _kernel(
            ["o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)", "return o"],
            label="output-nothing-writes-2d",
        ),
        _kernel(["z = y"], top=["from " + "." * 40 + "x import y"], label="40-dot-import"),
        # (the fuzz gate's finds, frozen: a --where of 2,000 nots, an .npy header that does
        # not close its brace)
        _sweep("where-2000-nots", "float32[128,512]", "width=1..3", "not " * 2000 + "width"),
        Example(
            "npy",
            "k.py",
            _encode(_kernel([]).source.decode()),
            (("a", "@a.npy"),),
            (
                (
                    "a.npy",
                    _npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (128, 64)"),
                ),
            ),
            label="npy-header-unclosed-brace",
        ),
        # (the campaign of 2026-12-05, at e4cae6c: a .nasm program's register tensor of
        # another shape than its engine's file; a sweep's --out that links to /dev/zero, beside
        # a results file that is not UTF-8, was taken for an error owed a position)
        Example(
            "nasm",
            "regs.nasm",
            _encode(NASM_REGS_OF_ANOTHER_SHAPE),
            (("x", "float32[128,4]"),),
            label="nasm-register-shape",
        ),
        _sweep_out(
            "out-links-to-dev-zero",
            "bufs=1",
            "results.jsonl",
            (("host/results.jsonl", b"\xff\xfe\n"), ("results.jsonl -> /dev/zero", b"")),
        ),
        _sweep_out(
            "out-with-a-planted-internal-record",
            "width=128,256",
            "sub/results.jsonl",
            (("sub/results.jsonl", _encode(_PLANTED_INTERNAL)),),
        ),
        # (the campaign of 2026-12-06, at 3824f9c: a sweep's value that JSON cannot say, a
        # complex number or Ellipsis, was an internal error where the results were written)
        _sweep("sweep-param-complex", "float32[128,256]", "width=0..99999:33333\nbufs=1j"),
        _sweep("sweep-param-ellipsis", "float32[128,{W}]", "width=1..4:2\nW=..."),
        # (the campaign of 2026-12-06, at a226aeb: a dtype called on a number out of its range
        # was an internal OverflowError; a FIFO drawn twice beside a kernel broke the harness)
        _kernel(["n = nl.int8(a.shape[0] + 127)"], label="dtype-call-out-of-range"),
        Example(
            "helpers",
            "work/k.py",
            _encode(_kernel(["import helper"]).source.decode()),
            (("a", "float32[128,64]"),),
            (("work/helper -> |fifo", b""), ("work/helper -> |fifo", b"")),
            label="fifo-drawn-twice",
        ),
        # (a review of 2026-12-06: `break` or `return` out of place, a division by zero while
        # a loop is being recorded for replay: internal errors)
        _kernel(["if True:", "    break"], label="break-outside-loop"),
        _kernel(
            ["z = 1"],
            top=["try:", "    return 3", "except Exception:", "    pass"],
            label="return-at-module-level",
        ),
        _kernel(
            ["for i in range(8):", "    x = 1 // (i - 1)"], label="zero-division-while-recording"
        ),
        _kernel(["x = [1]", "y = {x: 1}"], label="dict-unhashable-key"),
        # non-UTF-8 bytes: an error about the file must say where
        _kernel(["s = 'caf\udce9'"], label="latin-1-byte-in-string"),
        # 5. memory made by results (issue 38): copies, joined text, arrays, Python's errors
        _kernel(
            ["big = [0] * 4_000_000", "xs = [big.copy() for _ in range(1000)]"],
            label="list-copies",
        ),
        _kernel(["big = [0] * 2_000_000", "print(*big, sep='x' * 1000)"], label="print-wide-sep"),
        _kernel(["x = np.zeros(4_000_000).astype('U1000')"], label="astype-wide-strings"),
        _kernel(["b = 'x'.encode('rot13')"], label="unknown-codec"),
        _kernel(["b = b'x' * 4", "c = b.replace('x', 'yy')"], label="bytes-replace-str"),
        # held-out attacks (issue 38): an object array that holds itself (a SIGSEGV), and a
        # special method's result that breaks its protocol (an internal TypeError)
        _kernel(["y = np.array([10**30, 1])", "y[1] = y", "z = y == y"], label="object-array"),
        _kernel(
            ["z = ''.join(C())"],
            top=["class C:", "    def __iter__(self):", "        return 5"],
            label="iter-returns-non-iterator",
        ),
        # (the campaign of 2026-12-05: a slice was no container to the nesting measure)
        _kernel(["x = ()", "for i in range(10**6):", "    x = slice(x)"], label="slice-nest"),
        # (the campaign of 2026-12-06 at 69283c9: the idna codec punycodes each non-ASCII
        # label, in time quadratic in it: 25 s for this one, unmetered)
        _kernel(["x = ('\U0001f600' * 4_000_000).encode('idna')"], label="idna-long-label"),
        # (a review of 2026-12-06: NumPy arrays that do not broadcast, compared, were an
        # internal ValueError)
        _kernel(["z = np.array([1, 2]) == np.array([1, 2, 3])"], label="numpy-compare-shapes"),
        # (the campaign of 2026-12-06 at 8c415c4: the text a `%` made was no work to the
        # clocks: 0.3 s a format, polled every few dozen, 30 s past trace_seconds=8)
        _kernel(
            ["big = [[0] * 1000] * 4000", "xs = [['%s' % (big,)] for _ in range(10**6)]"],
            label="percent-of-a-large-list",
        ),
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


class CliExit(Exception):
    """The command line (run in the child by `_cli`) exited with `code` and wrote `stderr`."""

    def __init__(self, code: int, stderr: str):
        super().__init__(stderr)
        self.code = code
        self.stderr = stderr


def _cli_kind(example: Example, exc: CliExit) -> str:
    """A command's failure as the outcome its first error line says."""
    lines = [line for line in exc.stderr.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line), lines[0] if lines else "")
    if first.startswith("internal error") or "Traceback" in exc.stderr:
        return "internal"
    m = LOCATED.match(first)
    if m and int(m["line"]) >= 1 and int(m["col"]) >= 1:
        return "located"
    if exc.code == 2 and first.startswith("error: ") and example.utf8():
        return "usage"
    return "unlocated"


def _classify(
    example: Example, run: Callable[[], Any], allow: Sequence[str] = ()
) -> dict[str, Any]:
    """In the child: run, and say how it ended (JSON-able). `allow`: files the example's
    options ask to write (`--trace`, `--out`...)."""
    from neuronemu.errors import NeuronEmuError, UsageError

    printed: list[str] = []
    size = [0]

    def print_fn(text: str) -> None:
        if size[0] < 1 << 20:
            printed.append(str(text)[: 1 << 16])
            size[0] += len(printed[-1])

    message = ""
    cache = os.environ.get("NEURONEMU_CACHE_DIR")
    if cache:  # (the guard allows it as named; neuronemu writes it by its real path)
        allow = [*allow, os.path.realpath(cache)]
    with HostGuard(allow=allow) as guard:
        try:
            run(print_fn)
            kind = "ran"
        except CliExit as exc:
            message = exc.stderr
            kind = _cli_kind(example, exc)
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
        d.decode("utf-8", "replace") for n, d in example.helpers if not n.startswith(OUTSIDE)
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


def _run(example: Example, path: Path, print_fn: Callable[[str], None]) -> None:
    """Run the example as the command line would (in the example's folder): its inputs
    (`-i` SPECs, an `--inputs` archive), its kernel, grid and target; or its sweep."""
    import neuronemu
    from neuronemu.inputs import load_npz

    options = dict(example.options)
    if "params" in options:
        _sweep(example, path, options)
        return
    if "argv" in options:
        _cli(example, path, options["argv"].split("\n"), print_fn)
        return
    inputs = load_npz(options["npz"]) if "npz" in options else {}
    inputs.update(_inputs(dict(example.case)))
    grid = options.get("grid")
    neuronemu.run(
        path,
        inputs,
        kernel=options.get("kernel"),
        target=options.get("target"),
        grid=tuple(int(g) for g in grid.split(",")) if grid else None,
        print_fn=print_fn,
        limits=FUZZ_LIMITS,
    )


def _planted_configs(out: Path) -> set[str]:
    """The configurations (as sorted JSON) of the records a results file holds already."""
    try:
        lines = out.read_bytes()[: 1 << 22].splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            found.add(json.dumps(record.get("config"), sort_keys=True))
    return found


def _sweep(example: Example, path: Path, options: dict[str, str]) -> None:
    """`neuronemu sweep PATH -i ... --param ... --where ...` on one local process. A
    configuration's error is in its result: an internal one is raised as itself would be,
    and one with no position (not a usage error) as an unlocated NeuronEmuError. A record
    resumed from a planted `--out` file is the file's, not this run's: not judged."""
    import neuronemu
    from neuronemu import sweeps
    from neuronemu.errors import NeuronEmuError

    params = dict(sweeps.parse_param(text) for text in options["params"].split("\n"))
    more: dict[str, Any] = {"max_configs": SWEEP_CONFIGS}
    if "out" in options:
        more["out"] = options["out"]
    if "max_configs" in options:
        more["max_configs"] = min(int(options["max_configs"]), SWEEP_CONFIGS)
    records = neuronemu.sweep(
        path,
        params,
        dict(example.case),
        where=options.get("where"),
        workers=1,
        limits=SWEEP_LIMITS,
        **more,
    )
    planted = _planted_configs(path.parent / options["out"]) if "out" in options else set()
    for record in records:
        error = record.get("error")
        if not error or json.dumps(record.get("config"), sort_keys=True) in planted:
            continue
        if error["kind"] == "internal":
            raise RuntimeError(f"sweep configuration {record['config']}: {error['message']}")
        if error["kind"] != "usage" and not (error["line"] or 0) >= 1:
            raise NeuronEmuError(f"sweep configuration {record['config']}: {error['message']}")


def _cli(example: Example, path: Path, argv: list[str], print_fn: Callable[[str], None]) -> None:
    """`neuronemu run PATH -i NAME=SPEC... ARGV...` through the command line itself; a failed
    command raises `CliExit` with what it wrote on stderr."""
    import io

    from neuronemu.cli import main

    args = ["run", str(path)] + [a for k, v in example.case for a in ("-i", f"{k}={v}")]
    args += [a for k, v in FUZZ_LIMITS.items() for a in ("--limit", f"{k}={v}")]
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    code = 0
    try:
        main.main(args=args + argv, prog_name="neuronemu")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.stdout, sys.stderr = saved
    print_fn(out.getvalue()[: 1 << 16])
    print_fn(err.getvalue()[: 1 << 16])
    if code:
        raise CliExit(code, err.getvalue()[:20000])


_WRITING = ("--trace", "--save", "--save-inputs")


def _outputs_of(example: Example, workdir: str) -> list[str]:
    """The files the example's options ask neuronemu to write (absolute paths)."""
    options = dict(example.options)
    paths = [options["out"]] if "out" in options else []
    argv = options.get("argv", "").split("\n")
    paths += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in _WRITING]
    return [os.path.join(workdir, p) for p in paths if p]


def _write_files(example: Example, workdir: str) -> None:
    """The kernel and its helpers in `workdir`: folders made as needed, links and FIFOs as
    their names say."""
    for name, data in [(example.name, example.source), *example.helpers]:
        name, link, target = name.partition(LINK)
        path = Path(workdir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or (path.exists() and not path.is_dir()):  # a name drawn twice
            path.unlink()  # (a file, a link or a FIFO): the last one wins, as in its JSON
        if not link:
            path.write_bytes(data)
        elif target == "|fifo":
            os.mkfifo(path)
        else:
            if target.startswith("@/"):
                target = os.path.join(workdir, target[2:])
            os.symlink(target, path)


def _plant_cache(example: Example, path: Path, workdir: str, form: str) -> None:
    """In the child: point NEURONEMU_CACHE_DIR at a cache folder planted as `form` says (for a
    form of entries, a private folder filled by a first run of the kernel, then tampered
    with), before the example's run."""
    from neuronemu.frontend import parser

    cache = Path(workdir) / "cache"
    real = Path(workdir) / "cache.real"
    setting = {
        "fifo-dir": "fifo",
        "file-dir": "file",
        "dev-null": "/dev/null",
        "proc": "/proc/self",
    }.get(form, str(cache))
    os.environ["NEURONEMU_CACHE_DIR"] = setting
    if form == "fifo-dir":
        os.mkfifo(Path(workdir) / "fifo")
    elif form == "file-dir":
        (Path(workdir) / "file").write_text("{}\n")
    elif form == "link-dir":
        real.mkdir(mode=0o700)
        cache.symlink_to(real)
    else:
        cache.mkdir(mode=0o700)
    if form.startswith("entries") or form in ("private", "shared", "group", "sticky"):
        folder = real if form == "link-dir" else cache
        try:  # a first run fills the cache (its outcome is not the example's)
            _run(example, path, lambda _: None)
        except BaseException:  # noqa: BLE001
            pass
        parser._AST_CACHE.clear()
        entries = sorted(p for p in folder.rglob("*") if p.is_file())
        if form == "entries-swapped":  # a second kernel's entries, under the first's names
            _swap_entries(path, folder, entries)
        mode = {"shared": 0o777, "group": 0o770, "sticky": 0o1777}.get(form)
        if mode is not None:
            folder.chmod(mode)
        for entry in entries:
            _tamper(entry, form, workdir)
    parser._AST_CACHE.clear()


def _swap_entries(path: Path, folder: Path, entries: list[Path]) -> None:
    import neuronemu

    other = path.parent / "other.py"
    text, case = SOURCES["tensor_add.py"]
    other.write_text(text)
    try:
        neuronemu.run(other, _inputs(dict(case)), print_fn=lambda _: None)
    except BaseException:  # noqa: BLE001
        pass
    other.unlink()
    new = sorted(p for p in folder.rglob("*") if p.is_file() and p not in entries)
    for entry, forged in zip(entries, new):
        entry.write_bytes(forged.read_bytes())


def _tamper(entry: Path, form: str, workdir: str) -> None:
    data = entry.read_bytes()
    if form in ("entries-fifo", "entries-zero", "entries-urandom", "entries-link-out"):
        entry.unlink()
        if form == "entries-fifo":
            os.mkfifo(entry)
        else:
            target = {
                "entries-zero": "/dev/zero",
                "entries-urandom": "/dev/urandom",
                "entries-link-out": os.path.join(workdir, "cache-outside.json"),
            }[form]
            if form == "entries-link-out":
                Path(target).write_bytes(data)
            os.symlink(target, entry)
    elif form == "entries-garbage":
        head, _, payload = data.partition(b"\n")
        entry.write_bytes(head + b"\n" + payload[::-1])
    elif form == "entries-truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif form == "entries-huge":
        head, _, payload = data.partition(b"\n")
        entry.write_bytes(head + b"\n" + b"[" * 200_000 + b"]" * 200_000)
    elif form == "entries-writable":
        entry.chmod(0o666)
    elif form == "entries-dir":
        entry.unlink()
        entry.mkdir()


def run_example(
    example: Example, time_limit: float = TIME_LIMIT_S, rss_limit: int = RSS_LIMIT
) -> Outcome:
    """Write the example's files to a fresh directory and run it there (the cwd, too) with
    neuronemu's default caps but `FUZZ_LIMITS`, in a forked child under the host-effect guard."""
    warm_up()

    workdir = tempfile.mkdtemp(prefix="neuronemu-fuzz-")
    try:
        path = Path(workdir) / example.name.partition(LINK)[0]
        _write_files(example, workdir)
        outputs = _outputs_of(example, workdir)
        cache = dict(example.options).get("cache")

        def child() -> dict[str, Any]:
            if cache:
                _plant_cache(example, path, workdir, cache)
            return _classify(example, lambda print_fn: _run(example, path, print_fn), outputs)

        outcome = run_in_child(child, time_limit, rss_limit, cwd=workdir)
        made = [n.partition(LINK)[0] for n in (example.name, *(n for n, _ in example.helpers))]
        made += [os.path.relpath(p, workdir) for p in outputs]
        made += ["cache", "cache.real", "fifo", "file", "cache-outside.json"] if cache else []
        stray = sorted(set(os.listdir(workdir)) - {m.split("/")[0] for m in made})
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
    "feature_example",
    "FEATURES",
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
