"""`neuronemu lint` and `neuronemu migrate` through the CLI: constructs found where they are,
ported files that keep their comments and names, ported kernels that compute the same."""

from __future__ import annotations

import difflib
import io
import keyword
import re
import tokenize
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.migrate import compare_outputs

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
OLDER = sorted(
    p.name
    for p in KERNELS.glob("*.py")
    if not p.name.endswith("_ref.py") and "neuronxcc" in p.read_text()
)
# Names and text the rewrite rules replace on purpose (rules.py): all others must stay.
REPLACED_NAMES = {
    *keyword.kwlist,  # (`from neuronxcc import nki` becomes `import nki`)
    *("neuronxcc", "load", "store", "value", "affine_range", "sequential_range", "par_dim"),
}
REPLACED_TEXT = ("neuronxcc", "nl.load(", "nl.store(", "affine_range(", "+= nisa.", "par_dim(")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def tokens(text: str, kind: int) -> list[str]:
    return [
        t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == kind
    ]


PLANTED = """from neuronxcc import nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def k(x, out):
    i_p = nl.arange(128)[:, None]
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=x.dtype, buffer="sbuf")
    for i in nl.affine_range(2):
        t = nl.load(x[i_p, i], mask=(i_p < 100))
        y = nisa.reciprocal(t)
    for j in nl.dynamic_range(3):
        r = nisa.register_alloc(0)
"""
# (line, text that starts the construct, rule) of each construct planted above.
WANTED = [
    (1, "from", "namespace"),
    (2, "import", "namespace"),
    (3, "import", "namespace"),
    (7, "def", "output_args"),
    (8, "nl.arange", "arange"),
    (9, "nl.par_dim", "block_dims"),
    (9, "buffer=", "buffer_string"),
    (10, "nl.affine_range", "range"),
    (11, "mask=", "mask"),
    (12, "nisa.reciprocal", "dst"),
    (13, "nl.dynamic_range", "dynamic_range"),
    (14, "nisa.register_alloc", "register"),
]


def test_lint_finds_planted_constructs_at_their_line_and_column(kernel_file):
    path = kernel_file(PLANTED)
    result = invoke("lint", path)
    assert result.exit_code == 1, result.output
    found = [
        (int(m[1]), int(m[2]), m[3])
        for m in re.finditer(rf"^{re.escape(path)}:(\d+):(\d+): warning: .*\[(\w+)\]$",
                             result.stdout, re.M)
    ]  # fmt: skip
    lines = PLANTED.splitlines()
    assert found == [(n, lines[n - 1].index(text) + 1, rule) for n, text, rule in WANTED]
    assert "nl.affine_range: deprecated in NKI 0.7.0; use range" in result.stdout
    assert "mask=: removed in NKI 0.2.0" in result.stdout


def test_lint_of_a_current_kernel_without_old_constructs_is_clean():
    result = invoke("lint", str(KERNELS / "scaled_rows_v07.py"))
    assert (result.exit_code, result.stdout) == (0, "")


def test_lint_of_a_current_kernel_names_deprecated_ranges(kernel_file):
    path = kernel_file(
        "import nki\nimport nki.language as nl\n\nfor i in nl.sequential_range(2):\n    pass\n"
    )
    result = invoke("lint", path)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}:4:10: warning: nl.sequential_range: deprecated")


@pytest.mark.parametrize("command", ["lint", "migrate"])
@pytest.mark.parametrize(
    ("source", "where", "message"),
    [
        ("import numpy as np\nx = 1\n", "1:1", "not an NKI kernel file"),
        ("from neuronxcc import nki\ndef k(a:\n    return a\n", "2:6", "invalid syntax"),
    ],
)
def test_bad_input_is_a_located_error_with_exit_2(kernel_file, command, source, where, message):
    path = kernel_file(source)
    result = invoke(command, path)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"{path}:{where}: error: {message}")


def test_migrate_never_overwrites_the_original(kernel_file):
    path = kernel_file(PLANTED)
    result = invoke("migrate", path, "-o", path, "--no-run")
    assert result.exit_code == 2
    assert "the port would overwrite the original" in result.stderr
    assert Path(path).read_text() == PLANTED


def test_migrate_refuses_a_file_already_in_the_current_dialect():
    path = str(KERNELS / "tensor_add.py")
    result = invoke("migrate", path, "-o", "/dev/null")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{path}:8:1: error: already in the current NKI dialect")


