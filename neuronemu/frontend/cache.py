"""The on-disk AST cache: a data-only encoding that can build AST nodes and nothing else.

An entry is one header line (format, its key, hash of the source it was parsed from, hash of
the payload) and a JSON payload. Loading checks all of them and decodes only the node classes
of `ast.py`, so a corrupted or foreign entry is a miss: it is parsed again and rewritten, and
no code in it ever runs (the cache used to be a pickle, which runs code when loaded). The
hashes cannot tell a forged entry from a true one, so the cache is used only in a folder no
one else can write (`neuronemu.host.cachedirs`), and entries are read without following links.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from neuronemu.errors import SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.host.cachedirs import private_dir, read_private

__all__ = ["cache_dir", "load", "store"]

# Bump when the AST classes or the encoding change shape: older entries are then misses.
FORMAT = "neuronemu-ast-5"
# The parser's tables are about 0.5 MB; a larger entry is not read.
MAX_TABLES_BYTES = 16 << 20
_NODES: dict[str, type[A.Node]] = {
    name: cls
    for name, cls in vars(A).items()
    if isinstance(cls, type) and issubclass(cls, A.Node) and cls is not A.Node
}
_FIELDS = {
    name: tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
    for name, cls in _NODES.items()
}


def cache_dir(create: bool = False) -> Path | None:
    """Where parsed ASTs are kept between runs (NEURONEMU_CACHE_DIR; "" turns it off), as
    its real path; None when off or when the folder is not this user's alone."""
    configured = os.environ.get("NEURONEMU_CACHE_DIR")
    if configured == "":
        return None
    if not configured:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        configured = os.path.join(base, "neuronemu", "ast")
    real = private_dir(configured, create=create)
    return None if real is None else Path(real)


def load(key: str, source_hash: str, path: str, max_bytes: int) -> A.Module | None:
    """The cached AST of this source, or None for anything else (absent, foreign, corrupt,
    larger than `max_bytes`, not a regular file of this user's, in a folder others can
    write)."""
    payload = _read(f"{key}.json", key, source_hash, max_bytes)
    if payload is None:
        return None
    try:
        module = _decode(json.loads(payload), path)
    except Exception:  # noqa: BLE001 - whatever is wrong with an entry, it is only a miss
        return None
    return module if isinstance(module, A.Module) else None


def store(key: str, source_hash: str, module: A.Module, max_bytes: int) -> None:
    try:
        payload = json.dumps(
            _encode(module, module.span.path), separators=(",", ":"), allow_nan=False
        ).encode()
    except (_NotCacheable, RecursionError, ValueError):
        return  # a tree too deep to encode is parsed again next time, nothing worse
    _write(f"{key}.json", key, source_hash, payload, max_bytes)


def load_tables(key: str) -> Any:
    """Lark's serialized LALR tables (plain dicts, lists, tuples and scalars), or None."""
    payload = _read(f"lalr-{key}.json", key, key, MAX_TABLES_BYTES)
    if payload is None:
        return None
    try:
        return _plain(json.loads(payload))
    except Exception:  # noqa: BLE001 - a bad entry is a miss
        return None


def store_tables(key: str, tables: Any) -> None:
    try:
        payload = json.dumps(_tag(tables), separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError):
        return
    _write(f"lalr-{key}.json", key, key, payload, MAX_TABLES_BYTES)


def _header(key: str, source_hash: str, payload: bytes) -> dict[str, str]:
    return {
        "format": FORMAT,
        "key": key,
        "source": source_hash,
        "payload": hashlib.sha256(payload).hexdigest(),
    }


def _read(name: str, key: str, source_hash: str, max_bytes: int) -> bytes | None:
    """An entry's payload if its header names this format, key and source and its payload is
    intact; None otherwise (the file is then simply rewritten)."""
    directory = cache_dir()
    if directory is None:
        return None
    data = read_private(directory / name, max_bytes)
    if data is None:
        return None
    head, _, payload = data.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None
    return payload if header == _header(key, source_hash, payload) else None


def _write(name: str, key: str, source_hash: str, payload: bytes, max_bytes: int) -> None:
    header = json.dumps(_header(key, source_hash, payload)).encode()
    if len(header) + 1 + len(payload) > max_bytes:
        return  # it would not be read back
    directory = cache_dir(create=True)
    if directory is None:
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")  # 0600, a new file
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header + b"\n" + payload)
            os.replace(tmp, directory / name)  # atomic: readers see all or nothing
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a cache that cannot be written is only slower, never wrong


# Plain data (Lark's tables): a dict is {"d": [[key, value], ...]} (its keys may be ints), a
# tuple {"t": [...]}; lists and scalars are JSON's own.


def _tag(value: Any) -> Any:
    if isinstance(value, dict):
        return {"d": [[_tag(k), _tag(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"t": [_tag(v) for v in value]}
    if isinstance(value, list):
        return [_tag(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(type(value).__name__)


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        ((tag, items),) = value.items()
        if tag == "d":
            return {_plain(k): _plain(v) for k, v in items}
        if tag == "t":
            return tuple(_plain(v) for v in items)
        raise ValueError(tag)
    return value


class _NotCacheable(Exception):
    pass


# Encoding: a node is ["N", class, line, col, end_line, end_col, *fields]; a tuple is
# ["T", *items]; other tags: "F" float (non-finite), "B" bytes, "E" Ellipsis. Scalars are
# JSON's own (strings, ints, finite floats, true/false/null).


def _encode(value: Any, path: str) -> Any:
    if isinstance(value, A.Node):
        span = value.span
        if span.path != path:
            raise _NotCacheable(span.path)
        return [
            "N",
            type(value).__name__,
            span.line,
            span.col,
            span.end_line,
            span.end_col,
            *(_encode(getattr(value, f), path) for f in _FIELDS[type(value).__name__]),
        ]
    if isinstance(value, tuple):
        return ["T", *(_encode(v, path) for v in value)]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ["F", repr(value)]
    if isinstance(value, bytes):
        return ["B", base64.b64encode(value).decode()]
    if value is Ellipsis:
        return ["E"]
    raise _NotCacheable(type(value).__name__)


def _decode(value: Any, path: str) -> Any:
    if not isinstance(value, list):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise ValueError(value)
    tag = value[0]
    if tag == "N":
        cls = _NODES[value[1]]
        fields = value[6:]
        if len(fields) != len(_FIELDS[value[1]]):
            raise ValueError(value[1])
        line, col, end_line, end_col = value[2:6]
        if not all(
            isinstance(n, int) or (n is None and i >= 2)
            for i, n in enumerate((line, col, end_line, end_col))
        ):
            raise ValueError("span")
        return cls(
            SourceSpan(path, line, col, end_line, end_col), *(_decode(v, path) for v in fields)
        )
    if tag == "T":
        return tuple(_decode(v, path) for v in value[1:])
    if tag == "F" and value[1] in ("inf", "-inf", "nan"):
        return float(value[1])
    if tag == "B":
        return base64.b64decode(value[1], validate=True)
    if tag == "E" and len(value) == 1:
        return Ellipsis
    raise ValueError(tag)
