"""The host-effect guard of the fuzz tests (`tests/_host_guard.py`) sees what it must (a file
written, a process started, a socket, code run from a pickle) and stays quiet for ordinary
kernel runs, so that a host effect it reports is the kernel's doing."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import _host_guard as G
import pytest

import neuronemu
from neuronemu.inputs import parse_spec
from neuronemu.report.reference import discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def effects(action, allow=()) -> list[str]:
    with G.HostGuard(allow=allow) as guard:
        action()
    return [e.event for e in guard.effects]


def test_a_file_opened_for_writing_is_caught(tmp_path):
    assert effects(lambda: open(tmp_path / "x", "w").close()) == ["open"]
    assert effects(lambda: open(tmp_path / "x", "a").close()) == ["open"]
    assert effects(lambda: os.close(os.open(tmp_path / "y", os.O_CREAT | os.O_WRONLY))) == ["open"]
    assert effects(lambda: open(tmp_path / "x").read()) == []  # reading is fine


def test_writes_under_an_allowed_directory_are_fine(tmp_path):
    assert effects(lambda: open(tmp_path / "x", "w").close(), allow=[tmp_path]) == []
    assert effects(lambda: (tmp_path / "d").mkdir(), allow=[tmp_path]) == []


def test_nothing_is_recorded_while_disarmed(tmp_path):
    guard = G.HostGuard()
    open(tmp_path / "x", "w").close()
    assert guard.effects == []


def test_processes_are_caught():
    assert "os.system" in effects(lambda: os.system("true"))
    assert "subprocess.Popen" in effects(lambda: subprocess.run(["true"]))


def test_sockets_are_caught():
    def connect():
        with socket.socket() as s:
            s.settimeout(0.01)
            try:
                s.connect(("127.0.0.1", 9))
            except OSError:
                pass

    found = effects(connect)
    assert "socket.__new__" in found and "socket.connect" in found


def test_file_system_changes_outside_allowed_directories_are_caught(tmp_path):
    (tmp_path / "f").write_text("x")
    assert effects(lambda: os.remove(tmp_path / "f")) == ["os.remove"]
    assert effects(lambda: os.mkdir(tmp_path / "d")) == ["os.mkdir"]
    assert effects(lambda: os.rename(tmp_path / "d", tmp_path / "e")) == ["os.rename"]


def test_code_run_from_a_pickle_is_caught():
    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())  # harmless to call, but not a cache entry's business

    data = pickle.dumps(Evil())
    assert effects(lambda: pickle.loads(data)) == ["pickle.find_class"]


def test_exec_and_compile_of_code_are_caught():
    assert "exec" in effects(lambda: exec("x = 1", {}))
    assert effects(lambda: compile("1 + 1", "<x>", "eval")) == ["compile"]


def test_host_modules_imported_while_armed_are_caught():
    sys.modules.pop("pty", None)
    assert "import" in effects(lambda: __import__("pty"))


def test_the_guard_raises_with_the_effects(tmp_path):
    with G.HostGuard() as guard:
        open(tmp_path / "x", "w").close()
    with pytest.raises(G.HostEffectError, match="open for writing"):
        guard.assert_clean()


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_ordinary_kernel_runs_are_quiet(tmp_path, monkeypatch, cache):
    """Every kernel of kernels/ with its reference: nothing but the AST cache is written,
    whether the cache is empty (parse and store) or full (load)."""
    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(tmp_path / "cache"))
    cases = discover_cases(KERNELS)
    if cache == "warm":
        for path, ref, case in cases:
            neuronemu.run(
                path, {k: parse_spec(k, v, 0) for k, v in case.items()}, print_fn=lambda _: None
            )
    from neuronemu.frontend import parser

    for path, ref, case in cases:
        parser._AST_CACHE.clear()
        inputs = {k: parse_spec(k, v, 0) for k, v in case.items()}
        with G.HostGuard() as guard:
            result = neuronemu.run(path, inputs, ref=ref, print_fn=lambda _: None)
        guard.assert_clean()
        assert result.check.passed
