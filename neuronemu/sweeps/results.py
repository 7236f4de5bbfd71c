"""A sweep's results file (`--out RESULTS.jsonl`): the records a sweep resumes from, each
checked before it is believed (the file may hold anything: a line cut short, a hand edit,
planted lines), and the file each new record is appended to.

A line that is not a record this sweep could have written is ignored: its configuration
runs again. Only regular files are read or written (a FIFO would wait without end).
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Mapping
from typing import IO, Any

from neuronemu.errors import UsageError
from neuronemu.host.files import over_budget, system_tree

__all__ = ["key_of", "read_done", "open_results"]

# A line longer than this is no record of ours (one is a few KiB): it is not parsed.
LINE_BYTES = 4 * 2**20
# JSON nesting of a record (its critical path's lines are the deepest, at 5).
_DEPTH = 16


def key_of(config: Mapping[str, Any]) -> str:
    """A configuration's identity in a results file."""
    return json.dumps({k: config[k] for k in config}, sort_keys=True, default=repr)


def _open(out: str, flags: int, option: str = "--out", max_bytes: int | None = None) -> int:
    """`out` opened with `flags`, refused unless it is a regular file outside the host's own
    trees (/proc/self/environ says it is a regular file) of at most `max_bytes`."""
    tree = system_tree(out)
    if tree is not None:
        link = f" (a link to {os.path.realpath(out)})" if os.path.islink(out) else ""
        raise UsageError(
            f"{option} {out!r}{link}: cannot open it (it lies in {tree}, the host's own state)",
            hint="results go to a regular file of their own, e.g. --out results.jsonl",
        )
    try:
        # (O_NONBLOCK: opening a FIFO does not wait for a writer or reader)
        fd = os.open(out, flags | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        raise UsageError(f"{option} {out!r}: cannot open it ({exc.strerror or exc})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UsageError(
            f"{option} {out!r} is not a regular file",
            hint="results go to a file of their own, e.g. --out results.jsonl",
        )
    if max_bytes is not None and st.st_size > max_bytes:
        os.close(fd)
        raise over_budget(f"{option} {out!r}", st.st_size, max_bytes)
    os.set_blocking(fd, True)
    return fd


def read_done(
    out: str | None,
    configs: list[dict[str, Any]],
    max_bytes: int | None = None,
    option: str = "--out",
) -> dict[str, dict]:
    """The results in `out` of these configurations, by `key_of` (a sweep resumes there);
    a last line cut short by a killed sweep is cut off the file. A file over `max_bytes`
    (the memory budget: the records are kept) is refused unread."""
    if not out or not os.path.lexists(out):
        return {}
    wanted = {key_of(c): c for c in configs}
    done: dict[str, dict] = {}
    fd = _open(out, os.O_RDWR, option, max_bytes)
    try:
        f = os.fdopen(fd, "r+b")
    except OSError as exc:
        os.close(fd)
        raise UsageError(f"{option} {out!r}: cannot read it back ({exc.strerror or exc})") from None
    with f:
        kept = 0  # where the last whole line ends
        while True:
            line = f.readline(LINE_BYTES + 1)
            if not line.endswith(b"\n"):
                if line and len(line) <= LINE_BYTES:
                    break  # the last line, cut short
                if not line:
                    break
                while line and not line.endswith(b"\n"):  # (too long: skip it whole)
                    line = f.readline(LINE_BYTES)
                kept = f.tell()
                continue
            kept = f.tell()
            record = _record(line)
            if record is None:
                continue
            config = wanted.get(key_of(record["config"]))
            if config is not None:
                record["config"] = config  # (as the sweep has it: tuples, not JSON lists)
                done[key_of(config)] = record
        if kept != os.fstat(f.fileno()).st_size:
            f.truncate(kept)
    return done


def open_results(out: str) -> IO[str]:
    """`out` for appending records to (a regular file, made if it is not there)."""
    fd = _open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        return os.fdopen(fd, "a", encoding="utf-8")
    except OSError as exc:  # (a file that cannot be appended to: /proc/self/status)
        os.close(fd)
        raise UsageError(f"--out {out!r}: cannot append to it ({exc.strerror or exc})") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _record(line: bytes) -> dict | None:
    """A line's record, if it is one a sweep could have written: else None."""
    try:
        record = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError, MemoryError):
        return None
    if not (isinstance(record, dict) and _plain(record, _DEPTH)):
        return None
    if not isinstance(record.get("config"), dict):
        return None
    status = record.get("status")
    fields = _OK if status == "ok" else _FAILED if status == "error" else None
    if status == "mismatch":
        fields = {**_OK, "error": _is_error}
    if fields is None or not all(check(record.get(k)) for k, check in fields.items()):
        return None
    return record


def _plain(value: Any, depth: int) -> bool:
    """JSON data as a sweep writes it: finite numbers, integers that fit 64 bits, no
    deeper than `depth`."""
    if depth < 0:
        return False
    if isinstance(value, dict):
        return all(_plain(v, depth - 1) for v in value.values())
    if isinstance(value, list):
        return all(_plain(v, depth - 1) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return value is None or isinstance(value, str)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_str(x: Any) -> bool:
    return isinstance(x, str)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or check(x)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, list) and all(check(i) for i in x)


def _fields(**checks: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, dict) and all(c(x.get(k)) for k, c in checks.items())


_is_error = _fields(
    kind=_is_str,
    message=_is_str,
    path=_optional(_is_str),
    line=_optional(_is_count),
    col=_optional(_is_count),
    hint=_optional(_is_str),
)
_is_cause = _fields(
    cause=_is_str,
    ns=_is_number,
    share=_is_number,
    lines=_list_of(_fields(line=_is_str)),
)
_OK: dict[str, Callable[[Any], bool]] = {
    "time_ns": _is_number,
    "cycles": _is_count,
    "bound_by": _is_str,
    "mfu": _is_number,
    "instructions": _is_count,
    "sbuf_peak_bytes_per_partition": _is_count,
    "psum_peak_bytes_per_partition": _is_count,
    "critical_path": _fields(causes=_list_of(_is_cause)),
    "notes": _list_of(_is_str),
    "check": _optional(lambda x: isinstance(x, dict)),
}
_FAILED: dict[str, Callable[[Any], bool]] = {"error": _is_error}
