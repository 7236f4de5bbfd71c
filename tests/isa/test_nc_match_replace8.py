"""nc_match_replace8: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    PSUM,
    SBUF,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["nc_match_replace8"]
F32 = np.float32


def reference(data: np.ndarray, vals: np.ndarray, imm: float) -> tuple[np.ndarray, np.ndarray]:
    """vals from the last to the first; each replaces the first match not yet replaced."""
    out = data.copy()
    idx = np.full(vals.shape, 0xFFFFFFFF, dtype=np.int64)
    for r in range(data.shape[0]):
        done = np.zeros(data.shape[1], dtype=bool)
        for j in reversed(range(vals.shape[1])):
            for k in range(data.shape[1]):
                if not done[k] and data[r, k] == vals[r, j]:
                    done[k] = True
                    out[r, k] = imm
                    idx[r, j] = k
                    break
    return out, idx


@settings(deadline=None)
@given(p=st.integers(1, 16), f=st.integers(1, 200), seed=seeds)
def test_nc_match_replace8_replaces_first_matches(p: int, f: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 10, size=(p, f)).astype(F32)
    vals = rng.integers(0, 12, size=(p, 8)).astype(F32)
    out = SPEC.semantics(data, vals, imm=-1.0)
    want_dst, want_idx = reference(data, vals, -1.0)
    np.testing.assert_array_equal(np.asarray(out["dst"]).reshape(p, f), want_dst)
    np.testing.assert_array_equal(np.asarray(out["dst_idx"]).reshape(p, 8), want_idx)


def test_nc_match_replace8_doc_example_for_duplicate_vals() -> None:
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], dtype=F32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], dtype=F32)
    out = SPEC.semantics(data, vals, imm=0.0)
    np.testing.assert_array_equal(out["dst_idx"], [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(out["dst"], [[1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0]])


CHECK = checker(
    Engine.VECTOR,
    attrs={"imm": -1e30},
    dst=tile("dst", (128, 2, 512), "bfloat16", SBUF),
    dst_idx=tile("dst_idx", (128, 8), "uint32", SBUF),
    data=tile("data", (128, 1024), "bfloat16", PSUM),
    vals=tile("vals", (128, 8), "float32", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("with-dst-idx"),
    *on_each_target("without-dst-idx", dst_idx=None),
]
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "vals 64"], vals=tile("vals", (64, 8))),
    violation("free", ["elements per partition differ", "dst 512"], dst=tile("dst", (128, 512))),
    violation(
        "big",
        ["data has 16385 elements", "at most 16384"],
        data=tile("data", (128, 16385)),
        dst=tile("dst", (128, 16385)),
    ),
    violation("idx", ["dst_idx has 4 elements"], dst_idx=tile("dst_idx", (128, 4), "uint32")),
    violation("imm", ["imm None", "fp32 number"], attrs={"imm": None}),
]


def _sized(target: str, free: int) -> Any:
    return CHECK(target, **{n: tile(n, (128, free)) for n in ("dst", "data")})


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), sizes=(1, 16384))
