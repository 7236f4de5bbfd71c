"""activation_reduce: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    assert_bits_equal,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, checker, on_each_target, sequential_fold, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

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
    b: Any = {"none": None, "number": -0.5, "column": random_array(seed + 2, (p, 1), "float32")}[
        bias
    ]
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


CHECK = checker(
    Engine.SCALAR,
    attrs={"op": "exp", "reduce_op": "add"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    reduce_res=tile("reduce_res", (128, 1), "float32", SBUF),
    data=tile("data", (128, 512), "float32", PSUM),
    bias=tile("bias", (128, 1), "float32", SBUF),
    scale=2.0,
)


ACCEPTED: list[Any] = [
    *on_each_target("tile-bias"),
    *on_each_target("column-scale", bias=None, scale=tile("scale", (128, 1))),
]
VIOLATIONS: list[Any] = [
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
    violation("bias", ["bias has shape [128, 2]"], bias=tile("bias", (128, 2))),
    violation("scale", ["scale has shape [64, 1]"], scale=tile("scale", (64, 1))),
    violation("bias-imm", ["bias must be a [P, 1] tile on NC-v2"], target="trn1", bias=0.5),
    violation(
        "reduce-res",
        ["reduce_res has shape [128, 4]", "[128, 1]"],
        reduce_res=tile("reduce_res", (128, 4)),
    ),
]


def _sized(target: str, free: int, dtype: str = "float32") -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "data": tile("data", (128, free), dtype),
        "reduce_res": tile("reduce_res", (128, 1)),
    }
    return make_check(target, Engine.SCALAR, tiles, {"op": "exp"})


def _cost(target: str, free: int, dtype: str = "float32") -> int:
    return SPEC.cost(_sized(target, free, dtype))


def _floor(target: str) -> int:
    arch = load_arch(target)
    return int(arch.cost_min_ii_cycles + arch.cost_act_reduce_readout_cycles)


COST_GROWTH = Growth(_sized, _floor)


def test_activation_reduce_cost_is_max_64_n_plus_64_on_trn1() -> None:
    assert _cost("trn1", 10) == 128
    assert _cost("trn1", 1000) == 1064
