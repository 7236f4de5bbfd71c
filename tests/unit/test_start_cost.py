"""What every run pays before any kernel work: modules it need not import are not imported.
NumPy 2's `np.unique` imports `numpy.ma` on its first call (~15 ms, a few percent of a small
kernel's command); the passes every run takes use `distinct` instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from neuronemu.program.table import distinct

ROOT = Path(__file__).resolve().parents[2]


@given(arrays(np.int64, st.integers(0, 60), elements=st.integers(-(2**62), 2**62)))
def test_distinct_is_numpys_unique(values):
    got = distinct(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_a_run_with_values_and_a_reference_does_not_import_numpy_ma():
    child = (
        "import sys\n"
        "import neuronemu\n"
        "from neuronemu.report.reference import load_reference\n"
        "import ml_dtypes, numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "inputs = {k: rng.standard_normal((256, 1024)).astype(ml_dtypes.bfloat16) for k in 'ab'}\n"
        f"kernels = {str(ROOT / 'kernels')!r}\n"
        "ref = load_reference(kernels + '/tensor_add_ref.py:reference')\n"
        "r = neuronemu.run(kernels + '/tensor_add.py', inputs, ref=ref, print_fn=lambda _l: None)\n"
        "assert r.check.passed, r.check\n"
        "r.critical_path, r.stalls\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert run.stdout.strip() == "False", run.stderr
