"""activation_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    assert_cost_grows,
    fired,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import assert_every_constraint_hit, assert_single_message, sequential_fold
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["activation_reduce"]
F32 = np.float32

# The tests' own fp32 activation functions (exactly one IEEE operation or a NumPy ufunc).
FUNCS = {
    "copy": lambda x: x,
    "square": lambda x: x * x,
    "relu": lambda x: np.maximum(x, F32(0)),
    "abs": np.abs,
    "exp": np.exp,
    "tanh": np.tanh,
}


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=256),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op=st.sampled_from(sorted(FUNCS)),
    column_scale=st.booleans(),
    bias=st.sampled_from(["none", "column", "number"]),
    seed=seeds,
)
def test_activation_reduce_sums_the_activation_per_partition(
    shape: tuple[int, ...], src: str, dst: str, op: str, column_scale: bool, bias: str, seed: int
) -> None:
    p = shape[0]
    x = random_array(seed, shape, src, -2, 2)
    scale: Any = random_array(seed + 1, (p, 1), "float32") if column_scale else 0.75
    b: Any = {"none": None, "number": -0.5,
              "column": random_array(seed + 2, (p, 1), "float32")}[bias]
    pre = x.astype(F32).reshape(p, -1) * (scale if column_scale else F32(scale))
    if b is not None:
        pre = pre + (b if bias == "column" else F32(b))
    expected = FUNCS[op](pre).astype(F32)
    out = SPEC.semantics(x, b, scale, op=op, reduce_op="add")
    got = cast_to(np.asarray(out["dst"]).reshape(p, -1), NP_DTYPES[dst])
    with np.errstate(over="ignore"):  # large results overflow float16 to inf, as on write
        assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))
    total = sequential_fold(lambda a, c: a + c, expected, F32(0))
    assert_bits_equal(np.asarray(out["reduce_res"]).reshape(p), total)


def _check(target: str = "trn2", **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 512), "bfloat16", SBUF),
        "reduce_res": tile("reduce_res", (128, 1), "float32", SBUF),
        "data": tile("data", (128, 512), "float32", PSUM),
        "bias": tile("bias", (128, 1), "float32", SBUF),
        "scale": 2.0,
    }
    return make_check(target, Engine.SCALAR, operands | ops, {"op": "exp", "reduce_op": "add"})


@pytest.mark.parametrize("target", TARGETS)
def test_activation_reduce_accepts_tile_bias_and_scale(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    assert fired(SPEC, _check(target, bias=None, scale=tile("scale", (128, 1)))) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 512))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"dst": tile("dst", (128, 256))}, ["elements per partition differ", "dst 256"], id="free"
    ),
    pytest.param({"bias": tile("bias", (128, 2))}, ["bias has shape [128, 2]"], id="bias"),
    pytest.param({"scale": tile("scale", (64, 1))}, ["scale has shape [64, 1]"], id="scale"),
    pytest.param(
        {"target": "trn1", "bias": 0.5}, ["bias must be a [P, 1] tile on NC-v2"], id="bias-imm"
    ),
    pytest.param(
        {"reduce_res": tile("reduce_res", (128, 4))},
        ["reduce_res has shape [128, 4]", "[128, 1]"],
        id="reduce-res",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_activation_reduce_constraint_message(change: dict[str, Any], expected: list[str]) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_activation_reduce_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int, dtype: str = "float32") -> int:
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "data": tile("data", (128, free), dtype),
        "reduce_res": tile("reduce_res", (128, 1)),
    }
    return SPEC.cost(make_check(target, Engine.SCALAR, tiles, {"op": "exp"}))


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS), f1=st.integers(1, 65536), f2=st.integers(1, 65536)
)
def test_activation_reduce_cost_grows_with_free_size(target: str, f1: int, f2: int) -> None:
    arch = load_arch(target)
    floor = arch.cost_min_ii_cycles + arch.cost_act_reduce_readout_cycles
    assert_cost_grows(lambda f: _cost(target, f), f1, f2, floor)


def test_activation_reduce_cost_is_max_64_n_plus_64_on_trn1() -> None:
    assert _cost("trn1", 10) == 128
    assert _cost("trn1", 1000) == 1064
