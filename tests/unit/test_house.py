"""The layout rules of STYLE.md, run: imports go one way, no cycles, files stay small, the
instruction set is known only to isa/, and the docs and packaging list what is there."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import tomllib

from neuronemu_isa import REGISTRY
from neuronemu_isa.catalog import NKI_ISA

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 700


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "isa":
        parts[0] = "neuronemu_isa"
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    files = [*(ROOT / "neuronemu").rglob("*.py"), *(ROOT / "isa").rglob("*.py")]
    return {_module_name(p): p for p in files}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports, anywhere in it (function-local and
    TYPE_CHECKING imports count too: a cycle through them is still a cycle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in known:  # `from a.b import name` imports a.b
                t = t.rpartition(".")[0]
            # A module's own packages run first whatever it imports: not an edge of the graph.
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def import_graph() -> dict[str, set[str]]:
    sources = _sources()
    known = set(sources)
    return {name: _imports(name, path, known) for name, path in sources.items()}


# The rooms of neuronemu/, lowest first: a module imports only from its own room and the rooms
# below it (STYLE.md, "Rooms by pipeline stage").
ROOMS = (
    (
        "neuronemu.errors",
        "neuronemu.limits",
        "neuronemu.host",
        "neuronemu.ir",
        "neuronemu.jit",
        "neuronemu.replay",  # (the package imports nothing; its modules have their rooms)
        "neuronemu.replay.journal",
    ),
    ("neuronemu.frontend",),
    ("neuronemu.program", "neuronemu.replay.late"),
    ("neuronemu.checks",),
    ("neuronemu.build", "neuronemu.replay.repeats", "neuronemu.replay.deferred"),
    ("neuronemu.sim",),
    (
        "neuronemu.trace",
        "neuronemu.nasm",
        "neuronemu.replay.moving",
        "neuronemu.replay.plans",
        "neuronemu.replay.templates",
        "neuronemu.replay.lazy_tiles",
    ),
    ("neuronemu.report",),
    ("neuronemu.migrate",),
    (
        "neuronemu.inputs",
        "neuronemu.pipeline",
        "neuronemu.api",
        "neuronemu.testing",
        "neuronemu.strategies",
        "neuronemu.sweeps",
        "neuronemu",
    ),
    ("neuronemu.cli", "neuronemu.__main__"),
)


def room_of(module: str) -> int | None:
    """The room a module lives in (the longest prefix that names one; the package itself,
    `neuronemu`, only by its own name), None outside."""
    best, found = -1, None
    for level, names in enumerate(ROOMS):
        for name in names:
            inside = module.startswith(name + ".") and name != "neuronemu"
            if (module == name or inside) and len(name) > best:
                best, found = len(name), level
    return found


def _private_across(a: str, b: str) -> bool:
    """`b` is a private module (`_name`) of another package than `a`'s."""
    package, _, last = b.rpartition(".")
    return last.startswith("_") and not (a == package or a.startswith(package + "."))


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    out = []
    interpreter = (
        "neuronemu.trace.interpreter",
        "neuronemu.trace.expressions",
        "neuronemu.trace.classes",
        "neuronemu.trace.imports",
        "neuronemu.trace.kernel",
        "neuronemu.trace.tracer",
    )
    for a, targets in graph.items():
        for b in targets:
            ra, rb = room_of(a), room_of(b)
            if ra is not None and rb is not None and rb > ra:
                out.append(f"{a} imports {b}: an import up the rooms ({ra} -> {rb})")
            if _private_across(a, b):
                out.append(f"{a} imports {b}: a private module of another package")
            if under(b, "neuronemu.trace") and not (
                any(under(a, m) for m in ("neuronemu.trace", "neuronemu.replay"))
                or a in ("neuronemu.pipeline", "neuronemu.api")
            ):
                out.append(
                    f"{a} imports {b}: only the pipeline, api, trace/ and replay/ import trace"
                )
            if under(a, "neuronemu.trace.lib") and any(under(b, m) for m in interpreter):
                out.append(f"{a} imports {b}: lib/ reaches the tracer only via its Context")
            if under(a, "neuronemu_isa") and under(b, "neuronemu"):
                out.append(f"{a} imports {b}: the ISA needs only NumPy")
            for x, y in (
                ("neuronemu.frontend", "neuronemu.sim"),
                ("neuronemu.sim", "neuronemu.frontend"),
            ):
                if under(a, x) and under(b, y):
                    out.append(f"{a} imports {b}: frontend and sim never import each other")
            if under(a, "neuronemu.ir") and not any(
                under(b, m) for m in ("neuronemu.ir", "neuronemu.errors", "neuronemu_isa")
            ):
                out.append(f"{a} imports {b}: ir/ is the bottom of the program's data model")
    return out


