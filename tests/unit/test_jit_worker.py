"""The jitted passes run in a worker process (neuronemu.jit.worker) give what they give
in-process; a worker that dies leaves the calls in-process; the command turns it on."""

from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu import cli, pipeline
from neuronemu.build import allocator
from neuronemu.checks import hazards
from neuronemu.checks.hazards import first_race
from neuronemu.jit import compiled as _jit
from neuronemu.jit import worker as jit_worker
from neuronemu.sim import timing

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "tests" / "timing" / "v12_matmuls.py"
BF16 = ml_dtypes.bfloat16


@pytest.fixture
def calls(monkeypatch):
    """Start a worker for the test (stopped after it); the names of the calls it ran."""
    ran: list[str] = []
    call = jit_worker._Worker.call

    def counted(self, name, args, writes):
        got = call(self, name, args, writes)
        if got is not _jit.NOT_RUN:
            ran.append(name)
        return got

    monkeypatch.setattr(jit_worker._Worker, "call", counted)
    jit_worker.start()
    assert jit_worker.running()
    yield ran
    jit_worker.stop()
    assert not jit_worker.running() and _jit.REMOTE is None


def _run(kernel: str):
    inputs = {"lhsT": np.ones((1024, 512), BF16), "rhs": np.ones((1024, 1024), BF16)}
    return neuronemu.run(MATMUL, inputs, kernel=kernel, timing_only=True, print_fn=lambda _: None)


@pytest.mark.parametrize("kernel", ["tiled", "hoisted"])
def test_the_passes_in_the_worker_give_what_they_give_in_process(kernel, calls, monkeypatch):
    for module in (allocator, pipeline, hazards, timing):  # (the jitted passes, on a small program)
        monkeypatch.setattr(module, "JIT_ABOVE", 0)
    remote = _run(kernel)
    assert {"place", "clocks", "first_race", "schedule"} <= set(calls)
    jit_worker.stop()
    here = _run(kernel)
    assert remote.program.memory_map() == here.program.memory_map()
    np.testing.assert_array_equal(remote.timeline.start_ns, here.timeline.start_ns)
    np.testing.assert_array_equal(remote.timeline.end_ns, here.timeline.end_ns)
    assert remote.to_json() == here.to_json()  # (the critical path's walk included)


TWO_CORES = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(a.shape[0] // 128):
        x = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        y = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[t * 128 : t * 128 + 128, :])
        nisa.dma_copy(dst=y, src=b[t * 128 : t * 128 + 128, :])
        nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
        nisa.dma_copy(dst=out[t * 128 : t * 128 + 128, :], src=x)
    return out


def on_two_cores(a, b):
    return add[nl.nc(2)](a, b)
"""


def test_pairs_a_pass_writes_into_its_arguments_come_back(tmp_path, calls):
    """The race check's pairs of two cores' writes to the same HBM rows, which the jitted
    pass writes into an array it is given: the worker's, copied back, are the same."""
    path = tmp_path / "k.py"
    path.write_text(TWO_CORES)
    a = np.zeros((1024, 64), np.float32)
    program = neuronemu.compile_kernel(path, {"a": a, "b": a}, kernel="on_two_cores")
    remote: list[tuple[int, int]] = []
    assert first_race(program, remote, use_jit=True) is None
    assert calls == ["clocks", "first_race"]
    jit_worker.stop()
    here: list[tuple[int, int]] = []
    assert first_race(program, here, use_jit=True) is None
    assert len(here) >= 4 and remote == here


def test_a_worker_that_dies_leaves_the_calls_in_process(calls, monkeypatch):
    for module in (allocator, pipeline, hazards, timing):
        monkeypatch.setattr(module, "JIT_ABOVE", 0)
    jit_worker._worker.process.kill()  # type: ignore[union-attr]
    jit_worker._worker.process.wait()  # type: ignore[union-attr]
    result = _run("tiled")
    assert calls == [] and not jit_worker.running()
    jit_worker.stop()
    assert result.to_json() == _run("tiled").to_json()


