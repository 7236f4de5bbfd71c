"""The files a user names (issue 38, held-out findings 8 to 10): a kernel file, input files and
results files are read only if they are regular files of the size they claim, outside the
host's own trees (/proc, /sys, /dev), and no error quotes their bytes; an output that cannot
be written is a usage error. Each case once hung, grew to gigabytes, printed the host's
environment or ended in an internal error."""

from __future__ import annotations

import errno
import io
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _guard import Sandbox
from test_regressions_cli import INPUT, KERNEL, SWEEP

from neuronemu.errors import UsageError


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    box = Sandbox(tmp_path)
    box.write("k.py", KERNEL)
    return box


def assert_no_environment(box: Sandbox, out) -> None:
    """None of the child's environment (as /proc/self/environ reads it) is printed."""
    text = out.stdout + out.stderr
    leaked = [f"{k}={v}" for k, v in box.env().items() if len(v) > 3 and f"{k}={v}" in text]
    assert not leaked and "PYTHONPATH=" not in text, out.describe()


# --- F9: the kernel file -------------------------------------------------------------------

_KERNEL_COMMANDS = {
    "run": ("run", "link.py", *INPUT),
    "asm": ("asm", "link.py", *INPUT),
    "lint": ("lint", "link.py"),
    "migrate": ("migrate", "link.py", "--no-run"),
    "sweep": ("sweep", "link.py", *INPUT, "--param", "bufs=1", "-j", "1"),
    "run-nasm": ("run", "link.nasm"),
}


@pytest.mark.parametrize("command", list(_KERNEL_COMMANDS))
def test_a_kernel_linked_to_the_process_environment_is_refused_unread(box, command):
    for name in ("link.py", "link.nasm"):
        os.symlink("/proc/self/environ", box.work / name)
    out = box.run(*_KERNEL_COMMANDS[command])
    out.assert_usage()
    assert "is not a regular file (it lies in /proc" in out.first_line, out.describe()
    assert_no_environment(box, out)


def test_check_refuses_a_kernel_linked_to_the_process_environment(box):
    (box.work / "ks").mkdir()
    os.symlink("/proc/self/environ", box.work / "ks" / "e.py")
    box.write("ks/e_ref.py", "CASES = [{'a': 'float32[4,4]'}]\n\ndef reference(a):\n    return a\n")
    out = box.run("check", "ks")
    out.assert_confined()
    assert out.returncode == 1 and "is not a regular file (it lies in /proc" in out.stderr
    assert_no_environment(box, out)


@pytest.mark.parametrize("command", list(_KERNEL_COMMANDS))
def test_a_kernel_linked_out_of_its_folder_is_refused_unparsed(box, command):
    """`k.py -> /etc/passwd` (a regular file; a pull request can add the link): a syntax
    error quoted its first line. A link out of the kernel's own folder is not parsed."""
    (box.work / "host").mkdir()
    box.write("host/credentials", f'{SECRET} = = "x"\n')
    (box.work / "ks").mkdir()
    for name in ("link.py", "link.nasm"):
        os.symlink("../host/credentials", box.work / "ks" / name)
    args = [a.replace("link.", "ks/link.") for a in _KERNEL_COMMANDS[command]]
    out = box.run(*args)
    out.assert_usage()
    assert "is a link to a file outside its folder; it is not run" in out.first_line, out.describe()
    assert SECRET[:6] not in out.stdout + out.stderr, out.describe()


def test_a_kernel_linked_to_a_regular_file_still_runs(box):
    os.symlink("k.py", box.work / "link.py")
    out = box.run("run", "link.py", *INPUT)
    out.assert_confined()
    assert out.returncode == 0, out.describe()


def test_a_file_that_reads_more_than_its_size_is_refused(monkeypatch):
    """The rule behind the trees' refusal: /proc/self/environ says it is 0 bytes long."""
    from neuronemu.host import files

    monkeypatch.setattr(files, "SYSTEM_TREES", ())
    with pytest.raises(UsageError, match="reads more bytes than its size says") as info:
        files.read_user_file("/proc/self/environ", "kernel file")
    assert "PATH" not in info.value.message


# --- F8 and F9: input files and results files ------------------------------------------------

_NOT_REGULAR = {
    "inputs-dev-zero": ("--inputs", "/dev/zero"),
    "inputs-dev-urandom": ("--inputs", "/dev/urandom"),
    "inputs-fifo": ("--inputs", "fifo"),
    "inputs-environ": ("--inputs", "environ.npz"),
    "npy-fifo": ("-i", "a=@fifo"),
    "npy-dev-zero": ("-i", "a=@/dev/zero"),
    "npy-dev-zero-as-bfloat16": ("-i", "a=@/dev/zero:bfloat16"),
    "npy-environ": ("-i", "a=@environ.npy"),
}


@pytest.mark.parametrize("case", list(_NOT_REGULAR))
def test_an_input_file_that_is_not_a_regular_file_is_refused_unread(box, case):
    os.mkfifo(box.work / "fifo")
    for name in ("environ.npz", "environ.npy"):
        os.symlink("/proc/self/environ", box.work / name)
    option, value = _NOT_REGULAR[case]
    out = box.run("run", "k.py", option, value)
    out.assert_usage()
    named = "--inputs" if option == "--inputs" else "input 'a'"
    assert out.first_line.startswith(f"error: {named}: file "), out.describe()
    assert "is not a regular file" in out.first_line, out.describe()
    assert_no_environment(box, out)


def _padded_npy() -> bytes:
    """A valid .npy of a [128, 64] float32 array, followed by 3 MiB of zeros."""
    buf = io.BytesIO()
    np.save(buf, np.ones((128, 64), np.float32))
    return buf.getvalue() + bytes(3 << 20)


