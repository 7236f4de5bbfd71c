"""Each error kind: the full `path:line:col: error:` message, the caret, the exit code."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from neuronemu.cli import main

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def run_cli(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    return result


def kernel(tmp_path: Path, body: str) -> str:
    path = tmp_path / "k.py"
    path.write_text(HEADER + body)
    return str(path)


def first_line(stderr: str) -> str:
    return stderr.splitlines()[0]


def test_syntax_error(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    for i in nl.affine_range(2)
        pass
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:7:32: error: invalid syntax: unexpected end of line"
    )
    lines = result.stderr.splitlines()
    assert lines[1] == "    for i in nl.affine_range(2)"
    assert lines[2] == " " * 31 + "^"
    assert lines[3] == "hint: expected ':'"


def test_unknown_isa_instruction_suggests_the_right_one(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensr(dst=t, data1=t, data2=t, op=nl.add)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:8:5: error: nki.isa has no instruction 'tensor_tensr'"
    )
    assert "hint: did you mean nki.isa.tensor_tensor?" in result.stderr


def test_partition_dimension_over_128(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    big = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.sbuf)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:7:11: error: SBUF tensor 'big' has partition dimension 256, which exceeds "
        "128 (nl.tile_size.pmax)"
    )
    assert "hint: tile the first dimension into chunks of at most 128" in result.stderr


def test_dma_element_count_mismatch(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[128,256]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:8:5: error: dma_copy: src has 32768 elements [128, 256] and dst 65536 "
        "[128, 512]; they must be equal"
    )


def test_instruction_constraint_names_operand_value_and_limit(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    y = nl.ndarray((128, 640), dtype=nl.bfloat16, buffer=nl.sbuf)
    acc = nl.ndarray((128, 640), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:10:5: error: nc_matmul: moving free size 640 exceeds 512 (tile_gemm_moving_fmax)"
    )


def test_wrong_buffer_is_located(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    x = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=acc, stationary=x, moving=x)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert first_line(result.stderr) == (
        f"{path}:9:5: error: nc_matmul: dst is in SBUF (acc); it must be in PSUM"
    )


def test_immediate_too_large_for_a_float_is_located(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=256 ** 128)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:8:5: error: tensor_scalar: operand0 is a 309-digit integer, too large for a "
        "float immediate"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "a=float32[x]"], "error: input 'a': cannot read 'float32[x]'"),
        (["-i", "b=float32[4,4]"], "error: kernel 'k' has no parameter 'b'"),
        ([], "error: kernel 'k' needs input 'a'"),
        (["-i", "a=float32[4,4]", "-k", "kk"], "has no kernel 'kk'"),
        (["-i", "a=float32[4,4]", "--ref", "nofile.py:f"], "--ref: no such file 'nofile.py'"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    path = kernel(tmp_path, "@nki.jit\ndef k(a):\n    return a\n")
    result = run_cli("run", path, *args)
    assert result.exit_code == 2
    assert message in result.stderr


FACTORY = """import nki.language as nl


def make(scale):
    def _kernel(a):
        return a

    return _kernel
