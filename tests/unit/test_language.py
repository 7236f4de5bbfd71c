"""Trace-time Python beyond the basics: classes, dataclasses, enums, helper modules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import KernelSyntaxError, KernelTypeError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n"


def traced(kernel_file, body: str) -> list[str]:
    """Run a kernel that prints trace-time values; return what it printed."""
    printed: list[str] = []
    neuronemu.compile_kernel(
        kernel_file(HEADER + body), {"a": np.zeros((2, 2), np.float32)}, print_fn=printed.append
    )
    return printed


def test_plain_class_with_init_methods_and_properties(kernel_file):
    out = traced(
        kernel_file,
        """
class Tiler(nl.NKIObject):
    LIMIT = 128

    def __init__(self, n, tile=64):
        self.n = n
        self.tile = min(tile, self.LIMIT)

    def count(self):
        return (self.n + self.tile - 1) // self.tile

    @property
    def last(self):
        return self.n - (self.count() - 1) * self.tile

    @staticmethod
    def double(x):
        return 2 * x

    @classmethod
    def make(cls, n):
        return cls(n, tile=32)

@nki.jit
def k(a):
    t = Tiler(300, tile=256)
    u = Tiler.make(70)
    print(t.tile, t.count(), t.last, Tiler.double(4), u.tile, u.count(), isinstance(u, Tiler))
    return a
""",
    )
    assert out == ["128 3 44 8 32 3 True"]


def test_dataclass_defaults_factory_post_init_and_frozen(kernel_file):
    out = traced(
        kernel_file,
        """
from dataclasses import dataclass, field

@dataclass
class Config:
    rows: int
    cols: int = 512
    tags: list = field(default_factory=list)

    def __post_init__(self):
        self.size = self.rows * self.cols

@dataclass(frozen=True)
class Point:
    x: int = 0
    y: int = 0

@nki.jit
def k(a):
    c = Config(4)
    c.tags.append("t")
    d = Config(2, cols=8)
    print(c.size, d.size, c.tags, d.tags, Point(1, 2) == Point(1, 2), Point(y=3))
    return a
""",
    )
    assert out == ["2048 16 ['t'] [] True Point(x=0, y=3)"]


def test_frozen_dataclass_rejects_assignment(kernel_file):
    with pytest.raises(KernelTypeError, match="FrozenInstanceError: cannot assign to field 'x'"):
        traced(
            kernel_file,
            """
from dataclasses import dataclass

@dataclass(frozen=True)
class P:
    x: int = 0

@nki.jit
def k(a):
    p = P()
    p.x = 3
    return a
""",
        )


def test_enum_members_values_and_lookup(kernel_file):
    out = traced(
        kernel_file,
        """
from enum import Enum

class Mode(Enum):
    FAST = "fast"
    EXACT = "exact"

@nki.jit
def k(a, mode="exact"):
    m = Mode(mode)
    print(m is Mode.EXACT, m.name, Mode.FAST.value, m == Mode.FAST)
    return a
""",
    )
    assert out == ["True EXACT fast False"]


def test_metaclass_is_rejected(kernel_file):
    with pytest.raises(KernelSyntaxError, match=r"class keywords \(metaclass=...\)"):
        traced(
            kernel_file,
            """
class M(metaclass=type):
    pass

@nki.jit
def k(a):
    return M
