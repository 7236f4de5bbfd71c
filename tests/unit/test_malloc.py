"""The command's malloc setting (neuronemu.host.malloc): arrays of a tile's size, made and freed
in turn, reuse the heap's pages instead of faulting fresh ones in each time; the command
sets it, a host's process is left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from neuronemu import cli
from neuronemu.host import malloc

# 100 rounds of two arrays of 512 KiB (128 x 1024 fp32 tiles) and their sum, all freed at
# the round's end (an instruction's operands converted and its result); the minor page
# faults that takes.
FAULTS = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from neuronemu.host import malloc
    if sys.argv[1] == "set":
        assert malloc.keep_freed_arrays()
    np.ones(2**17, np.float32)  # (the heap's first pages)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        a = np.ones(2**17, np.float32)
        b = np.ones(2**17, np.float32)
        c = a + b
        del a, b, c
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_arrays_of_a_tiles_size_are_reused_not_faulted_in_again():
    pages = 2**19 // 4096  # per array
    assert _faults("default") >= 100 * 2 * pages  # (glibc as it starts: pages afresh)
    assert _faults("set") < 10 * pages


def test_only_the_command_as_its_own_process_sets_it(monkeypatch):
    called: list[int] = []
    monkeypatch.setattr(malloc, "keep_freed_arrays", lambda: called.append(1) or True)
    monkeypatch.setattr(cli, "main", lambda: None)
    monkeypatch.setattr(cli, "_OWN_PROCESS", False)
    from neuronemu.jit import worker as jit_worker

    monkeypatch.setattr(jit_worker, "ENABLED", False)
    cli.entry()
    assert called == [1]
