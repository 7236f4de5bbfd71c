"""`lint` and `migrate` of a kernel file: its findings, and its text ported to NKI 0.7 by
edits in place (names, layout and comments kept), the rest marked `# neuronemu: ...`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neuronemu.errors import NeuronEmuError, SourceSpan, UsageError
from neuronemu.frontend import ast as A
from neuronemu.frontend.parser import parse_source, read_source
from neuronemu.limits import Limits
from neuronemu.migrate.finder import Edit, Finding, find
from neuronemu.migrate.source import Source
from neuronemu_isa.numerics import ulps_apart

__all__ = ["Migration", "OutputDiff", "compare_outputs", "lint_file", "migrate_file"]

MARK = "# neuronemu: "


@dataclass
class Migration:
    path: str
    text: str  # the file ported
    rewritten: list[Finding] = field(default_factory=list)
    marked: list[tuple[Finding, int]] = field(default_factory=list)  # with its line in `text`
    lines: dict[int, tuple[int, ...]] = field(default_factory=dict)  # id(rewritten) -> lines
    hints: dict[int, str] = field(default_factory=dict)  # id(marked) -> what the run showed

    def message(self, finding: Finding) -> str:
        """What a marked place's comment says: the rule, and what the run showed, if any."""
        hint = self.hints.get(id(finding))
        return finding.message() + (f"; {hint}" if hint else "")

    def rewritten_at(self, line: int) -> list[Finding]:
        """The rewrites (of KEEPABLE rules) whose text is on `line` of the port."""
        return [f for f in self.rewritten if f.rule.name in KEEPABLE and line in self.lines[id(f)]]


def _read(path: str | Path, limits: Limits | None) -> tuple[Source, A.Module]:
    """The file's text and AST; a file that is not Python is an input error (exit 2)."""
    try:
        text = read_source(path, limits=limits)
        module = parse_source(text, str(path), limits)
        source = Source(text, str(path))
    except UsageError:
        raise
    except NeuronEmuError as err:  # not Python: bad input to lint and migrate
        raise UsageError(err.message, err.span, err.hint) from None
    return source, module


def _imports_nki(stmt: A.Node) -> bool:
    """`import nki...` or `from nki... import ...` (the current dialect)."""
    if isinstance(stmt, A.Import):
        return any(d.split(".")[0] == "nki" for d, _ in stmt.names)
    return isinstance(stmt, A.ImportFrom) and (stmt.module or "").split(".")[0] == "nki"


def _first_import(module: A.Module, path: str) -> SourceSpan:
    return next((s.span for s in module.body if _imports_nki(s)), SourceSpan(path, 1, 1))


def _nki_file(module: A.Module, older: bool, path: str) -> None:
    if not (older or any(_imports_nki(s) for s in module.body)):
        raise UsageError(
            "not an NKI kernel file: it imports neither nki nor neuronxcc.nki",
            SourceSpan(path, 1, 1),
            hint="lint and migrate read kernel files written against NKI",
        )


def lint_file(path: str | Path, limits: Limits | None = None) -> list[Finding]:
    """The deprecated and removed constructs of an NKI kernel file (either dialect)."""
    source, module = _read(path, limits)
    findings, older, _ = find(module, source)
    _nki_file(module, older, str(path))
    return [f for f in findings if f.lint]


# Rewrites that may be kept as written instead (`keep`): nl.load/nl.store are NKI 0.7 API
# again (NKI 0.3.0 "nki.language APIs"), and a kept accumulation is marked.
KEEPABLE = ("load", "store", "accumulate")


Results = Mapping[tuple[int, int, str], str]  # (line, col, instruction) -> its result


