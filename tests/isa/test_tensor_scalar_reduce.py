"""tensor_scalar_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import (
    ARITH,
    Growth,
    checker,
    least_cost,
    on_each_target,
    sequential_fold,
    violation,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["tensor_scalar_reduce"]
F32 = np.float32
IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=256),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    op0=st.sampled_from(sorted(ARITH)),
    reduce_op=st.sampled_from(sorted(IDENTITY)),
    column=st.booleans(),
    load=st.booleans(),
    negate=st.booleans(),
    seed=seeds,
)
def test_tensor_scalar_reduce_folds_the_tensor_scalar_result(
    shape: tuple[int, ...],
    src: str,
    dst: str,
    op0: str,
    reduce_op: str,
    column: bool,
    load: bool,
    negate: bool,
    seed: int,
) -> None:
    p = shape[0]
    x = random_array(seed, shape, src, 0.5, 1.5)
    operand0: Any = random_array(seed + 1, (p, 1), "float32", 0.5, 1.5) if column else 1.25
    init: Any = random_array(seed + 2, (p, 1), "float32") if load else None
    flat = x.astype(F32).reshape(p, -1)
    start = init.reshape(p) if load else F32(IDENTITY[reduce_op])
    with np.errstate(over="ignore"):  # a long product may overflow to inf, as in fp32 hardware
        expected_dst = ARITH[op0](flat, operand0 if column else F32(operand0))
        expected_res = sequential_fold(ARITH[reduce_op], expected_dst, start)
    if negate:
        expected_res = -expected_res
    out = SPEC.semantics(
        x,
        operand0,
        init,
        op0=op0,
        reduce_op=reduce_op,
        reduce_cmd="load_reduce" if load else "reset_reduce",
        reduce_res_negate=negate,
    )
    got = cast_to(np.asarray(out["dst"]).reshape(p, -1), NP_DTYPES[dst])
    assert_bits_equal(got, expected_dst.astype(NP_DTYPES[dst]))
    assert_bits_equal(np.asarray(out["reduce_res"]).reshape(p), expected_res.astype(F32))


def test_tensor_scalar_reduce_unary_op_ignores_operand0() -> None:
    x = np.array([[-1.0, 2.0, -3.0]], dtype=F32)
    out = SPEC.semantics(x, None, op0="abs", reduce_op="maximum")
    np.testing.assert_array_equal(out["dst"], [[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(out["reduce_res"], [3.0])


CHECK = checker(
    Engine.VECTOR,
    attrs={"op0": "multiply", "reduce_op": "add", "reduce_cmd": "reset_reduce"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    reduce_res=tile("reduce_res", (128, 1), "float32", SBUF),
    data=tile("data", (128, 512), "float32", PSUM),
    operand0=tile("operand0", (128, 1), "float32", SBUF),
    reduce_init=None,
)


ACCEPTED: list[Any] = [
    *on_each_target("reset"),
    *on_each_target("load", attrs={"reduce_cmd": "load_reduce"}, reduce_init=0.5),
    *on_each_target("without-reduce-res", reduce_res=None),
]
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
    violation("operand0", ["operand0 has shape [128, 3]"], operand0=tile("operand0", (128, 3))),
    violation(
        "reduce-res",
        ["reduce_res has shape [128, 2]", "[128, 1]"],
        reduce_res=tile("reduce_res", (128, 2)),
    ),
    violation(
        "reduce-init-shape",
        ["reduce_init has shape [128, 4]"],
        attrs={"reduce_cmd": "load_reduce"},
        reduce_init=tile("reduce_init", (128, 4)),
    ),
    violation("no-operand0", ["op0 'multiply' is binary", "operand0"], operand0=None),
    violation("unary-operand0", ["op0 'abs' is unary", "None or 0"], attrs={"op0": "abs"}),
    violation("rev", ["reverse0=True", "not supported"], attrs={"reverse0": True}),
    violation(
        "stateful",
        ["reduce_cmd='reduce'", "kept between instructions", "reset_reduce"],
        attrs={"reduce_cmd": "reduce"},
    ),
    violation(
        "load-without-init",
        ["reduce_init must be given exactly when reduce_cmd is load_reduce"],
        attrs={"reduce_cmd": "load_reduce"},
    ),
]


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {n: tile(n, (128, free), dtype) for n in ("dst", "data")}
    return CHECK(target, {"op0": "add"}, **tiles)


COST_GROWTH = Growth(
    _sized, least_cost(Engine.VECTOR, times=2), params={"target": TARGETS, "dtype": FLOATS}
)


def test_tensor_scalar_reduce_cost_is_max_64_n_plus_64_on_trn1() -> None:
    assert SPEC.cost(_sized("trn1", 10)) == 128
    assert SPEC.cost(_sized("trn1", 1000)) == 1064
