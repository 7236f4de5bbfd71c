"""Run the `neuronemu` command line on untrusted input in a watched sandbox, and judge the
result the way the trust rules of DESIGN.md ask: a located or usage error, in bounded time
and memory, with nothing written on the host.

    box = Sandbox(tmp_path)
    box.write("k.py", source)
    out = box.run("run", "k.py", "-i", "a=float32[128,64]")
    out.assert_located("k.py")

Each run is a process of its own (cwd `box.work`) with:

- a wall-clock timeout (10 s): the whole process group is killed and the test fails;
- memory: RLIMIT_AS of 3 GiB set in the child before exec, only as a safety net so that a
  runaway allocation cannot take the machine down (at that point the child gets a
  MemoryError, which is an internal error and fails the test anyway). The assertion itself
  is on the child's peak resident set, which the kernel keeps for every process (its RSS
  high-water mark) and hands to the parent in the `rusage` of `os.wait4` when the child is
  reaped: exact for that one child, nothing to sample (polling /proc would miss short
  spikes). A small launcher process forks and reaps the command and reports that figure:
  a process forked straight from pytest would count pytest's own resident set (the
  high-water mark survives fork and exec);
- a fresh HOME, XDG_CACHE_HOME and NEURONEMU_CACHE_DIR under the sandbox. Every file under
  the sandbox (except the neuronemu cache directory, which neuronemu may write) is listed
  before and after the run: a new or modified file is a host effect. In the "env" cache
  mode, the cache starts with the parser's tables this session built (as a user's cache
  holds them after a first run): building them took ~0.3 s of CPU in each run, half of a
  small kernel's; `Sandbox(..., warm_parser=False)` starts it empty.

A `neuronemu` run (`box.run`) is forked from a zygote: a Python process, one per test
process, that imported `neuronemu.cli` once (Numba, which reads its settings from the
environment as it loads, is loaded lazily by the run, as the command does). Each fork is a
new session with the limits above, its own environment, cwd, stdin and output files, and
runs the command's entry as `python -m neuronemu` would, its exit handlers included. That
saves each run the interpreter's start and the command's imports (~0.35 s of CPU: the
trust tests make several hundred runs). `NEURONEMU_TEST_SANDBOX=exec` runs every command
as `sys.executable -m neuronemu` instead; `test_guard.py` runs attacks both ways and
requires the same outcomes.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Sandbox", "Outcome", "TIMEOUT_S", "RSS_LIMIT", "LOCATED", "USAGE"]

TIMEOUT_S = 10.0
RSS_LIMIT = 1 << 30  # the peak resident set a run may reach (1 GiB)
AS_LIMIT = 3 << 30  # address-space safety net in the child (not the assertion)
FSIZE_LIMIT = 256 << 20  # no single file written by the child may grow past this
CAPTURE_LIMIT = 1 << 20  # bytes of stdout/stderr kept for the assertions

# `path:line:col: error: message`, line and col from 1.
LOCATED = re.compile(r"^(?P<path>\S(?:.*?\S)?):(?P<line>\d+):(?P<col>\d+): error: \S")
USAGE = re.compile(r"^error: \S")
# A budget error names the budget and how to raise it (the exact words are the source's).
BUDGET_WORDS = re.compile(r"(?i)\b(limit|budget|cap)\b")
RAISE_WORDS = re.compile(r"(?i)(--[a-z][a-z0-9-]+|\braise|\bincrease|NEURONEMU_[A-Z_]+)")


# The limits a sandboxed run's process sets on itself (Python, at one indent).
_SET_LIMITS = f"""
    resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))
    resource.setrlimit(resource.RLIMIT_FSIZE, ({FSIZE_LIMIT}, {FSIZE_LIMIT}))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