"""


@pytest.mark.parametrize(
    ("name", "message", "hint"),
    [
        ("_kernel", "has no function '_kernel' at module level (functions: make)", "inside 'make'"),
        ("nope", "has no function 'nope' at module level (functions: make)", None),
    ],
)
def test_naming_a_function_the_file_does_not_define_at_module_level(tmp_path, name, message, hint):
    # A kernel a factory makes cannot be named; the hint says how to run it.
    path = kernel(tmp_path, FACTORY)
    result = run_cli("run", path, "-i", "a=float32[4,4]", "-k", name)
    assert result.exit_code == 2
    assert message in result.stderr
    assert (hint in result.stderr) if hint else "hint:" not in result.stderr


def test_missing_kernel_file_exits_2(tmp_path):
    result = run_cli("run", str(tmp_path / "none.py"))
    assert result.exit_code == 2
    assert "no such kernel file" in result.stderr


def test_debug_shows_the_traceback(tmp_path):
    path = kernel(tmp_path, "@nki.jit\ndef k(a):\n    return undefined_name\n")
    result = CliRunner().invoke(main, ["run", path, "-i", "a=float32[4,4]", "--debug"])
    assert result.exit_code == 1
    assert "Traceback" in result.stderr


def test_bad_dedent_is_located(tmp_path):
    path = kernel(tmp_path, "@nki.jit\ndef k(a):\n        x = 1\n    return a\n")
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:8:1: error: invalid syntax: unindent does not match any outer indentation level"
    )


def test_builtin_called_with_wrong_arguments(tmp_path):
    path = kernel(tmp_path, "@nki.jit\ndef k(a):\n    nl.store(a)\n    return a\n")
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:7:5: error: nl.store(): missing a required argument: 'value'"
    )


def test_unclosed_fstring_field_is_located(tmp_path):
    path = kernel(tmp_path, '@nki.jit\ndef k(a):\n    assert a, f"{a.shape"\n    return a\n')
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == f"{path}:7:15: error: f-string: expecting '}}'"


def test_a_mode_the_target_lacks_is_located(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    s = nl.ndarray((64, 2, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    m = nl.ndarray((64, 2, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0.0)
    nisa.memset(dst=m, value=0.0)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=m,
                   perf_mode=nisa.matmul_perf_mode.double_row)
    return a
""",
    )
    on_trn2 = run_cli("run", path, "-i", "a=float32[4,4]", "--target", "trn2")
    assert on_trn2.exit_code == 0, on_trn2.stderr
    result = run_cli("run", path, "-i", "a=float32[4,4]", "--target", "trn1")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:12:5: error: nc_matmul: perf_mode double_row needs NC-v3+ (trn2/trn3); "
        "target trn1 is NC-v2"
    )


def test_a_bracket_never_closed_is_reported_where_it_opens(tmp_path):
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    t = nl.load(a[0:4, 0:4]
    u = nl.exp(t)
    return u
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == f"{path}:7:16: error: invalid syntax: '(' was never closed"
    assert (
        result.stderr.splitlines()[-1]
        == "hint: parsing stopped at line 8, column 5 (unexpected 'u')"
    )
    # A bracket closed later is not blamed for an error inside it.
    closed = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    t = nl.load(a[0:4,
                  0:4 4])
    return t
""",
    )
    result = run_cli("run", closed, "-i", "a=float32[4,4]")
    assert first_line(result.stderr) == f"{closed}:8:23: error: invalid syntax: unexpected '4'"


PARTIAL = """@nki.jit
def k(a):
    out = nl.ndarray((512, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in range(3):  # one tile short
        t = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, 64:256], src=t[:, 64:256])
    return out
"""


def test_an_output_region_never_written_is_an_error_naming_it(tmp_path):
    path = kernel(tmp_path, PARTIAL)
    result = run_cli("run", path, "-i", "a=float32[512,256]")
    assert result.exit_code == 1
    # Rows 384: are never written, nor columns 0:64 of any row: the box of the gap.
    assert first_line(result.stderr) == (
        f"{path}:7:11: error: output 'out' is never written at out[0:512, 0:256] "
        f"({512 * 256 - 3 * 128 * 192:,} of {512 * 256:,} elements)"
    )
    assert "--allow-uninit" in result.stderr


def test_an_unwritten_output_region_is_a_note_with_allow_uninit(tmp_path):
    path = kernel(tmp_path, PARTIAL.replace("64:256", "0:256"))
    result = run_cli("run", path, "-i", "a=float32[512,256]", "--allow-uninit")
    assert result.exit_code == 0
    assert "output 'out' is never written at out[384:512, 0:256]" in result.stderr


@pytest.mark.parametrize("shape", [(128,), (128, 64), (4, 128, 8), (2, 3, 4, 5)])
def test_an_output_nothing_writes_is_the_located_never_written_error(tmp_path, shape):
    # Was an internal IndexError past 1-d: no write at all left the access table narrower
    # than the output.
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    return out
""",
    )
    spec = f"a=float32[{','.join(map(str, shape))}]"
    result = run_cli("run", path, "-i", spec)
    assert result.exit_code == 1
    box = ", ".join(f"0:{n}" for n in shape)
    n = math.prod(shape)
    assert first_line(result.stderr) == (
        f"{path}:7:11: error: output 'out' is never written at out[{box}] ({n:,} of {n:,} elements)"
    )


