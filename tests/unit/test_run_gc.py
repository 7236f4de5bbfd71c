"""A run lets the cyclic GC collect only its youngest generation (the program it builds lives
to the end; walking it again found next to nothing), runs the passes that make what lives on
without collections (freezing what they made until the run returns), and leaves the GC as
it found it, also when the run fails or the host froze objects itself."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

import numpy as np
import pytest

import neuronemu
from neuronemu.build import allocator, builder
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


def _finish_sees(monkeypatch) -> list[tuple[bool, int]]:
    """(GC on?, objects frozen) as each Builder.finish starts (neuronemu.host.gcpolicy.quiet)."""
    seen: list[tuple[bool, int]] = []
    finish = builder.Builder.finish

    def finishing(self, *args, **kwargs):
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(builder.Builder, "finish", finishing)
    return seen


def test_allocation_runs_without_collections_and_what_it_made_is_unfrozen_after(
    kernel_file, monkeypatch
):
    from neuronemu.host import gcpolicy

    # (a quiet pass wraps finish itself: the patch below sits outside it, so look inside)
    inside: list[tuple[bool, int]] = []
    allocate = allocator.allocate

    def allocating(*args, **kwargs):
        inside.append((gc.isenabled(), gc.get_freeze_count()))
        return allocate(*args, **kwargs)

    # (the builder's plan, `allocate_planned`, places by this one at this size)
    monkeypatch.setattr(allocator, "allocate", allocating)
    monkeypatch.setattr(gcpolicy, "QUIET_ABOVE", 0)  # (as for a program past it)
    gc.unfreeze()  # (what earlier tests may have frozen)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    a = np.ones((128, 64), np.float32)
    neuronemu.run(kernel_file(KERNEL), {"a": a})
    assert inside and all(not on for on, _ in inside)
    # the checks and the schedule ran quiet too, and froze what they made: all unfrozen now
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gcpolicy._freezing is None
    with pytest.raises(NeuronEmuError):
        neuronemu.run(kernel_file(KERNEL.replace("src=a)", "src=b)")), {"a": a})
    assert gc.isenabled() and gc.get_freeze_count() == 0 and gcpolicy._freezing is None


def test_a_host_that_froze_objects_keeps_its_freeze_and_its_collections(kernel_file, monkeypatch):
    from neuronemu.host import gcpolicy

    monkeypatch.setattr(gcpolicy, "QUIET_ABOVE", 0)  # (as for a program past it)
    seen = _finish_sees(monkeypatch)
    kept = [[n] for n in range(1000)]  # (objects the host froze)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        neuronemu.run(kernel_file(KERNEL), {"a": np.ones((128, 64), np.float32)})
        # nothing unfrozen (a few frozen objects may be freed meanwhile), nothing frozen
        assert frozen - 100 < gc.get_freeze_count() <= frozen
        assert seen and all(on for on, _ in seen)
    finally:
        gc.unfreeze()


def test_a_host_with_the_gc_off_finds_it_off(kernel_file):
    gc.unfreeze()  # (what earlier tests may have frozen)
    gc.disable()
    try:
        neuronemu.run(kernel_file(KERNEL), {"a": np.ones((128, 64), np.float32)})
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_runs_that_overlap_in_threads_leave_the_gc_as_the_first_found_it():
    from neuronemu.host import gcpolicy

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    inside: list[bool] = []

    @gcpolicy.run_scope
    def first():
        a_in.set()
        b_in.wait(5)

    @gcpolicy.run_scope
    def second():
        b_in.set()
        a_out.wait(5)  # (the first has returned: this one is still under way)
        with gcpolicy.quiet(gcpolicy.QUIET_ABOVE + 1):
            inside.append(not gc.isenabled())
            _ = [[] for _ in range(100)]

    before = gc.get_threshold()
    gc.unfreeze()  # (what earlier tests may have frozen)
    a = threading.Thread(target=first)
    b = threading.Thread(target=second)
    a.start()
    a_in.wait(5)
    b.start()
    a.join(5)
    a_out.set()
    b.join(5)
    assert inside == [True]  # (still quiet after the first returned)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert gcpolicy._freezing is None and gcpolicy._depth == 0


def test_whether_the_host_froze_objects_is_asked_once_a_run_and_only_of_large_programs(
    kernel_file, monkeypatch
):
    # (the answer walks every frozen object: a small run must not pay for it)
    from neuronemu.host import gcpolicy

    asked: list[int] = []
    count = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: asked.append(1) or count())
    path = kernel_file(KERNEL)
    a = np.ones((128, 64), np.float32)
    neuronemu.run(path, {"a": a})
    assert asked == []
    monkeypatch.setattr(gcpolicy, "QUIET_ABOVE", 0)
    neuronemu.run(path, {"a": a})
    assert len(asked) == 2  # (once while compiling, once while checking and timing)


def test_the_command_freezes_a_run_only_in_a_process_of_its_own(kernel_file):
    """`neuronemu run` keeps its run's objects out of collections until the process ends;
    called in a host's process (click's runner, a script), it leaves the host's GC as it
    was."""
    from click.testing import CliRunner

    from neuronemu import cli

    path = str(kernel_file(KERNEL))
    args = ["run", path, "--timing-only", "-i", "a=float32[128,64]"]
    gc.unfreeze()  # (what earlier tests may have frozen)
    before = gc.get_threshold()
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    script = (
        "import gc, sys\n"
        "from neuronemu import cli\n"
        f"sys.argv = ['neuronemu', *{args!r}]\n"
        "try:\n"
        "    cli.entry()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('frozen', gc.get_freeze_count(), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    frozen = [line for line in done.stderr.splitlines() if line.startswith("frozen ")]
    assert frozen and int(frozen[-1].split()[1]) > 0, done.stderr
