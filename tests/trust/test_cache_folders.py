"""A cache folder others can write is never used, and nothing in a cache folder can make a
run hang, exhaust memory or run another program than the file on disk.

An entry's hashes cannot tell a forged entry from a true one: anyone who can write the cache
folder can plant one that is well-formed, hashes right and parses another program. So the
caches (parsed kernels, the parser's tables, Numba's code) are used only in a folder of the
user's that no one else can write or replace (`neuronemu.host.cachedirs`). The forged entries
here are written by neuronemu itself (its own writer, given another program's AST or
tables that loop), so that these tests do not depend on the entries' names or format.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from _guard import Sandbox

import neuronemu
from neuronemu.limits import Limits

KERNEL = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scaled(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        y = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0={scale}, op1=nl.add,
                           operand1={offset})
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=y)
    return out
"""
SOURCE = KERNEL.format(scale=1.5, offset=4.75)
OTHER = KERNEL.format(scale=-2.0, offset=0.5)  # the program a forged entry holds
A = np.arange(256 * 64, dtype=np.float32).reshape(256, 64) / 7
WANT = A * np.float32(1.5) + np.float32(4.75)
FORGED = A * np.float32(-2.0) + np.float32(0.5)
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="changing a folder's owner needs root")


def _forget_parsed() -> None:
    from neuronemu.frontend import parser

    parser._AST_CACHE.clear()


def _outputs(path: Path) -> np.ndarray:
    _forget_parsed()
    return neuronemu.run(path, {"a": A}, print_fn=lambda _: None).outputs["out"]


def _entries(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def _forge(monkeypatch, folder: Path, path: Path) -> set[Path]:
    """Plant in `folder` (private while it is written) an entry for `path` holding OTHER's
    AST, with every hash right: what neuronemu writes had it parsed OTHER for SOURCE."""
    from neuronemu.frontend import lalr, parser

    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(folder))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    before = _entries(folder)
    real = lalr.parse
    with monkeypatch.context() as m:
        m.setattr(lalr, "parse", lambda text, p, limits: real(OTHER, p, limits))
        _forget_parsed()
        parser.parse_source(SOURCE, str(path))
    _forget_parsed()
    planted = _entries(folder) - before
    assert planted, "the forged entry was not written"
    return planted


@pytest.fixture
def kernel(tmp_path) -> Path:
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    return path


# -- (a) only a folder no one else can write is used -------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o720, 0o702, 0o1777])
def test_a_forged_entry_in_a_folder_others_can_write_is_not_used(
    tmp_path, monkeypatch, kernel, mode
):
    folder = tmp_path / "shared-cache"
    _forge(monkeypatch, folder, kernel)
    folder.chmod(mode)
    np.testing.assert_array_equal(_outputs(kernel), WANT)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_forged_entry_under_a_parent_others_can_write_is_not_used(
    tmp_path, monkeypatch, kernel, mode
):
    """Whoever can write a folder above the cache can put another folder in its place."""
    folder = tmp_path / "shared" / "cache"
    _forge(monkeypatch, folder, kernel)
    (tmp_path / "shared").chmod(mode)
    np.testing.assert_array_equal(_outputs(kernel), WANT)


@ROOT_ONLY
def test_a_forged_entry_in_a_folder_of_another_user_is_not_used(tmp_path, monkeypatch, kernel):
    folder = tmp_path / "theirs"
    _forge(monkeypatch, folder, kernel)
    for p in [folder, *folder.rglob("*")]:
        os.chown(p, 65534, 65534, follow_symlinks=False)
    np.testing.assert_array_equal(_outputs(kernel), WANT)


def test_an_entry_of_another_user_in_a_private_folder_is_not_used(tmp_path, monkeypatch, kernel):
    folder = tmp_path / "cache"
    planted = _forge(monkeypatch, folder, kernel)
    if os.geteuid() == 0:
        for p in planted:
            os.chown(p, 65534, 65534)
    else:  # (not root: a file others can write stands for one they could have made)
        for p in planted:
            p.chmod(0o666)
    np.testing.assert_array_equal(_outputs(kernel), WANT)


def test_a_private_folder_is_trusted_as_the_users_own_files(tmp_path, monkeypatch, kernel):
    """What the hashes cannot do: a self-consistent entry forged in the user's own 0700
    folder is used (only someone who could already edit the user's files can plant it).
    This is the boundary the README states; the shared-folder tests above are the fix."""
    folder = tmp_path / "cache"
    _forge(monkeypatch, folder, kernel)
    np.testing.assert_array_equal(_outputs(kernel), FORGED)


# -- (c) an entry is bound to its key: the source, its path and the limits ----------------------


def test_an_entry_made_under_other_limits_is_a_miss(tmp_path, monkeypatch):
    """The same text under a smaller int_bits budget must be refused, not read back from the
    entry parsed under a larger one (same source hash, another key)."""
    from neuronemu.errors import NeuronEmuError
    from neuronemu.frontend import lalr, parser

    folder = tmp_path / "cache"
    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(folder))
    text = "X = " + "9" * 3000 + "\n"  # ~10,000 bits: over the default 8,192
    big = Limits(int_bits=20_000)
    _forget_parsed()
    parser.parse_source(text, "k.py", big)
    theirs = _entries(folder)
    # The name the default limits' entry has: written by a parse stubbed to succeed.
    real = lalr.parse
    with monkeypatch.context() as m:
        m.setattr(lalr, "parse", lambda t, p, limits: real(t, p, big))
        _forget_parsed()
        parser.parse_source(text, "k.py")
    (mine,) = _entries(folder) - theirs
    # The entry under the larger budget: the same AST, so the same size (tables are larger).
    (entry,) = (p for p in theirs if p.stat().st_size == mine.stat().st_size)
    assert entry.read_bytes() != mine.read_bytes()
    mine.write_bytes(entry.read_bytes())
    _forget_parsed()
    with pytest.raises(NeuronEmuError, match="int_bits"):
        parser.parse_source(text, "k.py")