def test_an_unwritten_output_beside_a_narrower_written_one_is_located(tmp_path):
    # The access table holds a 1-d write only; the 3-d output has none.
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a, b):
    done = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 128), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.reshape((1, 128)))
    nisa.dma_copy(dst=done.reshape((1, 128)), src=t)
    out = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
    return done, out
""",
    )
    result = run_cli("run", path, "-i", "a=float32[128]", "-i", "b=float32[2,128,4]")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:11:11: error: output 'out' is never written at out[0:2, 0:128, 0:4] "
        f"(1,024 of 1,024 elements)"
    )


def _fails_inside(monkeypatch, exc: Exception) -> None:
    """nl.program_id raising `exc` from inside, as a bug of neuronemu's would."""
    from neuronemu.trace.lib import nl_spmd

    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(nl_spmd, "program_id", broken)


@pytest.mark.parametrize(
    "exc",
    [
        AttributeError("arch 'trn2' has no constant 'pe_rows'"),
        KeyError("psum"),
        IndexError("list index out of range"),
    ],
)
def test_a_failed_lookup_inside_an_nki_function_is_an_internal_error(tmp_path, monkeypatch, exc):
    # It was the author's "nl.program_id(): invalid argument (AttributeError ...)", exit 1,
    # and a kernel's `except AttributeError` could swallow it.
    _fails_inside(monkeypatch, exc)
    path = kernel(
        tmp_path,
        f"""@nki.jit
def k(a):
    try:
        i = nl.program_id(0)
    except {type(exc).__name__}:
        i = 0
    return a
""",
    )
    result = CliRunner().invoke(main, ["run", path, "-i", "a=float32[4,4]"])
    assert result.exit_code != 0
    assert first_line(result.stderr).startswith(f"internal error: {type(exc).__name__}")
    assert "invalid argument" not in result.stderr


def test_a_python_mirror_raises_lookups_for_the_kernel_as_cpython_does(tmp_path):
    path = kernel(
        tmp_path,
        """import operator


@nki.jit
def k(a):
    try:
        operator.getitem([], 0)
    except IndexError as e:
        print("caught IndexError", e.args)
    return a
""",
    )
    result = run_cli("run", path, "-i", "a=float32[4,4]")
    assert result.exit_code == 0, result.stderr
    assert "caught IndexError" in result.stdout


def test_a_reference_that_raises_is_located_in_the_reference_with_its_traceback(tmp_path):
    # It said only "the reference raised IndexError: ...": no file, no line, even with --debug.
    ref = tmp_path / "r.py"
    ref.write_text(
        "import numpy as np\n\n\ndef helper(x):\n    return x['nope']\n\n\n"
        "def reference(a, b):\n    return helper(a) + b\n"
    )
    kernel = Path(__file__).resolve().parents[2] / "kernels" / "tensor_add.py"
    result = run_cli(
        "run",
        str(kernel),
        "-i",
        "a=float32[128,512]",
        "-i",
        "b=float32[128,512]",
        "--ref",
        f"{ref}:reference",
    )
    assert result.exit_code == 2
    assert first_line(result.stderr).startswith(
        f"{ref}:5:12: error: the reference raised IndexError"
    )
    assert f'File "{ref}", line 9, in reference' in result.stderr
    assert "return x['nope']" in result.stderr


