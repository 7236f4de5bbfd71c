"""Tracer: the NKI meta-program is evaluated at trace time and emits the expected instructions."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelSyntaxError, KernelTypeError, UsageError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def compile_src(kernel_file, body: str, inputs=None, **kw):
    path = kernel_file(HEADER + body)
    inputs = {"a": np.zeros((128, 64), np.float32)} if inputs is None else inputs
    return neuronemu.compile_kernel(path, inputs, **kw)


def names(program):
    return [i.spec.name for i in program.instrs]


def test_loops_unroll_with_their_bounds(kernel_file):
    program = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for j in nl.sequential_range(1, 7, 2):
            t = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, j * 8:j * 8 + 16])
    for s in nl.static_range(3):
        pass
    return out
""",
    )
    assert names(program) == ["dma_copy"] * 6
    starts = [i.operands["src"].box[1][0] for i in program.instrs]
    assert starts == [8, 24, 40] * 2


def test_helper_functions_are_inlined_with_defaults_and_keywords(kernel_file):
    program = compile_src(
        kernel_file,
        """
SCALE = 3

def load(src, cols=32, *, dtype=None):
    t = nl.ndarray((128, cols), dtype=dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src[:, 0:cols])
    return t

@nki.jit
def k(a):
    out = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    x = load(a)
    y = load(a, cols=32, dtype=nl.bfloat16)
    z = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(z, x, nl.multiply, float(SCALE))
    nisa.dma_copy(dst=out, src=z)
    return out
""",
    )
    assert names(program) == ["dma_copy", "dma_copy", "tensor_scalar", "dma_copy"]
    assert program.instrs[1].operands["dst"].dtype.name == "bfloat16"
    ts = program.instrs[2]
    assert ts.attrs["op0"] == "multiply" and ts.operands["operand0"] == 3.0


def test_if_else_tuple_unpacking_and_comprehensions(kernel_file):
    program = compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    rows, cols = a.shape
    widths = [w for w in (16, 32, 48) if w < cols]
    out = nl.ndarray((rows, sum(widths)), dtype=a.dtype, buffer=nl.shared_hbm)
    first, *rest = widths
    if len(rest) == 2 and first == 16:
        off = 0
        for w in widths:
            t = nl.ndarray((rows, w), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[:, off:off + w])
            nisa.dma_copy(dst=out[:, off:off + w], src=t)
            off += w
    else:
        assert False, "unreachable"
    return out
""",
        inputs={"a": np.zeros((128, 128), np.float32)},
    )
    assert len(program.instrs) == 6
    assert program.outputs[0].shape == (128, 96)


def test_print_runs_at_trace_time(kernel_file):
    printed = []
    compile_src(
        kernel_file,
        """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    print("shape", a.shape, f"{a.shape[1] / 3:.2f}")
    return out
""",
        print_fn=printed.append,
    )
    assert printed == ["shape (128, 64) 21.33"]


def test_assert_failure_reports_the_kernel_message(kernel_file):
    with pytest.raises(KernelTypeError) as info:
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    assert a.shape[0] == 256, f"expected 256 rows, got {a.shape[0]}"
    return a
""",
        )
    err = info.value
    assert err.message == "assertion failed: expected 256 rows, got 128"
    assert (err.span.line, err.span.col) == (8, 5)


def test_tensor_in_condition_is_rejected(kernel_file):
    with pytest.raises(KernelTypeError, match="compile-time condition"):
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    if a:
        pass
    return a
""",
        )


def test_unknown_name_suggests_a_close_one(kernel_file):
    with pytest.raises(KernelTypeError) as info:
        compile_src(
            kernel_file,
            """
@nki.jit
def k(a):
    columns = 3
    return colums
""",
        )
    assert info.value.message == "name 'colums' is not defined"
    assert info.value.hint == "did you mean 'columns'?"


def test_unsupported_python_is_rejected_where_reached(kernel_file):
    with pytest.raises(KernelSyntaxError, match="'await' is not supported in NKI kernels"):
        compile_src(
            kernel_file,
            """
def never_called():
    return await y

@nki.jit
def k(a):
    x = await a
    return a
""",
        )


def test_host_code_at_module_level_is_not_run(kernel_file):
    program = compile_src(
        kernel_file,
        """
import torch
data = torch.randn(3)

@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    return out

if __name__ == "__main__":
    raise SystemExit(k(data))
""",
    )
    assert program.instrs == []


def test_module_name_whose_definition_failed_errors_when_used(kernel_file):
    with pytest.raises(KernelTypeError, match="module 'torch' is not available"):
        compile_src(
            kernel_file,
            """
import torch
data = torch.randn(3)

@nki.jit
def k(a):
    return data
""",
        )


def test_runaway_loop_is_stopped_by_the_loop_budget(kernel_file):
    from neuronemu.errors import BudgetError

    with pytest.raises(BudgetError, match="over the loop_iterations budget of 1000") as err:
        path = kernel_file(
            HEADER
            + """
@nki.jit
def k(a):
    n = 0
    while True:
        n += 1
    return a
"""
        )
        from neuronemu.build.builder import Builder
        from neuronemu.frontend import parse_file
        from neuronemu.limits import Limits, Meter
        from neuronemu.trace.tracer import Tracer
        from neuronemu_isa import load_arch

        meter = Meter(Limits(loop_iterations=1000))
        tracer = Tracer(
            parse_file(path), path, load_arch("trn2"), Builder(load_arch("trn2"), meter)
        )
        tracer.call_kernel(tracer.kernels()["k"], {"a": np.zeros((1, 1), np.float32)})
    assert "while True" in err.value.span.source_line()
    assert "--limit loop_iterations=" in err.value.hint


def test_recursion_is_rejected(kernel_file):
    with pytest.raises(KernelTypeError, match="recursion is not allowed"):
        compile_src(
            kernel_file,
            """
def f(n):
    return f(n + 1)

@nki.jit
def k(a):
    f(0)
    return a
""",
        )


def test_missing_and_unknown_inputs_are_usage_errors(kernel_file):
    src = """
@nki.jit
def k(a, b):
    return a
"""
    with pytest.raises(UsageError, match="needs input 'b'") as info:
        compile_src(kernel_file, src)
    # Worded for both faces: the command line and the Python API.
    assert "-i b=SPEC" in info.value.message and "inputs={'b': ...}" in info.value.message
    with pytest.raises(UsageError, match="has no parameter 'c'"):
        compile_src(
            kernel_file,
            src,
            inputs={"a": np.zeros((2, 2), np.float32), "b": np.zeros((2, 2), np.float32), "c": 1},
        )


def test_compile_time_parameters_and_defaults(kernel_file):
    program = compile_src(
        kernel_file,
        """
@nki.jit
def k(a, cols=16, scale=2.0):
    out = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, :cols])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    nisa.dma_copy(dst=out, src=t)
    return out
""",
        inputs={"a": np.zeros((128, 64), np.float32), "cols": 8},
    )
    assert program.outputs[0].shape == (128, 8)
    assert program.params == {"cols": 8, "scale": 2.0}


def test_neuronxcc_spelling_of_imports(kernel_file):
    path = kernel_file("""
from neuronxcc import nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

@nki.jit
def k(a):
    t = nl.load(a)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(t))
    return out
""")
    program = neuronemu.compile_kernel(path, {"a": np.zeros((4, 8), np.float32)})
    assert names(program) == ["dma_copy", "activation", "dma_copy"]
    assert program.instrs[1].attrs["op"] == "exp"
