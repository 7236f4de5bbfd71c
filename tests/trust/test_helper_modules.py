"""Helper modules come only from the kernel's own tree: a regular file inside the kernel's
folder (or the top folder of the package it is in), reached through no link out of it.
A kernel from a pull request once read host files by a symlink next to it (`creds.py ->
~/.aws/credentials`: the error quoted the secret line; `envleak.py -> /proc/self/environ`:
the syntax error printed the environment) and by climbing with dots (`from ...hostdir.
settings import TOKEN`: printed, exit 0)."""

from __future__ import annotations

import os

import pytest
from _guard import Sandbox

SECRET = "AKIA-NEURONEMU-TEST-SECRET-7f3a"
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n"
INPUT = ("-i", "a=float32[4,4]")


def kernel(imports: str, use: str) -> str:
    return f"{HEADER}{imports}\n\n@nki.jit\ndef k(a):\n    print({use})\n    return a\n"


@pytest.fixture
def box(tmp_path):
    box = Sandbox(tmp_path)
    host = tmp_path / "host"  # outside the kernel's folder, as a home directory would be
    host.mkdir()
    (host / "credentials").write_text(f'aws_secret_access_key = "{SECRET}"\nx = (\n')
    (host / "settings.py").write_text(f'TOKEN = "{SECRET}"\n')
    box.host = host
    return box


def assert_no_leak(out) -> None:
    assert SECRET not in out.stdout + out.stderr, out.describe()


def test_a_symlinked_helper_pointing_out_of_the_folder_is_refused(box):
    os.symlink(box.host / "credentials", box.work / "creds.py")
    box.write("k.py", kernel("from creds import aws_secret_access_key", "aws_secret_access_key"))
    out = box.run("run", "k.py", *INPUT)
    out.assert_located("k.py")
    assert "not a regular file inside the kernel's folder" in out.first_line, out.describe()
    assert_no_leak(out)


def test_a_symlink_to_the_process_environment_is_refused_without_printing_it(box, monkeypatch):
    os.symlink("/proc/self/environ", box.work / "envleak.py")
    box.write("k.py", kernel("import envleak", "envleak.x"))
    out = box.run("run", "k.py", *INPUT)
    out.assert_located("k.py")
    assert "HOME=" not in out.stdout + out.stderr and "PATH=" not in out.stderr, out.describe()


def test_a_symlinked_folder_leading_out_is_refused(box):
    os.symlink(box.host, box.work / "pkg")
    box.write("k.py", kernel("from pkg.settings import TOKEN", "TOKEN"))
    out = box.run("run", "k.py", *INPUT)
    out.assert_located("k.py")
    assert_no_leak(out)


@pytest.mark.parametrize("dots", [2, 3, 40])
def test_a_relative_import_climbing_out_of_the_kernels_folder_is_located(box, dots):
    # the kernel two folders below tmp_path/; host/ is a sibling of work/
    (box.work / "sub").mkdir()
    box.write("sub/k.py", kernel(f"from {'.' * dots}host.settings import TOKEN", "TOKEN"))
    out = box.run("run", "sub/k.py", *INPUT)
    out.assert_located("k.py")
    assert "beyond top-level package" in out.first_line, out.describe()
    assert_no_leak(out)


def test_helpers_inside_the_folder_still_import_through_links_that_stay_inside(box):
    box.write("real_helper.py", "VALUE = 'helper-ok'\n")
    os.symlink("real_helper.py", box.work / "helper.py")
    box.write("k.py", kernel("from helper import VALUE", "VALUE"))
    out = box.run("run", "k.py", *INPUT)
    assert out.returncode == 0, out.describe()
    assert "helper-ok" in out.stdout


def test_a_package_kernel_climbs_to_its_top_package_but_no_further(box):
    for folder in ("lib", "lib/core", "lib/core/ops"):
        (box.work / folder).mkdir()
        box.write(f"{folder}/__init__.py", "")
    box.write("lib/utils.py", "VALUE = 'package-ok'\n")
    box.write("settings.py", f'TOKEN = "{SECRET}"\n')  # beside the top package: not in it
    box.write("lib/core/ops/k.py", kernel("from ...utils import VALUE", "VALUE"))
    out = box.run("run", "lib/core/ops/k.py", *INPUT)
    assert out.returncode == 0, out.describe()
    assert "package-ok" in out.stdout
    box.write("lib/core/ops/k2.py", kernel("from ....settings import TOKEN", "TOKEN"))
    out = box.run("run", "lib/core/ops/k2.py", *INPUT)
    out.assert_located("k2.py")
    assert_no_leak(out)
