"""Held-out attacks on issue 38, second set (written apart from the issue's list, to judge
it): files neuronemu names itself, `.nasm` programs, numeric command-line values, and
`migrate`'s reference file. Each broke a promise before (a host file outside the kernel's
folder overwritten, a budget that did not apply, an internal error or a traceback); each
must now end in a located or usage error within 10 s and 1 GiB, writing nothing on the host
(see `_guard.py`), or, where the command succeeds, write only what it says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _guard import Sandbox
from test_host_files import OLD_KERNEL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


# --- F1: an output neuronemu names itself ---------------------------------------------------

VICTIM = "the host's own file\n"


def _planted(box: Sandbox, kind: str) -> Path:
    """`pr/old.py` beside a planted `pr/old_migrated.py` of `kind`; the file it may lead to,
    `victim.txt`, lies outside `pr/`."""
    box.write("pr/old.py", OLD_KERNEL)
    victim = box.write("victim.txt", VICTIM)
    port = box.work / "pr" / "old_migrated.py"
    if kind == "link-out":
        os.symlink("../victim.txt", port)
    elif kind == "link-in":
        box.write("pr/mine.py", VICTIM)
        os.symlink("mine.py", port)
    elif kind == "dangling-link":
        os.symlink("../made_by_the_port.py", port)
    elif kind == "fifo":
        os.mkfifo(port)
    elif kind == "folder":
        port.mkdir()
    return victim


@pytest.mark.parametrize("kind", ["link-out", "link-in", "dangling-link", "fifo", "folder"])
def test_the_default_port_is_never_written_through_what_is_planted_there(box, kind):
    """`old_migrated.py -> ../victim.txt` beside the kernel (a pull request can add it): the
    port overwrote the file outside the folder, exit 0. A link of that name (even one within
    the folder), a FIFO or a folder is refused before either kernel runs."""
    _planted(box, kind)
    out = box.run("migrate", "pr/old.py", "--no-run")
    out.assert_usage()
    assert out.first_line.startswith("error: the port 'pr/old_migrated.py': cannot write it ("), (
        out.describe()
    )
    if "link" in kind:
        assert "it is a link" in out.first_line, out.describe()
    assert (box.work / "victim.txt").read_text() == VICTIM
    assert not (box.work / "made_by_the_port.py").exists()


def test_the_default_port_replaces_a_hard_link_without_writing_through_it(box):
    """A regular file of the default name is replaced by a new file, not opened and
    truncated: a hard link there to a file elsewhere leaves that file as it was."""
    victim = _planted(box, "none")
    port = box.work / "pr" / "old_migrated.py"
    os.link(victim, port)
    out = box.run("migrate", "pr/old.py", "--no-run")
    assert out.returncode == 0 and "internal error" not in out.stderr, out.describe()
    assert victim.read_text() == VICTIM
    assert "import nki" in port.read_text() and not port.is_symlink()
    assert sorted(p.name for p in port.parent.iterdir()) == ["old.py", "old_migrated.py"]
    assert out.changed_files == ["work/pr/old_migrated.py"], out.describe()


def test_a_port_named_with_o_is_written_where_the_link_leads(box):
    """The user's own name is written as the shell's `>` writes it, through a link."""
    victim = _planted(box, "none")
    os.symlink("victim.txt", box.work / "named.py")
    out = box.run("migrate", "pr/old.py", "--no-run", "-o", "named.py")
    assert out.returncode == 0, out.describe()
    assert (box.work / "named.py").is_symlink() and "import nki" in victim.read_text()


# --- F9: migrate imports <name>_ref.py ----------------------------------------------------


def test_migrate_help_says_the_reference_file_runs_as_host_python(box):
    out = box.run("migrate", "--help")
    assert out.returncode == 0, out.describe()
    text = " ".join(out.stdout.split())
    assert "<name>_ref.py is trusted code" in text and "run as host Python" in text, text


def test_the_trust_docs_name_migrate_among_the_commands_that_run_references():
    text = (ROOT / "docs" / "trust.md").read_text(encoding="utf-8")
    bullet = text.split("**References are trusted code.**", 1)[1].split("\n- **", 1)[0]
    assert "neuronemu migrate" in bullet and "neuronemu check" in bullet, bullet
