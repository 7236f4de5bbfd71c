"""Access patterns: t.ap(...), reshape and broadcast views, against NumPy; their rules; the
text form."""

from __future__ import annotations

import re

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import ConstraintError, KernelTypeError, NeuronEmuError
from neuronemu.nasm.write import dumps

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

KERNEL = (
    HEADER
    + """
@nki.jit
def k(a, col):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap(pattern=[[128, 128], [2, 64]], offset=1))
    c = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=col)
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=t, data2=c.broadcast(1, 64), op=nl.add)
    u = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=s.reshape((128, 8, 8))[:, ::2, :])
    nisa.dma_copy(dst=out[:, 0:32], src=u.reshape(128, 32))
    nisa.dma_copy(dst=out[:, 32:64], src=t[:, 32:64])
    return out
"""
)


def inputs():
    rng = np.random.default_rng(0)
    return {
        "a": rng.standard_normal((128, 128)).astype(np.float32),
        "col": rng.standard_normal((128, 1)).astype(np.float32),
    }


def test_patterns_reshapes_and_broadcasts_read_the_right_elements(kernel_file):
    x = inputs()
    result = neuronemu.run(kernel_file(KERNEL), x)
    t = x["a"][:, 1::2]
    s = (t + x["col"]).reshape(128, 8, 8)[:, ::2, :].reshape(128, 32)
    np.testing.assert_array_equal(result.outputs["out"][:, :32], s)
    np.testing.assert_array_equal(result.outputs["out"][:, 32:], t[:, 32:])


def test_patterns_survive_the_text_form(kernel_file, tmp_path):
    x = inputs()
    first = neuronemu.run(kernel_file(KERNEL), x)
    text = tmp_path / "k.nasm"
    text.write_text(dumps(first.program))
    assert "ap(a, [[128, 128], [2, 64]], 1)" in text.read_text()
    again = neuronemu.run(text, x)
    assert again.outputs["out"].tobytes() == first.outputs["out"].tobytes()
    assert again.cycles == first.cycles


@pytest.mark.parametrize(
    ("line", "error", "message"),
    [
        (
            "nisa.dma_copy(dst=t, src=a.ap(pattern=[[128, 128], [2, 64]], offset=64))",
            ConstraintError,
            "reaches element 16446 of a, which has 16384",
        ),
        (
            "nisa.dma_copy(dst=t.ap(pattern=[[32, 128], [1, 64]]), src=a[:, 0:64])",
            ConstraintError,
            "partition step of an SBUF/PSUM access pattern must be the tensor's free",
        ),
        (
            "nisa.tensor_copy(dst=t[:, 0:1].broadcast(1, 64), src=t)",
            ConstraintError,
            "repeats elements (a stride-0 broadcast)",
        ),
        (
            "nisa.tensor_copy(dst=t, src=t[:, ::2].reshape(128, 64))",
            KernelTypeError,
            "cannot reshape [128, 32]",
        ),
        (
            "nisa.tensor_copy(dst=t, src=t.reshape(64, 128))",
            KernelTypeError,
            "reshape keeps the partition dim",
        ),
        (
            "nisa.tensor_copy(dst=t, src=t.broadcast(0, 4))",
            KernelTypeError,
            "the partition dim cannot be broadcast",
        ),
    ],
)
def test_bad_patterns_are_located_errors(kernel_file, line, error, message):
    src = (
        HEADER
        + f"""
@nki.jit
def k(a, col):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    {line}
    return a
"""
    )
    with pytest.raises(error, match=re.escape(message)) as info:
        neuronemu.compile_kernel(kernel_file(src), inputs())
    assert isinstance(info.value, NeuronEmuError) and info.value.span.line == 10