def test_only_the_command_as_its_own_process_starts_one(monkeypatch):
    started: list[int] = []
    monkeypatch.setattr(jit_worker, "start", lambda: started.append(1))
    monkeypatch.setattr(_jit, "loaded", lambda: False)
    monkeypatch.setattr(jit_worker, "_cores", lambda: 2)
    monkeypatch.setattr(jit_worker, "ENABLED", False)
    monkeypatch.setattr(cli, "_OWN_PROCESS", False)
    jit_worker.expect(10**6)
    assert started == []  # (a host's process: the Python API, these tests)
    monkeypatch.setattr(cli, "main", lambda: None)
    cli.entry()
    assert jit_worker.ENABLED
    jit_worker.expect(jit_worker.START_ABOVE)
    assert started == []  # (not past the size the jitted passes start at)
    monkeypatch.setenv("NEURONEMU_JIT_WORKER", "0")
    jit_worker.expect(10**6)
    assert started == []
    monkeypatch.delenv("NEURONEMU_JIT_WORKER")
    jit_worker.expect(jit_worker.START_ABOVE + 1)
    assert started == [1]


def test_it_starts_where_a_ready_worker_takes_the_passes():
    """Started no later than the size past which a ready worker takes the passes, which is
    below each pass's own size for loading Numba in-process."""
    assert jit_worker.START_ABOVE <= jit_worker.READY_JIT_ABOVE
    for module in (allocator, hazards, timing):
        assert jit_worker.READY_JIT_ABOVE < module.JIT_ABOVE
        assert jit_worker.jit_above(module.JIT_ABOVE) == module.JIT_ABOVE  # (no worker)


def _wait_ready(passes: tuple[str, ...], seconds: float = 120.0) -> None:
    import time

    began = time.monotonic()
    while not jit_worker.ready(passes):
        assert jit_worker.running(), "the worker died while loading"
        assert time.monotonic() - began < seconds, "the worker never said it was ready"
        time.sleep(0.02)


@pytest.fixture
def cached_passes():
    """Every jitted pass in Numba's cache (compiled here by a run that takes them all, if a
    fresh machine has not yet): what a worker must find to say it is ready."""
    from neuronemu.report import critical

    with pytest.MonkeyPatch.context() as patch:
        for module in (allocator, pipeline, hazards, timing, critical):
            patch.setattr(module, "JIT_ABOVE", 0)
        _run("tiled")


def test_ready_never_waits_and_a_ready_worker_takes_the_passes_past_its_size(
    cached_passes, calls, monkeypatch
):
    """`ready` answers at once while the worker loads; once it is ready, a program past
    READY_JIT_ABOVE (here 0) but under the passes' own JIT_ABOVE runs them there, with the
    results they give in-process."""
    import time

    began = time.monotonic()
    jit_worker.ready()
    assert time.monotonic() - began < 0.05  # (it loads Numba meanwhile: ~0.5 s)
    _wait_ready(("schedule", "clocks", "first_race"))
    assert jit_worker.jit_above(timing.JIT_ABOVE, "schedule") == jit_worker.READY_JIT_ABOVE
    monkeypatch.setattr(jit_worker, "READY_JIT_ABOVE", 0)
    remote = _run("tiled")
    assert "schedule" in calls
    jit_worker.stop()
    assert jit_worker.jit_above(hazards.JIT_ABOVE) == hazards.JIT_ABOVE
    here = _run("tiled")
    assert remote.to_json() == here.to_json()


