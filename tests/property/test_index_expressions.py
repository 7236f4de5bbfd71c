"""Random older-dialect index expressions (several nl.mgrid positions per dim, negative and
zero coefficients, offsets, masks) read the same elements as NumPy's own indexing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import neuronemu

HEADER = "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n\n"
KERNEL = """
@nki.jit
def k(x):
    out = nl.ndarray(({p}, {n1}, {n2}), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.zeros(({p}, {n1}, {n2}), dtype=x.dtype))
    i_p, i_a, i_b = nl.mgrid[0:{p}, 0:{n1}, 0:{n2}]
    t = nl.load(x[i_p, {a} * i_a + {b} * i_b + {c}]{mask})
    nl.store(out[i_p, i_a, i_b], value=t{mask})
    return out
"""


@settings(
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    p=st.integers(1, 16),
    n1=st.integers(1, 5),
    n2=st.integers(1, 5),
    a=st.sampled_from([-2, -1, 0, 1, 2]),
    b=st.sampled_from([-1, 0, 1, 3]),
    c=st.integers(0, 12),
    masked=st.integers(0, 5),
    seed=st.integers(0, 2**16),
)
def test_loads_through_index_expressions_match_numpy(
    tmp_path_factory, p, n1, n2, a, b, c, masked, seed
):
    width = 24
    f1, f2 = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    cols = a * f1 + b * f2 + c
    keep = f1 < masked if masked else np.ones_like(f1, dtype=bool)
    assume(keep.any() and cols[keep].min() >= 0 and cols[keep].max() < width)
    if not masked:
        assume(cols.min() >= 0 and cols.max() < width)
    x = np.random.default_rng(seed).standard_normal((p, width)).astype(np.float32)
    mask = f", mask=(i_a < {masked})" if masked else ""
    path: Path = tmp_path_factory.mktemp("k") / "kernel.py"
    path.write_text(HEADER + KERNEL.format(p=p, n1=n1, n2=n2, a=a, b=b, c=c, mask=mask))
    got = neuronemu.run(path, {"x": x}).outputs["out"]
    want = np.where(keep[None], x[:, np.clip(cols, 0, width - 1)], np.float32(0))
    np.testing.assert_array_equal(got, want)
