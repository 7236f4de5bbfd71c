"""quantize_mx: semantics vs a per-group loop written from the docs, each constraint's message,
cost growth."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
from _isa_testing import SBUF, make_check, seeds, tile
from _spec_testing import Growth, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine
from neuronemu_isa.numerics import cast_to, dtype_of

SPEC = REGISTRY["quantize_mx"]
BF16 = ml_dtypes.bfloat16
# nki.isa.quantize_mx: E_max, the element type's largest unbiased exponent, and the type.
FORMATS = {
    "float8_e4m3fn_x4": (8, ml_dtypes.float8_e4m3fn),
    "float8_e5m2_x4": (15, ml_dtypes.float8_e5m2),
}


def reference(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(words [P, F/4] uint32, E8M0 codes [P/8, F/4]) by the doc's formula, group by group:
    X = 2**(floor(log2(max|V|)) - (E_max - 1)), 2**-127 for an all-zero group; V / X rounded
    to the element type; value j of a word in its byte j."""
    e_max, element = FORMATS[fmt]
    p, f = x.shape
    q = np.zeros((p, f), np.float64)
    codes = np.zeros((p // 8, f // 4), np.int64)
    for g in range(p // 8):
        for c in range(f // 4):
            block = x[8 * g : 8 * g + 8, 4 * c : 4 * c + 4].astype(np.float64)
            amax = float(np.abs(block).max())
            e = -127 if amax == 0 else max(-127, math.floor(math.log2(amax)) - (e_max - 1))
            codes[g, c] = e + 127
            q[8 * g : 8 * g + 8, 4 * c : 4 * c + 4] = block / 2.0**e
    octets = q.astype(element).view(np.uint8).astype(np.uint32).reshape(p, f // 4, 4)
    words = octets[..., 0] | octets[..., 1] << 8 | octets[..., 2] << 16 | octets[..., 3] << 24
    return words, codes


def _scale_row(group: int) -> int:
    """The doc's scale layout: group g (partitions 8g..8g+7) in its quadrant's first 4 rows."""
    return (8 * group // 32) * 32 + group % 4


@settings(deadline=None)
@given(
    quadrants=st.integers(1, 4),
    cols=st.integers(1, 12),
    fmt=st.sampled_from(sorted(FORMATS)),
    e8m0=st.booleans(),
    magnitude=st.integers(-130, 120),
    zero_groups=st.booleans(),
    seed=seeds,
)
def test_quantize_mx_scales_each_group_and_rounds_its_values(
    quadrants: int, cols: int, fmt: str, e8m0: bool, magnitude: int, zero_groups: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    p, f = 32 * quadrants, 4 * cols
    x = rng.standard_normal((p, f)) * 2.0 ** rng.integers(-3, 4, (p, f)) * 2.0**magnitude
    if zero_groups:
        x[0:8, 0:4] = 0.0
    x = x.astype(BF16)
    old = rng.integers(0, 256, (p, cols)).astype(np.uint8)
    scale_in = old.view(ml_dtypes.float8_e8m0fnu) if e8m0 else old
    out = SPEC.semantics(x, scale_in.copy(), dst_dtype_name=fmt)
    words = cast_to(np.asarray(out["dst"]), dtype_of(fmt))
    want_words, codes = reference(x, fmt)
    np.testing.assert_array_equal(words.reshape(p, cols), want_words)
    got_scale = np.asarray(out["dst_scale"]).reshape(p, cols)
    got_codes = got_scale.view(np.uint8) if e8m0 else got_scale
    rows = [_scale_row(g) for g in range(p // 8)]
    np.testing.assert_array_equal(got_codes[rows], codes)
    others = [r for r in range(p) if r not in rows]
    np.testing.assert_array_equal(got_codes[others], old[others])  # the other rows are kept


def test_quantize_mx_gives_a_group_with_an_infinity_the_nan_scale() -> None:
    # ones: floor(log2 1) - (8 - 1) = -7, code 120; the group with inf: NaN, 0xFF (inferred)
    x = np.ones((32, 8), np.float32)
    x[3, 5] = np.inf
    out = SPEC.semantics(
        x.astype(BF16), np.zeros((4, 2), np.uint8), dst_dtype_name="float8_e4m3fn_x4"
    )
    assert np.asarray(out["dst_scale"]).tolist() == [
        [120, 255],
        [120, 120],
        [120, 120],
        [120, 120],
    ]


CHECK = checker(
    Engine.VECTOR,
    target="trn3",
    dst=tile("dst", (128, 512), "float8_e4m3fn_x4", SBUF),
    src=tile("src", (128, 2048), "bfloat16", SBUF),
    dst_scale=tile("dst_scale", (128, 512), "uint8", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("max-tile", targets=("trn3",)),
    *on_each_target(
        "one-quadrant-small-scale",
        targets=("trn3",),
        dst=tile("dst", (32, 8), "float8_e5m2_x4"),
        src=tile("src", (32, 32), "float16"),
        dst_scale=tile("dst_scale", (4, 8), "float8_e8m0fnu"),
    ),
    # nki/deep-dives/mxfp-matmul.rst: scales packed at offset 4 of each quadrant ([4:, :]).
    *on_each_target(
        "packed-scales", targets=("trn3",), dst_scale=tile("dst_scale", (124, 512), "uint8")
    ),
]
VIOLATIONS: list[Any] = [
    violation("nc-version", ["quantize_mx needs NC-v4+", "trn2 is NC-v3"], target="trn2"),
    violation(
        "partitions",
        ["partition sizes differ", "dst 64"],
        dst=tile("dst", (64, 512), "float8_e4m3fn_x4"),
    ),
    violation(
        "quadrants",
        ["src has 48 partitions", "multiple of 32"],
        src=tile("src", (48, 2048), "bfloat16"),
        dst=tile("dst", (48, 512), "float8_e4m3fn_x4"),
        dst_scale=tile("dst_scale", (48, 512), "uint8"),
    ),
    violation(
        "pack",
        ["src has 2046 elements", "multiple of 4"],
        src=tile("src", (128, 2046), "bfloat16"),
        dst_scale=tile("dst_scale", (128, 511), "uint8"),
    ),
    violation(
        "dst-free",
        ["dst has 256 elements per partition", "pack into 512"],
        dst=tile("dst", (128, 256), "float8_e4m3fn_x4"),
    ),
    violation(
        "scale-rows",
        ["dst_scale has 99 partitions", "need 100"],
        dst_scale=tile("dst_scale", (99, 512), "uint8"),
    ),
    violation(
        "scale-cols",
        ["dst_scale has 128 elements per partition", "512 scaling groups"],
        dst_scale=tile("dst_scale", (128, 128), "uint8"),
    ),
]


def _sized(target: str, free: int) -> Any:
    tiles = {
        "dst": tile("dst", (128, free), "float8_e4m3fn_x4"),
        "src": tile("src", (128, 4 * free), "bfloat16"),
        "dst_scale": tile("dst_scale", (128, free), "uint8"),
    }
    return make_check(target, Engine.VECTOR, tiles, {})


# trainium3_arch.rst: four source values per partition per cycle, above the MIN_II floor.
COST_GROWTH = Growth(_sized, least_cost(Engine.VECTOR), "free", (1, 16384), {"target": ("trn3",)})


def test_quantize_mx_streams_four_values_per_partition_per_cycle() -> None:
    assert SPEC.cost(CHECK()) == 2048 // 4
