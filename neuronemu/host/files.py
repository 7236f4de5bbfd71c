"""The files a user names on the command line or to the API (a kernel, its inputs, a sweep's
results, an output): read only if they are regular files of the size they claim, written
only if writing them changes no state of the host, never quoted in an error; and the files
neuronemu names itself, never written through a link."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from typing import BinaryIO

from neuronemu.errors import UsageError

__all__ = [
    "SYSTEM_TREES",
    "system_tree",
    "open_user_file",
    "read_user_file",
    "over_budget",
    "output_refusal",
    "check_own_output",
    "write_own_file",
]

# The host's own state, whatever links lead there: /proc/self/environ is a "regular file" of
# size 0 that reads the process environment, writing /proc/sys or /sys changes the machine,
# and /dev holds devices (a file made there is lost at boot). No user's file lives in them.
SYSTEM_TREES = ("/proc", "/sys", "/dev")
_WRITE_REFUSED = ("/proc", "/sys")  # (/dev/null and a terminal are outputs as any file)
# Why a file whose reads outrun the size it claims is refused.
MORE_THAN_ITS_SIZE = "is not a regular file (it reads more bytes than its size says)"


def system_tree(path: str | os.PathLike[str], trees: tuple[str, ...] | None = None) -> str | None:
    """The tree of `trees` (default SYSTEM_TREES) that `path` lies in once every link is
    followed, else None."""
    real = os.path.realpath(path)
    for tree in SYSTEM_TREES if trees is None else trees:
        if real == tree or real.startswith(tree + "/"):
            return tree
    return None


@contextlib.contextmanager
def open_user_file(
    path: str | os.PathLike[str],
    what: str = "file",
    option: str | None = None,
    max_bytes: int | None = None,
    budget: str = "memory_bytes",
) -> Iterator[tuple[BinaryIO, int]]:
    """(the file open for reading, its size) when `path` is a regular file outside
    SYSTEM_TREES of at most `max_bytes`; else a UsageError naming `option` (how the user gave
    it, e.g. "--inputs") and `what` it is with its path, and saying nothing of its bytes.

    The kind is checked before the file is opened, and again on the file opened (non-blocking:
    a FIFO put in its place cannot make the open wait for a writer)."""
    head = _head(option)
    name = f"{what} {os.fspath(path)!r}"
    try:
        before = os.stat(path)
        _check_kind(before, path, head + name)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{head}no such {name}") from None
    except (OSError, ValueError) as exc:  # (ValueError: a NUL in the path)
        raise UsageError(f"{head}cannot read {name} ({_why(exc)})") from None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise UsageError(f"{head}{name} was replaced while it was opened")
        _check_kind(st, path, head + name)
        if max_bytes is not None and st.st_size > max_bytes:
            raise over_budget(head + name, st.st_size, max_bytes, budget)
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f, st.st_size


def read_user_file(
    path: str | os.PathLike[str],
    what: str = "file",
    option: str | None = None,
    max_bytes: int | None = None,
    budget: str = "memory_bytes",
    at_most: int | None = None,
) -> bytes:
    """The bytes of `path`, checked as `open_user_file` checks it; a file that reads more
    bytes than its size said (a pseudo-file, or one growing as it is read) is refused.
    `at_most`: read no more than at_most + 1 bytes (more than at_most: the caller's budget)."""
    with open_user_file(path, what, option, max_bytes, budget) as (f, size):
        try:
            data = f.read((size if at_most is None else min(size, at_most)) + 1)
        except OSError as exc:
            raise UsageError(
                f"{_head(option)}cannot read {what} {os.fspath(path)!r} ({_why(exc)})"
            ) from None
    if len(data) > size:
        raise UsageError(f"{_head(option)}{what} {os.fspath(path)!r} {MORE_THAN_ITS_SIZE}")
    return data


def over_budget(name: str, size: int, max_bytes: int, budget: str = "memory_bytes") -> UsageError:
    """The error of a file (`name`: how the message names it) of `size` bytes, over
    `max_bytes`, the `budget` it is held to."""
    return UsageError(
        f"{name} is {size:,} bytes, over the {budget} budget of {max_bytes:,}",
        hint=f"raise it with --limit {budget}=N if the machine has the memory",
    )


def output_refusal(path: str | os.PathLike[str]) -> str | None:
    """Why `path` may not be written as an output (None: it may): a regular file of /proc or
    /sys (writing one sets the machine's state: /proc/sys/kernel/core_pattern), or a block
    device (a disk). Checked before the output is opened, since the open itself truncates."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError):
        return None  # (the open says why)
    if st is not None and stat.S_ISBLK(st.st_mode):
        return "it is a block device"
    if st is not None and not stat.S_ISREG(st.st_mode):
        return None  # a FIFO, a terminal, /dev/null: as the user means it
    tree = system_tree(path, _WRITE_REFUSED)
    return None if tree is None else f"it lies in {tree}, the host's own state"


def check_own_output(path: str | os.PathLike[str], what: str, hint: str | None = None) -> None:
    """A UsageError naming `what` (with `hint`) unless `path`, a file neuronemu names itself
    (not the user: `migrate`'s default `<name>_migrated.py`), may be written: nothing there,
    or a regular file. A link of that name is never followed (a pull request can plant
    `k_migrated.py -> ~/.bashrc` beside `k.py`), and a FIFO, device or folder is not replaced."""
    refusal = _own_output_refusal(path)
    if refusal is not None:
        raise UsageError(f"{what} {os.fspath(path)!r}: cannot write it ({refusal})", hint=hint)


def _own_output_refusal(path: str | os.PathLike[str]) -> str | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return output_refusal(path)
    except (OSError, ValueError) as exc:
        return _why(exc)
    if stat.S_ISLNK(st.st_mode):
        return "it is a link, and neuronemu writes no file it names itself through a link"
    if stat.S_ISDIR(st.st_mode):
        return "it is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    return output_refusal(path)


def write_own_file(
    path: str | os.PathLike[str], data: bytes, what: str, hint: str | None = None
) -> None:
    """Write `data` as `path`, a file neuronemu names itself, whatever is planted there: what
    `own_output_refusal` refuses is a UsageError naming `what` (with `hint`); else the bytes
    go to a new file in the same folder (made with O_EXCL and O_NOFOLLOW, so nothing there
    is opened) that is then renamed over `path` (a link put there since the check is
    replaced, not followed)."""
    check_own_output(path, what, hint)
    name = f"{what} {os.fspath(path)!r}"
    folder, base = os.path.split(os.path.abspath(path))
    temp = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temp, flags, 0o666)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{name}: cannot write it ({_why(exc)})", hint=hint) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise UsageError(f"{name}: cannot write it ({_why(exc)})", hint=hint) from None
        raise


def _check_kind(st: os.stat_result, path: str | os.PathLike[str], name: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{name} is a folder")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{name} is not a regular file")
    tree = system_tree(path)
    if tree is not None:
        raise UsageError(f"{name} is not a regular file (it lies in {tree}, the host's own state)")


def _head(option: str | None) -> str:
    return f"{option}: " if option else ""


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
