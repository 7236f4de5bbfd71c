"""The passes compiled ahead of time (neuronemu.jit.ahead): the module built from Numba's
signatures gives what the plain twins give on the arguments real runs pass; a call of other
types goes to Numba; a module is loaded only from a private folder, with its manifest, when
built from this source. Building takes ~20 s: those tests are marked slow (.ci/run runs
them)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import neuronemu
from neuronemu.checks.hazards import first_race
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
        assert "built the passes ahead of time" in result.output, result.output
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
    for args in (
        (stream.astype(np.int32), first, z, 1),  # another dtype
        (np.zeros(4, np.int64)[::2], first, z, 1),  # not C order
        (stream, first, z, 1.0),  # a float for an int
        (stream, first, z, True),  # a bool for an int
        (stream.reshape(2, 1), first, z, 1),  # another number of dimensions
        (stream, first, z),  # too few
    ):
        assert ahead.call("clocks", args) is _jit.NOT_RUN
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
    for changed in ("shared folder", "no manifest", "another source", "shared module"):
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
    from neuronemu.cli import warm_up_command

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _fresh(monkeypatch, cache)
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


def test_only_a_command_that_started_the_worker_builds_later(monkeypatch):
    from neuronemu import cli
    from neuronemu.host import malloc

    monkeypatch.setattr(cli, "_OWN_PROCESS", False)  # (entry's settings, undone after)
    monkeypatch.setattr(malloc, "keep_freed_arrays", lambda: None)
    built: list[bool] = []
    monkeypatch.setattr(cli, "build_later", lambda: built.append(True))
    monkeypatch.setattr(cli, "main", lambda: None)
    for started in (False, True):
        monkeypatch.setattr(jit_worker, "started", lambda: started)
        monkeypatch.setattr(jit_worker, "ENABLED", False)
        cli.entry()
    assert built == [True]


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
