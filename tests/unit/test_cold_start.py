"""A cold start says what it is doing: the first compile of the jitted passes on a machine
(neuronemu.jit.compiling) puts "compiling the scheduler once (about N s)" on the command's
stderr, in-process or from the worker; a warm cache prints nothing; `neuronemu warm-up`
compiles every pass ahead."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neuronemu import cli
from neuronemu.cli import warm_up_command as warm_up
from neuronemu.jit import compiled as _jit
from neuronemu.jit import compiling
from neuronemu.jit import worker as jit_worker

ROOT = Path(__file__).resolve().parents[2]
TENSOR_ADD = str(ROOT / "kernels" / "tensor_add.py")
MESSAGE = re.compile(r"^neuronemu: compiling the scheduler once \(about (\d+) s\)$", re.M)

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="with the JIT off, nothing compiles"
)

# The command, with the race check jitted from the first instruction on: a small kernel then
# compiles its passes (the cheapest to compile) instead of the 20,000 instructions it takes.
COMMAND = (
    "import sys\n"
    "from neuronemu.checks import hazards\n"
    "hazards.JIT_ABOVE = 0\n"
    "from neuronemu.cli import entry\n"
    "sys.argv[0] = 'neuronemu'\n"
    "entry()\n"
)


def _neuronemu(cache: Path, *args: str, code: str = COMMAND) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env
    )


def test_a_cold_run_says_it_compiles_and_a_warm_run_does_not(tmp_path):
    cache = tmp_path / "numba"
    args = ("run", TENSOR_ADD, "-i", "a=float32[128,512]", "-i", "b=float32[128,512]", "--json")
    cold = _neuronemu(cache, *args)
    assert cold.returncode == 0, cold.stderr
    said = MESSAGE.findall(cold.stderr)
    assert len(said) == 1, cold.stderr  # (once, though several passes compile)
    assert int(said[0]) >= 1
    assert "compiling" not in cold.stdout  # (stdout is the JSON alone)
    first = json.loads(cold.stdout)
    warm = _neuronemu(cache, *args)
    assert warm.returncode == 0, warm.stderr
    assert "compiling" not in warm.stderr + warm.stdout
    assert json.loads(warm.stdout)["cycles"] == first["cycles"]
    # This machine's figures are kept for the next cold start's estimate.
    figures = json.loads((cache / compiling.FIGURES_FILE).read_text())
    assert {"clocks"} <= set(figures) <= set(_jit.LAZY)


def test_the_estimate_is_this_machines_last_figure_for_each_pass_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(compiling, "is_cached", lambda dispatcher: dispatcher is cached)
    cached = _jit.LAZY["schedule"].load()
    defaults = sum(compiling.COMPILE_SECONDS[n] for n in _jit.LAZY if n != "schedule")
    assert compiling.estimate(None) == pytest.approx(defaults)
    # ("schedule" about to compile counts, though a signature of it is cached)
    with_it = defaults + compiling.COMPILE_SECONDS["schedule"]
    assert compiling.estimate(None, "schedule") == pytest.approx(with_it)
    (tmp_path / compiling.FIGURES_FILE).write_text(json.dumps({"place": 100.0, "clocks": "x"}))
    tmp_path.chmod(0o700)
    (tmp_path / compiling.FIGURES_FILE).chmod(0o600)
    expected = defaults - compiling.COMPILE_SECONDS["place"] + 100.0
    assert compiling.estimate(str(tmp_path)) == pytest.approx(expected)


def test_a_compile_in_the_worker_is_told_in_the_command(tmp_path, monkeypatch):
    told: list[tuple[float, bool]] = []
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))  # (the worker's cache)
    monkeypatch.setattr(compiling, "ON_COMPILE", lambda *args: told.append(args))
    monkeypatch.setattr(compiling, "_told", False)
    jit_worker.start()
    try:
        assert jit_worker.running()
        z = np.zeros(0, np.int64)
        position, clock = _jit.clocks(np.zeros(2, np.int64), np.zeros(3, np.int64), z, 1)
        assert jit_worker.running()  # (the call ran there, the word came first)
        again = _jit.clocks(np.zeros(3, np.int64), np.zeros(4, np.int64), z, 1)
    finally:
        jit_worker.stop()
    assert list(position) == [1, 2] and list(again[0]) == [1, 2, 3]
    assert len(told) == 1 and told[0][0] > 0 and told[0][1] is True


def test_the_word_goes_to_stderr_above_a_live_status_line(capsys):
    warm_up.say_compiling(12.4, True)
    assert capsys.readouterr().err == "neuronemu: compiling the scheduler once (about 12 s)\n"
    printed: list[str] = []

    class Status:
        class console:
            @staticmethod
            def print(text, **_kwargs):
                printed.append(text)

    with warm_up.status_shown(Status):
        warm_up.say_compiling(0.2, False)
    warm_up.say_compiling(3, True)
    assert printed == [
        "neuronemu: compiling the scheduler (about 1 s; not kept: its cache folder is shared)"
    ]
    assert capsys.readouterr().err == "neuronemu: compiling the scheduler once (about 3 s)\n"


def test_warm_up_takes_every_jitted_pass(monkeypatch):
    # Its kernel runs each pass (here from the tests' cache, or compiled into it).
    cold = iter([["schedule"]])
    real = warm_up._cold
    monkeypatch.setattr(warm_up, "_cold", lambda: next(cold, None) or real())
    monkeypatch.setattr(jit_worker, "ENABLED", False)
    ran: set[str] = set()
    for name, lazy in _jit.LAZY.items():
        jitted = lazy.load()
        monkeypatch.setattr(lazy, "_jitted", _Counted(jitted, name, ran))
    result = CliRunner().invoke(cli.main, ["warm-up"])
    assert result.exit_code == 0, result.output
    assert "compiled the jitted passes" in result.output
    assert ran == set(_jit.LAZY)
    assert all(compiling.is_cached(lazy.load().jitted) for lazy in _jit.LAZY.values())


class _Counted:
    def __init__(self, jitted, name, ran):
        self.jitted, self.name, self.ran = jitted, name, ran

    def __call__(self, *args):
        self.ran.add(self.name)
        return self.jitted(*args)

    def __getattr__(self, name):  # (the dispatcher's cache, for `is_cached`)
        return getattr(self.jitted, name)


@pytest.mark.slow
def test_after_warm_up_a_large_run_compiles_nothing(tmp_path):
    # Every pass compiled cold (~15 s), then the command on 20,480 instructions (each pass
    # past its threshold, in the worker) says nothing.
    cache = tmp_path / "numba"
    plain = "import sys\nfrom neuronemu.cli import entry\nsys.argv[0] = 'neuronemu'\nentry()\n"
    done = _neuronemu(cache, "warm-up", code=plain)
    assert done.returncode == 0, done.stderr
    assert len(MESSAGE.findall(done.stderr)) == 1
    spec = "bfloat16[16384,40960]"
    args = ("run", TENSOR_ADD, "-i", f"a={spec}", "-i", f"b={spec}", "--timing-only")
    run = _neuronemu(cache, *args, code=plain)
    assert run.returncode == 0, run.stderr
    assert "compiling" not in run.stderr
    again = _neuronemu(cache, "warm-up", code=plain)
    assert "compiled already" in again.stdout
