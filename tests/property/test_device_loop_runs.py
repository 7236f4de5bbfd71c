"""Random kernels of nested device loops (`fori_loop`, `while_loop`, `if_else`) whose trip
counts come from tiles the kernel writes on the device, in bodies that may run zero times:
a timing-only run is the run with values (its time, notes, prints and errors), and the
executed run with its passes over a body as repeated blocks, the third on made when read
(`neuronemu.sim.loops`), is the run made instruction by instruction."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import NeuronEmuError
from neuronemu.sim import loops

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# The tiles every kernel has: `c` and `c2` hold counts, `acc` and `row` values, `zoff` 0.
PROLOGUE = """@nki.jit
def k(data, n, m):
    R, F = data.shape
    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=m)
    c2 = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=c2, value=2)
    xs = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=data)
    acc = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    row = nl.zeros((1, F), dtype=data.dtype, buffer=nl.sbuf)
    zoff = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=zoff, value=0)
"""
EPILOGUE = """    nisa.dma_copy(dst=out, src=acc)
    nisa.dma_copy(dst=out[0:1, 0:F], src=row)
    return out
"""


def _statement(draw, variables: list[str]) -> list[str]:
    """One instruction or two, on the counts or the values."""
    kind = draw(st.integers(0, 8))
    if kind == 0:
        return ["nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)"]
    if kind == 1:
        return ["nisa.tensor_copy(dst=xs, src=acc, engine=nisa.gpsimd_engine)"]
    if kind == 2:
        count, value = draw(st.sampled_from(["c", "c2"])), draw(st.integers(0, 3))
        return [f"nisa.memset(dst={count}, value={value})"]
    if kind == 3:  # (a count stepped, kept in [0, 4])
        return [
            f"nisa.tensor_scalar(dst=c, data=c, op0=nl.add, operand0={draw(st.integers(-1, 2))})",
            "nisa.tensor_scalar(dst=c, data=c, op0=nl.maximum, operand0=0)",
            "nisa.tensor_scalar(dst=c, data=c, op0=nl.minimum, operand0=4)",
        ]
    if kind == 4:
        return ["nisa.tensor_copy(dst=c2, src=c)"]
    if kind in (5, 6):  # a row gathered at an offset from a loop variable (in bounds)
        offset = "zoff"
        if variables:
            offset = f"nisa.scalar_alu({draw(st.sampled_from(variables))}, R, op=nl.fmod)"
        name = f"g{draw(st.integers(0, 10**6))}"
        return [
            f"{name} = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)",
            f"nisa.dma_copy(dst={name}, src=data.ap([[F, 1], [1, F]], scalar_offset={offset}, "
            "indirect_dim=0))",
            f"nisa.tensor_tensor(dst=row, data1=row, data2={name}, op=nl.add)",
        ]
    if kind == 7:
        return ["nl.device_print('row=', row[0:1, 0:2])"]
    return ["nisa.dma_copy(dst=out[0:1, 0:F], src=row)"]


def _bound(draw, variables: list[str]) -> str:
    options = ["nisa.scalar_load(n_sb)", "nisa.scalar_load(c)", "nisa.scalar_load(c2)", "3"]
    if variables:
        options.append(f"{variables[-1]} + {draw(st.integers(-1, 1))}")
    return draw(st.sampled_from(options))


@st.composite
def kernels(draw) -> str:
    counter = iter(range(10**6))

    def block(indent: str, depth: int, variables: list[str]) -> list[str]:
        lines: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 3 and draw(st.booleans()):
                lines += control(indent, depth + 1, variables)
            else:
                lines += [indent + line for line in _statement(draw, variables)]
        return lines

    def control(
        indent: str, depth: int, variables: list[str], kinds: tuple = ("for", "while", "if")
    ) -> list[str]:
        f = f"f{next(counter)}"
        inner = indent + "    "
        kind = draw(st.sampled_from(kinds))
        if kind == "for":
            i = f"i{next(counter)}"
            return [
                f"{indent}def {f}({i}):",
                *block(inner, depth, [*variables, i]),
                f"{indent}nl.fori_loop(0, {_bound(draw, variables)}, {f})",
            ]
        if kind == "while":  # (at most 4 passes)
            start = (
                f"nisa.scalar_alu(nisa.scalar_alu({_bound(draw, variables)}, 4, op=nl.minimum), "
                "0, op=nl.maximum)"
            )
            return [
                f"{indent}def {f}(r):",
                *block(inner, depth, variables),
                f"{inner}return r - 1",
                f"{indent}nl.while_loop({start}, {f})",
            ]
        condition = f"{_bound(draw, variables)} > {draw(st.integers(0, 2))}"
        return [
            f"{indent}def {f}a():",
            *block(inner, depth, variables),
            f"{indent}def {f}b():",
            *block(inner, depth, variables),
            f"{indent}nl.if_else({condition}, {f}a, {f}b)",
        ]

    # (one loop at least: a timing-only run of a kernel without one runs no instruction)
    body = block("    ", 0, []) + control("    ", 1, [], ("for", "while"))
    return HEADER + PROLOGUE + "\n".join(body) + "\n" + EPILOGUE


def _run(path: Path, inputs: dict, **kw):
    printed: list[str] = []
    try:
        result = neuronemu.run(
            path, inputs, print_fn=printed.append, limits={"instructions": 20_000}, **kw
        )
    except NeuronEmuError as e:
        return None, printed, f"{type(e).__name__}: {e}"
    return result, printed, None


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(kernels(), st.integers(0, 6), st.integers(0, 4), st.integers(0, 2**16))
def test_a_timing_only_run_of_device_loops_is_the_run_with_values(source, n, m, seed):
    data = (np.random.default_rng(seed).standard_normal((4, 8)) * 0.1).astype(np.float32)
    inputs = {"data": data, "n": np.array([[n]], np.int32), "m": np.array([[m]], np.int32)}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.py"
        path.write_text(source)
        full, printed, error = _run(path, inputs)
        fast, printed_fast, error_fast = _run(path, inputs, timing_only=True)
        with mock.patch.object(loops, "_repeated_passes", lambda *_: []):
            plain, _, error_plain = _run(path, inputs, timing_only=True)
    assert error_fast == error and error_plain == error
    assert printed_fast == printed
    if error is not None:
        return
    assert full is not None and fast is not None and plain is not None
    np.testing.assert_array_equal(fast.timeline.end_ns, full.timeline.end_ns)
    assert fast.program.notes == full.program.notes
    assert fast.engines == full.engines
    # The passes as repeated blocks and made when read: the same run, each instruction
    # following the same ones.
    ran, ran_plain = fast.timeline.program.instrs, plain.timeline.program.instrs
    assert [(i.deps, i.waits) for i in ran] == [(i.deps, i.waits) for i in ran_plain]
    np.testing.assert_array_equal(fast.timeline.start_ns, plain.timeline.start_ns)
    assert fast.stalls.lines() == plain.stalls.lines()
