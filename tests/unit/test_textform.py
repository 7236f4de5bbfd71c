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
from neuronemu.nasm.write import dumps
from neuronemu.report.reference import discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def round_trip(tmp_path, kernel_path, inputs, **options):
    """Run the kernel, print its program, run the text back: the same cycles, the same
    output bytes, the same source lines, and the text a fixed point (but for the file it
    names as its source). Returns the text."""
    original = neuronemu.run(kernel_path, inputs, **options)
    text = tmp_path / "program.nasm"
    text.write_text(dumps(original.program))
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    again = neuronemu.run(text, arrays, **options)
    assert again.cycles == original.cycles
    assert (again.outputs is None) == (original.outputs is None)
    for name, out in (original.outputs or {}).items():
        assert again.outputs[name].tobytes() == out.tobytes(), name
    assert dumps(again.program).split("\n")[3:] == dumps(original.program).split("\n")[3:]

    def where(result):
        return [(i.span.path, i.span.line, i.span.col) for i in result.program.instrs]

    assert where(again) == where(original)
    return text.read_text()


@pytest.mark.parametrize(
    ("kernel_path", "case"),
    [
        pytest.param(path, case, id=f"{path.stem}-{'-'.join(case.values())}")
        for path, _, case in discover_cases(KERNELS)
    ],
)
def test_asm_parses_back_to_the_same_outputs_and_cycles(tmp_path, kernel_path, case):
    inputs = {k: parse_spec(k, v, seed=3) for k, v in case.items()}
    assert round_trip(tmp_path, kernel_path, inputs)  # (it fails inside, with what differs)


TIMING = Path(__file__).resolve().parents[1] / "timing"


@pytest.mark.parametrize(
    ("file", "kernel", "shapes", "params"),
    [
        ("matmul_blocked.py", None, ((512, 1024), (512, 1024)), {"block_m": 512, "block_n": 512}),
        ("v12_matmuls.py", "tiled", ((256, 256), (256, 1024)), {}),
        ("v12_matmuls.py", "hoisted", ((256, 256), (256, 1024)), {}),
        ("v12_matmuls.py", "blocked_free", ((512, 512), (512, 2048)), {}),
        ("v12_matmuls.py", "blocked_all", ((1024, 2048), (1024, 1024)), {}),
    ],
)
def test_the_timing_kernels_round_trip(tmp_path, file, kernel, shapes, params):
    rng = np.random.default_rng(4)
    inputs = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in zip(("lhsT", "rhs"), shapes)
    }
    options = {"kernel": kernel} if kernel else {}
    assert round_trip(tmp_path, TIMING / file, inputs | params, **options)


