"""Trace-time Python against CPython (issue 41): every program of tests/conformance/python/
runs under CPython and inside a kernel through neuronemu, and both must print the same.

Where the trust rules make neuronemu refuse what CPython runs, the program is in `REFUSED`
of its topic module with the located error neuronemu must give instead (docs/limitations.md
lists them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import neuronemu

PROGRAMS_DIR = Path(__file__).resolve().parent / "python"


def _load(path: Path):
    name = f"conformance_programs_{path.stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


harness = _load(PROGRAMS_DIR / "_harness.py")
KNOWN_DIFFERENCES = _load(PROGRAMS_DIR / "_known.py").KNOWN_DIFFERENCES
TOPICS = {p.stem: _load(p) for p in sorted(PROGRAMS_DIR.glob("[!_]*.py"))}
PROGRAMS = {
    f"{topic}.{name}": source
    for topic, module in TOPICS.items()
    for name, source in module.PROGRAMS.items()
}
REFUSED = {
    f"{topic}.{name}": case
    for topic, module in TOPICS.items()
    for name, case in getattr(module, "REFUSED", {}).items()
}


def test_the_suite_is_large():
    assert len(PROGRAMS) >= 300, len(PROGRAMS)


def test_known_differences_name_programs():
    assert set(KNOWN_DIFFERENCES) <= set(PROGRAMS)


def _program(name: str):
    reason = KNOWN_DIFFERENCES.get(name)
    if reason is None:
        return name
    return pytest.param(name, marks=pytest.mark.xfail(reason=reason, strict=True))


@pytest.mark.parametrize("name", [_program(n) for n in sorted(PROGRAMS)])
def test_program_prints_as_in_cpython(tmp_path, name):
    source = PROGRAMS[name]
    expected = harness.run_cpython(name, source)
    assert expected, "a program must print something"
    assert not any(line.startswith("!!") for line in expected), expected
    assert harness.run_neuronemu(name, source, tmp_path) == expected


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_program_is_a_located_error(tmp_path, name):
    source, message = REFUSED[name]
    assert harness.run_cpython(name, source)  # CPython runs it
    path = tmp_path / "refused.py"
    path.write_text(source + harness.KERNEL_TAIL)
    with pytest.raises(neuronemu.NeuronEmuError, match=message) as info:
        neuronemu.compile_kernel(path, harness.INPUTS, print_fn=lambda line: None)
    span = info.value.span
    assert span is not None and span.path == str(path) and span.line <= source.count("\n") + 1


# What the fixes added keeps the trust rules: a NumPy maker's result, and a factorial's, are
# sized from the arguments and refused before they are made.
_BUDGETED = {
    "np.repeat": ("np.repeat(np.arange(4), 10**9)", "sequence_items"),
    "np.tile": ("np.tile(np.arange(4), (10**5, 10**5))", "sequence_items"),
    "np.outer": ("np.outer(np.arange(10**5), np.arange(10**5))", "sequence_items"),
    "np.meshgrid": ("np.meshgrid(np.arange(10**4), np.arange(10**4))", "sequence_items"),
    "np.linspace": ("np.linspace(0, 1, 10**9)", "sequence_items"),
    "math.factorial": ("math.factorial(10**7)", "int_bits"),
}


@pytest.mark.parametrize("name", sorted(_BUDGETED))
def test_made_values_are_budgeted_first(tmp_path, name):
    expr, budget = _BUDGETED[name]
    path = tmp_path / "budget.py"
    path.write_text(
        "import math\nimport numpy as np\nimport nki\n\n\n"
        f"@nki.jit\ndef k(a):\n    x = {expr}\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match=budget) as info:
        neuronemu.compile_kernel(path, harness.INPUTS)
    assert info.value.span is not None and info.value.span.line == 8


_BUILDER = """
import nki
import nki.language as nl
import nki.isa as nisa


def build(scale, bias=0.0):
    @nki.jit
    def scaled(a, shift=bias):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=r, data=t, op0=nl.multiply, operand0=float(scale), op1=nl.add, operand1=shift
        )
        nisa.dma_copy(dst=out, src=r)
        return out

    return scaled


triple = build(3)
halve = build(0.5, bias=1.0)
"""


@pytest.mark.parametrize(("kernel", "scale", "bias"), [("triple", 3, 0.0), ("halve", 0.5, 1.0)])
def test_a_kernel_a_builder_made_runs_with_its_scope(tmp_path, kernel, scale, bias):
    """Issue 41: an `@nki.jit` function defined inside a builder function and returned is a
    kernel of the file, under the name it is bound to, and sees the builder's arguments."""
    path = tmp_path / "built.py"
    path.write_text(_BUILDER)
    a = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32)
    result = neuronemu.run(path, {"a": a}, kernel=kernel)
    expected = a * np.float32(scale) + np.float32(bias)
    np.testing.assert_allclose(result.outputs["out"], expected, rtol=1e-6, atol=1e-6)


def test_two_builder_made_kernels_need_a_name(tmp_path):
    path = tmp_path / "built.py"
    path.write_text(_BUILDER)
    with pytest.raises(neuronemu.NeuronEmuError, match="several kernels"):
        neuronemu.run(path, {"a": np.zeros((128, 64), np.float32)})
