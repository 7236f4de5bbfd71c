"""The jitted passes in a second process, for the `neuronemu` command on large programs.

Importing Numba and loading the compiled passes from its cache costs ~0.6 s, all of it
Python holding the GIL, so a thread would not hide it. A program past START_ABOVE
instructions will run the jitted passes (the allocator's placement, the checks, the
schedule: their JIT_ABOVE), and knows it while it is still being traced. Where the command
is its own process (`ENABLED`, set by `neuronemu.cli.entry`) and the machine has a second
core, the builder, the loop replay and the first pass of a loop nest's body (times the
nest's trip counts) call `expect` as the program grows: past START_ABOVE it starts a worker
(`main`, in a fresh Python) that imports Numba and loads the passes while the tracing goes
on. Each jitted call then sends its arrays to the worker and takes the result
back (the same compiled code, on the same arrays: the same result). If the worker cannot
start, fails or dies, the call runs in this process, as without it.

Once the worker has loaded the passes (it says so: `ready`), a pass takes its jitted form
past READY_JIT_ABOVE instructions instead of its own JIT_ABOVE (`jit_above`), if the
worker found it in Numba's cache (else its first call there would compile it): the load no
longer costs this process anything, and the plain passes' ~20 us an instruction would. A
step that starts while the worker is still loading waits for it only as long as
WAIT_PER_INSTRUCTION allows (`jit_above`), then runs its plain form here; one whose pass
the worker compiles (a cold cache) never waits for it.

Only arrays and numbers cross (pickled, over the worker's stdin and stdout pipes): no
kernel code or value of the kernel's runs there. The worker ends when the pipe closes, as
this process ends. `NEURONEMU_JIT_WORKER=0` turns it off.
"""

from __future__ import annotations

import atexit
import mmap
import os
import pickle
import select
import struct
import subprocess
import sys
import time
from typing import IO, Any

from neuronemu.host import malloc
from neuronemu.jit import ahead, compiling
from neuronemu.jit import compiled as _jit

__all__ = [
    "ENABLED",
    "READY_JIT_ABOVE",
    "START_ABOVE",
    "expect",
    "jit_above",
    "ready",
    "running",
    "start",
    "started",
    "stop",
]

# Start the worker when the command runs as its own process (neuronemu.cli.entry); a host's
# process (the Python API, tests) keeps every call in-process unless it sets this.
ENABLED = False

# Start it once a program is known to pass this many instructions (READY_JIT_ABOVE: from
# there the passes take their jitted form, if the worker is ready by then).
START_ABOVE = 4_000
# With a worker ready, the passes take their jitted form past this many instructions.
# Measured on the 4096^3 matmul_tiled (17,920 instructions): its race check and schedule
# took 0.39 and 0.33 s in their plain forms. Below a few thousand instructions the plain
# forms take well under 0.1 s: the copies to the worker and back would gain nothing.
READY_JIT_ABOVE = 4_000
# A step past READY_JIT_ABOVE that would run its plain form because the worker is still
# loading waits for it up to this long per instruction: a third of what the checks' plain
# forms take (the race check ~40 us an instruction, the schedule ~20, measured on
# matmul_tiled's 17,920), so that waiting in vain costs at most a third more. (The
# allocator does not wait: its plain placement, ~15 us, cost less than the wait did.)
WAIT_PER_INSTRUCTION = 20e-6


# The worker's program: this very package (the directory the parent imported it from goes
# first on the path only while it is imported), or none if that is not the parent's.
_MAIN = (
    "import sys; sys.path.insert(0, sys.argv[1]); from neuronemu.jit import worker as jit_worker; "
    "del sys.path[0]; jit_worker.main(sys.argv[2:])"
)