"""

# Runs as `python -c _LAUNCHER RSS_FILE ARGV...`: forks the command with the limits set,
# reaps it, writes its peak resident set (bytes) to RSS_FILE and ends as the command did.
_LAUNCHER = f"""
import os, resource, signal, sys
rss_file, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
{_SET_LIMITS.strip(chr(10))}
    os.execvp(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(rss_file, "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.WEXITSTATUS(status))
"""


@dataclass
class Outcome:
    args: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    elapsed: float
    peak_rss: int  # bytes
    timed_out: bool
    new_files: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)

    # -- what the run printed --------------------------------------------------------------

    @property
    def first_line(self) -> str:
        """The first line of stderr that is not a note."""
        for line in self.stderr.splitlines():
            if line.strip() and not line.startswith("note: "):
                return line
        return ""

    def describe(self) -> str:
        return (
            f"neuronemu {' '.join(self.args)}\n  exit {self.returncode}, "
            f"{self.elapsed:.1f} s, peak RSS {self.peak_rss / 2**20:.0f} MiB"
            f"{', TIMED OUT' if self.timed_out else ''}\n"
            f"  new files: {self.new_files}\n  changed files: {self.changed_files}\n"
            f"--- stderr ---\n{self.stderr[-3000:]}\n--- stdout ---\n{self.stdout[-1500:]}"
        )

    # -- the trust rules --------------------------------------------------------------------

    def assert_confined(self) -> None:
        """Bounded time and memory, no traceback, no internal error, nothing written."""
        assert not self.timed_out, f"still running after {TIMEOUT_S:.0f} s\n{self.describe()}"
        assert self.peak_rss <= RSS_LIMIT, (
            f"peak RSS {self.peak_rss / 2**20:.0f} MiB > {RSS_LIMIT >> 20} MiB\n{self.describe()}"
        )
        text = self.stderr + self.stdout
        assert "internal error" not in text, f"an internal error\n{self.describe()}"
        assert "Traceback (most recent call last)" not in text, (
            f"a Python traceback\n{self.describe()}"
        )
        assert self.returncode is not None and self.returncode >= 0, (
            f"killed by signal {-(self.returncode or 0)}\n{self.describe()}"
        )
        assert not self.new_files and not self.changed_files, (
            f"the run wrote on the host\n{self.describe()}"
        )

    def assert_located(self, *files: str) -> re.Match[str]:
        """A kernel error (exit 1) whose first line is `path:line:col: error: ...` with line
        and col >= 1, in one of `files` (by name) when given."""
        self.assert_confined()
        assert self.returncode == 1, f"expected exit 1 (kernel error)\n{self.describe()}"
        m = LOCATED.match(self.first_line)
        assert m, f"the error is not located (path:line:col: error: ...)\n{self.describe()}"
        assert int(m["line"]) >= 1 and int(m["col"]) >= 1, self.describe()
        if files:
            assert Path(m["path"]).name in files, (
                f"the error points at {m['path']!r}, expected one of {files}\n{self.describe()}"
            )
        return m

    def assert_usage(self) -> None:
        """A usage error (exit 2): `error: message`."""
        self.assert_confined()
        assert self.returncode == 2, f"expected exit 2 (usage error)\n{self.describe()}"
        assert USAGE.match(self.first_line) or LOCATED.match(self.first_line), self.describe()

    def assert_refused(self, *files: str) -> None:
        """Either a located kernel error (exit 1) or a usage error (exit 2): for limits that
        may be checked before running (a usage error) or while tracing (located)."""
        if self.returncode == 2:
            self.assert_usage()
        else:
            self.assert_located(*files)

    def assert_budget_message(self) -> None:
        """The error names the budget and says how to raise it."""
        text = self.stderr
        assert BUDGET_WORDS.search(text), f"no budget/limit named\n{self.describe()}"
        assert RAISE_WORDS.search(text), f"no way to raise the limit given\n{self.describe()}"


class Sandbox:
    """A temporary tree for one CLI run: `work` (the cwd), `home`, `xdg` and `cache`.

    `cache_mode` says how the child finds its AST cache: "env" (NEURONEMU_CACHE_DIR=cache),
    "xdg" (no NEURONEMU_CACHE_DIR, XDG_CACHE_HOME=cache) or "home" (neither: the default
    ~/.cache under `home`). Whatever neuronemu writes there is not a host effect."""

    def __init__(self, root: Path, cache_mode: str = "env", warm_parser: bool = True):
        self.root = Path(root)
        self.cache_mode = cache_mode
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.xdg = self.root / "xdg"
        self.cache = self.root / "cache"
        for d in (self.work, self.home, self.xdg, self.cache):
            d.mkdir(parents=True, exist_ok=True)
        if cache_mode == "home":
            (self.home / ".cache").mkdir()
        if cache_mode == "env" and warm_parser:
            for name, data in _parser_tables().items():
                fd = os.open(self.cache / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)

    @property
    def cache_root(self) -> Path:
        """The directory neuronemu's cache lives under, in this cache mode."""
        if self.cache_mode == "env":
            return self.cache
        if self.cache_mode == "xdg":
            return self.cache / "neuronemu"
        return self.home / ".cache" / "neuronemu"

    def write(self, name: str, data: str | bytes) -> Path:
        path = self.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        return path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONEMU_")}
        env.update(
            HOME=str(self.home),
            XDG_CACHE_HOME=str(self.xdg),
            NEURONEMU_CACHE_DIR=str(self.cache),
            PYTHONDONTWRITEBYTECODE="1",
            # (the passes built ahead of time are test_ahead's: as in tests/conftest.py; a run
            # here must not find the user's module, nor start a build that outlives it)
            NEURONEMU_AHEAD="0",
        )
        env.pop("PYTHONFAULTHANDLER", None)
        if self.cache_mode != "env":
            del env["NEURONEMU_CACHE_DIR"]
            if self.cache_mode == "xdg":
                env["XDG_CACHE_HOME"] = str(self.cache)
            else:
                del env["XDG_CACHE_HOME"]
        return _with_checkout(env)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Every file under the sandbox but the neuronemu cache: path -> (size, mtime)."""
        files: dict[str, tuple[int, int]] = {}
        # neuronemu's own caches: the AST cache, and Numba's machine code for the scheduler,
        # which neuronemu keeps under the user cache directory ($XDG_CACHE_HOME/neuronemu or
        # ~/.cache/neuronemu): not the kernel's doing.
        skip = {
            str(self.cache),
            str(self.cache_root),
            str(self.xdg / "neuronemu"),
            str(self.home / ".cache" / "neuronemu"),
        }
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
            for name in filenames:
                p = os.path.join(dirpath, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                files[os.path.relpath(p, self.root)] = (st.st_size, st.st_mtime_ns)
            for name in dirnames:  # new empty directories count too
                p = os.path.join(dirpath, name)
                files.setdefault(os.path.relpath(p, self.root) + "/", (0, 0))
        return files

    def run(self, *args: str, timeout: float = TIMEOUT_S, exec_: bool | None = None) -> Outcome:
        """`neuronemu ARGS...` in the sandbox: forked from the zygote, or with `exec_` (by
        default where NEURONEMU_TEST_SANDBOX=exec) as `sys.executable -m neuronemu`."""
        if exec_ is None:
            exec_ = os.environ.get("NEURONEMU_TEST_SANDBOX") == "exec"
        if exec_:
            return self.run_argv([sys.executable, "-m", "neuronemu", *args], timeout, args)
        before = self.snapshot()
        with tempfile.NamedTemporaryFile() as out, tempfile.NamedTemporaryFile() as err:
            start = time.monotonic()
            status, peak_rss, timed_out = _zygote().run(
                list(args), str(self.work), self.env(), out.name, err.name, timeout
            )
            elapsed = time.monotonic() - start
            stdout, stderr = _read(out), _read(err)
        return Outcome(
            args,
            os.waitstatus_to_exitcode(status),
            stdout,
            stderr,
            elapsed,
            peak_rss,
            timed_out,
            *self._effects(before),
        )

    def run_argv(
        self, argv: list[str], timeout: float = TIMEOUT_S, shown: tuple[str, ...] | None = None
    ) -> Outcome:
        """Any command in the sandbox (the guard's own tests run plain Python)."""
        before = self.snapshot()
        rss_fd, rss_file = tempfile.mkstemp(prefix="neuronemu-rss-")
        os.close(rss_fd)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, rss_file, *argv],
                cwd=self.work,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            timed_out = False
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - start > timeout:
                    timed_out = True
                    _kill_group(proc.pid)
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.01)
            elapsed = time.monotonic() - start
            _kill_group(proc.pid)  # anything the run left behind in its session
            proc.returncode = os.waitstatus_to_exitcode(status)
            stdout, stderr = _read(out), _read(err)
        try:
            peak_rss = int(Path(rss_file).read_text() or 0)
        except (OSError, ValueError):
            peak_rss = 0  # killed at the timeout before it could tell
        os.unlink(rss_file)
        shown = tuple(argv) if shown is None else shown
        return Outcome(
            shown,
            proc.returncode,
            stdout,
            stderr,
            elapsed,
            peak_rss,
            timed_out,
            *self._effects(before),
        )

    def _effects(self, before: dict[str, tuple[int, int]]) -> tuple[list[str], list[str]]:
        """The files new since the snapshot `before`, and those changed."""
        after = self.snapshot()
        new = sorted(set(after) - set(before))
        return new, sorted(p for p in before if p in after and before[p] != after[p])


# The zygote's program: import the command, then for each request (a JSON line: args, cwd,
# env, the output files), fork a run, tell its pid, reap it, tell its wait status and peak
# resident set. Replies go on a copy of stdout; the zygote's own fd 1 is /dev/null.
_ZYGOTE = f"""
import atexit, json, os, resource, sys, traceback
replies = os.fdopen(os.dup(1), "wb")
requests = os.fdopen(os.dup(0), "rb")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
import neuronemu.cli  # noqa: F401  (what every run imports first)
assert "numba" not in sys.modules, "the zygote must not load Numba: runs load it themselves"


def child(req):
    os.setsid()
    os.close(replies.fileno())
    os.close(requests.fileno())
{_SET_LIMITS.strip(chr(10))}
    for fd, path in ((1, req["out"]), (2, req["err"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    # (as `python -m neuronemu` starts: argv[0] its __main__.py, the cwd first on the path,
    # and __main__ a module of the package, which click names the command by)
    package = os.path.dirname(os.path.dirname(os.path.abspath(neuronemu.cli.__file__)))
    sys.argv = [os.path.join(package, "__main__.py"), *req["args"]]
    sys.path[0] = os.getcwd()
    sys.modules["__main__"].__package__ = "neuronemu"
    code = 0
    try:
        neuronemu.cli.entry()
    except SystemExit as e:  # (as the interpreter ends on one)
        if isinstance(e.code, int) or e.code is None:
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


for line in requests:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = child(req)
        finally:
            os._exit(code)
    replies.write(b"%d\\n" % pid)
    replies.flush()
    _, status, usage = os.wait4(pid, 0)
    replies.write(b"%d %d\\n" % (status, usage.ru_maxrss * 1024))
    replies.flush()
"""


class _Zygote:
    """The process sandboxed runs are forked from (one per test process)."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="neuronemu-zygote-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONEMU_")}
        env.update(
            HOME=self.home,
            XDG_CACHE_HOME=self.home,
            PYTHONDONTWRITEBYTECODE="1",
            NEURONEMU_AHEAD="0",
        )
        env = _with_checkout(env)
        env.pop("PYTHONFAULTHANDLER", None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            cwd=self.home,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests = self.process.stdin
        self.replies = os.fdopen(self.process.stdout.fileno(), "rb", buffering=0, closefd=False)

    def alive(self) -> bool:
        return self.process.poll() is None

    def _line(self, deadline: float | None) -> bytes | None:
        """The next reply line; None if `deadline` (monotonic) passes first."""
        line = b""
        while not line.endswith(b"\n"):
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.replies], [], [], wait)[0]:
                return None
            byte = self.replies.read(1)
            if not byte:
                raise RuntimeError("the sandbox zygote ended")
            line += byte
        return line

    def run(
        self, args: list[str], cwd: str, env: dict[str, str], out: str, err: str, timeout: float
    ) -> tuple[int, int, bool]:
        """Fork `neuronemu ARGS` there: (its wait status, its peak RSS, timed out?)."""
        request = {"args": args, "cwd": cwd, "env": env, "out": out, "err": err}
        self.requests.write(json.dumps(request).encode() + b"\n")
        self.requests.flush()
        start = time.monotonic()
        told = self._line(start + 60)
        assert told is not None, "the sandbox zygote did not fork"
        pid = int(told)
        done = self._line(start + timeout)
        timed_out = done is None
        _kill_group(pid)  # (on time: anything the run left behind in its session)
        if done is None:
            done = self._line(None)
        assert done is not None
        status, peak_rss = map(int, done.split())
        return status, peak_rss, timed_out

    def stop(self) -> None:
        try:
            self.requests.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.replies.close()
        shutil.rmtree(self.home, ignore_errors=True)


_ZYGOTE_PROCESS: _Zygote | None = None


def _zygote() -> _Zygote:
    global _ZYGOTE_PROCESS
    if _ZYGOTE_PROCESS is None or not _ZYGOTE_PROCESS.alive():
        _ZYGOTE_PROCESS = _Zygote()
        atexit.register(_ZYGOTE_PROCESS.stop)
    return _ZYGOTE_PROCESS


_TABLES: dict[str, bytes] | None = None


def _parser_tables() -> dict[str, bytes]:
    """The files of the LALR tables neuronemu stores in its cache (built once per session,
    by a neuronemu of its own in a folder of its own): name -> bytes."""
    global _TABLES
    if _TABLES is None:
        with tempfile.TemporaryDirectory(prefix="neuronemu-tables-") as folder:
            env = _with_checkout(dict(os.environ, NEURONEMU_CACHE_DIR=folder))
            code = "from neuronemu.frontend import lalr; lalr._parser()"
            subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
            _TABLES = {p.name: p.read_bytes() for p in Path(folder).glob("lalr-*.json")}
    return _TABLES


def _with_checkout(env: dict[str, str]) -> dict[str, str]:
    """`env` with this checkout first on PYTHONPATH: a child finds the neuronemu under test
    (the tests may run from a checkout)."""
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read(f) -> str:
    f.seek(0)
    return f.read(CAPTURE_LIMIT).decode("utf-8", "replace")
