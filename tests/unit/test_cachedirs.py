"""The cache folder policy: a folder is used only if it is the user's and no one else can
write it or a folder above it; files in it are read only if regular, the user's and small."""

from __future__ import annotations

import os
import threading

import pytest

from neuronemu.host.cachedirs import private_dir, read_private

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="changing an owner needs root")


def test_a_missing_folder_is_made_private_with_its_missing_parents(tmp_path):
    folder = tmp_path / "a" / "b" / "c"
    assert private_dir(folder, create=True) == str(folder)
    for p in (tmp_path / "a", tmp_path / "a" / "b", folder):
        assert p.stat().st_mode & 0o777 == 0o700, p


def test_a_missing_folder_is_not_made_unless_asked(tmp_path):
    assert private_dir(tmp_path / "absent") is None
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o730, 0o703, 0o1777])
def test_a_folder_others_can_write_is_refused(tmp_path, mode):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    assert private_dir(folder) is None
    assert private_dir(folder, create=True) is None


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_folder_under_one_others_can_write_is_refused(tmp_path, mode):
    folder = tmp_path / "shared" / "mine"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "shared").chmod(mode)
    assert private_dir(folder) is None


def test_a_folder_under_a_sticky_one_is_accepted(tmp_path):
    """As in /tmp: others may add to a sticky folder but not move what is ours."""
    folder = tmp_path / "sticky" / "mine"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "sticky").chmod(0o1777)
    assert private_dir(folder) == str(folder)


def test_a_link_is_judged_by_what_it_names_and_answered_by_its_real_path(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    assert private_dir(tmp_path / "link") == str(mine)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "to-shared").symlink_to(shared)
    assert private_dir(tmp_path / "to-shared") is None


def test_a_file_is_not_a_folder(tmp_path):
    (tmp_path / "file").write_text("")
    assert private_dir(tmp_path / "file") is None
    assert private_dir(tmp_path / "file", create=True) is None


@ROOT_ONLY
def test_a_folder_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    assert private_dir(folder) is None


@ROOT_ONLY
def test_a_folder_under_one_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "theirs" / "mine"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(tmp_path / "theirs", 65534, 65534)
    assert private_dir(folder) is None


def test_a_regular_file_of_the_user_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"data")
    assert read_private(tmp_path / "f", 4) == b"data"
    assert read_private(tmp_path / "f", 3) is None  # over the bound


def test_links_fifos_and_devices_are_not_read(tmp_path):
    (tmp_path / "f").write_bytes(b"data")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    done: list[object] = []
    reader = threading.Thread(
        target=lambda: done.extend(
            read_private(tmp_path / n, 1 << 20) for n in ("link", "zero", "fifo")
        ),
        daemon=True,
    )
    reader.start()
    reader.join(10)
    assert done == [None, None, None]
    assert read_private("/dev/null", 1 << 20) is None
    assert read_private(tmp_path, 1 << 20) is None


def test_a_file_others_can_write_is_not_read(tmp_path):
    (tmp_path / "f").write_bytes(b"data")
    (tmp_path / "f").chmod(0o666)
    assert read_private(tmp_path / "f", 4) is None


@ROOT_ONLY
def test_a_file_of_another_user_is_not_read(tmp_path):
    (tmp_path / "f").write_bytes(b"data")
    os.chown(tmp_path / "f", 65534, 65534)
    assert read_private(tmp_path / "f", 4) is None


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no Numba cache")
@pytest.mark.parametrize("where", ["private", "shared", "under-shared"])
def test_numba_caches_only_in_a_folder_no_one_else_can_write(tmp_path, monkeypatch, where):
    import numba

    from neuronemu.jit import compiled as _jit

    folder = tmp_path / "shared" / "numba" if where == "under-shared" else tmp_path / where
    folder.mkdir(parents=True, mode=0o700)
    if where == "shared":
        folder.chmod(0o777)
    if where == "under-shared":
        (tmp_path / "shared").chmod(0o777)
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(folder))

    def add(a, b):
        return a + b

    cached = type(_jit.njit(add)._cache).__name__ != "NullCache"
    assert cached == (where == "private")
