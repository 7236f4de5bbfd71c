"""Engine registers as program state: activation's reduce registers persist between
instructions, are ordered like memory, and are uninitialized until reset."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import MemoryAccessError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

TWO_PASSES = (
    HEADER
    + """
@nki.jit
def k(a, b):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    ex = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=ex, op=nl.exp, data=x, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.%s)
    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=ex, op=nl.exp, data=y, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.dma_copy(dst=out, src=total)
    return out
"""
)


def test_registers_accumulate_across_instructions(kernel_file):
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    result = neuronemu.run(kernel_file(TWO_PASSES % "reset_reduce"), {"a": a, "b": b})
    expected = np.exp(a).sum(1, dtype=np.float32) + np.exp(b).sum(1, dtype=np.float32)
    np.testing.assert_allclose(result.outputs["out"][:, 0], expected, rtol=1e-5)
    regs = [t for t in result.program.tensors if t.buffer.value == "reg"]
    assert [t.name for t in regs] == ["reduce_regs.scalar"]
    second = [i for i in result.program.instrs if i.spec.name == "activation"][1]
    assert second.operands["reduce_regs"].tensor is regs[0]


def test_reducing_onto_registers_never_reset_is_an_uninitialized_read(kernel_file):
    with pytest.raises(MemoryAccessError, match="activation reads reduce_regs.scalar"):
        neuronemu.run(
            kernel_file(TWO_PASSES % "reduce"),
            {"a": np.zeros((128, 64), np.float32), "b": np.zeros((128, 64), np.float32)},
        )


def test_activation_reduce_leaves_its_sum_in_the_registers(kernel_file):
    src = (
        HEADER
        + """
@nki.jit
def k(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    first = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=y, op=nl.copy, data=x, reduce_op=nl.add, reduce_res=first)
    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.copy, data=x, reduce_op=nl.add, reduce_res=total,
                    reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.dma_copy(dst=out, src=total)
    return out
"""
    )
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 64
    result = neuronemu.run(kernel_file(src), {"a": a})
    np.testing.assert_allclose(result.outputs["out"][:, 0], 2 * a.sum(1), rtol=1e-6)


RANDOM = (
    HEADER
    + """
@nki.jit
def k(a, seed=7):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    %s
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dropout(dst=y, data=x, prob=0.25)
    nisa.dma_copy(dst=out, src=y)
    return out
"""
)
SEEDING = """s = nl.ndarray((1, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=seed)
    nisa.set_rng_seed(s)"""


def test_random_instructions_are_deterministic_from_their_seed(kernel_file):
    path = kernel_file(RANDOM % SEEDING)
    a = np.ones((128, 64), np.float32)
    first = neuronemu.run(path, {"a": a})
    again = neuronemu.run(path, {"a": a})
    other = neuronemu.run(path, {"a": a, "seed": 8})
    out = first.outputs["out"]
    assert out.tobytes() == again.outputs["out"].tobytes()
    assert out.tobytes() != other.outputs["out"].tobytes()
    assert 0.2 < (out == 0).mean() < 0.3
    assert set(np.unique(out)) <= {0.0, 1.0}


def test_an_unseeded_generator_is_an_uninitialized_read(kernel_file):
    with pytest.raises(MemoryAccessError, match="dropout reads rng_state.vector"):
        neuronemu.run(kernel_file(RANDOM % "pass"), {"a": np.ones((128, 64), np.float32)})
