"""Shared test setup: Hypothesis profiles (dev, ci, thorough) and the repository paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Parsed ASTs are cached on disk; tests use a cache of their own, not the user's.
os.environ.setdefault("NEURONEMU_CACHE_DIR", tempfile.mkdtemp(prefix="neuronemu-test-cache-"))

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="large shapes: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def kernel_file(tmp_path: Path):
    """Write kernel source to a file and return its path."""

    def write(source: str, name: str = "kernel.py") -> str:
        path = tmp_path / name
        path.write_text(source)
        return str(path)

    return write