def test_a_cold_cache_loads_nothing_and_says_so(tmp_path):
    """On a cold cache `load_all` compiles nothing and names no pass as loaded (the worker
    then is `ready` for none: no small program waits for a compile)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    code = "from neuronemu.jit import compiled as c; print(len(c.load_all()), c.loaded())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split() == ["0", "True"], out.stderr


def test_what_the_worker_says_while_loading_is_kept_until_a_call_waits(monkeypatch):
    """A compile notice read by `ready` is not told (nothing waits for it); the call that
    then waits tells it first, before anything the worker says after it."""
    told: list[tuple] = []
    monkeypatch.setattr(jit_worker.compiling, "tell", lambda *a: told.append(a))
    opened: list = []

    def worker_saying(*messages: tuple):
        read, write = os.pipe()
        out = os.fdopen(write, "wb")
        for message in messages:
            jit_worker._send(message, out)
        worker = object.__new__(jit_worker._Worker)
        worker.alive, worker.loaded, worker.cached, worker.notices = True, False, frozenset(), []
        worker.replies = os.fdopen(read, "rb", buffering=0)
        opened.extend((out, worker.replies))
        return worker, out

    # Loaded before anything waited: the notice is kept, never told.
    worker, out = worker_saying(("compiling", (2.5, True)), ("ready", ["schedule", "place"]))
    assert worker.ready() and worker.ready()  # (the second: nothing more to read)
    assert worker.notices == [(2.5, True)] and told == []
    # Still compiling when a call comes: it tells the notice, then waits for the rest.
    worker, out = worker_saying(("compiling", (2.5, True)))
    assert not worker.ready() and worker.notices == [(2.5, True)] and told == []
    jit_worker._send(("compiling", (1.0, True)), out)
    jit_worker._send(("ready", ["schedule", "place"]), out)
    worker._wait_loaded()
    assert worker.loaded and told == [(2.5, True), (1.0, True)] and worker.notices == []
    # Done loading, but a pass was not in the cache: calls of it go there (and compile it
    # there), but it is not ready for them: smaller programs keep that plain pass here.
    worker, out = worker_saying(("ready", ["schedule"]))
    worker._wait_loaded()
    assert worker.loaded and worker.ready(("schedule",)) and not worker.ready(("place",))
    for f in opened:
        f.close()


@pytest.mark.parametrize("arena_bytes", [2**20, 64])
def test_a_message_crosses_whole_with_its_arrays_aligned(arena_bytes):
    """Arrays of odd sizes and several dtypes, a scalar and a tuple, through a pipe: equal
    and aligned on the other side, in the arena (each at a multiple of 64 bytes) or, where
    it is too small, in buffers of their own."""
    import os
    import threading

    rng = np.random.default_rng(0)
    message = (
        "schedule",
        (
            rng.integers(0, 9, 13).astype(np.int64),
            rng.random(7).astype(np.float64),
            rng.integers(0, 2, 5).astype(np.bool_),
            rng.integers(0, 9, (3, 5)).astype(np.int32),
            4,
        ),
        (2,),
    )
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as source, os.fdopen(write_end, "wb") as sink:
        sender = threading.Thread(target=jit_worker._send, args=(message, sink))
        sender.start()
        arena = memoryview(bytearray(arena_bytes))
        name, args, writes = jit_worker._receive(source, arena)
        sender.join()
    assert (name, writes, args[4]) == ("schedule", (2,), 4)
    for got, sent in zip(args[:4], message[1][:4]):
        assert got.dtype == sent.dtype and got.flags.aligned and got.flags.writeable
        np.testing.assert_array_equal(got, sent)
    in_arena = [np.shares_memory(a, np.frombuffer(arena, np.uint8)) for a in args[:4]]
    assert in_arena == [arena_bytes > 64] * 4


@pytest.mark.parametrize("arena_bytes", [2**20, 64])
def test_a_message_through_a_shared_arena_leaves_its_arrays_there(arena_bytes):
    """Where the arrays fit in the arena both sides map, the sender copies them there and
    only the header and pickle go down the pipe; the reader's arrays are views of the arena
    (aligned, writable). Where they do not fit, they go down the pipe as without it."""
    import os
    import threading

    rng = np.random.default_rng(1)
    arrays = [rng.random(11), rng.integers(0, 9, (3, 7)).astype(np.int32), np.zeros(0)]
    message = ("first_race", (*arrays, 7), ())
    arena = memoryview(bytearray(arena_bytes))
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as source, os.fdopen(write_end, "wb") as sink:
        sender = threading.Thread(target=jit_worker._send, args=(message, sink, arena))
        sender.start()
        name, args, writes = jit_worker._receive(source, arena)
        sender.join()
        sink.close()
        assert source.read() == b""  # (nothing left in the pipe)
    assert (name, writes, args[3]) == ("first_race", (), 7)
    for got, sent in zip(args[:3], arrays):
        assert got.dtype == sent.dtype and got.flags.aligned and got.flags.writeable
        np.testing.assert_array_equal(got, sent)
    shared = [np.shares_memory(a, np.frombuffer(arena, np.uint8)) for a in args[:2]]
    assert shared == [arena_bytes > 64] * 2


def test_the_worker_loads_the_compiled_passes_before_the_first_call(monkeypatch):
    """What the worker loads while the parent traces: the code Numba's cache holds for each
    pass (here, once a run has compiled or loaded them), without compiling anything."""
    for module in (allocator, pipeline, hazards, timing):
        monkeypatch.setattr(module, "JIT_ABOVE", 0)
    _run("tiled")  # (the passes in Numba's cache)
    fresh = _jit.njit(_jit.place.py)
    assert not fresh.overloads
    _jit.load_cached(fresh)
    assert fresh.overloads and not fresh.stats.cache_misses


def test_a_worker_still_loading_is_stopped_at_once():
    """A run that fails early stops a worker that is still importing Numba: it is killed,
    not waited for (the command's exit would wait with it)."""
    import signal

    jit_worker.start()
    process = jit_worker._worker.process  # type: ignore[union-attr]
    jit_worker.stop()  # (right away: Numba alone takes ~0.3 s to import)
    assert process.returncode == -signal.SIGKILL
    assert not jit_worker.running() and _jit.REMOTE is None


def test_the_commands_exit_kills_and_reaps_the_worker_at_once(monkeypatch):
    """At the command's exit (the handler `start` registers), the worker is killed and
    reaped, waiting no longer than LEAVE_SECONDS: no zombie outlives the handler while the
    command's process tears itself down."""
    import signal
    import time

    registered = []
    monkeypatch.setattr(jit_worker.atexit, "register", registered.append)
    jit_worker.start()
    worker = jit_worker._worker
    assert worker is not None and registered == [worker.leave]
    worker.call(
        "clocks", (np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(0, np.int64), 1), ()
    )
    pid = worker.process.pid
    began = time.monotonic()
    worker.leave()
    assert time.monotonic() - began < jit_worker.LEAVE_SECONDS + 0.5
    assert not worker.alive
    assert worker.process.returncode == -signal.SIGKILL  # (reaped: no zombie left)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    jit_worker.stop()
    assert _jit.REMOTE is None


def _fake_worker(monkeypatch):
    """A worker that says only what the test writes to its pipe (no process)."""
    read, write = os.pipe()
    worker = object.__new__(jit_worker._Worker)
    worker.alive, worker.loaded, worker.cached, worker.notices = True, False, frozenset(), []
    worker.replies = os.fdopen(read, "rb", buffering=0)
    monkeypatch.setattr(jit_worker, "_worker", worker)
    return worker, os.fdopen(write, "wb")


def test_a_step_waits_for_a_loading_worker_less_than_its_plain_form_takes(monkeypatch):
    """Between READY_JIT_ABOVE and its own JIT_ABOVE, a step about to take its plain form
    because the worker is still loading waits for it, up to WAIT_PER_INSTRUCTION times the
    step's size: a worker ready within that is taken as soon as it says so; one that is not
    is given up at the bound; a step outside that range never waits."""
    import threading
    import time

    monkeypatch.setattr(jit_worker, "READY_JIT_ABOVE", 1_000)
    monkeypatch.setattr(jit_worker, "WAIT_PER_INSTRUCTION", 5e-4)  # (10,000: 5 s)
    worker, out = _fake_worker(monkeypatch)
    say = threading.Timer(0.1, lambda: jit_worker._send(("ready", ["schedule"]), out))
    began = time.monotonic()
    say.start()
    assert jit_worker.jit_above(20_000, "schedule", size=10_000) == 1_000
    assert 0.09 < time.monotonic() - began < 4.0  # (as it said so, not at the bound)
    say.join()
    worker.replies.close()
    out.close()

    monkeypatch.setattr(jit_worker, "WAIT_PER_INSTRUCTION", 2e-5)  # (10,000: 0.2 s)
    worker, out = _fake_worker(monkeypatch)
    for size, waits in ((10_000, True), (20_001, False), (1_000, False)):
        began = time.monotonic()
        assert jit_worker.jit_above(20_000, "schedule", size=size) == 20_000
        took = time.monotonic() - began
        assert (0.19 < took < 2.0) if waits else took < 0.15, (size, took)
    worker.replies.close()
    out.close()


def test_a_loop_nests_first_pass_tells_the_programs_size(monkeypatch, tmp_path):
    """The first pass of a nest's innermost body, times the trip counts of the loops around
    it, is how large the program will be long before any replay knows: the worker is
    expected right after that pass (here its second instruction), not 256 instructions on."""
    heard: list[int] = []
    monkeypatch.setattr(jit_worker, "expect", heard.append)
    kernel = tmp_path / "nest.py"
    kernel.write_text(
        "import nki\n"
        "import nki.isa as nisa\n"
        "import nki.language as nl\n\n\n"
        "@nki.jit\n"
        "def nest(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    for i in nl.affine_range(16):\n"
        "        for j in nl.affine_range(8):\n"
        "            for k in nl.affine_range(4):\n"
        "                c = ((i * 8 + j) * 4 + k) * 2\n"
        "                t = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.sbuf)\n"
        "                nisa.dma_copy(dst=t, src=x[:, c : c + 2])\n"
        "                nisa.dma_copy(dst=out[:, c : c + 2], src=t)\n"
        "    return out\n"
    )
    x = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)
    result = neuronemu.run(kernel, {"x": x}, timing_only=True, print_fn=lambda _: None)
    assert len(result.program.instrs) == 2 * 16 * 8 * 4
    assert heard[:2] == [0, 2 * 16 * 8 * 4]  # (the first from the first instruction emitted)


