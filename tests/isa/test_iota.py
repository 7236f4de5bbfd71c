"""iota: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from _isa_testing import NP_DTYPES, SBUF, tile
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["iota"]

patterns = st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 6)), min_size=1, max_size=4)


def reference(pattern: list[tuple[int, int]], offset: int, mult: int, p: int) -> np.ndarray:
    """The doc's nested loops, with Python ints wrapped to int32 at the end."""
    dims = [num for _, num in pattern]
    out = []
    for ch in range(p):
        row = []
        for idx in np.ndindex(*dims):
            row.append(offset + ch * mult + sum(i * step for i, (step, _) in zip(idx, pattern)))
        out.append(row)
    return np.array(out, dtype=np.int64).astype(np.int32)


@settings(deadline=None)
@given(
    pattern=patterns,
    offset=st.integers(-1000, 1000),
    mult=st.integers(-20, 20),
    p=st.integers(1, 128),
    dtype=st.sampled_from(["int32", "float32", "int16", "bfloat16"]),
)
def test_iota_generates_the_documented_pattern(
    pattern: list[tuple[int, int]], offset: int, mult: int, p: int, dtype: str
) -> None:
    f = math.prod(n for _, n in pattern)
    out = SPEC.semantics(
        pattern=[list(x) for x in pattern], offset=offset, channel_multiplier=mult, dst_shape=(p, f)
    )
    expected = reference(pattern, offset, mult, p)
    np.testing.assert_array_equal(np.asarray(out).reshape(p, f), expected)
    got = cast_to(np.asarray(out).reshape(p, f), NP_DTYPES[dtype])
    np.testing.assert_array_equal(got, cast_to(expected, NP_DTYPES[dtype]))


def test_iota_wraps_in_int32() -> None:
    out = SPEC.semantics(pattern=[[2**30, 3]], offset=0, channel_multiplier=0, dst_shape=(1, 3))
    np.testing.assert_array_equal(out, [[0, 2**30, -(2**31)]])


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.GPSIMD,
    attrs={"pattern": [[1, 4], [4, 8]], "offset": 0, "channel_multiplier": 32},
    dst=tile("dst", (128, 32), "int32", SBUF),
)


ACCEPTED: list[Any] = on_each_target("pattern-covering-dst")
VIOLATIONS: list[Any] = [
    violation("not-a-list", ["pattern 5", "[step, num]"], attrs={"pattern": 5}),
    violation(
        "too-many-dims",
        ["5 [step, num] pairs", "1 to 4", "tile_pattern_max_dims"],
        attrs={"pattern": [[1, 2]] * 5},
    ),
    violation("zero-num", ["num below 1"], attrs={"pattern": [[1, 0], [1, 32]]}),
    violation("size", ["covers 16 elements", "dst has 32"], attrs={"pattern": [[1, 16]]}),
    violation("offset", ["offset 1.5", "int32"], attrs={"offset": 1.5}),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int) -> Any:
    return CHECK(target, {"pattern": [[1, free]]}, dst=tile("dst", (128, free), "int32"))


COST_GROWTH = Growth(_sized, least_cost(Engine.GPSIMD))


def test_iota_cost_is_startup_plus_n() -> None:
    # ISA-old: 150 + N GpSimd cycles.
    assert SPEC.cost(_sized("trn1", 1000)) == 1150