NKI = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
LEGACY = (
    "from neuronxcc import nki\nimport neuronxcc.nki.isa as nisa\n"
    "import neuronxcc.nki.language as nl\nfrom neuronxcc.nki.language import par_dim\n\n"
)
RNG = np.random.default_rng(11)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# Small kernels, one per kind of program the text form must carry whole.
ROUND_TRIPS = {
    # A tile a loop allocates under one explicit name in every iteration.
    "named-in-a-loop": (
        NKI
        + """
@nki.jit
def k(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, name="t")
        nisa.dma_copy(dst=t, src=a[:, i * 64:(i + 1) * 64])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, i * 64:(i + 1) * 64], src=t)
    return out
""",
        {"a": _rand(128, 256)},
        {},
    ),
    # The same in the older dialect: a block tensor made anew in each iteration (its blocks
    # are named after it, the same every time), and a named tile.
    "legacy-blocks-in-a-loop": (
        LEGACY
        + """
@nki.jit
def k(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        acc = nl.zeros((2, par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            c = (2 * i + j) * 128
            x = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, name="x")
            x[...] = nl.load(a[:, c:c + 128])
            acc[j] = nl.add(acc[j], x)
            nl.store(out[:, c:c + 128], value=acc[j])
    return out
""",
        {"a": _rand(128, 512)},
        {},
    ),
    # A loop long enough to be replayed, each iteration's tile placed at one address: the
    # reuse of those bytes orders copies on their own queue (no wait says so).
    "replayed-reuse": (
        NKI
        + """
@nki.jit
def k(a):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    keep = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=keep, src=a[0:128, 0:64])
    bank = []
    for b in range(12):
        bt = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt, src=a[0:128, 0:64])
        bank.append(bt)
    for i in nl.affine_range(6):
        p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
        nisa.dma_copy(dst=p, src=a[0:128, 0:64])
        nisa.dma_copy(dst=out[:, (i % 2) * 64:(i % 2) * 64 + 64], src=keep)
        nisa.tensor_copy(dst=keep[:, 0:32], src=bank[3][:, 0:32])
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:128, 0:64])
    last = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=last, src=keep)
    nisa.dma_copy(dst=out[:, 0:64], src=last)
    return out
""",
        {"a": _rand(256, 1024)},
        {"allow_uninit": True},
    ),
    # Tiles that outgrow trn1's SBUF (a scan per state): stored, reloaded into clones, loads
    # sunk to where there is room, all placed by the planner.
    "spills": (
        NKI
        + """
@nki.jit
def k(dt, x, a, b, c):
    chans, steps = dt.shape
    y = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.shared_hbm)
    total = nl.zeros((chans, steps), dtype=nl.float32)
    dt_t = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=dt_t, src=dt)
    x_t = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_t, src=x)
    for n in nl.affine_range(a.shape[1]):
        a_n = nl.ndarray((chans, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_n, src=a[:, n:n + 1])
        decay = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=decay, op=nl.exp, data=dt_t, scale=a_n)
        b_n = nl.ndarray((1, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_n, src=b[n:n + 1, :])
        drive = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        prod = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=dt_t, data2=x_t, op=nl.multiply)
        nisa.tensor_tensor(dst=drive, data1=prod, data2=nl.broadcast_to(b_n, (chans, steps)),
                           op=nl.multiply)
        h = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=h, data0=decay, data1=drive, initial=0.0,
                                op0=nl.multiply, op1=nl.add)
        c_n = nl.ndarray((1, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c_n, src=c[n:n + 1, :])
        hc = nl.ndarray((chans, steps), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=hc, data1=h, data2=nl.broadcast_to(c_n, (chans, steps)),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=total, data1=total, data2=hc, op=nl.add)
    nisa.dma_copy(dst=y, src=total)
    return y
""",
        {
            "dt": _rand(128, 4096) * np.float32(0.01),
            "x": _rand(128, 4096),
            "a": -np.abs(_rand(128, 4)),
            "b": _rand(4, 4096),
            "c": _rand(4, 4096),
        },
        {"target": "trn1"},
    ),
    # Inputs nothing reads (one of them 0-d), an input the kernel writes and returns.
    "inputs": (
        NKI
        + """
@nki.jit
def k(a, b, unused, s):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=b)
    nisa.dma_copy(dst=a[0:64, :], src=t[0:64, :])
    return a
""",
        {
            "a": _rand(128, 64),
            "b": _rand(128, 64),
            "unused": _rand(4, 4),
            "s": np.array(2, np.float32),
        },
        {"allow_uninit": True},
    ),
    # The older dialect's output argument, written only in part.
    "legacy-output-argument": (
        LEGACY
        + """
@nki.jit
def k(a, out):
    nl.store(out[0:64, :], value=nl.exp(nl.load(a[0:64, :])))
""",
        {"a": _rand(128, 32), "out": _rand(128, 32)},
        {},
    ),
    # A device loop over a register, indirect copies at its variable, a reinterpreted tile,
    # PSUM, views with steps and an access pattern with odd strides and offset.
    "device-loop-indirect-psum-views": (
        NKI
        + """
@nki.jit
def k(data, n, w):
    R, F = data.shape
    out = nl.ndarray((R, F), dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((R, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)

    def body(i):
        t = nl.ndarray((1, F), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], scalar_offset=i, indirect_dim=0), src=t)

    nl.fori_loop(0, nisa.scalar_load(n_sb), body)
    ws = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    bits = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=bits, data=ws.view(nl.int32), op0=nl.bitwise_and, operand0=0x7FFFFF)
    acc = nl.ndarray((128, 43), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=ws, moving=ws[:, 1:128:3])
    back = nl.ndarray((128, 43), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=back, src=acc)
    flip = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=flip, src=ws.ap(pattern=[[128, 128], [2, 64]], offset=1))
    r = nl.ndarray((128, 64 + 43 + 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=r[:, 0:64], src=flip)
    nisa.dma_copy(dst=r[:, 64:107], src=back)
    nisa.dma_copy(dst=r[:, 107:235], src=bits.view(nl.float32))
    return out, r
""",
        {
            "data": _rand(8, 16),
            "n": np.array([[5]], dtype=np.int32),
            "w": _rand(128, 128),
        },
        {},
    ),
    # Two cores (LNC2), and tiles named by words the text form reads otherwise.
    "two-cores-and-odd-names": (
        NKI
        + """
@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    rows = a.shape[0] // nl.num_programs(0)
    for t in range(rows // 128):
        r0 = i * rows + t * 128
        ap = nl.load(a[r0:r0 + 128, :])
        after = nl.load(b[r0:r0 + 128, :])
        odd = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf, name="my tile")
        nisa.tensor_tensor(dst=odd, data1=ap, data2=after, op=nl.add)
        nl.store(out[r0:r0 + 128, :], value=odd)
    return out


def on_two_cores(a, b):
    return add[nl.nc(2)](a, b)
""",
        {"a": _rand(512, 64), "b": _rand(512, 64)},
        {"kernel": "on_two_cores"},
    ),
}


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_every_kind_of_program_runs_back_the_same(kernel_file, tmp_path, name):
    source, inputs, options = ROUND_TRIPS[name]
    text = round_trip(tmp_path, kernel_file(source), inputs, **options)
    lines = text.splitlines()
    names = [line.split()[1] for line in lines if line.startswith((".tensor", ".alias"))]
    assert len(names) == len(set(names))


def test_a_tile_named_alike_in_every_iteration_is_numbered_in_program_order(kernel_file, tmp_path):
    source, inputs, _ = ROUND_TRIPS["named-in-a-loop"]
    text = round_trip(tmp_path, kernel_file(source), inputs)
    tiles = [line.split()[1] for line in text.splitlines() if " tile sbuf " in line]
    assert tiles == ["t", "t.1", "t.2", "t.3"]


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
    text.write_text(dumps(first.program))
    assert "shuffle_mask=[31, 30," in text.read_text()
    again = neuronemu.run(text, {"a": a})
    assert again.outputs["out"].tobytes() == first.outputs["out"].tobytes()
