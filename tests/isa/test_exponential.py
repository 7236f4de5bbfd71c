"""exponential: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import numpy as np
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    assert_bits_equal,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, accepted, checker, sequential_fold, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["exponential"]
F32 = np.float32


@settings(deadline=None)
@given(
    shape=tile_shapes(max_free=256),
    src=st.sampled_from(FLOATS + ("int8", "int16")),
    dst=st.sampled_from(FLOATS),
    column=st.booleans(),
    cmd=st.sampled_from(["idle", "reset_reduce", "load_reduce"]),
    seed=seeds,
)
def test_exponential_subtracts_max_value_then_sums(
    shape: tuple[int, ...], src: str, dst: str, column: bool, cmd: str, seed: int
) -> None:
    p = shape[0]
    x = random_array(seed, shape, src, -8, 8)
    max_value: Any = random_array(seed + 1, (p, 1), "float32") if column else 1.5
    init = random_array(seed + 2, (p, 1), "float32")
    flat = x.astype(F32).reshape(p, -1)
    expected = np.exp(flat - (max_value if column else F32(max_value)))
    start = init.reshape(p) if cmd == "load_reduce" else F32(0.0)
    expected_sum = sequential_fold(lambda a, b: a + b, expected, start)
    out = SPEC.semantics(x, max_value, init if cmd == "load_reduce" else 0.0, reduce_cmd=cmd)
    got = cast_to(np.asarray(out["dst"]).reshape(p, -1), NP_DTYPES[dst])
    with np.errstate(over="ignore"):  # large results overflow float16 to inf, as on write
        assert_bits_equal(got, expected.astype(NP_DTYPES[dst]))
    if cmd != "idle":
        assert_bits_equal(np.asarray(out["reduce_res"]).reshape(p), expected_sum)


CHECK = checker(
    Engine.VECTOR,
    "trn3",
    attrs={"reduce_cmd": "reset_reduce"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    reduce_res=tile("reduce_res", (128, 1), "float32", SBUF),
    src=tile("src", (128, 512), "float32", PSUM),
    max_value=tile("max_value", (128, 1), "float32", SBUF),
    reduce_init=None,
)


# Each stateless reduce_cmd, on trn3.
ACCEPTED: list[Any] = [
    accepted("reset-reduce"),
    accepted("idle", attrs={"reduce_cmd": "idle"}, reduce_res=None),
    accepted("load-reduce", attrs={"reduce_cmd": "load_reduce"}, reduce_init=2.0, max_value=0.5),
]
VIOLATIONS: list[Any] = [
    violation("gen", ["exponential needs NC-v4+ (trn3)", "target trn2 is NC-v3"], target="trn2"),
    violation("par", ["partition sizes differ", "dst 64"], dst=tile("dst", (64, 512))),
    violation("free", ["elements per partition differ", "dst 256"], dst=tile("dst", (128, 256))),
    violation(
        "rank",
        ["dst has 4 free dimensions", "at most 3", "tile_exponential_free_dims_max"],
        dst=tile("dst", (128, 2, 2, 2, 64)),
        src=tile("src", (128, 2, 2, 2, 64)),
    ),
    violation("max", ["max_value has shape [128, 2]"], max_value=tile("max_value", (128, 2))),
    violation(
        "init-shape",
        ["reduce_init has shape [128, 4]"],
        attrs={"reduce_cmd": "load_reduce"},
        reduce_init=tile("reduce_init", (128, 4)),
    ),
    violation(
        "reduce-res",
        ["reduce_res has shape [128, 2]", "[128, 1]"],
        reduce_res=tile("reduce_res", (128, 2)),
    ),
    violation(
        "stateful",
        ["reduce_cmd='reduce'", "kept between instructions"],
        attrs={"reduce_cmd": "reduce"},
    ),
    violation(
        "init-without-load",
        ["reduce_init is 3.0", "reduce_cmd is reset_reduce", "unset or 0.0"],
        reduce_init=3.0,
    ),
]


def _sized(free: int, reduce: bool = False, dtype: str = "float32") -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dtype),
        "src": tile("src", (128, free), dtype),
        "reduce_res": tile("reduce_res", (128, 1)) if reduce else None,
        "max_value": None,
    }
    return CHECK(attrs={"reduce_cmd": "reset_reduce" if reduce else "idle"}, **tiles)


def _cost(free: int, reduce: bool = False) -> int:
    return SPEC.cost(_sized(free, reduce))


def _floor(reduce: bool, **_: Any) -> int:
    return int(load_arch("trn3").cost_min_ii_cycles * (2 if reduce else 1))


COST_GROWTH = Growth(_sized, _floor, params={"reduce": (False, True), "dtype": FLOATS})


def test_exponential_runs_at_four_times_the_scalar_exp_rate() -> None:
    # trainium3_arch.rst: 4x activation(exp); ScalarE 128 elem/cycle over 128 lanes.
    assert _cost(4096) == 1024
    assert _cost(4096, reduce=True) == 1024 + 64
