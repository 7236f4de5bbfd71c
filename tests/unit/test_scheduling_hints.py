"""Scheduling hints: `with nl.no_reorder()`, `instr.depends_on(...)`, `kernel.with_schedule`."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import ConstraintError, KernelTypeError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

BODY = """
def body(i, tiles, outs):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=o, op=nl.exp, data=tiles[i], name=f"act{i}")
    outs.append(o)

@nki.jit
def k(a):
    tiles = []
    for i in range(3):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(i), name=f"set{i}")
        tiles.append(t)
    outs = []
    %s
    return a
"""


def acts(program):
    return [i for i in program.instrs if i.spec.name == "activation"]


def compile_body(kernel_file, loop: str, extra: str = "", kernel: str | None = None):
    src = HEADER + BODY % loop + extra
    return neuronemu.compile_kernel(
        kernel_file(src), {"a": np.zeros((1, 1), np.float32)}, kernel=kernel
    )


def test_independent_instructions_have_no_edges(kernel_file):
    p = compile_body(kernel_file, "for i in range(3):\n        body(i, tiles, outs)")
    assert [len(i.deps) for i in acts(p)] == [1, 1, 1]  # only its own memset


def test_no_reorder_chains_everything_under_it_including_called_helpers(kernel_file):
    p = compile_body(
        kernel_file,
        "with nl.no_reorder():\n        for i in range(3):\n            body(i, tiles, outs)",
    )
    a = acts(p)
    assert a[0].index in a[1].deps and a[1].index in a[2].deps


def test_depends_on_a_later_instruction_is_an_error(kernel_file):
    with pytest.raises(ConstraintError, match="comes later in program order"):
        compile_body(
            kernel_file,
            "x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
            "    c = nisa.tensor_copy(dst=x, src=tiles[0])\n"
            "    m = nisa.memset(dst=tiles[2], value=9.0)\n"
            "    c.depends_on(m)",
        )


def test_depends_on_an_earlier_instruction(kernel_file):
    p = compile_body(
        kernel_file,
        "x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    m = nisa.memset(dst=tiles[2], value=9.0)\n"
        "    c = nisa.tensor_copy(dst=x, src=tiles[0], engine=nisa.engine.scalar)\n"
        "    c.depends_on(m)",
    )
    copy, memset = p.instrs[-1], p.instrs[-2]
    assert memset.index in copy.deps and memset.index in copy.waits


def test_with_schedule_orders_named_instructions(kernel_file):
    extra = "\nscheduled = k.with_schedule([('act1', 'act0'), ('act2', ['act1', 'set0'])])\n"
    p = compile_body(
        kernel_file, "for i in range(3):\n        body(i, tiles, outs)", extra, kernel="scheduled"
    )
    a = acts(p)
    assert a[0].index in a[1].deps and a[1].index in a[2].deps
    assert p.instrs[0].index in a[2].deps


def test_other_with_blocks_are_rejected(kernel_file):
    # (`with` takes nl.no_reorder() or a kernel class with __enter__/__exit__: CPython's
    # TypeError for anything else)
    with pytest.raises(KernelTypeError, match="does not support the context manager protocol"):
        compile_body(kernel_file, "with nl.sbuf:\n        pass")