def test_every_module_of_neuronemu_is_in_a_room():
    outside = [m for m in import_graph() if m.startswith("neuronemu.") and room_of(m) is None]
    assert outside == [], "put it in a room (ROOMS) or a new one"
    assert room_of("neuronemu.newmodule") is None  # (the package's name is no catch-all)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_imports_follow_the_layering():
    assert layering_violations(import_graph()) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_checks_catch_planted_violations():
    graph = import_graph()
    planted = {k: set(v) for k, v in graph.items()}
    planted["neuronemu.sim.timing"].add("neuronemu.trace.tracer")  # upward
    planted["neuronemu.trace.lib.emit"].add("neuronemu.trace.interpreter")
    planted["neuronemu.ir.tensor"].add("neuronemu.program")
    planted["neuronemu.program"].add("neuronemu.report")  # up the rooms
    planted["neuronemu.report"].add("neuronemu.sim.state")
    planted["neuronemu.api"].add("neuronemu_isa._dma")  # another package's private module
    found = layering_violations(planted)
    assert any("program imports neuronemu.report: an import up" in v for v in found)
    assert not any("neuronemu.report imports neuronemu.sim.state" in v for v in found)
    assert any("api imports neuronemu_isa._dma: a private module" in v for v in found)
    assert any("sim.timing imports neuronemu.trace.tracer" in v for v in found)
    assert any("lib.emit imports neuronemu.trace.interpreter" in v for v in found)
    assert any("ir.tensor imports neuronemu.program" in v for v in found)
    planted["neuronemu.errors"] = graph["neuronemu.errors"] | {"neuronemu.limits"}
    assert any("neuronemu.errors" in c and "neuronemu.limits" in c for c in cycles(planted))


def test_no_file_is_over_700_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _sources().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, "split these by responsibility"


# Instruction knowledge lives in isa/: no branch elsewhere on an instruction's name.


