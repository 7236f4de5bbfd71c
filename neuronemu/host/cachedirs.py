"""Cache folders only this user can write, and files read from them without following links:
the one policy for every on-disk cache (parsed kernels, parser tables, Numba's code)."""

from __future__ import annotations

import os
import stat

__all__ = ["private_dir", "read_private"]

# Where files have no owner to check or links cannot be refused, nothing is cached.
_POSIX = hasattr(os, "geteuid") and hasattr(os, "O_NOFOLLOW")


def private_dir(path: str | os.PathLike[str], *, create: bool = False) -> str | None:
    """The real path of `path` if it is a directory of this user that no one else can write,
    nor replace: each folder above it, up to the user's home, belongs to this user or root
    and is not writable by group or others unless sticky (as /tmp is).
    None otherwise (the cache is then not used). `create`: make missing folders, 0700.

    Anyone who can write a cache folder can plant entries that are well-formed and carry
    matching hashes, so this check, not the entries' hashes, is what makes a cache safe."""
    if not _POSIX:
        return None
    try:
        if create:
            _make(os.path.abspath(path))
        real = os.path.realpath(path)
        return real if _chain_is_private(real) else None
    except (OSError, ValueError):
        return None


def read_private(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    """The bytes of `path` if it is a regular file of this user, not writable by others and
    at most `max_bytes` long; None otherwise. A link is not followed and a FIFO or device is
    never opened (a FIFO would block, a device such as /dev/zero never end)."""
    if not _POSIX:
        return None
    try:
        before = os.lstat(path)
        if not _own_regular(before, max_bytes):
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        # The file opened is the one checked (not swapped for another since).
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            return None
        if not _own_regular(st, max_bytes):
            return None
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= max_bytes else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _own_regular(st: os.stat_result, max_bytes: int) -> bool:
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_uid == os.geteuid()
        and not st.st_mode & 0o022
        and st.st_size <= max_bytes
    )


def _make(path: str) -> None:
    """Make `path` and its missing parents, each 0700 (os.makedirs applies its mode to the
    last folder only: the others would get the umask's, perhaps group-writable)."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass


def _chain_is_private(real: str) -> bool:
    uid = os.geteuid()
    st = os.lstat(real)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return False
    home = os.path.realpath(os.path.expanduser("~"))
    folder = real
    while folder != home:
        parent = os.path.dirname(folder)
        if parent == folder:  # the root, checked as any folder
            return True
        st = os.lstat(parent)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (uid, 0):
            return False
        # Writable by others only if sticky: then no one else moves what is ours in it.
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return False
        folder = parent
    return True
