"""The passes compiled ahead of time (neuronemu.jit.ahead): the module built from Numba's
signatures gives what the plain twins give on the arguments real runs pass; a call of other
types goes to Numba; a module is loaded only from a private folder, with its manifest, when
built from this source. Building takes ~20 s: those tests are marked slow (.ci/run runs
them)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import neuronemu
from neuronemu.checks.hazards import first_race
from neuronemu.cli import warm_up_command
from neuronemu.errors import RaceError
from neuronemu.inputs import parse_spec
from neuronemu.jit import ahead
from neuronemu.jit import compiled as _jit
from neuronemu.jit import worker as jit_worker
from neuronemu.nasm.read import load_program
from neuronemu.nasm.write import dumps

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="with the JIT off, nothing is built"
)
# (Numba's AOT compiler needs a C compiler: where there is none, the build cannot be tried)
needs_a_compiler = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"
)


def _ring_source() -> str:
    """test_allocator's RING kernel (three 64 KiB tiles, the third reusing the first's bytes
    on trn1, after a wait): the race check's reuse pass finds a race when the wait goes."""
    path = Path(__file__).with_name("test_allocator.py")
    spec = importlib.util.spec_from_file_location("_ring", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HEADER + module.RING


def _fresh(monkeypatch, where: Path | None) -> None:
    """This process looks for the module again, in `where`'s folder (None: nowhere)."""
    monkeypatch.setattr(ahead, "_looked", False)
    monkeypatch.setattr(ahead, "_loaded", None)
    monkeypatch.setattr(ahead, "_missed", False)
    monkeypatch.setattr(_jit, "AHEAD", None)
    if where is None:
        monkeypatch.setenv("NEURONEMU_AHEAD", "0")
    else:
        monkeypatch.setenv("NEURONEMU_AHEAD", "1")
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(where))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A module built into a folder of its own (its parent stands for Numba's cache folder),
    from the signatures this process's passes have, after running each."""
    from click.testing import CliRunner

    from neuronemu.cli import main

    _jit.LAZY["clocks"].load()  # (Numba imported now: its cache folder stays the tests')
    cache = tmp_path_factory.mktemp("cache")
    cache.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("NUMBA_CACHE_DIR", "NEURONEMU_AHEAD")}
    os.environ["NEURONEMU_AHEAD"] = "1"
    ahead._looked, ahead._loaded = False, None
    try:
        # (warm-up: the passes compiled, or loaded from the tests' Numba cache, in this
        # process; then the module built: the folder is read from the environment)
        os.environ["NUMBA_CACHE_DIR"] = str(cache)
        result = CliRunner().invoke(main, ["warm-up"])
        assert result.exit_code == 0, result.output
        assert "built the jitted passes ahead of time" in result.output, result.output
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        ahead._looked, ahead._loaded, _jit.AHEAD = False, None, None
    return cache


# Kernels of kernels/ (name, inputs, spec), run with values.
KERNELS = (
    ("matmul_tiled", ("lhsT", "rhs"), "bfloat16[256,1024]"),
    ("softmax_rows", ("x",), "float32[512,512]"),
    ("layernorm", ("x",), "float32[512,256]"),
)


