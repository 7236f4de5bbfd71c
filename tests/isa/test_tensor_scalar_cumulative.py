"""tensor_scalar_cumulative: semantics vs NumPy, each constraint's message, cost growth."""

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
from _spec_testing import ARITH, Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

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
    shape: tuple[int, ...],
    src: str,
    dst: str,
    op0: str,
    op1: str,
    column: bool,
    load: bool,
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


CHECK = checker(
    Engine.VECTOR,
    attrs={"op0": "multiply", "op1": "add", "reduce_cmd": "reset_reduce"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    src=tile("src", (128, 512), "float32", PSUM),
    imm0=tile("imm0", (128, 1), "float32", SBUF),
    imm1=None,
)


ACCEPTED: list[Any] = [
    *on_each_target("reset"),
    *on_each_target("load", attrs={"reduce_cmd": "load_reduce"}, imm1=2.0),
]
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
    violation("imm0", ["imm0 has shape [128, 3]"], imm0=tile("imm0", (128, 3))),
    violation(
        "imm1",
        ["imm1 has shape [32, 1]"],
        attrs={"reduce_cmd": "load_reduce"},
        imm1=tile("imm1", (32, 1)),
    ),
    violation(
        "stateful",
        ["reduce_cmd='reduce'", "kept between instructions", "reset_reduce"],
        attrs={"reduce_cmd": "reduce"},
    ),
    violation(
        "load-without-imm1",
        ["reduce_cmd is load_reduce but imm1", "not given"],
        attrs={"reduce_cmd": "load_reduce"},
    ),
]


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {n: tile(n, (128, free), dtype) for n in ("dst", "src")}
    return CHECK(target, {"op0": "add", "op1": "add"}, **tiles)


COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), params={"target": TARGETS, "dtype": FLOATS})