""",
        )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_sibling_module_and_relative_imports(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/consts.py": "SCALE = 3\n",
            "pkg/helpers.py": "from .consts import SCALE\n\ndef scaled(x):\n    return x * SCALE\n",
            "pkg/kernel.py": HEADER + "from . import helpers\nfrom .helpers import scaled\n"
            "import sibling\n\n@nki.jit\ndef k(a):\n"
            "    print(helpers.scaled(2), scaled(5), sibling.twice(7))\n"
            "    return a\n",
            "pkg/sibling.py": "def twice(x):\n    return 2 * x\n",
        },
    )
    printed: list[str] = []
    neuronemu.compile_kernel(
        tmp_path / "pkg" / "kernel.py", {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append
    )
    assert printed == ["6 15 14"]


def test_missing_helper_module_errors_where_used(tmp_path):
    _write(
        tmp_path,
        {"kernel.py": HEADER + "import nowhere\n\n@nki.jit\ndef k(a):\n    return nowhere.f(a)\n"},
    )
    with pytest.raises(KernelTypeError, match="module 'nowhere' is not available") as info:
        neuronemu.compile_kernel(tmp_path / "kernel.py", {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span.line == 4  # the import line


def test_helper_module_errors_point_into_the_helper(tmp_path):
    _write(
        tmp_path,
        {
            "helper.py": "def bad(x):\n    return x // 0\n",
            "kernel.py": HEADER + "from helper import bad\n\n@nki.jit\ndef k(a):\n"
            "    bad(1)\n    return a\n",
        },
    )
    with pytest.raises(KernelTypeError, match="division by zero") as info:
        neuronemu.compile_kernel(tmp_path / "kernel.py", {"a": np.zeros((1, 1), np.float32)})
    assert info.value.span.path.endswith("helper.py") and info.value.span.line == 2


def test_dynamic_range_with_known_bounds_unrolls(kernel_file):
    x = np.random.default_rng(2).standard_normal((3, 128, 8)).astype(np.float32)
    path = kernel_file(
        HEADER
        + """
@nki.jit
def k(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.dynamic_range(3):
        nl.store(out[i], value=nl.multiply(nl.load(x[i]), 2.0))
    return out
"""
    )
    np.testing.assert_array_equal(neuronemu.run(path, {"x": x}).outputs["out"], x * np.float32(2.0))


def test_dynamic_range_with_a_tensor_bound_is_a_located_error(kernel_file):
    path = kernel_file(
        HEADER
        + """
@nki.jit
def k(x):
    for i in nl.dynamic_range(x):
        pass
    return x
"""
    )
    with pytest.raises(KernelTypeError, match="takes ints or registers") as info:
        neuronemu.run(path, {"x": np.zeros((2, 2), np.float32)})
    assert info.value.span.line == 7


def test_nki_object_dataclasses_take_plain_class_attributes_as_fields(kernel_file):
    out = traced(
        kernel_file,
        """
from dataclasses import dataclass

@dataclass
class Section(nl.NKIObject):
    index = None
    offset = 0
    width: int = 8

@nki.jit
def k(a):
    s = Section(index=3, offset=128)
    print(s.index, s.offset, s.width, Section().offset)
    return a
""",
    )
    assert out == ["3 128 8 0"]


def test_os_environ_and_sys_stderr_at_trace_time(kernel_file, monkeypatch):
    monkeypatch.setenv("NEURON_TEST_FLAG", "on")
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    out = traced(
        kernel_file,
        """
import os
import sys

@nki.jit
def k(a):
    print(os.environ.get("NEURON_TEST_FLAG"), os.getenv("NEURON_NOT_SET", "off"),
          os.environ.get("SECRET_TOKEN"), "HOME" in os.environ, file=sys.stderr)
    return a
""",
    )
    # The Neuron tools' settings are visible; nothing else of the host's environment is.
    assert out == ["on off None False"]


def test_mx_dtypes_can_be_named_and_allocated(kernel_file):
    path = kernel_file(
        HEADER
        + """
@nki.jit
def k(a):
    assert a.dtype != nl.float8_e4m3fn_x4
    t = nl.ndarray((128, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    assert t.dtype == nl.float8_e4m3fn_x4 and t.dtype != nl.float8_e5m2_x4
    assert nl.float8_e8m0fnu != nl.uint8
    return a
"""
    )
    neuronemu.run(path, {"a": np.zeros((2, 2), np.float32)})


def test_nki_object_plain_attributes_stay_class_attributes(kernel_file):
    out = traced(
        kernel_file,
        """
from dataclasses import dataclass

@dataclass
class Cfg(nl.NKIObject):
    SCALE = 2
    n: int = 1

@nki.jit
def k(a):
    c = Cfg(3)
    print(Cfg.SCALE, c.n, c.SCALE)
    return a
""",
    )
    assert out == ["2 3 2"]
