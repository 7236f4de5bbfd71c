"""Trust boundary regressions: each input below once touched the host, exhausted the machine,
ended in an internal error or was silently wrong. Each now must end in a located error
(`path:line:col: error: ...`, exit 1) or a usage error (`error: ...`, exit 2), within 10 s
and 1 GiB, writing nothing and running nothing (see `_guard.py` for how that is watched).

Every run is the real command line in a subprocess, with the real default caps."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _guard import Sandbox

from neuronemu.nasm.write import dumps

INPUT = ("-i", "a=float32[128,64]")
MARKER = "KERNEL-BODY-RAN"


def kernel(body: str = "", top: str = "", copy: bool = True) -> str:
    """A small kernel file: `top` at module level, `body` first in the kernel, then a copy of
    `a` to the output (when `copy`)."""
    tail = (
        (
            "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
            "    nisa.dma_copy(dst=t, src=a)\n"
            "    nisa.dma_copy(dst=out, src=t)\n"
            "    return out\n"
        )
        if copy
        else "    return a\n"
    )
    return (
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n"
        "import numpy as np\n\n"
        + top
        + "\n\n@nki.jit\ndef k(a):\n"
        + textwrap.indent(body, "    ")
        + ("\n" if body else "")
        + tail
    )


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


def run_kernel(box: Sandbox, source: str | bytes, *extra: str, name: str = "k.py"):
    box.write(name, source)
    return box.run("run", name, *INPUT, *extra)


# Controls: the kernel template, the options and the references used below work, so each
# regression fails for its own reason, not because of the harness. ---------------------------


def test_the_template_kernels_run(box):
    box.write("helper.py", "X = 3\n")
    for source in (
        kernel(),
        kernel("y = X + 1", top="from helper import X"),
        kernel("print('{} {}'.format(1, [2]))"),
    ):
        out = run_kernel(box, source)
        out.assert_confined()
        assert out.returncode == 0 and "output out: float32[128, 64]" in out.stdout, out.describe()


def test_the_options_and_references_work(box):
    box.write("k.py", kernel())
    box.write("right.py", _RIGHT_REF)
    box.write("wrong.py", _WRONG_REF)
    for extra, code in [
        (("--ref", "right.py:reference"), 0),
        (("--ref", "right.py:reference", "--rtol", "0.001", "--atol", "0"), 0),
        (("--ref", "wrong.py:reference"), 1),
        (("--ref", "wrong.py:reference", "--atol", "1e9"), 0),
        (("--seed", "3"), 0),
    ]:
        out = box.run("run", "k.py", *INPUT, *extra)
        assert out.returncode == code, out.describe()
    (box.work / "results").mkdir()
    out = box.run(
        "run", "k.py", *INPUT, "--save", "results/out.npz", "--trace", "results/trace.json"
    )
    assert out.returncode == 0 and sorted(out.new_files) == [
        "work/results/out.npz",
        "work/results/trace.json",
    ], out.describe()


# 1. Host side effects from trace-time objects ----------------------------------------------

# Where the trace-time NumPy call sits: in the kernel, in a module-level constant the kernel
# uses, in a helper module it imports, or before a kernel error (the write happened anyway).
_PLACES = {
    "kernel-body": lambda call: (kernel(call), {}),
    "module-constant": lambda call: (kernel("y = X", top=f"X = {call}"), {}),
    "helper-module": lambda call: (
        kernel("y = X", top="from helper import X"),
        {"helper.py": f"import numpy as np\n\nX = {call}\n"},
    ),
    "before-a-kernel-error": lambda call: (
        kernel(f"{call}\nassert False, 'the kernel fails after the write'"),
        {},
    ),
}


@pytest.mark.parametrize("method", ["dump", "tofile"])
@pytest.mark.parametrize("place", list(_PLACES))
def test_trace_time_numpy_methods_write_no_file(box, method, place):
    # An absolute path outside the working directory, or a relative one inside it.
    outside = place in ("module-constant", "helper-module")
    target = (box.root / "outside" if outside else box.work) / f"written.{method}"
    target.parent.mkdir(exist_ok=True)
    call = f"np.arange(3).{method}({str(target) if outside else target.name!r})"
    source, helpers = _PLACES[place](call)
    for name, text in helpers.items():
        box.write(name, text)
    out = run_kernel(box, source)
    assert not target.exists(), f"the kernel wrote {target}\n{out.describe()}"
    out.assert_located("k.py", "helper.py")


@pytest.mark.parametrize(
    "call",
    [
        "'{0.fn.__globals__[os].environ[HOME]}'.format(len)",  # the example
        "'{x.fn.__globals__[os].environ}'.format_map({'x': max})",
    ],
)
def test_str_format_cannot_reach_host_objects(box, call):
    out = run_kernel(box, kernel(f"print({call})"))
    assert str(box.home) not in out.stdout + out.stderr, (
        f"the kernel read the host's HOME through str.format\n{out.describe()}"
    )
    out.assert_located("k.py")


# 3. Budgets: each ends in a located (or usage) error that names the budget and how to
# raise it -----------------------------------------------------------------------------------

_BUDGETS = {
    "power-tower": kernel("n = 10 ** 10 ** 10"),
    "pow-builtin": kernel("n = pow(7, 10**8)"),
    "sum-of-a-huge-range": kernel("n = sum(range(10**12))"),
    "string-repetition": kernel("s = 'x' * 3 * 10**9"),
    "sorted-huge-range": kernel("s = sorted(range(10**8))"),
    "empty-loop": kernel("for _ in range(10**7):\n    pass"),
    "million-memsets": kernel(
        "z = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "for _ in range(10**6):\n    nisa.memset(dst=z, value=0.0)"
    ),
    "2MB-string-literal": kernel("s = '" + "x" * 2_000_000 + "'\nn = len(s)"),
}


@pytest.mark.parametrize("case", list(_BUDGETS))
def test_budgets_end_in_a_located_error(box, case):
    out = run_kernel(box, _BUDGETS[case])
    out.assert_refused("k.py")
    out.assert_budget_message()


def test_kernel_file_that_never_ends_is_refused(box):
    """`neuronemu run /dev/zero`: a device is not a kernel file (it is never read), not 23 GB;
    an ordinary file too large is the file-size budget (the 2 MB literal case)."""
    out = box.run("run", "/dev/zero", *INPUT)
    out.assert_usage()
    assert "not a regular file" in out.stderr, out.describe()


def test_huge_grid_is_refused(box):
    out = run_kernel(box, kernel(), "--grid", "1000000")
    out.assert_refused("k.py")
    out.assert_budget_message()


# 4. Internal errors: every one of these is now a located error (or a usage error) -----------

_KERNEL_ERRORS = {
    # f-strings: a NUL byte or a backslash where Python's own f-string rules reject them
    "fstring-nul-in-field": kernel("print(f'{1\x00}')"),
    "fstring-backslash-ending-field": kernel("print(f'{1\\}')"),
    "fstring-nul-in-text": kernel("print(f'x\x00{1}')"),
    "fstring-backslash-before-field": kernel("print(f'\\{1}')"),
    # nesting and sizes
    "1000-nested-brackets": kernel("x = " + "[" * 1000 + "]" * 1000),
    "1000-deep-if-nest": kernel(
        "".join(" " * i + "if True:\n" for i in range(1000)) + " " * 1000 + "pass"
    ),
    "100000-term-sum": kernel("n = " + "+".join(["1"] * 100_000)),
    "4301-digit-int-literal": kernel("n = " + "9" * 4301),
    # values that do not fit
    "par_dim-nan": kernel("x = nl.par_dim(float('nan'))"),
    "reduce-axis-10**23": kernel("t = nl.load(a)\nm = nl.max(t, axis=10**23)"),
    "mgrid-inf": kernel("i = nl.mgrid[float('inf'):4, 0:4]"),
    "mgrid-10**23-positions": kernel("i = nl.mgrid[-10**23:4, 0:4]"),  # fuzz seed 20261207
    "fori_loop-bound-2**40": kernel("nl.fori_loop(-2**40, 4, lambda i: None)"),
    "ndarray-10**9-squared": kernel(
        "z = nl.ndarray((10**9, 10**9), dtype=nl.float32, buffer=nl.shared_hbm)"
    ),
}


@pytest.mark.parametrize("case", list(_KERNEL_ERRORS))
def test_bad_kernels_give_located_errors(box, case):
    run_kernel(box, _KERNEL_ERRORS[case]).assert_located("k.py")


@pytest.mark.parametrize(
    "spec",
    [
        "a=float32[100000,100000,100]",  # 3.6 TiB of random data
        "a=float32[1,99999999999999999999999]",  # past NumPy's dimension limit
    ],
)
def test_huge_input_specs_are_usage_errors(box, spec):
    box.write("k.py", kernel())
    box.run("run", "k.py", "-i", spec).assert_usage()


def test_npy_given_as_inputs_npz_is_a_usage_error(box):
    buf = io.BytesIO()
    np.save(buf, np.zeros((128, 64), np.float32))
    box.write("a.npy", buf.getvalue())
    box.write("k.py", kernel())
    box.run("run", "k.py", "--inputs", "a.npy").assert_usage()


def test_negative_seed_is_a_usage_error(box):
    run_kernel(box, kernel(), "--seed", "-1").assert_usage()


@pytest.mark.parametrize("option,name", [("--save", "out.npz"), ("--trace", "trace.json")])
def test_output_into_a_missing_folder_is_a_usage_error_before_running(box, option, name):
    """Not an error after a long run whose results are then lost: checked before tracing."""
    out = run_kernel(box, kernel(f"print({MARKER!r})"), option, f"missing/{name}")
    out.assert_usage()
    assert MARKER not in out.stdout + out.stderr, (
        f"the kernel was traced before the output path was checked\n{out.describe()}"
    )
    assert "cycles" not in out.stdout, out.describe()


# .nasm text programs --------------------------------------------------------------------------

_ADD_INPUTS = ("-i", "a=float32[128,512]", "-i", "b=float32[128,512]")


@pytest.fixture(scope="module")
def add_nasm(tmp_path_factory) -> str:
    """`neuronemu asm` of the tensor-add kernel (a Vector instruction waiting on two DMAs)."""
    import neuronemu

    root = Path(__file__).resolve().parents[2]
    a = np.zeros((128, 512), np.float32)
    program = neuronemu.compile_kernel(
        root / "kernels" / "tensor_add.py", {"a": a, "b": a}, print_fn=lambda _: None
    )
    text = dumps(program)
    assert "tensor_tensor dst=sum_tile data1=a_tile data2=b_tile op=add" in text
    assert ".grid 1\n" in text and "wait(dma.q0@0, dma.q1@1)" in text
    return text


def run_nasm(box: Sandbox, text: str):
    box.write("k.nasm", text)
    return box.run("run", "k.nasm", *_ADD_INPUTS)


def test_nasm_as_printed_runs(box, add_nasm):
    """The control for the .nasm edits below: the unedited program runs."""
    out = run_nasm(box, add_nasm)
    out.assert_confined()
    assert out.returncode == 0, out.describe()


@pytest.mark.parametrize("extra", ["bogus=3", "bogus=a_tile"])
def test_nasm_unknown_instruction_argument_is_located(box, add_nasm, extra):
    text = add_nasm.replace("op=add", f"op=add {extra}", 1)
    run_nasm(box, text).assert_located("k.nasm")


# 5. Silently wrong ----------------------------------------------------------------------------

_WRONG_REF = "def reference(a):\n    return a + 1\n"  # every element differs from the kernel's
_RIGHT_REF = "def reference(a):\n    return a\n"


@pytest.mark.parametrize(
    "option,value",
    [("--rtol", "nan"), ("--atol", "nan"), ("--rtol", "-1"), ("--atol", "-0.5"), ("--rtol", "inf")],
)
def test_tolerances_must_be_finite_and_not_negative(box, option, value):
    # NaN made every comparison pass (here against a reference that is wrong everywhere);
    # a negative tolerance made every comparison fail; an infinite one passes anything.
    box.write("r.py", _WRONG_REF if value in ("nan", "inf") else _RIGHT_REF)
    out = run_kernel(box, kernel(), "--ref", "r.py:reference", f"{option}={value}")
    out.assert_usage()


@pytest.mark.parametrize("grid", ["0", "1000000"])
def test_nasm_grid_is_validated(box, add_nasm, grid):
    out = run_nasm(box, add_nasm.replace(".grid 1\n", f".grid {grid}\n", 1))
    out.assert_located("k.nasm")


def test_nasm_wait_names_a_real_stream(box, add_nasm):
    """`wait(nosuch@0)` was accepted: only the instruction index was checked."""
    out = run_nasm(box, add_nasm.replace("wait(dma.q0@0, dma.q1@1)", "wait(nosuch@0, dma.q1@1)", 1))
    out.assert_located("k.nasm")
