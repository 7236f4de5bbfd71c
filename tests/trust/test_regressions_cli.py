"""Trust boundary regressions of the command line, its input files and the Python API
(issue 38, items 8 and 10): each input below once ended in an internal error, a traceback or
a hang. Each must now end in a usage error (`error: ...`, exit 2) within 10 s and 1 GiB,
leaving nothing running (`_guard.py` watches), or, in the API, in a `UsageError`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _guard import Sandbox
from click.testing import CliRunner

import neuronemu
from neuronemu import sweeps
from neuronemu.cli import main
from neuronemu.nasm.write import dumps
from neuronemu.sweeps import results as sweep_results

KERNEL = textwrap.dedent(
    """\
    import nki
    import nki.isa as nisa
    import nki.language as nl


    @nki.jit
    def k(a, bufs=2, other=1):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out
    """
)
INPUT = ("-i", "a=float32[128,64]")
SWEEP = ("sweep", "k.py", *INPUT, "--param", "bufs=1,2", "-j", "1")


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    box = Sandbox(tmp_path)
    box.write("k.py", KERNEL)
    return box


def test_the_kernel_runs_and_sweeps(box):
    """Control: the kernel and the sweep below work, so each regression fails for its own
    reason."""
    out = box.run("run", "k.py", *INPUT)
    out.assert_confined()
    assert out.returncode == 0, out.describe()
    out = box.run(*SWEEP, "--where", "bufs * 2 <= 4 and -bufs < 0")
    out.assert_confined()
    assert out.returncode == 0 and "2 ran, 0 failed" in out.stdout, out.describe()


# --- -i SPECs and input files -------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, words",
    [
        ("float32[4,4]~uniform(-1e308,1e308)", "finite"),
        ("float32[4,4]~randint(0.1,0.2)", "no integer"),
        ("float32[4,4]~randint(-1e300,1e300)", "int64"),
        ("float32[" + ",".join(["1"] * 70) + "]", "dimensions"),
        ("float32[4,4]" + "~" * 100_000, "unknown distribution"),
        ("float32[" + "9" * 5000 + "]", "too large"),
    ],
    ids=["uniform-overflow", "randint-no-integer", "randint-int64", "70-dims", "tildes", "huge"],
)
def test_a_bad_array_spec_is_a_usage_error(box, spec, words):
    out = box.run("run", "k.py", "-i", f"a={spec}")
    out.assert_usage()
    assert words in out.stderr and len(out.stderr) < 2000, out.describe()


def test_an_array_of_strings_is_not_reinterpreted_as_numbers(box):
    np.save(box.work / "strings.npy", np.array([["ab", "cd"]] * 2))
    np.savez(
        box.work / "strings.npz",
        a=np.array([["ab", "cd"]] * 2),
        __neuronemu_dtypes__=np.array(["a=float32"]),
    )
    for args in (("-i", "a=@strings.npy:float32"), ("--inputs", "strings.npz")):
        out = box.run("run", "k.py", *args)
        out.assert_usage()
        assert "not numbers" in out.stderr, out.describe()


@pytest.mark.parametrize("option", ["--trace", "--save", "--save-inputs"])
def test_an_output_that_cannot_be_written_is_a_usage_error(box, option):
    out = box.run("run", "k.py", *INPUT, option, "/dev/full")
    out.assert_usage()
    assert f"{option} '/dev/full': cannot write it" in out.stderr, out.describe()


def test_an_output_fifo_no_one_reads_is_refused_at_once(box):
    os.mkfifo(box.work / "fifo")
    out = box.run("run", "k.py", *INPUT, "--trace", "fifo")
    out.assert_usage()


# --- sweeps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where, words",
    [
        ("-" * 5000 + "bufs > 0", "not an expression"),
        ("-" * 150 + "bufs > 0", "deeper"),
        ("+".join(["bufs"] * 5000) + " > 0", "characters"),
        ("((((9**64)**64)**64)**64)**64 > bufs", "bits"),
        ("'a' * 10**9 > 'b' * bufs", "numbers"),
    ],
    ids=["deep", "nested", "long", "power-tower", "string-repeat"],
)
def test_a_where_expression_past_its_bounds_is_a_usage_error(box, where, words):
    out = box.run(*SWEEP, "--where", where)
    out.assert_usage()
    assert words in out.stderr, out.describe()


def test_a_sweep_of_too_many_configurations_names_its_cap(box):
    out = box.run("sweep", "k.py", *INPUT, "--param", "bufs=0..99999", "--param", "other=0..99999")
    out.assert_usage()
    out.assert_budget_message()
    assert "10,000,000,000 configurations" in out.stderr and "--max-configs" in out.stderr


def test_the_configuration_cap_is_raised_with_max_configs():
    with pytest.raises(neuronemu.UsageError, match="max_configs"):
        sweeps.configurations({"a": list(range(400)), "b": list(range(400))}, None)
    kept = sweeps.configurations(
        {"a": list(range(400)), "b": list(range(400))}, "a + b < 2", max_configs=160_000
    )
    assert kept == [{"a": 0, "b": 0}, {"a": 0, "b": 1}, {"a": 1, "b": 0}]


# Lines a results file may hold that no sweep wrote: each once an internal error.
PLANTED = [
    '{"config": [5]}',  # IndexError in key_of
    '{"config": {"bufs": 1}, "status": "ok"}',  # KeyError: time_ns
    '{"config": {"bufs": 1}, "status": "error"}',  # KeyError: error
    '{"config": {"bufs": 1}, "status": "ok", "time_ns": "fast"}',  # TypeError ranking
    '{"config": {"bufs": 1}, "status": "ok", "time_ns": 1e999}',  # inf in strict JSON
    '{"config": {"bufs": 1}, "status": "error", "error": {"message": 5}}',
    "[" * 100_000 + "]" * 100_000,  # RecursionError in json
]


def test_planted_lines_in_a_results_file_are_ignored(box):
    good = box.run(*SWEEP, "--out", "good.jsonl")
    assert good.returncode == 0, good.describe()
    record = json.loads((box.work / "good.jsonl").read_text().splitlines()[0])
    huge = dict(record, time_ns=10**4000)  # OverflowError printing the table
    lines = [*PLANTED, json.dumps(huge)]
    (box.work / "results.jsonl").write_text("\n".join(lines) + "\n")
    out = box.run(*SWEEP, "--out", "results.jsonl")
    out.changed_files = [f for f in out.changed_files if f != "work/results.jsonl"]
    out.assert_confined()
    assert out.returncode == 0 and "2 ran, 0 failed" in out.stdout, out.describe()
    lines.append(json.dumps(dict(record, time_ns=float("nan"))))  # a NaN token
    (box.work / "results.jsonl").write_text("\n".join(lines) + "\n")
    out = box.run(*SWEEP, "--out", "results.jsonl", "--json")
    out.changed_files = [f for f in out.changed_files if f != "work/results.jsonl"]
    out.assert_confined()
    assert out.returncode == 0 and json.loads(out.stdout)["ran"] == 2, out.describe()


@pytest.mark.parametrize("line", PLANTED, ids=range(len(PLANTED)))
def test_a_planted_line_is_no_record(tmp_path, line):
    path = tmp_path / "results.jsonl"
    path.write_text(line + "\n")
    assert sweep_results.read_done(str(path), [{"bufs": 1}]) == {}


def test_a_results_record_comes_back_with_the_sweeps_own_configuration(tmp_path):
    path = tmp_path / "results.jsonl"
    record = {"config": {"shape": [2, 4]}, "status": "error", "error": _ERROR}
    path.write_text(json.dumps(record) + "\n" + '{"config": {"sha')  # and a line cut short
    done = sweep_results.read_done(str(path), [{"shape": (2, 4)}])
    assert list(done.values())[0]["config"] == {"shape": (2, 4)}
    assert path.read_text() == json.dumps(record) + "\n"


_ERROR = {"kind": "usage", "message": "m", "path": None, "line": None, "col": None, "hint": None}


def test_a_results_file_that_is_a_fifo_is_refused(box):
    os.mkfifo(box.work / "fifo")
    out = box.run(*SWEEP, "--out", "fifo")
    out.assert_usage()
    code = (
        "import neuronemu\n"
        "try:\n"
        "    neuronemu.sweep('k.py', {'bufs': [1]}, {'a': 'float32[128,64]'}, out='fifo')\n"
        "except neuronemu.UsageError as err:\n"
        "    print(err.message)\n"
    )
    out = box.run_argv([sys.executable, "-c", code])
    out.assert_confined()
    assert "not a regular file" in out.stdout, out.describe()


def test_ray_ships_only_regular_files_inside_the_kernels_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n")
    folder = tmp_path / "kernels"
    (folder / "pkg").mkdir(parents=True)
    (folder / "k.py").write_text(KERNEL)
    (folder / "pkg" / "helper.py").write_text("X = 1\n")
    (folder / "linked.py").symlink_to(outside / "secret.py")
    (folder / "linked_dir").symlink_to(outside, target_is_directory=True)
    spec = sweeps.Sweep(str(folder / "k.py"), None, None, (), frozenset())
    root, files = sweeps._files_to_ship(spec)
    assert sorted(files) == ["k.py", "pkg/helper.py"]
    assert not any(b"SECRET" in data for data in files.values())


# --- the Python API -----------------------------------------------------------------------


@pytest.fixture
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    return path


A = np.zeros((128, 64), np.float32)


@pytest.mark.parametrize(
    "inputs, words",
    [
        ([A], "inputs must be a dict"),
        ("a", "inputs must be a dict"),
        ({1: A}, "not a parameter name"),
        ({"a": np.array([[object()]] * 2, dtype=object)}, "dtype object"),
        ({"a": np.array([["x"]])}, "dtype <U1"),
        ({"a": A, "bufs": iter([1])}, "list_iterator"),
    ],
    ids=["list", "str", "int-key", "object-array", "str-array", "iterator"],
)
def test_api_inputs_of_a_wrong_type_are_usage_errors(kernel_file, inputs, words):
    for call in (neuronemu.run, neuronemu.compile_kernel):
        with pytest.raises(neuronemu.UsageError, match=words):
            call(kernel_file, inputs, print_fn=lambda _line: None)


def test_api_inputs_of_a_text_program_are_arrays(kernel_file, tmp_path):
    program = neuronemu.compile_kernel(kernel_file, {"a": A}, print_fn=lambda _line: None)
    nasm = tmp_path / "k.nasm"
    nasm.write_text(dumps(program))
    for value in ([[1.0] * 64] * 128, None, np.zeros((128, 64))):
        with pytest.raises(neuronemu.UsageError, match="input 'a'"):
            neuronemu.run(nasm, {"a": value}, print_fn=lambda _line: None)


@pytest.mark.parametrize(
    "limits",
    [
        {"trace_seconds": float("nan")},
        {"run_seconds": math.inf},
        {"trace_seconds": -1},
        {"instructions": 1.5},
        {"instructions": True},
        {"memory_bytes": "4G"},
        {"instructions": 10**5000},
        {"nosuch": 1},
        "trace_seconds=60",
        neuronemu.Limits(trace_seconds=float("nan")),
    ],
)
def test_api_limits_are_checked(kernel_file, limits):
    with pytest.raises(neuronemu.UsageError, match="limits"):
        neuronemu.run(kernel_file, {"a": A}, limits=limits, print_fn=lambda _line: None)


def test_api_limits_of_numpy_numbers_are_taken(kernel_file):
    limits = {"trace_seconds": np.float32(30), "instructions": np.int64(1000)}
    result = neuronemu.run(kernel_file, {"a": A}, limits=limits, print_fn=lambda _line: None)
    assert result.cycles > 0


@pytest.mark.parametrize(
    "params, inputs, words",
    [
        ([1], {"a": "float32[128,64]"}, "params must be a dict"),
        ({1: [1]}, {"a": "float32[128,64]"}, "not a parameter name"),
        ({"bufs": "12"}, {"a": "float32[128,64]"}, "list of values"),
        ({"bufs": [1]}, {"a": A}, "SPEC string"),
        ({"bufs": [1]}, [1], "inputs must be a dict"),
    ],
)
def test_api_sweep_arguments_are_checked(kernel_file, params, inputs, words):
    with pytest.raises(neuronemu.UsageError, match=words):
        neuronemu.sweep(kernel_file, params, inputs, workers=1)


# --- what a kernel sees and shows -----------------------------------------------------------


def test_a_kernel_shows_no_host_address(box):
    body = (
        "    print(iter([1]), [zip()], f'{iter([2])!r}', '%s' % (reversed([1]),))\n"
        "    assert False, iter([3])\n"
    )
    box.write("p.py", KERNEL.replace("    out = nl.ndarray", body + "    out = nl.ndarray", 1))
    out = box.run("run", "p.py", *INPUT)
    out.assert_located("p.py")
    assert "<list_iterator object> [<zip object>]" in out.stdout + out.stderr, out.describe()
    assert " at 0x" not in out.stdout + out.stderr, out.describe()


def test_check_says_its_references_are_trusted_code():
    help_text = CliRunner().invoke(main, ["check", "--help"]).output
    assert "trusted code" in help_text and "host Python" in help_text
    trust = (Path(__file__).resolve().parents[2] / "docs" / "trust.md").read_text()
    assert "`neuronemu check`" in trust[: trust.index("\n## Reliability")]


def test_the_command_leaves_no_worker_behind(tmp_path):
    """The JIT worker is reaped as the command exits (the worker's start is forced)."""
    code = (
        "import os, sys\n"
        "from neuronemu.jit import worker as jit_worker\n"
        "jit_worker.start()\n"
        "w = jit_worker._worker\n"
        "print(w.process.pid if w else -1, flush=True)\n"
        "w and w.leave()\n"
        "print(open(f'/proc/{w.process.pid}/stat').read().split()[2] if w and "
        "os.path.exists(f'/proc/{w.process.pid}/stat') else 'gone', flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    pid, state = result.stdout.split()
    assert state == "gone", f"worker {pid} is left as state {state}"
