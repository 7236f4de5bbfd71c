"""The import path of kernels: absolute imports of the kernel's own package (its root found by
walking up `__init__.py` files), and source trees of other packages given by `--path`,
`import_path=` and NEURONEMU_PATH, each a root whose modules are regular files inside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu import errors, sweeps
from neuronemu.cli import main
from neuronemu.errors import KernelTypeError, UsageError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n"
SECRET = "AKIA-NEURONEMU-IMPORT-PATH-SECRET-51c2"

# A library package as nki-library lays out its source: absolute imports of itself inside it.
LIBRARY = {
    "nkilib/__init__.py": "",
    "nkilib/core/__init__.py": "",
    "nkilib/core/consts.py": "SCALE = 3.0\nBIAS = 0.5\n",
    "nkilib/core/ops.py": (
        HEADER + "from nkilib.core.consts import SCALE\nfrom .consts import BIAS\n\n"
        "def scaled_copy(a, out):\n"
        "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=SCALE, op1=nl.add,"
        " operand1=BIAS)\n"
        "    nisa.dma_copy(dst=out, src=r)\n"
    ),
}
USER_KERNEL = (
    HEADER + "from nkilib.core.ops import scaled_copy\nimport nkilib.core.consts\n\n"
    "@nki.jit\ndef k(a):\n"
    "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    scaled_copy(a, out)\n"
    "    print(nkilib.core.consts.SCALE)\n"
    "    return out\n"
)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def layout(tmp_path):
    """tmp/lib: a library source tree; tmp/work/k.py: a kernel that imports it."""
    _write(tmp_path / "lib", LIBRARY)
    _write(tmp_path / "work", {"k.py": USER_KERNEL})
    return tmp_path


def _expected(a: np.ndarray) -> np.ndarray:
    return a * np.float32(3.0) + np.float32(0.5)


A = np.arange(32, dtype=np.float32).reshape(4, 8) - 7


def test_a_kernel_imports_its_own_package_absolutely(tmp_path):
    _write(
        tmp_path,
        {
            "mypkg/__init__.py": "",
            "mypkg/kernels/__init__.py": "",
            "mypkg/utils/__init__.py": "",
            "mypkg/utils/tiles.py": "from mypkg.utils.sizes import ROWS\n\n"
            "def rows():\n    return ROWS\n",
            "mypkg/utils/sizes.py": "ROWS = 96\n",
            "mypkg/kernels/attn.py": HEADER + "from mypkg.utils.tiles import rows\n"
            "import mypkg.utils.sizes\nfrom mypkg import utils\n\n"
            "@nki.jit\ndef k(a):\n"
            "    print(rows(), mypkg.utils.sizes.ROWS + 1, utils.tiles.rows())\n"
            "    return a\n",
        },
    )
    printed: list[str] = []
    neuronemu.compile_kernel(tmp_path / "mypkg/kernels/attn.py", {"a": A}, print_fn=printed.append)
    assert printed == ["96 97 96"]


def test_a_package_inside_a_package_is_imported_by_its_own_name(tmp_path):
    # nki-library's layout: src/nkilib_src/__init__.py, and nkilib/ inside it: the kernel's
    # package root is nkilib_src, and `nkilib` resolves by its name too.
    _write(
        tmp_path,
        {
            "outer_src/__init__.py": "",
            "outer_src/lib/__init__.py": "",
            "outer_src/lib/core/__init__.py": "",
            "outer_src/lib/core/ops/__init__.py": "",
            "outer_src/lib/core/utils.py": "def div_ceil(a, b):\n    return -(-a // b)\n",
            "outer_src/lib/core/ops/k.py": HEADER + "from lib.core.utils import div_ceil\n"
            "from outer_src.lib.core import utils\n\n"
            "@nki.jit\ndef k(a):\n    print(div_ceil(7, 2), utils.div_ceil(9, 3))\n    return a\n",
        },
    )
    printed: list[str] = []
    neuronemu.compile_kernel(
        tmp_path / "outer_src/lib/core/ops/k.py", {"a": A}, print_fn=printed.append
    )
    assert printed == ["4 3"]


def test_a_package_reached_through_a_namespace_folder_needs_path_and_says_which(tmp_path):
    # neuronx-distributed-inference's layout: src/nxdi/__init__.py, src/nxdi/modules/ (no
    # __init__.py), src/nxdi/modules/kvcache/utils.py importing nxdi.modules.custom_calls.
    _write(
        tmp_path,
        {
            "src/nxdi/__init__.py": "",
            "src/nxdi/modules/custom_calls.py": "WIDTH = 64\n",
            "src/nxdi/modules/kvcache/utils.py": HEADER
            + "from nxdi.modules.custom_calls import WIDTH\n\n"
            "@nki.jit\ndef k(a):\n    print(WIDTH)\n    return a\n",
        },
    )
    kernel = tmp_path / "src/nxdi/modules/kvcache/utils.py"
    with pytest.raises(KernelTypeError) as info:
        neuronemu.compile_kernel(kernel, {"a": A}, print_fn=lambda _: None)
    assert f"add --path {str(tmp_path / 'src')!r}" in (info.value.hint or "")
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel, {"a": A}, import_path=[tmp_path / "src"], print_fn=printed.append
    )
    assert printed == ["64"]


def test_a_kernel_outside_any_package_cannot_reach_a_sibling_package_by_name(tmp_path):
    # The package root is the kernel's own package only: no folder beside it becomes a root.
    _write(
        tmp_path,
        {
            "other/__init__.py": "",
            "other/consts.py": "N = 1\n",
            "mine/__init__.py": "",
            "mine/k.py": HEADER + "from other.consts import N\n\n"
            "@nki.jit\ndef k(a):\n    print(N)\n    return a\n",
        },
    )
    with pytest.raises(KernelTypeError, match="module 'other.consts' is not available"):
        neuronemu.compile_kernel(tmp_path / "mine/k.py", {"a": A}, print_fn=lambda _: None)


def test_import_path_in_the_api_runs_a_library_kernel(layout):
    printed: list[str] = []
    res = neuronemu.run(
        layout / "work/k.py",
        {"a": A},
        import_path=[layout / "lib"],
        print_fn=printed.append,
        ref=_expected,
    )
    assert printed == ["3.0"]
    assert res.check is not None and res.check.passed
    np.testing.assert_array_equal(res.outputs["out"], _expected(A))


def test_without_the_import_path_the_error_lists_where_it_looked(layout):
    with pytest.raises(KernelTypeError) as info:
        neuronemu.compile_kernel(layout / "work/k.py", {"a": A}, print_fn=lambda _: None)
    err = info.value
    assert err.span.line == 4 and err.span.path.endswith("k.py")  # the import statement
    assert "module 'nkilib.core.ops' is not available" in err.message
    assert f"{str(layout / 'work')!r} (the kernel's folder)" in err.message
    assert "--path DIR" in (err.hint or "")


def test_a_missing_module_error_lists_every_root_in_order(layout, monkeypatch):
    env_root = layout / "env"
    env_root.mkdir()
    monkeypatch.setenv("NEURONEMU_PATH", str(env_root))
    _write(
        layout,
        {
            "work/k2.py": HEADER + "import nkilib.nothing\n\n@nki.jit\ndef k(a):\n"
            "    return nkilib.nothing.f(a)\n"
        },
    )
    with pytest.raises(KernelTypeError) as info:
        neuronemu.compile_kernel(layout / "work/k2.py", {"a": A}, import_path=[str(layout / "lib")])
    message = info.value.message
    assert "module 'nkilib.nothing' is not available" in message
    places = [
        f"{str(layout / 'work')!r} (the kernel's folder)",
        f"{str(layout / 'lib')!r} (--path)",
        f"{str(env_root)!r} (NEURONEMU_PATH)",
    ]
    at = [message.index(p) for p in places]
    assert at == sorted(at), message
    assert info.value.span.line == 4


def test_the_cli_path_option_runs_a_library_kernel(layout):
    args = ["run", str(layout / "work/k.py"), "-i", "a=float32[128,64]", "--json"]
    without = CliRunner().invoke(main, args)
    assert without.exit_code == 1, without.output
    assert "nkilib.core.ops" in without.stderr and "k.py:4:1" in without.stderr
    result = CliRunner().invoke(main, [*args, "--path", str(layout / "lib")])
    assert result.exit_code == 0, result.output
    assert '"out"' in result.stdout


def test_the_cli_path_option_is_on_asm_and_check(layout):
    asm = CliRunner().invoke(
        main,
        ["asm", str(layout / "work/k.py"), "-i", "a=float32[4,8]", "--path", str(layout / "lib")],
    )
    assert asm.exit_code == 0, asm.output
    assert "tensor_scalar" in asm.stdout
    _write(
        layout,
        {
            "work/k_ref.py": "import numpy as np\n\nCASES = [{'a': 'float32[4,8]'}]\n\n"
            "def reference(a):\n    return a * np.float32(3.0) + np.float32(0.5)\n"
        },
    )
    failed = CliRunner().invoke(main, ["check", str(layout / "work")])
    assert failed.exit_code == 1, failed.output
    passed = CliRunner().invoke(
        main, ["check", str(layout / "work"), "--path", str(layout / "lib")]
    )
    assert passed.exit_code == 0, passed.output
    assert "1 passed, 0 failed" in passed.stdout


def test_a_path_that_is_no_folder_is_a_usage_error(layout):
    result = CliRunner().invoke(
        main, ["run", str(layout / "work/k.py"), "-i", "a=float32[4,8]", "--path", "/nowhere-x"]
    )
    assert result.exit_code == 2 and "--path" in result.stderr


def test_an_import_path_that_is_no_list_of_folders_is_a_usage_error(layout):
    with pytest.raises(UsageError, match="is not a folder"):
        neuronemu.run(layout / "work/k.py", {"a": A}, import_path=[layout / "work/k.py"])
    with pytest.raises(UsageError, match="list of folders"):
        neuronemu.run(layout / "work/k.py", {"a": A}, import_path=str(layout / "lib"))
    with pytest.raises(UsageError, match="list of folders"):
        neuronemu.compile_kernel(layout / "work/k.py", {"a": A}, import_path=[3])


def test_neuronemu_path_adds_roots(layout, monkeypatch):
    monkeypatch.setenv("NEURONEMU_PATH", os.pathsep.join(["", "/nowhere-x", str(layout / "lib")]))
    res = neuronemu.run(layout / "work/k.py", {"a": A}, print_fn=lambda _: None)
    np.testing.assert_array_equal(res.outputs["out"], _expected(A))


def test_a_root_that_is_itself_a_package_resolves_by_its_name(layout):
    res = neuronemu.run(
        layout / "work/k.py", {"a": A}, import_path=[layout / "lib/nkilib"], print_fn=lambda _: None
    )
    np.testing.assert_array_equal(res.outputs["out"], _expected(A))


def test_roots_are_searched_in_order(layout, monkeypatch):
    first = _write(
        layout / "first",
        {
            "nkilib/__init__.py": "",
            "nkilib/core/__init__.py": "",
            "nkilib/core/consts.py": "SCALE = -1.0\nBIAS = 0.0\n",
            "nkilib/core/ops.py": LIBRARY["nkilib/core/ops.py"],
        },
    )
    monkeypatch.setenv("NEURONEMU_PATH", str(layout / "lib"))
    printed: list[str] = []
    neuronemu.compile_kernel(
        layout / "work/k.py", {"a": A}, import_path=[first], print_fn=printed.append
    )
    assert printed == ["-1.0"]  # --path before NEURONEMU_PATH


def test_a_symlink_in_a_path_root_pointing_out_is_refused(layout):
    host = layout / "host"
    host.mkdir()
    (host / "settings.py").write_text(f'TOKEN = "{SECRET}"\nbad = (\n')
    os.symlink(host / "settings.py", layout / "lib/nkilib/core/settings.py")
    os.symlink(host, layout / "lib/hostpkg")
    _write(
        layout,
        {
            "work/k3.py": HEADER + "from nkilib.core.settings import TOKEN\n\n"
            "@nki.jit\ndef k(a):\n    print(TOKEN)\n    return a\n",
            "work/k4.py": HEADER + "from hostpkg.settings import TOKEN\n\n"
            "@nki.jit\ndef k(a):\n    print(TOKEN)\n    return a\n",
        },
    )
    for name in ("k3.py", "k4.py"):
        result = CliRunner().invoke(
            main,
            [
                "run",
                str(layout / "work" / name),
                "-i",
                "a=float32[4,8]",
                "--path",
                str(layout / "lib"),
            ],
        )
        assert result.exit_code == 1, result.output
        assert f"{name}:4:1: error:" in result.stderr, result.stderr
        assert SECRET not in result.output + result.stderr
        assert "not a regular file inside --path" in result.stderr, result.stderr


def test_a_symlinked_module_file_out_of_a_root_names_the_root(layout):
    host = layout / "host"
    host.mkdir()
    (host / "consts.py").write_text(f'SCALE = "{SECRET}"\n')
    (layout / "lib/nkilib/core/consts.py").unlink()
    os.symlink(host / "consts.py", layout / "lib/nkilib/core/consts.py")
    printed: list[str] = []
    with pytest.raises(KernelTypeError) as info:
        neuronemu.compile_kernel(
            layout / "work/k.py", {"a": A}, import_path=[layout / "lib"], print_fn=printed.append
        )
    message = info.value.render()
    assert "is not a regular file inside --path" in message and str(layout / "lib") in message
    assert SECRET not in message + "".join(printed)


def test_relative_imports_stay_in_the_path_roots_top_package(layout):
    (layout / "lib/settings.py").write_text("TOKEN = 1\n")  # in the root, beside the package
    _write(
        layout,
        {
            "lib/nkilib/core/climb.py": "from ...settings import TOKEN\n",
            "work/k5.py": HEADER + "from nkilib.core.climb import TOKEN\n\n"
            "@nki.jit\ndef k(a):\n    print(TOKEN)\n    return a\n",
        },
    )
    with pytest.raises(KernelTypeError, match="beyond top-level package") as info:
        neuronemu.compile_kernel(
            layout / "work/k5.py", {"a": A}, import_path=[layout / "lib"], print_fn=lambda _: None
        )
    assert info.value.span.path.endswith("climb.py")


def test_modules_of_a_path_root_are_interpreted_under_the_same_budgets(layout):
    _write(
        layout,
        {
            "lib/big/__init__.py": "X = '" + "x" * 2000 + "'\n",
            "work/k6.py": HEADER + "import big\n\n@nki.jit\ndef k(a):\n"
            "    print(len(big.X))\n    return a\n",
        },
    )
    with pytest.raises(neuronemu.BudgetError, match="file_bytes"):
        neuronemu.compile_kernel(
            layout / "work/k6.py",
            {"a": A},
            import_path=[layout / "lib"],
            limits={"file_bytes": 1000},
        )


def test_simulate_takes_an_import_path(layout):
    fn = neuronemu.simulate(layout / "work/k.py", import_path=[layout / "lib"])
    np.testing.assert_array_equal(fn(A), _expected(A))


def test_sweep_takes_the_path_option_and_its_best_command_keeps_it(layout):
    args = ["sweep", str(layout / "work/k.py"), "-i", "a=float32[128,{N}]", "--param"]
    args += ["N=64,128", "-j", "1", "--json", "--path", str(layout / "lib")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ran"] == 2 and report["failed"] == 0
    assert f"--path {layout / 'lib'}" in report["best_command"]


def test_ray_ships_the_import_path_trees_with_the_kernel(layout, monkeypatch):
    # One root by --path, one by NEURONEMU_PATH (the driver's: workers may not have it).
    _write(layout / "more", {"extra/__init__.py": "def check(n):\n    assert n < 100, n\n"})
    kernel = USER_KERNEL.replace("import nkilib", "import extra\nimport nkilib", 1)
    kernel = kernel.replace("def k(a):\n", "def k(a):\n    extra.check(a.shape[1])\n")
    _write(layout, {"work/k.py": kernel})
    monkeypatch.setenv("NEURONEMU_PATH", str(layout / "more"))
    spec = sweeps.Sweep(
        str(layout / "work/k.py"),
        None,
        None,
        (("a", "float32[128,{N}]"),),
        frozenset(),
        import_path=(str(layout / "lib"),),
    )
    root, files = sweeps._files_to_ship(spec)
    trees = sweeps._path_trees_to_ship(spec)
    assert [folder for folder, _ in trees] == [str(layout / "lib"), str(layout / "more")]
    for folder in ("lib", "more"):  # only the shipped copies can be read now
        (layout / folder).rename(layout / f"{folder}-away")
    fields = {f: getattr(spec, f) for f in sweeps.Sweep.__dataclass_fields__}
    record = sweeps._ray_run(fields, root, files, {"N": 64}, trees)
    assert record["status"] == "ok", record
    failed = sweeps._ray_run(fields, root, files, {"N": 128}, trees)
    assert failed["status"] == "error", failed
    # located in the shipped copy of extra/__init__.py, named as the driver has it
    assert failed["error"]["path"] == str(layout / "more/extra/__init__.py"), failed


def test_ray_ships_the_whole_package_of_a_package_kernel(tmp_path):
    _write(
        tmp_path,
        {
            "mypkg/__init__.py": "",
            "mypkg/kernels/__init__.py": "",
            "mypkg/utils.py": "ROWS = 96\n",
            "mypkg/kernels/attn.py": HEADER + "from mypkg.utils import ROWS\n\n"
            "@nki.jit\ndef k(a):\n    assert ROWS == 96\n    return a\n",
        },
    )
    spec = sweeps.Sweep(
        str(tmp_path / "mypkg/kernels/attn.py"),
        None,
        None,
        (("a", "float32[4,{N}]"),),
        frozenset(),
    )
    root, files = sweeps._files_to_ship(spec)
    assert "mypkg/utils.py" in files and "mypkg/__init__.py" in files
    (tmp_path / "mypkg").rename(tmp_path / "away")  # only the shipped copies can be read now
    fields = {f: getattr(spec, f) for f in sweeps.Sweep.__dataclass_fields__}
    record = sweeps._ray_run(fields, root, files, {"N": 8})
    assert record["status"] == "ok", record


def test_an_error_in_a_helper_module_names_the_kernel_line_that_called_it(tmp_path):
    # A failed assert inside a library's helper (nki-library's kernel_assert) was located at
    # the helper's line alone: which line of the kernel got there was not said.
    _write(
        tmp_path,
        {
            "checks.py": "def expect(cond, msg):\n    assert cond, msg\n",
            "shapes.py": (
                "from checks import expect\n\n"
                "def rows_of(t):\n"
                "    expect(t.shape[0] <= 128, f'too many rows: {t.shape[0]}')\n"
                "    return t.shape[0]\n"
            ),
            "k.py": (
                HEADER + "from shapes import rows_of\n\n@nki.jit\ndef k(a):\n"
                "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
                "    n = rows_of(a)\n"
                "    return out\n"
            ),
        },
    )
    result = CliRunner().invoke(main, ["run", str(tmp_path / "k.py"), "-i", "a=float32[256,64]"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    # The error where it happened, then each file's line on the way out, innermost first.
    assert heads == [
        f"{tmp_path / 'checks.py'}:2:5: error: assertion failed: too many rows: 256",
        f"{tmp_path / 'shapes.py'}:4:5: note: called from here",
        f"{tmp_path / 'k.py'}:9:9: note: called from here",
    ], result.output
    assert "    n = rows_of(a)" in lines


def _failed_heads(tmp_path: Path, files: dict[str, str]) -> list[str]:
    """The unindented lines (error, notes, hint) of running k.py among `files`, which fails."""
    _write(tmp_path, files)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "k.py"), "-i", "a=float32[4,4]"])
    assert result.exit_code == 1, result.output
    return [line for line in result.output.splitlines() if not line.startswith(" ")]


def test_a_deferred_error_names_the_call_that_reached_it_this_time(tmp_path):
    # A module-level name whose value failed is an error each time it is read; the notes of
    # the first read (caught by the kernel) must not be shown for the second.
    heads = _failed_heads(
        tmp_path,
        {
            "table.py": "TABLE = [1, 2][5]\n\ndef get():\n    return TABLE\n",
            "k.py": (
                HEADER + "from table import get\n\n@nki.jit\ndef k(a):\n"
                "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
                "    try:\n"
                "        get()\n"
                "    except IndexError:\n"
                "        pass\n"
                "    n = get()\n"
                "    return out\n"
            ),
        },
    )
    notes = [h for h in heads if "note:" in h]
    assert notes == [f"{tmp_path / 'k.py'}:13:9: note: called from here"], heads


def test_calls_bouncing_between_files_show_a_bounded_number_of_notes(tmp_path):
    # Recursion through a helper in another file alternates files at every level: the error
    # shows the first calls on the way out and counts the rest, not hundreds of notes.
    heads = _failed_heads(
        tmp_path,
        {
            "bounce.py": "def bounce(f, n):\n    return f(n + 1)\n",
            "k.py": (
                HEADER + "from bounce import bounce\n\n"
                "def again(n):\n    return bounce(again, n)\n\n"
                "@nki.jit\ndef k(a):\n"
                "    again(0)\n"
                "    return a\n"
            ),
        },
    )
    assert "recursion is not allowed" in heads[0], heads
    notes = [h for h in heads if h.endswith("note: called from here")]
    assert len(notes) == errors.MAX_CALLERS_SHOWN, heads
    more = [h for h in heads if "more calls from other files" in h]
    assert len(more) == 1 and int(more[0].split()[2]) > 0, heads
