"""nc_matmul_mx: semantics vs a float64 reference written from the docs, each constraint's
message, cost growth."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from _isa_testing import PSUM, SBUF, make_check, seeds, tile
from _spec_testing import Growth, checker, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["nc_matmul_mx"]
# The packed types: the word, the element type, the bits per value (docs: fp8 x4 is 32-bit,
# fp4 x4 16-bit).
FORMATS = {
    "float8_e4m3fn_x4": (np.uint32, ml_dtypes.float8_e4m3fn, 8),
    "float8_e5m2_x4": (np.uint32, ml_dtypes.float8_e5m2, 8),
    "float4_e2m1fn_x4": (np.uint16, ml_dtypes.float4_e2m1fn, 4),
}


def _random_words(rng: np.random.Generator, shape: tuple[int, int], fmt: str) -> np.ndarray:
    """Words of finite values: each value a random code of the element type, NaN codes
    replaced by zero."""
    word, element, bits = FORMATS[fmt]
    codes = rng.integers(0, 1 << bits, (*shape, 4)).astype(np.uint8)
    finite = np.isfinite(codes.view(element).astype(np.float32))
    codes = np.where(finite, codes, 0).astype(np.uint64)
    return sum(codes[..., j] << np.uint64(bits * j) for j in range(4)).astype(word)


def _values(words: np.ndarray, fmt: str) -> np.ndarray:
    """[K', F] words -> [K', F, 4] float64 values, value j from bits [j*w, (j+1)*w)."""
    _, element, bits = FORMATS[fmt]
    w = words.astype(np.uint64)
    codes = np.stack(
        [(w >> np.uint64(bits * j)) & np.uint64((1 << bits) - 1) for j in range(4)], -1
    )
    return codes.astype(np.uint8).view(element).astype(np.float64)


def _scales(codes: np.ndarray, partitions: int) -> np.ndarray:
    """[K', F] scale factors 2**(code - 127): data partition p's group (p // 8) reads its
    quadrant's row (p // 32) * 32 + (p % 32) // 8 (nki/deep-dives/mxfp-matmul.rst)."""
    rows = [(p // 32) * 32 + (p % 32) // 8 for p in range(partitions)]
    return 2.0 ** (codes[rows].astype(np.float64) - 127)


@settings(deadline=None)
@given(
    quadrants=st.integers(1, 4),
    m=st.integers(1, 64).map(lambda v: 2 * v),
    n=st.integers(1, 96),
    s_fmt=st.sampled_from(sorted(FORMATS)),
    m_fmt=st.sampled_from(sorted(FORMATS)),
    e8m0=st.booleans(),
    accumulate=st.booleans(),
    seed=seeds,
)
def test_nc_matmul_mx_sums_the_dequantized_products_over_partitions_and_x4(
    quadrants: int,
    m: int,
    n: int,
    s_fmt: str,
    m_fmt: str,
    e8m0: bool,
    accumulate: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    k = 32 * quadrants
    stat, mov = _random_words(rng, (k, m), s_fmt), _random_words(rng, (k, n), m_fmt)
    s_codes = rng.integers(117, 137, (k, m)).astype(np.uint8)
    m_codes = rng.integers(117, 137, (k, n)).astype(np.uint8)
    dst = rng.standard_normal((m, n)).astype(np.float32)
    as_scale = (lambda c: c.view(ml_dtypes.float8_e8m0fnu)) if e8m0 else (lambda c: c)
    got = SPEC.semantics(
        stat,
        mov,
        as_scale(s_codes),
        as_scale(m_codes),
        dst,
        accumulate=accumulate,
        stationary_dtype_name=s_fmt,
        moving_dtype_name=m_fmt,
    )
    a = _values(stat, s_fmt) * _scales(s_codes, k)[:, :, None]
    b = _values(mov, m_fmt) * _scales(m_codes, k)[:, :, None]
    terms = np.einsum("pmj,pnj->mnpj", a, b).reshape(m, n, -1)
    want = terms.sum(axis=2) + (dst.astype(np.float64) if accumulate else 0.0)
    # fp32 accumulation of 4K' exact products: within a few fp32 ulps of the sum of |terms|.
    bound = 4 * k * 2.0**-23 * (np.abs(terms).sum(axis=2) + np.abs(dst) * accumulate) + 1e-30
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound)


CHECK = checker(
    Engine.TENSOR,
    target="trn3",
    attrs={"accumulate": False, "tile_position": None, "tile_size": None},
    dst=tile("dst", (128, 512), "float32", PSUM),
    stationary=tile("stationary", (128, 128), "float8_e4m3fn_x4", SBUF),
    moving=tile("moving", (128, 512), "float4_e2m1fn_x4", SBUF),
    stationary_scale=tile("stationary_scale", (128, 128), "uint8", SBUF),
    moving_scale=tile("moving_scale", (128, 512), "float8_e8m0fnu", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("max-tiles", targets=("trn3",)),
    *on_each_target(
        "bf16-whole-psum",
        targets=("trn3",),
        dst=tile("dst", (128, 8192), "bfloat16", PSUM),
        moving=tile("moving", (128, 8192), "float8_e5m2_x4"),
        moving_scale=tile("moving_scale", (128, 8192), "uint8"),
    ),
    *on_each_target(
        "row-tile",
        targets=("trn3",),
        attrs={"tile_position": (64, 0), "tile_size": (64, 128)},
        stationary=tile("stationary", (64, 128), "float8_e4m3fn_x4"),
        moving=tile("moving", (64, 512), "float4_e2m1fn_x4"),
        stationary_scale=tile("stationary_scale", (36, 128), "uint8"),
        moving_scale=tile("moving_scale", (36, 512), "uint8"),
    ),
]
VIOLATIONS: list[Any] = [
    violation("nc-version", ["nc_matmul_mx needs NC-v4+", "trn2 is NC-v3"], target="trn2"),
    violation(
        "contraction",
        ["stationary has 128 partitions and moving 96"],
        moving=tile("moving", (96, 512), "float4_e2m1fn_x4"),
        moving_scale=tile("moving_scale", (96, 512), "uint8"),
    ),
    violation(
        "quadrants",
        ["stationary has 48 partitions", "multiple of 32"],
        stationary=tile("stationary", (48, 128), "float8_e4m3fn_x4"),
        moving=tile("moving", (48, 512), "float4_e2m1fn_x4"),
        stationary_scale=tile("stationary_scale", (48, 128), "uint8"),
        moving_scale=tile("moving_scale", (48, 512), "uint8"),
    ),
    violation(
        "odd-m",
        ["stationary free size 127 must be even", "tile_gemm_stationary_fmax"],
        stationary=tile("stationary", (128, 127), "float8_e4m3fn_x4"),
        stationary_scale=tile("stationary_scale", (128, 127), "uint8"),
        dst=tile("dst", (127, 512), "float32", PSUM),
    ),
    violation(
        "whole-psum",
        ["moving free size 4608 exceeds 4096", "float32 dst"],
        dst=tile("dst", (128, 4608), "float32", PSUM),
        moving=tile("moving", (128, 4608), "float4_e2m1fn_x4"),
        moving_scale=tile("moving_scale", (128, 4608), "uint8"),
    ),
    violation(
        "dst-shape",
        ["dst has shape [128, 256]", "give [128, 512]"],
        dst=tile("dst", (128, 256), "float32", PSUM),
    ),
    violation(
        "stationary-scale",
        ["stationary_scale has 64 partitions", "need 100"],
        stationary_scale=tile("stationary_scale", (64, 128), "uint8"),
    ),
    violation(
        "moving-scale",
        ["moving_scale has 256 elements per partition", "512 scaling groups"],
        moving_scale=tile("moving_scale", (128, 256), "uint8"),
    ),
    violation(
        "columns",
        ["nc_matmul_mx tiles rows only", "column size 128"],
        attrs={"tile_position": (0, 64), "tile_size": (128, 64)},
    ),
    violation(
        "row-size",
        ["tile_size rows 64", "row 32 a multiple of it"],
        attrs={"tile_position": (32, 0), "tile_size": (64, 128)},
        stationary=tile("stationary", (64, 128), "float8_e4m3fn_x4"),
        moving=tile("moving", (64, 512), "float4_e2m1fn_x4"),
    ),
    violation(
        "fit",
        ["stationary's 128 partitions do not fit the 64-row PE tile"],
        attrs={"tile_position": (0, 0), "tile_size": (64, 128)},
    ),
    violation(
        "pairs",
        ["must both be (row, column) pairs"],
        attrs={"tile_position": (0, 0), "tile_size": None},
    ),
]


def _sized(target: str, n: int) -> Any:
    tiles = {
        "dst": tile("dst", (128, n), "float32", PSUM),
        "stationary": tile("stationary", (128, 128), "float8_e4m3fn_x4"),
        "moving": tile("moving", (128, n), "float8_e4m3fn_x4"),
        "stationary_scale": tile("stationary_scale", (128, 128), "uint8"),
        "moving_scale": tile("moving_scale", (128, n), "uint8"),
    }
    return make_check(target, Engine.TENSOR, tiles, {"accumulate": False})


# As an nc_matmul of the x4 shapes: max(min(MIN_II, M), N) cycles, N the moving free size.
COST_GROWTH = Growth(_sized, size="n", sizes=(1, 4096), params={"target": ("trn3",)})


def test_nc_matmul_mx_counts_four_values_per_x4_element_in_its_flops() -> None:
    check = CHECK()
    assert SPEC.flops is not None and SPEC.peak_flops_per_ns is not None
    assert SPEC.flops(check) == 2 * (4 * 128) * 128 * 512
    assert SPEC.peak_flops_per_ns(check) == 315000.0  # trainium3_arch.rst: 315 MX TFLOPS