def test_a_device_loops_run_tells_its_size_as_it_passes_the_start(monkeypatch, tmp_path):
    """A program with device loops is small; its run can be long: the worker is expected
    once the machine has run START_ABOVE instructions, for the checks and the schedule of
    the run (a run that stays below says nothing)."""
    heard: list[int] = []
    monkeypatch.setattr(jit_worker, "expect", heard.append)
    monkeypatch.setattr(jit_worker, "START_ABOVE", 20)
    kernel = tmp_path / "loop.py"
    kernel.write_text(
        "import nki\n"
        "import nki.isa as nisa\n"
        "import nki.language as nl\n\n\n"
        "@nki.jit\n"
        "def k(x, n):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    acc = nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
        "    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=n_sb, src=n)\n"
        "\n"
        "    def body(i):\n"
        "        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)\n"
        "\n"
        "    nl.fori_loop(0, nisa.scalar_load(n_sb), body)\n"
        "    nisa.dma_copy(dst=out, src=acc)\n"
        "    return out\n"
    )
    x = np.zeros((4, 8), dtype=np.float32)
    runs = {}
    for trips in (3, 40):
        heard.clear()
        n = np.array([[trips]], dtype=np.int32)
        result = neuronemu.run(kernel, {"x": x, "n": n}, timing_only=True, print_fn=lambda _: None)
        # (the trace tells the program's size too, from its first instruction: 0 here)
        runs[trips] = ([h for h in heard if h], len(result.timeline.program.instrs))
    assert runs[3][0] == [] and runs[3][1] <= 20
    (told,) = runs[40][0]
    assert 20 < told <= 20 + 2 and runs[40][1] > told  # (told as it passed, not at the end)
