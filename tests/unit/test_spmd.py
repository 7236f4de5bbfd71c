"""SPMD launches: program ids, one shared output, instances in turn, the grid from the file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.errors import KernelTypeError

SOURCE = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tag(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    cols = a.shape[1] // nl.num_programs(1)
    r0 = nl.program_id(0) * rows
    c0 = nl.program_id(1) * cols
    t = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[r0:r0 + rows, c0:c0 + cols])
    tag = float(nl.program_id(0) * 10 + nl.program_id(1) + nl.program_ndim() * 100)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=tag)
    nisa.dma_copy(dst=out[r0:r0 + rows, c0:c0 + cols], src=t)
    return out


def host(a):
    return tag[2, 3](a)
"""


def expected(a, gx, gy):
    out = a.copy()
    rows, cols = a.shape[0] // gx, a.shape[1] // gy
    for x in range(gx):
        for y in range(gy):
            out[x * rows : (x + 1) * rows, y * cols : (y + 1) * cols] += 10 * x + y + 100 * 2
    return out


def test_grid_from_the_files_launch_and_shared_output(kernel_file):
    a = np.random.default_rng(0).standard_normal((8, 9)).astype(np.float32)
    result = neuronemu.run(kernel_file(SOURCE), {"a": a})
    assert result.program.grid == (2, 3)
    assert [t.name for t in result.program.outputs] == ["out"]
    np.testing.assert_array_equal(result.outputs["out"], expected(a, 2, 3))


def test_explicit_grid_overrides_the_launch(kernel_file):
    a = np.zeros((4, 4), np.float32)
    result = neuronemu.run(kernel_file(SOURCE), {"a": a}, grid=(1, 2))
    np.testing.assert_array_equal(result.outputs["out"], expected(a, 1, 2))


def test_instances_run_in_turn(kernel_file):
    result = neuronemu.run(kernel_file(SOURCE), {"a": np.zeros((8, 9), np.float32)})
    tl, instrs = result.timeline, result.program.instrs
    per_instance = len(instrs) // 6
    for n in range(1, 6):
        before = range((n - 1) * per_instance, n * per_instance)
        first = n * per_instance
        assert tl.start_ns[first] >= max(tl.end_ns[i] for i in before)


def test_program_id_axis_outside_the_grid_is_an_error(kernel_file):
    src = SOURCE.replace("nl.program_id(1) * cols", "nl.program_id(2) * cols")
    with pytest.raises(KernelTypeError, match=r"nl.program_id\(2\): the launch grid \[2, 3\]"):
        neuronemu.compile_kernel(kernel_file(src), {"a": np.zeros((8, 9), np.float32)})


def test_cli_grid_option(kernel_file):
    path = kernel_file(SOURCE)
    result = CliRunner().invoke(
        main, ["run", path, "-i", "a=float32[4,6]", "--grid", "2,2", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["grid"] == [2, 2]
    bad = CliRunner().invoke(main, ["run", path, "-i", "a=float32[4,6]", "--grid", "0"])
    assert bad.exit_code == 2


OVERRIDE = """\
import os
import nki
import nki.language as nl

os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn1"


@nki.jit
def k(a):
    return a
"""


def test_platform_override_in_the_file_picks_the_target(kernel_file):
    path = kernel_file(OVERRIDE)
    program = neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)})
    assert program.arch.name == "trn1"
    assert program.notes == [
        f"{path}:5:1: NEURON_PLATFORM_TARGET_OVERRIDE='trn1' selects target trn1"
    ]
    explicit = neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)}, target="trn3")
    assert explicit.arch.name == "trn3" and "--target trn3 wins" in explicit.notes[0]


def test_platform_override_is_reported_by_the_cli(kernel_file):
    result = CliRunner().invoke(
        main, ["run", kernel_file(OVERRIDE), "-i", "a=float32[1,1]", "--json"]
    )
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["target"] == "trn1" and len(data["notes"]) == 1
    assert "note:" in result.stderr and "selects target trn1" in result.stderr