@pytest.mark.parametrize("name", OLDER)
def test_a_migrated_file_keeps_every_comment_and_name(tmp_path, name):
    old_text = (KERNELS / name).read_text()
    new = tmp_path / name
    result = invoke("migrate", str(KERNELS / name), "-o", str(new), "--no-run")
    assert result.exit_code == 0, result.output
    new_text = new.read_text()
    assert "import neuronxcc" not in new_text and "from neuronxcc" not in new_text
    new_comments = tokens(new_text, tokenize.COMMENT)
    assert [c for c in new_comments if not c.startswith("# neuronemu:")] == tokens(
        old_text, tokenize.COMMENT
    )
    kept = set(tokens(old_text, tokenize.NAME)) - REPLACED_NAMES
    assert kept <= set(tokens(new_text, tokenize.NAME))
    # Every line the port changed holds a construct a rule replaces.
    diff = difflib.ndiff(old_text.splitlines(), new_text.splitlines())
    removed = [line[2:] for line in diff if line.startswith("- ")]
    assert removed and all(any(t in line for t in REPLACED_TEXT) for line in removed), removed


def commented(text: str) -> str:
    """`text` with a comment at the end of every line of code that has none, and a comment
    line before each statement inside a block: comments next to every construct a rule
    rewrites, inside its brackets too."""
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    ends = {t.start[0] for t in toks if t.type == tokenize.NEWLINE}
    inner = {t.start[0] for t in toks if t.type == tokenize.NL}  # (inside brackets)
    # (the lines of a string over several lines: a comment there would be its text)
    strings = [t for t in toks if t.type == tokenize.STRING and t.start[0] < t.end[0]]
    in_string = {n for t in strings for n in range(t.start[0], t.end[0] + 1)}
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.strip() and "#" not in line and n not in in_string
        if code and n in ends and line.startswith(" "):
            out.append(line[: len(line) - len(line.lstrip())] + f"# before {n}")
        out.append(f"{line}  # at {n}" if code and (n in ends or n in inner) else line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", OLDER)
def test_a_migrated_file_keeps_a_comment_beside_every_construct(tmp_path, name):
    old_text = commented((KERNELS / name).read_text())
    assert old_text.count("# at ") > 10
    old, new = tmp_path / f"old_{name}", tmp_path / name
    old.write_text(old_text)
    result = invoke("migrate", str(old), "-o", str(new), "--no-run")
    assert result.exit_code == 0, result.output
    new_text = new.read_text()
    compile(new_text, str(new), "exec")
    new_comments = tokens(new_text, tokenize.COMMENT)
    assert [c for c in new_comments if not c.startswith("# neuronemu:")] == tokens(
        old_text, tokenize.COMMENT
    )


def test_the_migrated_add_runs_with_identical_values_and_time(tmp_path):
    old = KERNELS / "tensor_add_legacy.py"
    new = tmp_path / "tensor_add.py"
    result = invoke("migrate", str(old), "-o", str(new), "--check")
    assert result.exit_code == 0, result.output
    assert "6 rewrite(s), 0 place(s) marked" in result.stdout
    assert result.stdout.count("equal, bit for bit") == 2
    assert "values: equal in 2 of 2 case(s)" in result.stdout
    text = new.read_text()
    assert "nisa.dma_copy(dst=a_tile, src=a[lo:hi, :])" in text
    assert "nl.load(" not in text and "nl.store(" not in text
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((200, 96)).astype(ml_dtypes.bfloat16) for _ in range(2))
    got = neuronemu.run(new, {"a": a, "b": b}, print_fn=lambda _: None)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.outputs["out"].view(np.uint16), want.view(np.uint16))
    assert got.program.dialect == "nki"


def test_marked_places_are_listed_and_the_port_still_matches(tmp_path):
    new = tmp_path / "relu.py"
    result = invoke("migrate", str(KERNELS / "scaled_relu_legacy.py"), "-o", str(new), "--check")
    assert result.exit_code == 0, result.output
    marks = [n for n, line in enumerate(new.read_text().splitlines(), 1) if "# neuronemu:" in line]
    listed = [int(n) for n in re.findall(rf"^  {re.escape(str(new))}:(\d+): ", result.stdout, re.M)]
    assert marks and sorted(set(listed)) == marks
    assert "values: equal in 2 of 2 case(s)" in result.stdout


def test_check_exits_1_when_the_port_does_not_run(tmp_path):
    new = tmp_path / "att.py"
    result = invoke("migrate", str(KERNELS / "attention_legacy.py"), "-o", str(new), "--check")
    assert result.exit_code == 1
    assert "the port does not run yet" in result.stdout and "block dimensions" in result.stdout
    text = new.read_text()
    assert "nisa.nc_matmul(acc, p_t[j], v_t[j], accumulate=True)" in text
    # A value-returning call's mark shows the tile it made in the run (q_sb^T k: fp32 PSUM).
    mark = "            # neuronemu: nisa.nc_matmul: removed in NKI 0.2.0; use a result allocated"
    hint = "; in the run: nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)\n"
    assert mark in text and f"{hint}            qk = nisa.nc_matmul(" in text