def _padded_npz() -> bytes:
    """A valid .npz behind 3 MiB of zeros (a zip archive may start anywhere)."""
    buf = io.BytesIO()
    np.savez(buf, a=np.ones((128, 64), np.float32))
    return bytes(3 << 20) + buf.getvalue()


@pytest.mark.parametrize(
    "name, data, option",
    [("big.npy", _padded_npy, "-i"), ("big.npz", _padded_npz, "--inputs")],
)
def test_an_input_file_over_the_memory_budget_is_refused_by_its_size(box, name, data, option):
    box.write(name, data())
    value = f"a=@{name}" if option == "-i" else name
    out = box.run("run", "k.py", option, value, "--limit", "memory_bytes=1M")
    out.assert_usage()
    assert "bytes, over the memory_bytes budget" in out.first_line, out.describe()
    assert "--limit memory_bytes=N" in out.stderr, out.describe()


SECRET = "SECRET-7f3a-token"


def _npy_header(header: str) -> bytes:
    """A .npy file (format 1.0) of this header text and no data."""
    text = header.encode().ljust(118) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


@pytest.mark.parametrize(
    "data",
    [
        f"{SECRET}\n".encode(),  # not a .npy at all: its first 6 bytes were quoted
        _npy_header(f"{{'{SECRET}': 1}}"),
        _npy_header(f"{{'descr': '{SECRET}', 'fortran_order': False, 'shape': (4,)}}"),
        _npy_header(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ('{SECRET}',)}}"),
    ],
    ids=["text", "header-keys", "header-descr", "header-shape"],
)
def test_an_input_file_is_never_quoted_in_its_error(box, data):
    (box.work / "host").mkdir()
    box.write("host/credentials", data)
    os.symlink("host/credentials", box.work / "link.npy")
    out = box.run("run", "k.py", "-i", "a=@link.npy")
    out.assert_usage()
    assert "is not a valid .npy file" in out.first_line, out.describe()
    assert SECRET[:6] not in out.stdout + out.stderr, out.describe()


def test_a_results_file_over_the_memory_budget_is_refused_unread(box):
    box.write("big.jsonl", "x" * (2 << 20) + "\n")
    out = box.run(*SWEEP, "--out", "big.jsonl", "--limit", "memory_bytes=1M")
    out.assert_usage()
    assert "--out 'big.jsonl' is" in out.first_line and "memory_bytes" in out.first_line


@pytest.mark.parametrize("option", ["--out", "--merge"])
def test_a_results_file_in_proc_is_refused(box, option):
    out = box.run(*SWEEP, option, "/proc/self/status")
    out.assert_usage()
    assert out.first_line.startswith(f"error: {option} '/proc/self/status': cannot "), (
        out.describe()
    )
    assert "(it lies in /proc, the host's own state)" in out.first_line, out.describe()


# --- F10: outputs --------------------------------------------------------------------------


def test_a_sweep_into_the_process_environment_is_a_usage_error(box):
    out = box.run(*SWEEP, "--out", "/proc/self/environ")
    out.assert_usage()
    assert "'/proc/self/environ': cannot" in out.first_line, out.describe()


OLD_KERNEL = textwrap.dedent(
    """\
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl


    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    """
)
_OUTPUTS = {
    "--trace": ("run", "k.py", *INPUT, "--trace"),
    "--save": ("run", "k.py", *INPUT, "--save"),
    "--save-inputs": ("run", "k.py", *INPUT, "--save-inputs"),
    "-o": ("migrate", "old.py", "--no-run", "-o"),
    "--out": SWEEP + ("--out",),
}


@pytest.mark.parametrize("option", list(_OUTPUTS))
def test_an_output_in_proc_is_refused_before_anything_is_written(box, option):
    """/proc/self/comm takes any write (it renames the process): it was written, exit 0."""
    box.write("old.py", OLD_KERNEL)
    out = box.run(*_OUTPUTS[option], "/proc/self/comm")
    out.assert_usage()
    assert "'/proc/self/comm': cannot write it (it lies in /proc" in out.first_line, out.describe()


def test_a_port_written_to_a_fifo_no_one_reads_is_refused_at_once(box):
    box.write("old.py", OLD_KERNEL)
    os.mkfifo(box.work / "fifo")
    out = box.run("migrate", "old.py", "--no-run", "-o", "fifo")
    out.assert_usage()
    assert out.first_line.startswith("error: -o 'fifo': cannot write it"), out.describe()


@pytest.mark.parametrize("option", ["--trace", "--save", "-o"])
def test_an_output_to_dev_null_is_written_as_asked(box, option):
    box.write("old.py", OLD_KERNEL)
    args = ("migrate", "old.py", "--no-run") if option == "-o" else ("run", "k.py", *INPUT)
    out = box.run(*args, option, "/dev/null")
    out.assert_confined()
    assert out.returncode == 0, out.describe()


class _FullDisk:
    """A results file on a disk that is full: every write, flush and close fails."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    flush = close = lambda self: _FullDisk.write(self, "")


def test_a_results_file_that_fails_to_the_end_is_a_usage_error(tmp_path, monkeypatch):
    """The buffer a failed write leaves is flushed again as the file closes: that OSError
    replaced the usage error of the write (an internal error)."""
    import neuronemu
    from neuronemu import sweeps

    (tmp_path / "k.py").write_text(KERNEL)
    monkeypatch.setattr(sweeps, "open_results", lambda out: _FullDisk())
    with pytest.raises(UsageError, match="cannot write it"):
        neuronemu.sweep(
            tmp_path / "k.py",
            {"bufs": [1]},
            {"a": "float32[128,64]"},
            out=tmp_path / "r.jsonl",
            workers=1,
        )
