"""The text form of programs: `asm` output parses back and runs identically; edits take effect."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.errors import KernelSyntaxError, KernelTypeError
from neuronemu.inputs import parse_spec
from neuronemu.nasm.read import load_program
from neuronemu.reference import discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@pytest.mark.parametrize(
    ("kernel_path", "case"),
    [
        pytest.param(path, case, id=f"{path.stem}-{'-'.join(case.values())}")
        for path, _, case in discover_cases(KERNELS)
    ],
)
def test_asm_parses_back_to_the_same_outputs_and_cycles(tmp_path, kernel_path, case):
    inputs = {k: parse_spec(k, v, seed=3) for k, v in case.items()}
    original = neuronemu.run(kernel_path, inputs)
    text = tmp_path / "program.nasm"
    text.write_text(original.program.dump())
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    again = neuronemu.run(text, arrays)
    assert again.cycles == original.cycles
    for name, out in original.outputs.items():
        assert again.outputs[name].tobytes() == out.tobytes()
    # The text is a fixed point (but for the file it names as its source).
    assert again.program.dump().split("\n")[3:] == original.program.dump().split("\n")[3:]

    def where(result):
        return [(i.span.path, i.span.line, i.span.col) for i in result.program.instrs]

    assert where(again) == where(original)


SMALL = """\
.kernel k
.target trn2
.tensor a input hbm float32[128,64]
.tensor out output shared_hbm float32[128,64]
.tensor t tile sbuf float32[128,64]

vector:
  @1 tensor_scalar dst=t data=t operand0=2.0 op0=multiply wait(dma.q0@0)
dma.q0:
  @0 dma_copy dst=t src=a
dma.q1:
  @2 dma_copy dst=out src=t wait(vector@1)
"""


def test_a_hand_written_program_runs(tmp_path):
    path = tmp_path / "k.nasm"
    path.write_text(SMALL)
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    result = neuronemu.run(path, {"a": a})
    np.testing.assert_array_equal(result.outputs["out"], a * 2)
    assert [i.queue for i in result.program.instrs if i.queue >= 0] == [0, 1]


def test_deleted_wait_is_kept_deleted(tmp_path):
    path = tmp_path / "k.nasm"
    path.write_text(SMALL.replace(" wait(dma.q0@0)", ""))
    program = load_program(path, {"a": np.zeros((128, 64), np.float32)})
    assert program.instrs[1].deps == ()


@pytest.mark.parametrize(
    ("edit", "error", "message", "line"),
    [
        (
            ("tensor_scalar", "tensor_scalr"),
            KernelTypeError,
            "unknown instruction 'tensor_scalr'",
            8,
        ),
        (("data=t ", "data=q "), KernelTypeError, "unknown tensor 'q'", 8),
        (("wait(dma.q0@0)", "wait(dma.q1@2)"), KernelTypeError, "not an earlier instruction", 8),
        (
            (
                "float32[128,64]\n.tensor t",
                "float32[128,64]\n.tensor t tile sbuf floaty[1,1]\n.tensor u",
            ),
            KernelTypeError,
            "unknown dtype 'floaty'",
            5,
        ),
        (("@1 tensor_scalar", "@1 = tensor_scalar"), KernelSyntaxError, "invalid program text", 8),
    ],
)
def test_bad_program_text_is_located(tmp_path, edit, error, message, line):
    path = tmp_path / "k.nasm"
    path.write_text(SMALL.replace(*edit))
    with pytest.raises(error, match=message) as info:
        load_program(path, {"a": np.zeros((128, 64), np.float32)})
    assert info.value.span.line == line and info.value.span.path == str(path)


def test_cli_runs_a_program_file(tmp_path):
    path = tmp_path / "k.nasm"
    path.write_text(SMALL)
    result = CliRunner().invoke(main, ["run", str(path), "-i", "a=float32[128,64]", "--json"])
    assert result.exit_code == 0, result.stderr
    missing = CliRunner().invoke(main, ["run", str(path)])
    assert missing.exit_code == 2 and "program needs input 'a'" in missing.stderr


def test_list_attributes_survive_the_text_form(kernel_file, tmp_path):
    src = """
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(dst=u, src=t, shuffle_mask=[31 - i for i in range(32)])
    nisa.dma_copy(dst=out, src=u)
    return out
"""
    a = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    first = neuronemu.run(kernel_file(src), {"a": a})
    np.testing.assert_array_equal(first.outputs["out"], a[::-1])
    text = tmp_path / "k.nasm"
    text.write_text(first.program.dump())
    assert "shuffle_mask=[31, 30," in text.read_text()
    again = neuronemu.run(text, {"a": a})
    assert again.outputs["out"].tobytes() == first.outputs["out"].tobytes()