def test_check_exits_1_when_values_differ(tmp_path, monkeypatch):
    from neuronemu.cli import migrate_command

    real = migrate_command.migrate_file

    def wrong(*args, **kwargs):  # a port that subtracts where the original adds
        m = real(*args, **kwargs)
        m.text = m.text.replace("nl.add(a_tile, b_tile)", "nl.subtract(a_tile, b_tile)")
        return m

    monkeypatch.setattr(migrate_command, "migrate_file", wrong)
    args = ["-i", "a=float32[128,64]", "-i", "b=float32[128,64]"]
    old = str(KERNELS / "tensor_add_legacy.py")
    result = invoke("migrate", old, "-o", str(tmp_path / "n.py"), *args, "--check")
    assert result.exit_code == 1
    assert re.search(
        r"output out\s+8,192 differ, by up to .* ulp \(at out\[\d+, \d+\]: old ", result.stdout
    )
    assert "values: equal in 0 of 1 case(s)" in result.stdout
    result = invoke("migrate", old, "-o", str(tmp_path / "n.py"), *args)
    assert result.exit_code == 0  # (without --check, a difference is reported, not failed)


def test_compare_outputs_counts_ulps_against_numpy():
    want = np.array([1.0, 2.0, 3.0], np.float32)
    got = want.copy()
    got[1] = np.nextafter(np.float32(2.0), np.float32(4.0))
    got[2] = np.float32(3.0) + 3 * np.spacing(np.float32(3.0))
    (diff,) = compare_outputs({"out": want}, {"out": got})
    assert (diff.equal, diff.differing, diff.max_ulps) == (False, 2, 3.0)
    assert (diff.worst, diff.values) == ((2,), (3.0, float(got[2])))
    assert diff.verdict() == f"2 differ, by up to 3 ulp (at out[2]: old 3, new {float(got[2]):.7g})"
    ints = compare_outputs({"i": np.array([[1, 2], [3, 4]])}, {"i": np.array([[1, 2], [3, 9]])})
    assert ints[0].verdict() == "1 differ, by up to 5 (at i[1, 1]: old 4, new 9)"
    (same,) = compare_outputs({"out": want}, {"out": want.copy()})
    assert (same.equal, same.max_ulps) == (True, 0.0)
    (shape,) = compare_outputs({"out": want}, {"out": want[:2]})
    assert not shape.equal and "float32[2] against float32[3]" in shape.problem


def test_mechanical_rewrites_edit_only_the_construct(kernel_file, tmp_path):
    tail = (
        '    a = nl.ndarray((nl.par_dim(128), 64), dtype=x.dtype, buffer="psum")  # keep me\n'
        "    for i in nl.sequential_range(4):\n"
        "        nl.store(out[i], a)\n"
    )
    new = tmp_path / "new.py"
    result = invoke("migrate", kernel_file(PLANTED + tail), "-o", str(new), "--no-run")
    assert result.exit_code == 0, result.output
    text = new.read_text()
    assert text.startswith("import nki\nimport nki.language as nl\nimport nki.isa as nisa\n")
    assert text.endswith(
        "    a = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.psum)  # keep me\n"
        "    for i in range(4):\n"
        "        nisa.dma_copy(dst=out[i], src=a)\n"
    )
    # The constructs it cannot port stay as written, each under its mark.
    assert "    # neuronemu: mask=: removed in NKI 0.2.0" in text
    assert "        t = nl.load(x[i_p, i], mask=(i_p < 100))\n" in text
    assert "9 rewrite(s), 7 place(s) marked to finish by hand" in result.stdout


def test_a_file_without_a_final_newline_is_read(kernel_file):
    result = invoke("lint", kernel_file("from neuronxcc import nki\nx = 1"))
    assert result.exit_code == 1, result.output
    assert ":1:1: warning: the neuronxcc.nki namespace: removed in Neuron 2.34" in result.stdout


PSUM_STORE = """from neuronxcc import nki
import neuronxcc.nki.language as nl


@nki.jit
def k(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    p = nl.matmul(x, y, transpose_x=True)
    nl.store(out, value=p)
    return out
"""