# -- (b) links and special files are never followed or opened -----------------------------------


def test_a_link_to_a_forged_entry_is_not_followed(tmp_path, monkeypatch, kernel):
    folder = tmp_path / "cache"
    planted = _forge(monkeypatch, folder, kernel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    for p in planted:
        target = elsewhere / p.name
        p.rename(target)
        p.symlink_to(target)
    np.testing.assert_array_equal(_outputs(kernel), WANT)


def _box_run(tmp_path: Path) -> tuple[Sandbox, tuple[str, ...]]:
    box = Sandbox(tmp_path / "box", cache_mode="env", warm_parser=False)  # (its own entries)
    box.write("k.py", SOURCE)
    box.write("r.py", "def reference(a):\n    return a * 1.5 + 4.75\n")
    args = ("run", "k.py", "-i", "a=float32[256,64]", "--ref", "r.py:reference")
    first = box.run(*args)
    assert first.returncode == 0, first.describe()
    return box, args


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero", "link-to-fifo", "link-loop"])
def test_special_files_in_the_cache_neither_block_nor_exhaust_memory(tmp_path, kind):
    """Every cache file (the AST entry and the parser's tables) replaced by a FIFO (reading
    one blocks until someone writes it) or by a link to an endless device."""
    box, args = _box_run(tmp_path)
    files = _entries(box.cache_root)
    assert files, f"nothing was cached under {box.cache_root}"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for p in files:
        p.unlink()
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "link-to-dev-zero":
            p.symlink_to("/dev/zero")
        elif kind == "link-to-fifo":
            p.symlink_to(fifo)
        else:
            p.symlink_to(p)
    again = box.run(*args)
    again.assert_confined()
    assert again.returncode == 0, again.describe()
    # The entries were made again, as regular files in place of what was there.
    assert all(stat.S_ISREG(p.lstat().st_mode) for p in files), again.describe()


# -- parser tables that loop ---------------------------------------------------------------------


def _forge_tables(monkeypatch, folder: Path, kind: str) -> None:
    """Plant (hashes right, every state and rule where Lark expects one) parser tables whose
    start state reduces forever: by the empty rule, growing the stack (`grow`), or by a
    one-symbol rule and back (`cycle`)."""
    from neuronemu.frontend import cache, lalr

    monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(folder))
    made: dict = {}
    with monkeypatch.context() as m:
        m.setattr(cache, "load_tables", lambda key: None)
        m.setattr(cache, "store_tables", lambda key, tables: made.update(key=key, tables=tables))
        lalr._parser.cache_clear()
        lalr._parser()
    lalr._parser.cache_clear()
    tables = made["tables"]
    memo, table = tables["memo"], tables["data"]["parser"]["parser"]
    names = table["tokens"]
    ids = {name: i for i, name in names.items()}
    rules = {i: r for i, r in memo.items() if r.get("__type__") == "Rule"}
    nonterminals = {r["origin"]["name"] for r in rules.values()}
    terminals = [i for i, n in names.items() if n not in nonterminals]
    states = table["states"]
    start = table["start_states"]["start"]
    if kind == "grow":
        (rule,) = (i for i, r in rules.items() if not r["expansion"])
        origin = ids[rules[rule]["origin"]["name"]]
        states[start] = {t: (1, {"@": rule}) for t in terminals}
        states[start][origin] = (0, start)
    else:
        # A rule that hands its one child on (`?rule`): the loop builds nothing.
        rule = next(
            i for i, r in rules.items() if len(r["expansion"]) == 1 and r["options"]["expand1"]
        )
        origin = ids[rules[rule]["origin"]["name"]]
        loop = next(s for s in states if s != start)
        states[start] = {t: (0, loop) for t in terminals}
        states[start][origin] = (0, loop)
        states[loop] = {t: (1, {"@": rule}) for t in terminals}
    cache.store_tables(made["key"], tables)


@pytest.mark.parametrize("kind", ["grow", "cycle"])
def test_parser_tables_that_loop_do_not_hang(tmp_path, monkeypatch, kind):
    box = Sandbox(tmp_path / "box", cache_mode="env", warm_parser=False)  # (its own entries)
    box.write("k.py", SOURCE)
    box.write("r.py", "def reference(a):\n    return a * 1.5 + 4.75\n")
    try:
        _forge_tables(monkeypatch, box.cache_root, kind)
    finally:
        from neuronemu.frontend import lalr

        lalr._parser.cache_clear()
    assert _entries(box.cache_root), "the forged tables were not written"
    out = box.run("run", "k.py", "-i", "a=float32[256,64]", "--ref", "r.py:reference")
    out.assert_confined()
    assert out.returncode == 0, out.describe()


def test_loaded_tables_get_the_options_the_built_parser_has():
    """Options are never read from the cache: loaded tables get `lalr._OPTIONS`, which must
    be what the parser built from the grammar serializes."""
    from lark.lark import LarkOptions

    from neuronemu.frontend import lalr
    from neuronemu.frontend.to_ast import ToAst

    built = lalr._build(ToAst("<string>"), lalr._Indenter()).options.serialize(None)
    forced = LarkOptions(dict(lalr._OPTIONS)).serialize(None)
    for options in (built, forced):
        del options["postlex"], options["transformer"]
    assert forced == built
