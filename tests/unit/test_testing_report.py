"""A failing `assert_kernel_matches` reads as the test's line and the check's report: none of
neuronemu's own source lines (it showed about 45 of them first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_failing_kernel_test_shows_the_report_not_neuronemus_source(tmp_path):
    (tmp_path / "test_k.py").write_text(
        "import numpy as np\n"
        "from neuronemu.testing import assert_kernel_matches\n\n\n"
        "def wrong(a, b):\n    return a - b\n\n\n"
        "def test_add():\n"
        f"    assert_kernel_matches({str(ROOT / 'kernels' / 'tensor_add.py')!r}, wrong,\n"
        "                          {'a': 'float32[128,512]', 'b': 'float32[128,512]'},\n"
        "                          explain=False)\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 1
    assert "outputs differ from the reference" in result.stdout
    assert "neuronemu/testing.py" not in result.stdout, result.stdout
    assert "test_k.py:10" in result.stdout


def test_a_falsifying_array_prints_as_the_array(tmp_path):
    # It printed as the calls that made it: `build(((1, 1), [0.0]))`.
    (tmp_path / "test_h.py").write_text(
        "from hypothesis import given, settings\n"
        "from neuronemu.strategies import arrays, shapes\n\n\n"
        "@settings(max_examples=5, database=None)\n"
        "@given(x=arrays('bfloat16', shapes()))\n"
        "def test_x(x):\n"
        "    assert x.size < 0\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 1
    assert "x=array([[" in result.stdout and "build(" not in result.stdout, result.stdout