def test_a_rewrite_the_port_cannot_run_is_kept_as_written(kernel_file, tmp_path):
    # nl.store of a PSUM tile: nisa.dma_copy cannot read PSUM (NKI 0.3.0), nl.store can.
    old, new = kernel_file(PSUM_STORE), tmp_path / "new.py"
    args = ["-i", "a=float32[128,128]", "-i", "b=float32[128,512]", "--check"]
    result = invoke("migrate", old, "-o", str(new), *args)
    assert result.exit_code == 0, result.output
    assert f"kept nl.store at {old}:11:5 as written: its port did not run (dma_copy: src" in (
        result.stdout
    )
    text = new.read_text()
    assert "    nl.store(out, value=p)\n" in text and "nisa.dma_copy(dst=y, src=b)" in text
    assert "values: equal in 1 of 1 case(s)" in result.stdout


def test_only_a_written_out_leading_par_dim_is_rewritten(kernel_file, tmp_path):
    source = (
        "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n\n"
        "t = nl.ndarray([2] + [nl.par_dim(128), 4], dtype=nl.float32)\n"
        "u = nl.ndarray(shape=(nl.par_dim(128), 4), dtype=nl.float32)\n"
    )
    new = tmp_path / "new.py"
    result = invoke("migrate", kernel_file(source), "-o", str(new), "--no-run")
    assert result.exit_code == 0, result.output
    lines = new.read_text().splitlines()
    # (a shape built by an expression may hold a block dim: left, and marked)
    assert lines[3].startswith("# neuronemu: a block dimension")
    assert lines[4:] == [
        "t = nl.ndarray([2] + [nl.par_dim(128), 4], dtype=nl.float32)",
        "u = nl.ndarray(shape=(128, 4), dtype=nl.float32)",
    ]


def test_a_slower_port_says_which_causes_grew(tmp_path, monkeypatch):
    from neuronemu.cli import migrate_command

    real = migrate_command.migrate_file

    def slower(*args, **kwargs):  # a port that moves b's tile twice
        m = real(*args, **kwargs)
        twice = "        nisa.dma_copy(dst=b_tile, src=b[lo:hi, :])\n"
        m.text = m.text.replace(twice, twice * 2)
        return m

    monkeypatch.setattr(migrate_command, "migrate_file", slower)
    args = ["-i", "a=float32[128,512]", "-i", "b=float32[128,512]"]
    old = str(KERNELS / "tensor_add_legacy.py")
    result = invoke("migrate", old, "-o", str(tmp_path / "n.py"), *args, "--check")
    assert result.exit_code == 0, result.output  # (the same values, later)
    times = re.search(r"^  time\s+([\d.]+) us\s+([\d.]+) us", result.stdout, re.M)
    assert times and float(times[2]) > float(times[1])
    said = re.search(
        r"the port is ([\d.]+)% slower; on its critical path: dma [a-z ]+ \+[\d.]+ us",
        result.stdout,
    )
    assert said, result.stdout
    assert abs(float(said[1]) - 100 * (float(times[2]) / float(times[1]) - 1)) < 0.1


SUB_KERNEL = """from neuronxcc import nki
import neuronxcc.nki.language as nl


@nki.jit(mode="trace")
def inner(a, out):
    nl.store(out, value=nl.load(a))


@nki.jit
def outer(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    inner(a, out)
    inner(a, out)
    return out
"""


def test_a_sub_kernel_is_named_once_and_may_return_nothing(kernel_file):
    path = kernel_file(SUB_KERNEL)
    result = invoke("lint", path)
    rules = re.findall(
        rf"^{re.escape(path)}:(\d+):(\d+): warning: .*\[(\w+)\]$", result.stdout, re.M
    )
    assert rules[2:] == [("5", "10", "jit_args"), ("6", "1", "sub_kernel")]


def test_arguments_between_comments_and_imports_in_a_function(kernel_file, tmp_path):
    source = (
        "from neuronxcc import nki\n"
        "import neuronxcc.nki.language as nl\n\n\n"
        "def k(psum, a, b, out):\n"
        "    import neuronxcc.nki.isa as nisa\n\n"
        "    psum += nisa.nc_matmul(\n"
        "        a,  # stationary\n"
        "        # (a comment line)\n"
        "        b  # moving\n"
        "    )\n"
        "    nl.store(out, value=psum)\n"
    )
    new = tmp_path / "new.py"
    result = invoke("migrate", kernel_file(source), "-o", str(new), "--no-run")
    assert result.exit_code == 0, result.output
    text = new.read_text()
    compile(text, str(new), "exec")  # (valid Python: a comment never swallows an edit)
    assert text == (
        "import nki\n"
        "import nki.language as nl\n"
        "import nki.isa as nisa\n\n\n"
        "def k(psum, a, b, out):\n"
        "    import nki.isa as nisa\n\n"
        "    nisa.nc_matmul(psum,\n"
        "        a,  # stationary\n"
        "        # (a comment line)\n"
        "        b, accumulate=True  # moving\n"
        "    )\n"
        "    nisa.dma_copy(dst=out, src=psum)\n"
    )
