"""Shared by the timing tests: the validation tolerance of reference/neuroncore.md section D3."""

from __future__ import annotations

from pathlib import Path

BLOCKED = Path(__file__).resolve().parent / "matmul_blocked.py"  # a blocked matmul kernel
KERNELS = Path(__file__).resolve().parents[2] / "kernels"
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

TOLERANCE = 0.15  # issue 6: published figures reproduced within +-15%


def within(modelled: float, published: float, tolerance: float = TOLERANCE) -> bool:
    """The emulator's figure is within +-tolerance of the published one."""
    return abs(modelled - published) <= tolerance * published