class _Worker:
    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(_jit.__file__))))
        fd = _shared_file()
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _MAIN,
                    root,
                    _jit.__file__,
                    "1" if _jit.LINALG else "0",
                    str(fd),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(fd,) if fd >= 0 else (),
            )
            # The arena both map: a call's arrays are copied in here, not sent down the pipe.
            try:
                self.shared = None if fd < 0 else memoryview(mmap.mmap(fd, ARENA_BYTES))
            except OSError:  # (the worker maps it too: stop it, the calls stay here)
                self.process.kill()
                self.process.wait()
                raise
        finally:
            if fd >= 0:
                os.close(fd)
        self.alive = True
        # Its replies, read unbuffered: `ready` asks the pipe itself whether a message came,
        # which a buffer that had read it ahead would hide.
        assert self.process.stdout is not None
        self.replies = os.fdopen(self.process.stdout.fileno(), "rb", buffering=0, closefd=False)
        self.loaded = False  # (it said it is done loading the passes)
        self.cached: frozenset[str] = frozenset()  # (... those the cache held: loaded)
        self.notices: list[tuple] = []  # compile notices read before anything waited
        for pipe in (self.process.stdin, self.process.stdout):
            _widen(pipe)

    def ready(self, passes: tuple[str, ...] = (), wait: float = 0.0) -> bool:
        """Is it done loading, with `passes` found in Numba's cache (so a call of them would
        wait for no load or compile)? Waits up to `wait` seconds for the load to end: reads
        what it has said so far (a compile notice is kept, to be told if a call comes to wait
        for it)."""
        out = self.replies
        deadline = time.monotonic() + wait
        try:
            while (
                self.alive
                and not self.loaded
                and select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]
            ):
                self._heard(_receive(out), tell=False)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            self.alive = False
        return self.alive and self.loaded and self.cached.issuperset(passes)

    def _heard(self, message: tuple, tell: bool) -> None:
        """A message the worker sent while loading: ("ready", names of the passes it
        loaded) or ("compiling", told)."""
        if message[0] == "ready":
            self.loaded, self.cached = True, frozenset(message[1])
        elif tell:
            compiling.tell(*message[1])
        else:
            self.notices.append(message[1])

    def _wait_loaded(self) -> None:
        """Wait until it is done loading the passes, telling what it said it compiles (what
        `ready` read of that first)."""
        if self.loaded:
            return
        for told in self.notices:
            compiling.tell(*told)
        self.notices = []
        while not self.loaded:
            self._heard(_receive(self.replies), tell=True)

    def call(self, name: str, args: tuple, writes: tuple[int, ...]) -> Any:
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        try:
            self._wait_loaded()
            _send((name, args, writes), process.stdin, self.shared)
            message = _receive(self.replies)
            while len(message) == 2:  # (a compile starts there: told as one here would be)
                compiling.tell(*message[1])
                message = _receive(self.replies)
            ok, result, written = message
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            self.alive = False
            return _jit.NOT_RUN
        if not ok:  # (it could not run it: run it here, where an error shows as it is)
            return _jit.NOT_RUN
        for position, array in written.items():  # (arguments the pass writes into)
            args[position][...] = array
        return result

    def stop(self) -> None:
        """Close its pipe: an idle worker ends there; one still loading Numba (a run that
        failed early) is killed rather than waited for. It holds nothing to save (Numba
        writes its cache by renaming whole files)."""
        self.alive = False
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        except OSError:
            pass

    def leave(self) -> None:
        """As the command's process ends: kill the worker, and reap it if it ends within
        LEAVE_SECONDS (its teardown took ~15 ms on the 100k matmul), so that no zombie
        outlives it while this process tears itself down (~1.5 s after a large run); one
        still ending then is reaped by the system as this process ends."""
        self.alive = False
        try:
            self.process.kill()
            self.process.wait(timeout=LEAVE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            pass


# Each pipe's buffer, where Linux lets it be set (F_SETPIPE_SZ; up to /proc/sys/fs/pipe-max-size,
# 1 MiB by default): with its default 64 KiB, a call's 17 MB of arrays crossed in ~270 turns
# of writer and reader, at ~150 MB/s.
PIPE_BYTES = 2**20
_F_SETPIPE_SZ = 1031  # (fcntl.F_SETPIPE_SZ from Python 3.10 on, on Linux only)


def _widen(pipe: Any) -> None:
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, OSError, ValueError):
        pass