def test_a_race_between_the_two_cores_is_hinted_in_nki_terms(tmp_path):
    # The hint was .nasm syntax (`wait(dma.q2@7)`), which a kernel cannot write, and the
    # instruction numbers did not say which core's they were.
    path = kernel(
        tmp_path,
        """@nki.jit
def k(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
    nisa.dma_copy(dst=out, src=t)
    return out
""",
    )
    result = run_cli("run", path, "-i", "a=float32[256,64]", "--grid", "2")
    assert result.exit_code == 1
    head = first_line(result.stderr)
    assert head.startswith(f"{path}:11:5: error: race on out: #")
    assert "(core 1) dma_copy writes out while #" in head and "(core 0) dma_copy" in head
    hint = result.stderr.splitlines()[-1]
    assert hint == (
        "hint: the two cores touch the same bytes of out: give each core its own part "
        "(index it by nl.program_id(0)), or put nisa.core_barrier between the two"
    )


INPUTS_KERNEL = """@nki.jit
def k(a, n_rows):
    out = nl.ndarray((n_rows, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((n_rows, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def test_every_missing_input_is_named_at_once(tmp_path):
    path = kernel(tmp_path, INPUTS_KERNEL)
    result = run_cli("run", path)
    assert result.exit_code == 2
    assert first_line(result.stderr).startswith(
        f"{path}:6:1: error: kernel 'k' needs inputs 'a', 'n_rows': -i a=SPEC -i n_rows=SPEC"
    )


def test_a_plain_value_given_for_a_tensor_says_which_input_wanted_what(tmp_path):
    # It said "int.shape is not available in NKI kernels".
    path = kernel(tmp_path, INPUTS_KERNEL)
    result = run_cli("run", path, "-i", "a=2", "-i", "n_rows=128")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:7:42: error: kernel input 'a' is 2 (an int), but the kernel uses a.dtype "
        "as a tensor's"
    )
    assert "hint: pass an array for it: -i a=float32[128,512]" in result.stderr


def test_a_plain_value_used_as_an_operand_says_which_input_it_was(tmp_path):
    # It said "dma_copy: src must be a tensor, got float 96.0" for `-i n_rows=96`: every
    # number was made a float immediate first, and no message named the input.
    path = kernel(tmp_path, INPUTS_KERNEL.replace("src=a)", "src=n_rows)"))
    result = run_cli("run", path, "-i", "a=float32[128,64]", "-i", "n_rows=96")
    assert result.exit_code == 1
    assert first_line(result.stderr) == (
        f"{path}:9:5: error: kernel input 'n_rows' is 96 (an int), but dma_copy's src "
        "must be a tensor"
    )
    assert "hint: pass an array for it: -i n_rows=float32[128,512]" in result.stderr


def test_a_numpy_integer_is_a_compile_time_int(tmp_path):
    import numpy as np

    import neuronemu

    path = kernel(tmp_path, INPUTS_KERNEL)
    inputs = {"a": np.ones((128, 64), np.float32), "n_rows": np.int64(128)}
    result = neuronemu.run(path, inputs)
    np.testing.assert_array_equal(result.outputs["out"], inputs["a"])


def test_a_list_given_to_simulate_for_a_tensor_says_which_input_wanted_what(tmp_path):
    # It said "list.shape is not available in NKI kernels".
    import neuronemu
    from neuronemu.errors import KernelTypeError

    path = kernel(tmp_path, INPUTS_KERNEL)
    with pytest.raises(KernelTypeError) as info:
        neuronemu.simulate(path)([[1.0, 2.0]], 1)
    assert first_line(info.value.render()) == (
        f"{path}:7:42: error: kernel input 'a' is [[1.0, 2.0]] (a list), but the kernel uses "
        "a.dtype as a tensor's"
    )
