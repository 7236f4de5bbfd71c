"""A run lets the cyclic GC collect only its youngest generation (the program it builds lives
to the end; walking it again found next to nothing) and leaves the thresholds as it found
them, also when the run fails."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import neuronemu
from neuronemu import builder
from neuronemu.errors import NeuronEmuError

KERNEL = (
    "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
    "@nki.jit\n"
    "def k(a):\n"
    "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=t, src=a)\n"
    "    nisa.dma_copy(dst=out, src=t)\n"
    "    return out\n"
)


def test_a_run_collects_the_youngest_generation_only(kernel_file, monkeypatch):
    seen = []
    finish = builder.Builder.finish

    def finishing(self, *args, **kwargs):
        seen.append(gc.get_threshold())
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(builder.Builder, "finish", finishing)
    before = gc.get_threshold()
    a = np.ones((128, 64), np.float32)
    out = neuronemu.run(kernel_file(KERNEL), {"a": a}).outputs["out"]
    np.testing.assert_array_equal(out, a)
    ((young, middle, old),) = seen
    assert 0 < young and middle >= 2**30 and old >= 2**30
    assert gc.get_threshold() == before


def test_the_thresholds_come_back_when_the_run_fails(kernel_file):
    before = gc.get_threshold()
    with pytest.raises(NeuronEmuError):
        neuronemu.run(kernel_file(KERNEL.replace("src=a)", "src=b)")), {"a": np.ones((128, 64))})
    assert gc.get_threshold() == before