# How long a stopping worker is given to end by itself (an idle one takes a few ms).
STOP_SECONDS = 0.05
# How long the command's exit waits for a killed worker to be reaped.
LEAVE_SECONDS = 0.1

# The worker's buffer for a call's arguments (the 100k matmul's largest call sends 17 MB).
ARENA_BYTES = 64 * 2**20

_worker: _Worker | None = None
_started = False  # (a worker was started in this process)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def _remote(name: str, args: tuple, writes: tuple[int, ...]) -> Any:
    worker = _worker
    if worker is None or not worker.alive:
        return _jit.NOT_RUN
    return worker.call(name, args, writes)


def expect(instructions: int) -> None:
    """The program being traced will have at least `instructions`: past START_ABOVE, start
    the worker (only where ENABLED, with a second core, and Numba not loaded here yet)."""
    if instructions <= START_ABOVE or not ENABLED or _worker is not None:
        return
    if ahead.available(*_jit.LAZY):  # (the passes are here at once: no worker to wait for)
        return
    if os.environ.get("NEURONEMU_JIT_WORKER", "1") == "0" or _cores() < 2 or _jit.loaded():
        return
    start()


def start() -> None:
    """Start the worker (if none runs) and send it the jitted calls from now on."""
    global _worker, _started
    if _worker is not None and _worker.alive:
        return
    try:
        _worker = _Worker()
    except OSError:
        return
    _started = True
    atexit.register(_worker.leave)
    _jit.REMOTE = _remote


def started() -> bool:
    """Was a worker started in this process (the passes loaded through Numba there)?"""
    return _started


def running() -> bool:
    """Is a worker taking the jitted calls?"""
    return _worker is not None and _worker.alive


def ready(passes: tuple[str, ...] = (), wait: float = 0.0) -> bool:
    """Is a worker taking the jitted calls, done loading, with `passes` (names in
    neuronemu.jit.compiled.LAZY) loaded from the cache (no call of them would wait)? A
    worker still loading is waited for up to `wait` seconds."""
    return _worker is not None and _worker.ready(passes, wait)


def jit_above(in_process: int, *passes: str, size: int = 0) -> int:
    """The size past which a step whose jitted form calls `passes` takes it: `in_process`
    (the step's own JIT_ABOVE, which weighs loading Numba here), neuronemu.jit.ahead's where
    those passes are built ahead of time, or READY_JIT_ABOVE while a worker has them loaded.
    `size`: the step's, in instructions; between the two, a worker still loading is waited
    for, up to WAIT_PER_INSTRUCTION times `size`."""
    if ahead.available(*passes):
        return min(in_process, ahead.JIT_ABOVE)
    wait = size * WAIT_PER_INSTRUCTION if READY_JIT_ABOVE < size <= in_process else 0.0
    return min(in_process, READY_JIT_ABOVE) if ready(passes, wait) else in_process


def stop() -> None:
    """Stop the worker (calls go back in-process)."""
    global _worker
    if _worker is not None:
        _worker.stop()
        atexit.unregister(_worker.leave)
    _worker = None
    _jit.REMOTE = None


def _shared_file() -> int:
    """A file of ARENA_BYTES in memory for the worker to share (Linux's memfd_create), or
    -1 where there is none: the arrays then go down the pipe."""
    try:
        fd = os.memfd_create("neuronemu-jit-arena")
    except (AttributeError, OSError):
        return -1
    try:
        os.ftruncate(fd, ARENA_BYTES)
    except OSError:
        os.close(fd)
        return -1
    return fd


