"""Helpers for the timing tests: run a small kernel body in timing-only mode on a target; make
`_timing_testing.py` importable under importlib mode."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import neuronemu

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from _timing_testing import HEADER  # noqa: E402


@pytest.fixture
def timed(kernel_file):
    """timed(body, inputs, target) -> Result of `body` (a kernel `k` after the imports)."""

    def run(body: str, inputs: dict[str, np.ndarray] | None = None, target: str = "trn2"):
        path = kernel_file(HEADER + body)
        inputs = inputs if inputs is not None else {"a": np.zeros((1, 1), np.float32)}
        return neuronemu.run(path, inputs, target=target, timing_only=True)

    return run
