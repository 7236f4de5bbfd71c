"""dma_transpose: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    HBM,
    INTS,
    NP_DTYPES,
    SBUF,
    TARGETS,
    assert_bits_equal,
    fired,
    make_check,
    random_array,
    seeds,
    tile,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["dma_transpose"]
DEFAULT_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@settings(deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    dtype=st.sampled_from(FLOATS + INTS),
    explicit=st.booleans(),
    seed=seeds,
)
def test_dma_transpose_permutes_axes_bit_exactly(
    shape: list[int], dtype: str, explicit: bool, seed: int
) -> None:
    x = random_array(seed, tuple(shape), dtype, -1e6, 1e6)
    axes = DEFAULT_AXES[len(shape)]
    expected = np.empty(tuple(shape[a] for a in axes), dtype=x.dtype)
    for idx in itertools.product(*(range(n) for n in shape)):
        expected[tuple(idx[a] for a in axes)] = x[idx]
    out = SPEC.semantics(src=x, axes=axes if explicit else None)
    assert_bits_equal(cast_to(np.asarray(out), NP_DTYPES[dtype]), expected)


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 16), "bfloat16", SBUF),
        "src": tile("src", (16, 128), "bfloat16", HBM),
    }
    base = {"axes": (1, 0), "dge_mode": "hwdge"}
    return make_check(target, Engine.DMA, operands | ops, base | (attrs or {}))


def test_dma_transpose_accepts_2d_3d_and_4d_transposes() -> None:
    assert fired(SPEC, _check()) == []
    three = {"dst": tile("dst", (64, 8, 2), "float16"), "src": tile("src", (2, 8, 64), "float16")}
    assert fired(SPEC, _check(attrs={"axes": None}, **three)) == []
    four = {
        "dst": tile("dst", (32, 3, 5, 4), "float32"),
        "src": tile("src", (4, 3, 5, 32), "float32", SBUF),
    }
    assert fired(SPEC, _check("trn1", {"axes": (3, 1, 2, 0), "dge_mode": "unknown"}, **four)) == []
    flat = {"dst": tile("dst", (32, 60), "float32"), "src": four["src"]}
    assert fired(SPEC, _check(attrs={"axes": (3, 1, 2, 0), "dge_mode": None}, **flat)) == []


VIOLATIONS: list[Any] = [
    pytest.param(
        {"dst": tile("dst", (128, 16), "float32")},
        ["dst is float32", "src is bfloat16", "same dtype"],
        id="dtype",
    ),
    pytest.param(
        {"attrs": {"axes": (0, 1)}}, ["axes (0, 1)", "not supported", "(1, 0)"], id="axes"
    ),
    pytest.param(
        {"attrs": {"axes": (2, 1, 0)}}, ["axes (2, 1, 0) has 3 entries", "rank 2"], id="rank"
    ),
    pytest.param(
        {"dst": tile("dst", (16, 128), "bfloat16")},
        ["dst has shape [16, 128]", "gives [128, 16]"],
        id="dst-shape",
    ),
    pytest.param(
        {"attrs": {"dge_mode": "swdge"}}, ["dge_mode swdge", "unknown or hwdge"], id="dge"
    ),
    pytest.param(
        {"target": "trn1"}, ["dge_mode=hwdge needs NC-v3+", "target trn1 is NC-v2"], id="hwdge-v2"
    ),
    pytest.param(
        {"dst": tile("dst", (128, 8), "bfloat16"), "src": tile("src", (8, 128), "bfloat16", HBM)},
        ["src.shape[0] is 8", "exactly 16", "dma_hwdge_transpose_partitions"],
        id="hwdge-2d",
    ),
    pytest.param(
        {
            "dst": tile("dst", (8, 16, 3), "bfloat16"),
            "src": tile("src", (3, 16, 8), "bfloat16", HBM),
            "attrs": {"axes": (2, 1, 0)},
        },
        ["src.shape[0] is 3", "power of two up to 16"],
        id="hwdge-3d-first",
    ),
    pytest.param(
        {
            "dst": tile("dst", (8, 4, 2), "bfloat16"),
            "src": tile("src", (2, 4, 8), "bfloat16", HBM),
            "attrs": {"axes": (2, 1, 0)},
        },
        ["src.shape[0] * src.shape[-2] is 8", "multiple of 16"],
        id="hwdge-3d-group",
    ),
    pytest.param(
        {"dst": tile("dst", (256, 16), "bfloat16"), "src": tile("src", (16, 256), "bfloat16", HBM)},
        ["src.shape[-1] is 256", "at most 128", "dma_hwdge_transpose_free_max"],
        id="hwdge-free",
    ),
    pytest.param(
        {"dst": tile("dst", (128, 16), "float32"), "src": tile("src", (16, 128), "float32", HBM)},
        ["src is float32 (4 bytes)", "2-byte dtype"],
        id="hwdge-itemsize",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_dma_transpose_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_dma_transpose_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, partitions: int, free: int, src_buf: Any = HBM, middle: int = 1) -> int:
    c = make_check(
        target,
        Engine.DMA,
        {
            "dst": tile("dst", (free, middle, partitions), "bfloat16"),
            "src": tile("src", (partitions, middle, free), "bfloat16", src_buf),
        },
        {"axes": (2, 1, 0)},
    )
    assert fired(SPEC, c) == []
    return SPEC.cost(c)


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    p=st.integers(1, 128),
    f=st.integers(1, 128),
    m1=st.integers(1, 256),
    m2=st.integers(1, 256),
    buf=st.sampled_from([HBM, SBUF]),
)
def test_dma_transpose_cost_grows_with_size(
    target: str, p: int, f: int, m1: int, m2: int, buf: Any
) -> None:
    # The middle axis grows the bytes without changing how many DMA engines share them.
    small, large = sorted((m1, m2))
    c_small, c_large = _cost(target, p, f, buf, small), _cost(target, p, f, buf, large)
    assert 1 <= c_small <= c_large
    if large >= 2 * small and c_small > _cost(target, p, f, buf, 1) + 1:
        assert c_small < c_large


@pytest.mark.parametrize("target", TARGETS)
def test_dma_transpose_is_slower_than_a_copy_and_slowest_from_sbuf(target: str) -> None:
    copy = REGISTRY["dma_copy"].cost(
        make_check(
            target,
            Engine.DMA,
            {
                "dst": tile("dst", (128, 128), "bfloat16"),
                "src": tile("src", (128, 128), "bfloat16", HBM),
            },
            {},
        )
    )
    from_hbm, from_sbuf = _cost(target, 128, 128, HBM), _cost(target, 128, 128, SBUF)
    assert copy < from_hbm < from_sbuf
