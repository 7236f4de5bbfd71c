"""The sandbox of the trust tests catches what it is there to catch (so that a passing trust
test means something): a hang, a big resident set, a written file, an unlocated error."""

from __future__ import annotations

import sys

import pytest
from _guard import RSS_LIMIT, Outcome, Sandbox


def py(box: Sandbox, code: str, timeout: float = 10.0) -> Outcome:
    return box.run_argv([sys.executable, "-c", code], timeout)


def test_a_hang_is_killed_and_reported(tmp_path):
    out = py(Sandbox(tmp_path), "import time; time.sleep(60)", timeout=1.0)
    assert out.timed_out and out.elapsed < 5
    with pytest.raises(AssertionError, match="still running"):
        out.assert_confined()


def test_peak_resident_set_is_measured_per_child(tmp_path):
    box = Sandbox(tmp_path)
    big = py(box, "b = bytearray(1200 << 20); b[::4096] = b'x' * len(b[::4096])")
    assert big.peak_rss > RSS_LIMIT, big.describe()
    with pytest.raises(AssertionError, match="peak RSS"):
        big.assert_confined()
    small = py(box, "pass")  # an earlier big child does not count against a later one
    assert small.peak_rss < 200 << 20, small.describe()


def test_the_address_space_safety_net_holds(tmp_path):
    out = py(Sandbox(tmp_path), "b = bytearray(4 << 30)")
    assert out.returncode == 1 and "MemoryError" in out.stderr, out.describe()


@pytest.mark.parametrize("where", ["work/new.txt", "home/.x", "xdg/other/x", "outside"])
def test_new_and_changed_files_anywhere_in_the_sandbox_are_seen(tmp_path, where):
    box = Sandbox(tmp_path)
    (box.work / "old.txt").write_text("old")
    target = box.root / where
    out = py(
        box,
        f"import os; os.makedirs({str(target.parent)!r}, exist_ok=True); "
        f"open({str(target)!r}, 'w').write('x')",
    )
    assert out.new_files, out.describe()
    with pytest.raises(AssertionError, match="wrote on the host"):
        out.assert_confined()
    changed = py(box, f"open({str(box.work / 'old.txt')!r}, 'a').write('more')")
    assert changed.changed_files == ["work/old.txt"], changed.describe()


def test_the_neuronemu_cache_may_be_written(tmp_path):
    box = Sandbox(tmp_path)
    out = py(box, f"open({str(box.cache / 'entry')!r}, 'w').write('x')")
    assert not out.new_files and not out.changed_files, out.describe()


def test_errors_are_judged_by_their_first_line(tmp_path):
    box = Sandbox(tmp_path)
    located = py(box, "import sys; sys.stderr.write('k.py:3:5: error: no\\n'); sys.exit(1)")
    located.assert_located("k.py")
    with pytest.raises(AssertionError, match="points at"):
        located.assert_located("other.py")
    for bad in (
        "k.py:0:5: error: no",
        "k.py:3:0: error: no",
        "error: no",
        "internal error: KeyError",
    ):
        out = py(box, f"import sys; sys.stderr.write({bad + chr(10)!r}); sys.exit(1)")
        with pytest.raises(AssertionError):
            out.assert_located("k.py")
    usage = py(box, "import sys; sys.stderr.write('error: bad --seed\\n'); sys.exit(2)")
    usage.assert_usage()
    with pytest.raises(AssertionError, match="exit 1"):
        usage.assert_located()


def test_the_cli_gives_located_and_usage_errors_today(tmp_path):
    """Errors neuronemu already gets right pass the same checks the regressions use."""
    box = Sandbox(tmp_path)
    box.write("k.py", "import nki\n\n@nki.jit\ndef k(a):\n    return nosuch\n")
    box.run("run", "k.py", "-i", "a=float32[128,64]").assert_located("k.py")
    box.run("run", "k.py", "-i", "a=nosuchdtype[128,64]").assert_usage()


# Runs forked from the zygote stand for runs of `python -m neuronemu`: the same outcomes.
_BOTH_WAYS = {
    "runs": "import nki\nimport nki.language as nl\n\n@nki.jit\ndef k(a):\n"
    "    o = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)\n"
    "    nl.store(o, nl.exp(nl.load(a)))\n    return o\n",
    "unlocated-name": "import nki\n\n@nki.jit\ndef k(a):\n    return nosuch\n",
    "host-file": "import nki\n\n@nki.jit\ndef k(a):\n    return open('/etc/passwd').read()\n",
    "host-module": "import os\nimport nki\n\n@nki.jit\ndef k(a):\n    os.system('true')\n",
}


@pytest.mark.parametrize("case", _BOTH_WAYS)
@pytest.mark.parametrize("args", [(), ("--json",)], ids=["text", "json"])
def test_a_run_forked_from_the_zygote_ends_as_the_command_does(tmp_path, case, args):
    outcomes = []
    for exec_ in (True, False):
        box = Sandbox(tmp_path / f"exec-{exec_}")
        box.write("k.py", _BOTH_WAYS[case])
        out = box.run("run", "k.py", "-i", "a=float32[128,64]", *args, exec_=exec_)
        out.assert_confined()
        outcomes.append(out)
    a, b = outcomes
    assert (a.returncode, a.first_line, a.stdout) == (b.returncode, b.first_line, b.stdout), (
        f"{a.describe()}\n=== forked from the zygote ===\n{b.describe()}"
    )
    assert a.stderr.splitlines()[:2] == b.stderr.splitlines()[:2]


def test_a_usage_error_forked_from_the_zygote_names_the_command_as_python_m(tmp_path):
    for exec_ in (True, False):
        out = Sandbox(tmp_path / f"exec-{exec_}").run("nosuch", exec_=exec_)
        out.assert_usage()
        assert "python -m neuronemu --help" in out.stderr, out.describe()


def test_a_hang_forked_from_the_zygote_is_killed_and_reported(tmp_path):
    box = Sandbox(tmp_path)
    box.write("k.py", "import nki\n\n@nki.jit\ndef k(a):\n    while True:\n        pass\n")
    args = ("run", "k.py", "-i", "a=float32[128,64]", "--limit", "trace_seconds=60")
    out = box.run(*args, timeout=1.0)
    assert out.timed_out and out.elapsed < 5, out.describe()
    with pytest.raises(AssertionError, match="still running"):
        out.assert_confined()
    box.run("nosuch").assert_usage()  # (the zygote forks the next run as before)
