"""tensor_scalar_cumulative: semantics vs NumPy, each constraint's message, cost growth."""

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
from _spec_testing import ARITH, assert_every_constraint_hit, assert_single_message, floor_cycles
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa._numerics import cast_to

SPEC = REGISTRY["tensor_scalar_cumulative"]
F32 = np.float32
START = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=128),
    src=st.sampled_from(FLOATS + ("int8", "uint16")),
    dst=st.sampled_from(FLOATS),
    op0=st.sampled_from(sorted(ARITH)),
    op1=st.sampled_from(sorted(ARITH)),
    column=st.booleans(),
    load=st.booleans(),
    seed=seeds,
)
def test_tensor_scalar_cumulative_scans_op1_over_the_scaled_row(
    shape: tuple[int, ...], src: str, dst: str, op0: str, op1: str, column: bool, load: bool,
    seed: int,
) -> None:
    p = shape[0]
    x = random_array(seed, shape, src, 0.5, 1.5)
    imm0: Any = random_array(seed + 1, (p, 1), "float32", 0.5, 1.5) if column else 0.75
    imm1: Any = random_array(seed + 2, (p, 1), "float32") if load else None
    scaled = ARITH[op0](x.astype(F32).reshape(p, -1), imm0 if column else F32(imm0))
    expected = np.empty_like(scaled)
    with np.errstate(over="ignore"):  # a long running product may overflow to inf
        for r in range(p):
            reg = imm1[r, 0] if load else F32(START[op1])
            for i in range(scaled.shape[1]):
                reg = expected[r, i] = ARITH[op1](scaled[r, i], reg)  # the doc's op1(new, reg)
    out = SPEC.semantics(
        x, imm0, imm1, op0=op0, op1=op1, reduce_cmd="load_reduce" if load else "reset_reduce"
    )
    got = cast_to(np.asarray(out).reshape(p, -1), NP_DTYPES[dst])
    with np.errstate(over="ignore"):  # large results overflow float16 to inf, as on write
        assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))


def test_tensor_scalar_cumulative_add_is_a_running_sum_like_the_doc_test() -> None:
    out = SPEC.semantics(np.ones((2, 5), F32), 0.0, op0="add", op1="add")
    np.testing.assert_array_equal(out, np.add.accumulate(np.ones((2, 5), F32), axis=1))


def _check(target: str = "trn2", attrs: Any = None, **ops: Any) -> Any:
    operands = {
        "dst": tile("dst", (128, 512), "bfloat16", SBUF),
        "src": tile("src", (128, 512), "float32", PSUM),
        "imm0": tile("imm0", (128, 1), "float32", SBUF),
        "imm1": None,
    }
    base = {"op0": "multiply", "op1": "add", "reduce_cmd": "reset_reduce"}
    return make_check(target, Engine.VECTOR, operands | ops, base | (attrs or {}))


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_scalar_cumulative_accepts_reset_and_load(target: str) -> None:
    assert fired(SPEC, _check(target)) == []
    assert fired(SPEC, _check(target, {"reduce_cmd": "load_reduce"}, imm1=2.0)) == []


VIOLATIONS: list[Any] = [
    pytest.param({"dst": tile("dst", (64, 512))}, ["partition sizes differ", "dst 64"], id="par"),
    pytest.param(
        {"dst": tile("dst", (128, 256))}, ["elements per partition differ", "dst 256"], id="free"
    ),
    pytest.param({"imm0": tile("imm0", (128, 3))}, ["imm0 has shape [128, 3]"], id="imm0"),
    pytest.param(
        {"attrs": {"reduce_cmd": "load_reduce"}, "imm1": tile("imm1", (32, 1))},
        ["imm1 has shape [32, 1]"],
        id="imm1",
    ),
    pytest.param(
        {"attrs": {"reduce_cmd": "reduce"}},
        ["reduce_cmd='reduce'", "kept between instructions", "reset_reduce"],
        id="stateful",
    ),
    pytest.param(
        {"attrs": {"reduce_cmd": "load_reduce"}},
        ["reduce_cmd is load_reduce but imm1", "not given"],
        id="load-without-imm1",
    ),
]


@pytest.mark.parametrize(("change", "expected"), VIOLATIONS)
def test_tensor_scalar_cumulative_constraint_message(
    change: dict[str, Any], expected: list[str]
) -> None:
    assert_single_message(SPEC, _check(**change), expected)


def test_every_tensor_scalar_cumulative_constraint_has_a_violating_case() -> None:
    assert_every_constraint_hit(SPEC, _check, VIOLATIONS)


def _cost(target: str, free: int, dtype: str = "float32") -> int:
    tiles = {n: tile(n, (128, free), dtype) for n in ("dst", "src")}
    return SPEC.cost(make_check(target, Engine.VECTOR, tiles, {"op0": "add", "op1": "add"}))


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    dtype=st.sampled_from(FLOATS),
    f1=st.integers(1, 65536),
    f2=st.integers(1, 65536),
)
def test_tensor_scalar_cumulative_cost_grows_with_free_size(
    target: str, dtype: str, f1: int, f2: int
) -> None:
    assert_cost_grows(
        lambda f: _cost(target, f, dtype), f1, f2, floor_cycles(target, Engine.VECTOR)
    )