def _starts(sizes: list[int]) -> list[int]:
    """Where buffers of these sizes lie in an arena, each at a multiple of 64 bytes (aligned
    as NumPy makes them), and the end of the last."""
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + -(-n // 64) * 64)
    return starts


def _send(message: Any, out: IO[bytes], shared: memoryview | None = None) -> None:
    """`message` pickled with its arrays' bytes out of band: a header (the pickle's length
    and each buffer's), the pickle, then each buffer as it lies in memory; or, where they
    fit in the `shared` arena the reader maps too, the buffers copied there (the header's
    count negative) and only the header and pickle down the pipe."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    header = [len(data), *(r.nbytes for r in raws)]
    starts = _starts(header[1:])
    in_shared = shared is not None and bool(raws) and starts[-1] <= len(shared)
    if in_shared:
        assert shared is not None
        for at, r in zip(starts, raws):
            shared[at : at + r.nbytes] = r
    count = -len(header) if in_shared else len(header)
    out.write(struct.pack(f"<{len(header) + 1}q", count, *header))
    out.write(data)
    if not in_shared:
        for r in raws:
            out.write(r)
    out.flush()


def _receive(source: IO[bytes], arena: memoryview | None = None) -> Any:
    """A message `_send` wrote (EOFError: the pipe closed). Its arrays' bytes go into
    `arena` where they fit (each at a multiple of 64 bytes: aligned as NumPy made them),
    valid until the next message; else into buffers of their own. (A message sent through
    a shared arena finds its arrays in `arena`, which must be that one.)"""
    count = struct.unpack("<q", _read(source, 8))[0]
    shared = count < 0
    sizes = struct.unpack(f"<{abs(count)}q", _read(source, 8 * abs(count)))
    data = _read(source, sizes[0])
    starts = _starts(list(sizes[1:]))
    if shared:
        if arena is None or starts[-1] > len(arena):
            raise ValueError("a message in a shared arena this side does not map")
        return pickle.loads(data, buffers=[arena[at : at + n] for at, n in zip(starts, sizes[1:])])
    if arena is None or starts[-1] > len(arena):
        return pickle.loads(data, buffers=[_read(source, n) for n in sizes[1:]])
    buffers = [_read(source, n, arena[at : at + n]) for at, n in zip(starts, sizes[1:])]
    return pickle.loads(data, buffers=buffers)


def _read(source: IO[bytes], n: int, into: memoryview | None = None) -> Any:
    """`n` bytes from `source`, into `into` if given, else into a bytearray of their own."""
    if into is None:
        into = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = source.readinto(into[got:])  # type: ignore[attr-defined]
        if not k:
            raise EOFError
        got += k
    return into


def _serve(requests: IO[bytes], replies: IO[bytes], fd: int = -1) -> None:
    """The worker: load every jitted pass, then run the calls as they come, until the pipe
    closes. `fd`: the file of the arena the parent shares, or -1. A compile about to start
    (neuronemu.jit.compiling) is sent to the parent first, as ("compiling", (seconds, cached))."""
    compiling.ON_COMPILE = lambda *told: _send(("compiling", told), replies)
    _send(("ready", _jit.load_all()), replies)
    # (the calls' arguments land here: its pages made now, while the parent traces, not
    # page by page as each call's bytes come in; a call too large for it gets buffers)
    if fd >= 0:
        # (its pages made without writing to them: the parent may have written a call's
        # arrays there already)
        try:
            os.posix_fallocate(fd, 0, ARENA_BYTES)
        except (AttributeError, OSError):
            pass
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        arena = memoryview(mmap.mmap(fd, ARENA_BYTES, flags=flags))
        os.close(fd)
    else:
        arena = memoryview(bytearray(ARENA_BYTES))
    while True:
        try:
            name, args, writes = _receive(requests, arena)
        except EOFError:
            return
        try:
            result = _jit.LAZY[name].load()(*args)
            reply = (True, result, {k: args[k] for k in writes})
        except Exception:  # (told to the caller, which runs the pass itself)
            reply = (False, None, {})
        _send(reply, replies)


def main(argv: list[str]) -> None:
    """The worker process (`_MAIN`): argv is the parent's jitted module's file, LINALG and
    the shared arena's file descriptor (-1: none)."""
    if os.path.abspath(_jit.__file__) != os.path.abspath(argv[0]):
        os._exit(1)  # (another copy of neuronemu: the parent runs its calls itself)
    _jit.LINALG = argv[1] != "0"
    malloc.keep_freed_arrays()  # (each call's arrays come in as buffers of the same sizes)
    # Replies go out on a copy of stdout; anything printed (a Numba warning) goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        _serve(sys.stdin.buffer, out, int(argv[2]))
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    os._exit(0)  # (at once: nothing of Numba's to tear down)
