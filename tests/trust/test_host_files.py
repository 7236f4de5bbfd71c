"""The files a user names (issue 38, held-out findings 8 to 10): a kernel file, input files and
results files are read only if they are regular files of the size they claim, outside the
host's own trees (/proc, /sys, /dev), and no error quotes their bytes; an output that cannot
be written is a usage error. Each case once hung, grew to gigabytes, printed the host's
environment or ended in an internal error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _guard import Sandbox
from test_regressions_cli import INPUT, KERNEL

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
