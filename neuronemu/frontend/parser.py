"""Kernel files to ASTs, cached: a source seen before (same text, grammar, AST builder and
limits) is read back from the cache; others are parsed by `neuronemu.frontend.lalr`.

Kernel files are whole Python modules (host code included), so the grammar covers Python's
statements broadly; the specializer, not the grammar, enforces the NKI subset where code runs.
"""

from __future__ import annotations

import gc
import hashlib
from pathlib import Path

from neuronemu import __version__
from neuronemu.errors import (
    BudgetError,
    KernelSyntaxError,
    SourceSpan,
    UsageError,
    register_source,
)
from neuronemu.frontend import ast as A
from neuronemu.frontend import cache
from neuronemu.host.files import read_user_file
from neuronemu.limits import Limits

__all__ = ["parse_source", "parse_file", "parse_expression", "read_source"]


_GRAMMAR = Path(__file__).with_name("nki.lark")
_GRAMMAR_TEXT = _GRAMMAR.read_text(encoding="utf-8")
# What builds the AST from the parse tree: a cached AST is only reused by the same builder
# (a change to ast.py, to_ast.py or the lexer's limits in lalr.py without a grammar change
# must not revive stale entries).
_BUILDER_HASH = hashlib.sha256(
    b"".join((Path(__file__).parent / f).read_bytes() for f in ("ast.py", "to_ast.py", "lalr.py"))
).hexdigest()
# A cached AST's JSON is at most ~40 bytes per source byte (one node per character, as in
# `x = ------1`, with its span); an entry larger than this bound is not read.
_ENTRY_BYTES_PER_SOURCE_BYTE = 64


_AST_CACHE: dict[str, A.Module] = {}


def parse_source(text: str, path: str = "<string>", limits: Limits | None = None) -> A.Module:
    """Parse kernel source text to the AST.

    ASTs are cached by content hash (of neuronemu's version, the grammar, the AST format, the
    path, the limits that bound literals and the text), in memory and on disk, so an
    unchanged file is parsed once.
    """
    limits = limits or Limits()
    register_source(path, text)
    data = text.encode("utf-8", "surrogatepass")
    source = hashlib.sha256(data).hexdigest()
    max_bytes = _ENTRY_BYTES_PER_SOURCE_BYTE * len(data) + (1 << 16)
    digest = hashlib.sha256()
    for part in (
        __version__,
        cache.FORMAT,
        _BUILDER_HASH,
        _GRAMMAR_TEXT,
        path,
        str(limits.literal_bytes),
        str(limits.int_bits),
        source,
    ):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    key = digest.hexdigest()
    cached = _AST_CACHE.get(key) or cache.load(key, source, path, max_bytes)
    if cached is not None:
        _AST_CACHE[key] = cached
        return cached
    if not text.endswith("\n"):
        text += "\n"
    # The parse allocates hundreds of thousands of small objects and frees none of them: the
    # cyclic GC would scan them again and again for nothing.
    from neuronemu.frontend import lalr

    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        module = lalr.parse(text, path, limits)
    finally:
        if gc_was_on:
            gc.enable()
    _AST_CACHE[key] = module
    cache.store(key, source, module, max_bytes)
    return module


def read_source(path: str | Path, what: str = "kernel file", limits: Limits | None = None) -> str:
    """A source file's text; a missing, unreadable, non-regular or oversized file is a usage
    error (a kernel path may name a device, a pipe, or a link to /proc/self/environ, whose
    text a syntax error would quote: none is read, and nothing past the budget)."""
    limits = limits or Limits()
    p = Path(path)
    data = read_user_file(p, what, at_most=limits.file_bytes)
    if what != "helper module":
        _refuse_link_out(p, what)  # (after the checks of what may be read at all)
    if len(data) > limits.file_bytes:  # located where the budget runs out
        at = limits.file_bytes
        line = data.count(b"\n", 0, at) + 1
        col = at - (data.rfind(b"\n", 0, at) + 1) + 1
        raise BudgetError(
            f"{what} {p} is larger than the file_bytes budget of {limits.file_bytes:,} bytes",
            SourceSpan(str(path), line, col),
            hint="raise it with --limit file_bytes=N if the file really is a kernel",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise KernelSyntaxError(
            f"invalid UTF-8 in {what}: byte 0x{data[exc.start]:02x}",
            SourceSpan(str(path), line, col),
            hint="Python source files are UTF-8",
        ) from None


def _refuse_link_out(path: Path, what: str) -> None:
    """A kernel file that is a link out of its own folder (`k.py -> /etc/passwd`, which a
    pull request can add) is refused unparsed: a syntax error would quote the target's lines,
    and a kernel is the file the user named, not a host file behind it. (A link within the
    folder's tree still runs; helper modules have the import rules of trace/imports.py.)"""
    if not path.is_symlink():
        return
    try:
        folder = path.absolute().parent.resolve(strict=True)
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return  # (read_user_file says what is wrong with it)
    if not target.is_relative_to(folder):
        raise UsageError(
            f"{what} {str(path)!r} is a link to a file outside its folder; it is not run",
            hint="run the file by its own path if it really is a kernel",
        )


def parse_file(
    path: str | Path, limits: Limits | None = None, what: str = "kernel file"
) -> A.Module:
    return parse_source(read_source(path, what, limits=limits), str(path), limits)


def parse_expression(text: str, span: SourceSpan, limits: Limits | None = None) -> A.Node:
    """Parse one expression (an f-string field); errors point at the enclosing string."""
    from neuronemu.frontend import lalr

    return lalr.parse_expression(text, span, limits or Limits())