def _copied(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return bool(a == b)


@pytest.mark.slow
@needs_a_compiler
def test_every_pass_built_gives_what_its_twin_gives_on_real_runs(built, monkeypatch, tmp_path):
    _fresh(monkeypatch, built)
    monkeypatch.setattr(jit_worker, "ENABLED", False)
    assert ahead.available(*_jit.LAZY)
    calls: list[tuple] = []
    call = ahead.call

    def spy(name, args):
        before = _copied(args)
        got = call(name, args)
        if got is not _jit.NOT_RUN:
            calls.append((name, before, got, _copied(args)))
        return got

    monkeypatch.setattr(_jit, "AHEAD", spy)
    for name, names, spec in KERNELS:
        inputs = {n: parse_spec(n, spec, 0) for n in names}
        result = neuronemu.run(ROOT / "kernels" / f"{name}.py", inputs, print_fn=lambda _: None)
        _ = result.critical_path  # (walked when asked for)
    program = load_program(_ring(tmp_path), {"a": np.zeros((128, 16384), np.float32)})
    race = first_race(program)
    assert isinstance(race, RaceError) and "placed where t was" in str(race)
    assert {c[0] for c in calls} == set(_jit.LAZY)
    for name, before, got, after in calls:
        args = _copied(before)
        want = _jit.LAZY[name].py(*args)
        assert _same(got, want), name
        for position in _jit.LAZY[name].writes:  # (what the pass writes into its arguments)
            assert np.array_equal(after[position], args[position]), (name, position)


def _ring(tmp_path: Path) -> Path:
    """RING as text with the wait before its third tile's load deleted: a reuse race."""
    path = tmp_path / "ring.py"
    path.write_text(_ring_source())
    a = {"a": np.zeros((128, 16384), np.float32)}
    program = neuronemu.compile_kernel(path, a, target="trn1")
    text = dumps(program)
    waiter = next(
        i
        for i in program.instrs
        if i.spec.name == "dma_copy" and i.views("out")[0][1].tensor.name == "t.2"
    )
    line = next(x for x in text.splitlines() if x.strip().startswith(f"@{waiter.index} "))
    out = tmp_path / "ring.nasm"
    out.write_text(
        text.replace(line, line[: line.index(" wait(")] + line[line.index(")  ;") + 1 :])
    )
    return out


@pytest.mark.slow
@needs_a_compiler
def test_a_call_of_other_types_goes_to_numba(built, monkeypatch):
    _fresh(monkeypatch, built)
    assert ahead.available("clocks")
    z = np.zeros(0, np.int64)
    stream, first = np.zeros(2, np.int64), np.zeros(3, np.int64)
    assert ahead.call("clocks", (stream, first, z, 1)) is not _jit.NOT_RUN
    assert not ahead.missed()
    for args in (
        (stream.astype(np.int32), first, z, 1),  # another dtype
        (np.zeros(4, np.int64)[::2], first, z, 1),  # not C order
        (stream, first, z, 1.0),  # a float for an int
        (stream, first, z, True),  # a bool for an int
        (stream.reshape(2, 1), first, z, 1),  # another number of dimensions
        (stream, first, z),  # too few
    ):
        assert ahead.call("clocks", args) is _jit.NOT_RUN
    # (a call missed: the module is older than its callers; the rest of the process goes
    # as without it, and the command builds it again)
    assert ahead.missed() and not ahead.available("clocks")
    # (through the pass: Numba's, on the same values)
    position, _ = _jit.clocks(stream.astype(np.int32).astype(np.int64), first, z, 1)
    assert list(position) == [1, 2]


@pytest.mark.slow
@needs_a_compiler
def test_a_module_is_loaded_only_private_whole_and_of_this_source(built, monkeypatch, tmp_path):
    folder = built / "ahead"
    _fresh(monkeypatch, built)
    assert ahead.available(*_jit.LAZY)
    copy = tmp_path / "copy"
    copy.mkdir(mode=0o700)
    shutil.copytree(folder, copy / "ahead")
    _fresh(monkeypatch, copy)
    assert ahead.available(*_jit.LAZY)  # (the copy, as it is)
    changes = (
        "shared folder",
        "no manifest",
        "another source",
        "shared module",
        "another module's manifest",
        "an export it lacks",
        "a manifest that is no manifest",
    )
    for changed in changes:
        shutil.rmtree(copy / "ahead")
        shutil.copytree(folder, copy / "ahead")
        name = ahead.module_name()
        module = next((copy / "ahead").glob(f"{name}.*.so"))
        if changed == "shared folder":
            (copy / "ahead").chmod(0o777)
        elif changed == "no manifest":
            (copy / "ahead" / f"{name}.json").unlink()
        elif changed == "shared module":
            module.chmod(0o766)
        elif changed != "another source":
            listed = copy / "ahead" / f"{name}.json"
            manifest = json.loads(listed.read_text())
            if changed == "another module's manifest":
                manifest["sha256"] = "0" * 64
            elif changed == "an export it lacks":
                manifest["clocks"][0][0] = "clocks_99"
            else:
                manifest = [manifest]
            listed.write_text(json.dumps(manifest))
        else:
            monkeypatch.setattr(ahead, "module_name", lambda: name[:-1] + "x")
        _fresh(monkeypatch, copy)
        assert ahead.load() is None, changed
        assert not ahead.available("clocks") and _jit.AHEAD is None, changed
        monkeypatch.undo()
        (copy / "ahead").chmod(0o700)


def test_the_module_is_off_where_the_jit_is_or_bounds_are_checked(monkeypatch):
    monkeypatch.setenv("NEURONEMU_AHEAD", "1")
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    monkeypatch.delenv("NUMBA_BOUNDSCHECK", raising=False)
    assert ahead.enabled()
    for name, value in (
        ("NEURONEMU_AHEAD", "0"),
        ("NUMBA_DISABLE_JIT", "1"),
        ("NUMBA_BOUNDSCHECK", "1"),
    ):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert not ahead.enabled(), name


def test_a_step_takes_its_jitted_form_early_only_with_the_module_or_a_ready_worker(monkeypatch):
    monkeypatch.setattr(jit_worker, "_worker", None)
    monkeypatch.setattr(ahead, "available", lambda *passes: False)
    assert jit_worker.jit_above(20_000, "schedule") == 20_000
    monkeypatch.setattr(ahead, "available", lambda *passes: passes == ("schedule",))
    assert jit_worker.jit_above(20_000, "schedule") == ahead.JIT_ABOVE
    assert jit_worker.jit_above(20_000, "schedule", "clocks") == 20_000


def test_a_failed_build_is_kept_and_a_run_does_not_try_again(monkeypatch, tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _fresh(monkeypatch, cache)
    monkeypatch.delenv("CI", raising=False)
    started: list[list[str]] = []
    monkeypatch.setattr(
        warm_up_command.subprocess, "Popen", lambda args, **kw: started.append(args)
    )
    warm_up_command.build_later()  # (nothing built, nothing failed: a build starts)
    assert len(started) == 1 and "warm-up" in started[0][2]
    assert "in the background" in capsys.readouterr().err

    def no_compiler(real, name):
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(ahead, "_build", no_compiler)
    with pytest.raises(RuntimeError):
        ahead.build()
    assert ahead.failed() == "no C compiler"
    warm_up_command.build_later()
    assert len(started) == 1  # (not again: `neuronemu warm-up` tries again)
    with ahead.building() as mine:  # (nor while another process builds)
        assert mine
        monkeypatch.setattr(ahead, "failed", lambda: None)
        warm_up_command.build_later()
        assert len(started) == 1
    monkeypatch.setenv("NEURONEMU_AHEAD", "0")
    warm_up_command.build_later()
    assert len(started) == 1
    monkeypatch.setenv("NEURONEMU_AHEAD", "1")
    monkeypatch.setattr(ahead, "failed", lambda: None)
    monkeypatch.setenv("CI", "true")  # (a CI machine: fresh each time)
    warm_up_command.build_later()
    assert len(started) == 1
    monkeypatch.setenv("CI", "false")
    warm_up_command.build_later()
    assert len(started) == 2


def test_only_a_command_that_loaded_numba_builds_later(monkeypatch):
    from neuronemu import cli
    from neuronemu.host import malloc

    monkeypatch.setattr(cli, "_OWN_PROCESS", False)  # (entry's settings, undone after)
    monkeypatch.setattr(malloc, "keep_freed_arrays", lambda: None)
    built: list[bool] = []
    monkeypatch.setattr(cli, "build_later", lambda: built.append(True))
    monkeypatch.setattr(cli, "main", lambda: None)
    for started, missed in ((False, False), (True, False), (False, True)):
        monkeypatch.setattr(jit_worker, "started", lambda: started)
        monkeypatch.setattr(ahead, "missed", lambda: missed)
        monkeypatch.setattr(jit_worker, "ENABLED", False)
        cli.entry()
    assert built == [True, True]  # (a worker ran, or a call missed the module)


def test_a_build_leaves_the_last_modules_of_other_versions(tmp_path, monkeypatch):
    monkeypatch.setattr(ahead, "KEEP_OTHERS", 2)
    for age, stem in enumerate(("neuronemu_passes_a", "neuronemu_passes_b", "neuronemu_passes_c")):
        for suffix in (".so", ".json"):
            path = tmp_path / (stem + suffix)
            path.write_text("")
            os.utime(path, (1_000_000 + age, 1_000_000 + age))
    (tmp_path / "neuronemu_passes_d.so").write_text("")  # (the one just built)
    ahead._forget_others(str(tmp_path), "neuronemu_passes_d")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [
        "neuronemu_passes_b.json",
        "neuronemu_passes_b.so",
        "neuronemu_passes_c.json",
        "neuronemu_passes_c.so",
        "neuronemu_passes_d.so",
    ]


def test_only_exactly_the_types_built_fit():
    i8 = ("array", np.dtype("<i8"), 1, True)
    ok = np.zeros(4, np.int64)
    assert ahead._fits(i8, ok)
    frozen = ok.copy()
    frozen.flags.writeable = False
    misaligned = np.frombuffer(bytearray(40), dtype=np.uint8)[1:33].view(np.int64)
    for arg in (
        frozen,  # read-only, where the pass may write
        ok.view(np.matrix).reshape(-1),  # a subclass
        misaligned,
        ok.astype(">i8"),  # the other byte order
        ok[::2],  # not C order
        ok.reshape(2, 2),  # two dimensions
        np.int64(3),  # not an array
        np.zeros((), np.int64),  # 0-d
        ok.astype(np.int32),
    ):
        assert not ahead._fits(i8, arg), arg
    assert ahead._fits(("array", np.dtype("<i8"), 1, False), frozen)  # (only read)
    assert not misaligned.flags.aligned  # (as the test means it)
    assert [ahead._fits(("int",), v) for v in (3, np.int64(3), True, np.int32(3), 3.0)] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert [ahead._fits(("bool",), v) for v in (True, np.bool_(True), 1)] == [True, True, False]
    assert [ahead._fits(("float",), v) for v in (1.5, np.float64(1.5), 1, np.float32(1))] == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="Numba's types")
def test_a_signature_the_calls_cannot_check_is_left_out():
    from numba.core import types

    assert ahead._spec(types.Array(types.int64, 1, "C")) == ["array", "<i8", 1, True]
    readonly = types.Array(types.int32, 2, "C", readonly=True)
    assert ahead._spec(readonly) == ["array", "<i4", 2, False]
    assert ahead._spec(types.Array(types.int64, 1, "A")) is None  # (any layout)
    assert ahead._spec(types.Array(types.int64, 1, "C", aligned=False)) is None
    assert ahead._spec(types.int32) is None and ahead._spec(types.UniTuple(types.int64, 2)) is None
    assert [ahead._spec(t) for t in (types.boolean, types.int64, types.float64)] == [
        ["bool"],
        ["int"],
        ["float"],
    ]


def test_a_module_is_used_by_its_path_only_as_a_file_of_its_own(tmp_path):
    real = tmp_path / "m.so"
    real.write_bytes(b"x")
    real.chmod(0o700)
    assert _taken_by_the_loader(real)
    link = tmp_path / "link.so"
    link.symlink_to(real)
    assert not _taken_by_the_loader(link)
    real.chmod(0o722)
    assert not _taken_by_the_loader(real)


def _taken_by_the_loader(path: Path) -> bool:
    """Would the loader take the file at `path` (neuronemu.jit.ahead._import reads it so)?"""
    from neuronemu.host.cachedirs import read_private

    return read_private(path, 1 << 20) is not None


def test_with_the_module_no_worker_starts(monkeypatch):
    started: list[bool] = []
    monkeypatch.setattr(jit_worker, "start", lambda: started.append(True))
    monkeypatch.setattr(jit_worker, "ENABLED", True)
    monkeypatch.setattr(jit_worker, "_worker", None)
    monkeypatch.setattr(jit_worker, "_cores", lambda: 2)
    monkeypatch.setattr(_jit, "loaded", lambda: False)
    monkeypatch.setenv("NEURONEMU_JIT_WORKER", "1")
    monkeypatch.setattr(ahead, "available", lambda *passes: True)
    jit_worker.expect(10**6)
    assert started == []
    monkeypatch.setattr(ahead, "available", lambda *passes: False)
    jit_worker.expect(10**6)
    assert started == [True]


def test_every_failed_build_is_kept_and_a_killed_ones_folder_cleared(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _fresh(monkeypatch, cache)
    folder = Path(ahead.folder())
    folder.mkdir(mode=0o700)
    (folder / "build-killed").mkdir()
    (folder / "build-killed" / "half.o").write_text("")

    def full(real, name):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ahead, "_built", full)
    with pytest.raises(RuntimeError, match="No space left"):
        ahead.build()
    assert "No space left" in (ahead.failed() or "")
    assert not (folder / "build-killed").exists()


@pytest.mark.slow
@needs_a_compiler
def test_a_module_lacking_a_signature_the_cache_holds_is_not_current(built, monkeypatch):
    _fresh(monkeypatch, built)
    assert ahead.available(*_jit.LAZY) and ahead.current()
    signatures = ahead._signatures()
    extra = ("clocks", [["array", "<i4", 1, True]] * 3 + [["int"]], None, None)
    monkeypatch.setattr(ahead, "_signatures", lambda: [*signatures, extra])
    assert not ahead.current()  # (warm-up builds it again)


@pytest.mark.slow
def test_the_detached_build_runs_this_package_not_files_where_it_starts(tmp_path):
    # (NEURONEMU_AHEAD=0: warm-up stops before building; a click.py here would be imported
    # in place of Click if the current folder were on the path)
    (tmp_path / "click.py").write_text("raise SystemExit(7)\n")
    root = str(Path(warm_up_command.__file__).resolve().parents[2])
    env = dict(os.environ, NEURONEMU_AHEAD="0")
    done = subprocess.run(
        [sys.executable, "-c", warm_up_command._LATER, root],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "not built ahead of time" in done.stdout


def test_a_warm_up_waits_for_another(monkeypatch, tmp_path):
    # (a run's background warm-up holds the lock from its compile on: an explicit one waits
    # for it, then finds what it did; a run's check finds it held and starts nothing)
    from click.testing import CliRunner

    from neuronemu.cli import main

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _fresh(monkeypatch, cache)
    # (the other holds the lock until this one says it waits, or 10 s; says when it lets go)
    hold = (
        "import select, sys, time\nfrom neuronemu.jit import ahead\n"
        "with ahead.building() as mine:\n    print(mine, flush=True)\n"
        "    select.select([sys.stdin], [], [], 10)\n"
        "    print(time.time(), flush=True)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold],
        env=dict(os.environ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "True"
    started: list[list[str]] = []
    monkeypatch.setattr(warm_up_command.subprocess, "Popen", lambda a, **kw: started.append(a))
    monkeypatch.delenv("CI", raising=False)
    warm_up_command.build_later()  # (held: no second build)
    assert started == []
    cold_at: list[float] = []
    monkeypatch.setattr(warm_up_command, "_cold", lambda: cold_at.append(time.time()) or [])
    monkeypatch.setattr(warm_up_command, "_build_ahead", lambda: None)
    echo = warm_up_command.click.echo

    def echoed(message=None, **kwargs):
        echo(message, **kwargs)
        if "waiting for another warm-up" in str(message):
            holder.stdin.write("go\n")  # type: ignore[union-attr]
            holder.stdin.flush()  # type: ignore[union-attr]

    monkeypatch.setattr(warm_up_command.click, "echo", echoed)
    result = CliRunner().invoke(main, ["warm-up"])
    let_go_after = float(holder.stdout.readline())
    holder.wait()
    assert result.exit_code == 0, result.output
    assert "waiting for another warm-up" in result.output
    assert cold_at and cold_at[0] >= let_go_after


@pytest.mark.slow
@needs_a_compiler
def test_a_module_rebuilt_is_not_taken_in_the_process_that_imported_it(
    built, monkeypatch, tmp_path
):
    # (importing it again would give the first one's code under the new manifest)
    copy = tmp_path / "copy"
    copy.mkdir(mode=0o700)
    shutil.copytree(built / "ahead", copy / "ahead")
    monkeypatch.setattr(ahead, "_IMPORTED", {})
    _fresh(monkeypatch, copy)
    assert ahead.load() is not None
    name = ahead.module_name()
    module = next((copy / "ahead").glob(f"{name}.*.so"))
    rebuilt = tmp_path / "rebuilt.so"  # (another build's bytes, renamed into place as a
    rebuilt.write_bytes(module.read_bytes() + b"\0")  # build does: the loaded file stays)
    os.replace(rebuilt, module)
    listed = copy / "ahead" / f"{name}.json"
    manifest = json.loads(listed.read_text())
    manifest["sha256"] = hashlib.sha256(module.read_bytes()).hexdigest()
    listed.write_text(json.dumps(manifest))
    assert ahead.load(again=True) is None and not ahead.available("clocks")