def _name_branches(path: Path) -> list[str]:
    names = set(NKI_ISA) | set(REGISTRY)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            consts = [c for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            for c in node.comparators:
                if isinstance(c, (ast.Tuple, ast.List, ast.Set)):
                    consts += [e for e in c.elts if isinstance(e, ast.Constant)]
            hit = [c.value for c in consts if c.value in names]
            if hit:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {hit[0]}")
    return found


def test_no_branch_outside_isa_names_an_instruction():
    found = [hit for p in (ROOT / "neuronemu").rglob("*.py") for hit in _name_branches(p)]
    assert found == [], "give the spec a hook instead (isa/spec.py InstrSpec)"


def test_the_scan_sees_a_planted_branch(tmp_path):
    planted = ROOT / "neuronemu" / "_planted_for_test.py"
    try:
        planted.write_text("def f(ins):\n    return ins.spec.name == 'nc_matmul'\n")
        assert _name_branches(planted) == ["neuronemu/_planted_for_test.py:2: nc_matmul"]
    finally:
        planted.unlink()


# Replayed loops are known to replay/ and, for the passes after the build, to the program
# table alone (STYLE.md, "One columnar program table"): elsewhere no module names a replayed
# block or a shared form, and the passes that read a finished program (the scheduler, the
# checks, the report) take its instructions from the table.

REPLAY_NAMES = {"Repeated", "Form", "LateInstr"}
REPLAY_FIELDS = {"repeats", "form", "alike"}
READERS = ("neuronemu.sim.timing", "neuronemu.checks", "neuronemu.report")


def _replay_names(module: str, text: str) -> list[str]:
    """Where `module`'s source names what only replay/ and the table may (its line: what)."""
    reader = any(module == r or module.startswith(r + ".") for r in READERS)
    found = []
    for node in ast.walk(ast.parse(text)):
        hit = None
        if isinstance(node, ast.Name) and node.id in REPLAY_NAMES:
            hit = node.id
        elif isinstance(node, ast.alias) and node.name in REPLAY_NAMES:
            hit = f"import {node.name}"
        elif isinstance(node, ast.Attribute) and node.attr in REPLAY_FIELDS:
            hit = f".{node.attr}"
        elif isinstance(node, ast.keyword) and node.arg in REPLAY_FIELDS:
            hit = f"{node.arg}="
        elif reader and isinstance(node, ast.Attribute) and node.attr == "raw_instrs":
            hit = ".raw_instrs (read the table's instrs)"
        if hit:
            found.append(f"{module}:{getattr(node, 'lineno', '?')}: {hit}")
    return found


def test_only_replay_and_the_program_table_know_replayed_blocks():
    allowed = ("neuronemu.replay", "neuronemu.program.table")
    found = [
        hit
        for name, path in _sources().items()
        if name.startswith("neuronemu")
        and name != "neuronemu.program"  # (it declares the fields replay fills)
        and not any(name == a or name.startswith(a + ".") for a in allowed)
        for hit in _replay_names(name, path.read_text())
    ]
    assert found == [], "ask the program table (neuronemu.program.table)"


def test_the_replay_scan_sees_planted_names():
    text = (
        "from neuronemu.replay.records import Form\n"
        "def f(program, ins):\n"
        "    return program.repeats, ins.form, program.raw_instrs\n"
    )
    assert _replay_names("neuronemu.report.x", text) == [
        "neuronemu.report.x:1: import Form",
        "neuronemu.report.x:3: .repeats",
        "neuronemu.report.x:3: .form",
        "neuronemu.report.x:3: .raw_instrs (read the table's instrs)",
    ]
    assert len(_replay_names("neuronemu.api", text)) == 3  # (raw_instrs: only the readers')


def test_every_documented_name_is_modelled_or_known_not_yet():
    assert set(REGISTRY) <= set(NKI_ISA)


def test_the_docs_list_every_instruction():
    modelled = (ROOT / "docs" / "modelled.md").read_text()
    paragraph = modelled[modelled.index("- **Instructions**") :]
    paragraph = paragraph[: paragraph.index("\n- **")]
    listed = set(re.findall(r"`([a-z_0-9]+)`", paragraph))
    assert set(REGISTRY) - listed == set()
    claimed = {n for n in listed if n in NKI_ISA}
    assert claimed <= set(REGISTRY), "the docs claim instructions that are not modelled"


def test_pyproject_lists_every_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    present = {
        _module_name(p.parent / "__init__.py")
        for p in [*(ROOT / "neuronemu").rglob("__init__.py"), *(ROOT / "isa").rglob("__init__.py")]
    }
    assert listed == present


@pytest.mark.parametrize("name", ["dma_copy", "dma_transpose", "dma_compute"])
def test_hbm_bytes_count_every_dma_class_instruction(kernel_file, name):
    import ml_dtypes
    import numpy as np

    import neuronemu

    body = {
        "dma_copy": "nisa.dma_copy(dst=t, src=a)",
        "dma_transpose": "nisa.dma_transpose(dst=t, src=a)",
        "dma_compute": "nisa.dma_compute(dst=t, srcs=[a, a], scales=[1.0, 1.0], reduce_op=nl.add)",
    }[name]
    path = kernel_file(f"""
import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    t = nl.ndarray((32, 32), dtype=nl.bfloat16, buffer=nl.sbuf)
    {body}
    out = nl.ndarray((32, 32), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
""")
    a = np.ones((32, 32), dtype=ml_dtypes.bfloat16)
    result = neuronemu.run(path, {"a": a}, timing_only=True)
    reads = {"dma_copy": 1, "dma_transpose": 1, "dma_compute": 2}[name]
    assert result.hbm_bytes == {"read": reads * 32 * 32 * 2, "write": 32 * 32 * 2}


def test_the_readme_shows_what_its_first_command_prints(monkeypatch):
    # The README's example output is what the Quickstart's first command prints: line after
    # line, but where `...` says lines are left out.
    from click.testing import CliRunner

    from neuronemu.cli import main

    readme = (ROOT / "README.md").read_text()
    command = re.search(r"&& neuronemu (run [^\n]*)", readme).group(1)
    shown = readme.split("The first Quickstart command prints", 1)[1].split("```")[1]
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # (plain text, as a file receives it)
    result = CliRunner().invoke(main, shlex.split(command))
    assert result.exit_code == 0, result.output
    printed = [line.rstrip() for line in result.output.splitlines()]
    at, skipping = 0, False
    for line in shown.strip("\n").splitlines():
        if line.strip() == "...":
            skipping = True
            continue
        line = line.rstrip()
        if skipping:
            assert line in printed[at:], f"README shows a line not printed after:\n{line}"
            at = printed.index(line, at)
        else:
            assert printed[at : at + 1] == [line], (
                f"README shows, where another is printed:\n{line}"
            )
        at, skipping = at + 1, False
    assert skipping or at == len(printed), "README leaves out the last lines without `...`"


def test_the_readme_is_short_and_every_page_it_names_exists():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    pages = re.findall(r"\]\((docs/[a-z_]+\.md)\)", readme)
    assert pages and all((ROOT / page).is_file() for page in pages)
    for page in (ROOT / "docs").glob("*.md"):  # links between the pages
        for link in re.findall(r"\]\(([a-z_]+\.md)\)", page.read_text()):
            assert (ROOT / "docs" / link).is_file(), f"{page.name} links to {link}"