def migrate_file(
    path: str | Path,
    limits: Limits | None = None,
    keep: frozenset[SourceSpan] = frozenset(),
    results: Results | None = None,
) -> Migration:
    """A `neuronxcc.nki` kernel file ported to NKI 0.7: the mechanical rewrites made, each
    other construct left in place under a `# neuronemu: ...` comment saying what to do. `keep`:
    the places (of KEEPABLE rewrites, by their span in the file) to leave as written.
    `results`: the result tile each value-returning nisa call made in a run of the file, as
    `nl.ndarray(...)` text, for its mark to show."""
    source, module = _read(path, limits)
    findings, older, nisa = find(module, source)
    _nki_file(module, older, str(path))
    if not older:
        raise UsageError(
            "already in the current NKI dialect (it imports nki, not neuronxcc.nki): "
            "nothing to migrate",
            _first_import(module, str(path)),
            hint=f"'neuronemu lint {path}' lists its deprecated constructs",
        )
    edits: list[tuple[int, int, int, Edit, Finding | None]] = []  # (start, order, end, ...)
    rewritten, manual = [], []
    for f in findings:
        if f.rule.name in KEEPABLE and f.span in keep:
            if f.rule.name == "accumulate":
                manual.append(f)
            continue
        if f.edits:
            rewritten.append(f)
            edits.extend((e.start, 1, e.end, e, f) for e in f.edits)
        else:
            manual.append(f)
    hints = {
        id(f): f"in the run: {results[where]}"
        for f in manual
        if results and f.call and (where := (f.span.line, f.span.col, f.call)) in results
    }
    say = Migration(str(path), "", hints=hints).message
    marks_seen: set[tuple[int, str]] = set()
    for f in manual:
        key = (source.line_start(f.statement), say(f))
        if key in marks_seen:
            continue
        marks_seen.add(key)
        text = f"{source.indent(f.statement)}{MARK}{say(f)}\n"
        edits.append((key[0], 0, key[0], Edit(key[0], key[0], text), f))
    if nisa is None and any("nisa.dma_copy" in e.text for _, _, _, e, _ in edits):
        edits.append(_isa_import(findings, source))
    edits.sort(key=lambda e: (e[0], e[1], e[2]))
    out: list[str] = []
    pos = 0
    marked: list[tuple[Finding, int]] = []
    placed: dict[int, list[int]] = {}  # id of a rewritten finding -> the new lines it spans
    lines = 1
    for start, order, end, edit, finding in edits:
        if start < pos:
            continue  # overlaps an edit made: the construct stays as written
        piece = source.text[pos:start]
        out.append(piece)
        lines += piece.count("\n")
        if order == 0 and finding is not None:
            marked.append((finding, lines))
        elif finding is not None:
            placed.setdefault(id(finding), []).extend(
                range(lines, lines + edit.text.count("\n") + 1)
            )
        out.append(edit.text)
        lines += edit.text.count("\n")
        pos = end
    out.append(source.text[pos:])
    migration = Migration(
        str(path), "".join(out), rewritten, _lines_of_marks(marked, manual, source), hints=hints
    )
    migration.lines = {id(f): tuple(placed.get(id(f), ())) for f in rewritten}
    return migration


def _lines_of_marks(
    marked: list[tuple[Finding, int]], manual: list[Finding], source: Source
) -> list[tuple[Finding, int]]:
    """Every manual finding with the line of its mark (findings sharing a mark share it)."""
    line_of = {source.line_start(f.statement): m for f, m in marked if m}
    return [(f, line_of.get(source.line_start(f.statement), 0)) for f in manual]


def _isa_import(
    findings: list[Finding], source: Source
) -> tuple[int, int, int, Edit, Finding | None]:
    """`import nki.isa as nisa` after the ported imports of the module (not those in a
    function), for the DMA copies written."""
    ports = [
        f
        for f in findings
        if f.rule.name == "namespace" and f.edits and not source.indent(f.statement)
    ]
    at = max(f.edits[0].end for f in ports) if ports else 0
    text = "\nimport nki.isa as nisa" if ports else "import nki.isa as nisa\n"
    return (at, 2, at, Edit(at, at, text), None)


@dataclass(frozen=True)
class OutputDiff:
    """One output of the old and the new kernel, compared."""

    name: str
    equal: bool  # bit for bit
    max_ulps: float  # the largest difference in units in the last place (0 when equal)
    differing: int  # elements that differ
    problem: str = ""  # why they cannot be compared (missing, another shape or dtype)
    worst: tuple[int, ...] = ()  # the index of the element that differs the most
    values: tuple[float, float] = (0.0, 0.0)  # its old and new values

    def verdict(self) -> str:
        if self.equal:
            return "equal, bit for bit"
        if self.problem:
            return f"cannot compare: {self.problem}"
        unit = "" if self.integer else " ulp"
        at = f"{self.name}[{', '.join(map(str, self.worst))}]"
        return (
            f"{self.differing:,} differ, by up to {self.max_ulps:.3g}{unit} "
            f"(at {at}: old {self.values[0]:.7g}, new {self.values[1]:.7g})"
        )

    integer: bool = False  # (the difference is in integer steps, not ulps)


def compare_outputs(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> list[OutputDiff]:
    out = []
    for name, want in old.items():
        got = new.get(name)
        if got is None:
            out.append(OutputDiff(name, False, float("inf"), want.size, "missing from the new"))
            continue
        if got.shape != want.shape or got.dtype != want.dtype:
            problem = f"{got.dtype}{list(got.shape)} against {want.dtype}{list(want.shape)}"
            out.append(OutputDiff(name, False, float("inf"), want.size, problem))
            continue
        a, b = np.ascontiguousarray(want).reshape(-1), np.ascontiguousarray(got).reshape(-1)
        if not a.size:
            out.append(OutputDiff(name, True, 0.0, 0))
            continue
        same_bits = a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)
        differ = int(np.count_nonzero(~same_bits.all(axis=1)))
        if not differ:
            out.append(OutputDiff(name, True, 0.0, 0))
            continue
        integer = a.dtype.kind in "biu"
        if integer:
            apart = np.abs(a.astype(np.float64) - b.astype(np.float64))
        else:
            apart = ulps_apart(b, a, str(a.dtype))
        k = int(np.argmax(np.where(same_bits.all(axis=1), -1.0, apart)))
        where = tuple(int(i) for i in np.unravel_index(k, want.shape))
        values = (float(a[k]), float(b[k]))
        out.append(OutputDiff(name, False, float(apart[k]), differ, "", where, values, integer))
    for name in new:
        if name not in old:
            out.append(OutputDiff(name, False, float("inf"), 0, "not an output of the old"))
    return out
