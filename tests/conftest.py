"""Shared test setup: Hypothesis profiles (dev, ci, thorough), the fuzz seed, the repository
paths, and the host-effect guard `_host_guard` (loaded by path: putting `tests/` on sys.path
would let `tests/isa` shadow the `isa` package)."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Parsed ASTs are cached on disk; tests use a cache of their own, not the user's.
os.environ.setdefault("NEURONEMU_CACHE_DIR", tempfile.mkdtemp(prefix="neuronemu-test-cache-"))
# The scheduler's compiled code is shared by every process the tests start (sandboxed CLI
# runs get a fresh HOME, which would otherwise compile it again, ~3 s each).
os.environ.setdefault(
    "NUMBA_CACHE_DIR",
    os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "neuronemu",
        "numba",
    ),
)

# The passes built ahead of time (neuronemu.jit.ahead) are left to tests/unit/test_ahead.py:
# a module the user built would otherwise change which code runs here, as a fresh machine
# (CI) has none.
os.environ.setdefault("NEURONEMU_AHEAD", "0")

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"


def load_helper(name: str):
    """`tests/<name>.py` as module `name` (tests import it by that name afterwards)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


load_helper("_host_guard")
load_helper("_iterations")

# Every run with values works out the tiles each instruction touches from the access rows
# and from the views, and fails where they differ (neuronemu.sim.functional.CROSS_CHECK).
from neuronemu.sim import functional as _functional  # noqa: E402

_functional.CROSS_CHECK = True

# The fuzz tests draw from a fresh random seed each session (CI included), printed in the
# header and again after failures; NEURONEMU_FUZZ_SEED=N replays a session's examples (the
# tests read it from the environment, as do forked examples).
FUZZ_SEED = int(os.environ.get("NEURONEMU_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
os.environ["NEURONEMU_FUZZ_SEED"] = str(FUZZ_SEED)

settings.register_profile("dev", max_examples=30, deadline=None)
# CI's examples are derandomized (the same each run) and bounded: 15 per test kept the suite
# within its 4 minutes on 2 cores (25 took a third more CPU in the tests that take the
# profile's count); HYPOTHESIS_PROFILE=thorough draws 500, benches/fuzz.py far more.
settings.register_profile(
    "ci",
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_report_header(config: pytest.Config) -> str:
    return f"neuronemu fuzz seed: {FUZZ_SEED} (replay with NEURONEMU_FUZZ_SEED={FUZZ_SEED})"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    terminalreporter.write_line(
        f"neuronemu fuzz seed: {FUZZ_SEED}; to replay the fuzz tests' examples: "
        f"NEURONEMU_FUZZ_SEED={FUZZ_SEED} python -m pytest tests/property"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run tests marked slow")
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/conformance/golden/cycles.json with today's cycles (say why in "
        "the commit message)",
    )


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
