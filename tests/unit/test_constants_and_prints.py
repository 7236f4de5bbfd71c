"""Trace-time constants (nl.shared_identity_matrix, nl.shared_constant of NumPy arrays) and
run-time prints (nl.device_print), through the text form too."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import neuronemu
from neuronemu.nasm.write import dumps

KERNEL = """\
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ident = nl.shared_identity_matrix(128, dtype=nl.bfloat16)
    ramp = nl.shared_constant(np.arange(128, dtype=np.float32).reshape(128, 1) * 0.5)
    x = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=ident, moving=x)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y, data=ps, op0=nl.multiply, operand0=ramp)
    nl.device_print("row0=", y[0:1, 0:4])
    nisa.dma_copy(dst=out, src=y)
    return out
"""


def test_constants_are_initialized_tiles_and_survive_the_text_form(kernel_file, tmp_path):
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    printed: list[str] = []
    result = neuronemu.run(kernel_file(KERNEL), {"a": a}, print_fn=printed.append)
    expected = a.astype(np.float32) * (np.arange(128, dtype=np.float32) * 0.5)[:, None]
    np.testing.assert_array_equal(result.outputs["out"], expected)
    constants = {t.name: t for t in result.program.tensors if t.kind == "constant"}
    assert set(constants) == {"ident", "ramp"}
    np.testing.assert_array_equal(constants["ident"].data.astype(np.float32), np.identity(128))
    text = tmp_path / "k.nasm"
    text.write_text(dumps(result.program))
    again = neuronemu.run(text, {"a": a}, print_fn=lambda _: None)
    assert again.outputs["out"].tobytes() == result.outputs["out"].tobytes()
    assert again.cycles == result.cycles


def test_device_print_prints_values_when_the_kernel_runs(kernel_file):
    a = np.ones((128, 64), ml_dtypes.bfloat16)
    printed: list[str] = []
    program = neuronemu.compile_kernel(kernel_file(KERNEL), {"a": a}, print_fn=printed.append)
    assert printed == []  # nothing at trace time
    assert any(i.spec.name == "device_print" for i in program.instrs)
    path = kernel_file(KERNEL)
    neuronemu.run(path, {"a": a}, print_fn=printed.append)
    line = next(n for n, t in enumerate(KERNEL.splitlines(), 1) if "device_print" in t)
    assert printed == [f"{path}:{line} #1: row0=[[0. 0. 0. 0.]]"]


def test_device_print_in_a_loop_says_which_pass_printed(kernel_file):
    src = (
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
        "@nki.jit\ndef k(a):\n"
        "    for i in range(3):\n"
        "        t = nl.ndarray((1, 2), dtype=a.dtype, buffer=nl.sbuf)\n"
        "        nisa.dma_copy(dst=t, src=a[i:i + 1, 0:2])\n"
        "        nl.device_print('row=', t)\n"
        "    return a\n"
    )
    path = kernel_file(src)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    printed: list[str] = []
    neuronemu.run(path, {"a": a}, print_fn=printed.append)
    assert printed == [f"{path}:10 #{i + 1}: row={a[i : i + 1, 0:2]}" for i in range(3)]
