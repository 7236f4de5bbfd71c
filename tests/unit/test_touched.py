"""Which tiles each instruction touches, for releasing their arrays during a run with values
(neuronemu.sim.functional): read from the checks' access rows, it is what the views say,
on replayed loops, aliases and indirect copies alike (the suite also cross-checks every run
with values: tests/conftest.py turns on functional.CROSS_CHECK)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.checks.access_table import Accesses
from neuronemu.sim import functional

KERNELS = "kernels"
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

# A tile written through a reinterpreting view (its root is the tile) and read whole.
ALIAS = HEADER + (
    "@nki.jit\n"
    "def k(a):\n"
    "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=t.view(nl.int32), src=a.view(nl.int32))\n"
    "    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.tensor_copy(dst=u, src=t)\n"
    "    nisa.dma_copy(dst=out, src=u)\n"
    "    return out\n"
)


def _both(program) -> tuple:
    rows = functional._tiles_touched(program, Accesses(program))
    views = functional._tiles_touched(program)
    as_ids = [[sorted(t.id for t in ts) for ts in got[0]] for got in (rows, views)]
    return as_ids, (rows[1], views[1])


@pytest.mark.parametrize("path", ["matmul_tiled.py", "softmax_rows.py", "transpose_pe.py"])
def test_tiles_touched_from_rows_are_the_views(path):
    dtype = ml_dtypes.bfloat16 if "matmul" in path else np.float32
    names = ("lhsT", "rhs") if "matmul" in path else ("x",)
    inputs = {n: np.ones((512, 512), dtype) for n in names}
    program = neuronemu.compile_kernel(f"{KERNELS}/{path}", inputs)
    (rows, views), (written_rows, written_views) = _both(program)
    assert rows == views and written_rows == written_views
    assert sum(map(len, rows)) > len(rows)  # (tiles there to release)


def test_an_alias_counts_as_its_root(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(ALIAS)
    program = neuronemu.compile_kernel(str(path), {"a": np.ones((128, 64), np.float32)})
    (rows, views), (written_rows, written_views) = _both(program)
    assert rows == views and written_rows == written_views
    t = next(t for t in program.tensors if t.name == "t")
    assert [t.id] in rows and t.id in written_rows


def test_a_run_reads_no_dependency_and_leaves_the_reuse_ones_unmerged():
    rng = np.random.default_rng(3)
    inputs = {
        n: rng.standard_normal((2048, 1024)).astype(ml_dtypes.bfloat16) for n in ("lhsT", "rhs")
    }
    program = neuronemu.compile_kernel(f"{KERNELS}/matmul_tiled.py", inputs)
    assert program.reuse_deps is not None and len(program.reuse_deps[0])  # (reuses pending)
    got = functional.execute(program, inputs)["result"]
    assert program.reuse_deps is not None  # (merging them makes every instruction's deps)
    want = inputs["lhsT"].astype(np.float32).T @ inputs["rhs"].astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=0.1)
