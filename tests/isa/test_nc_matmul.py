"""nc_matmul: semantics vs NumPy, each constraint's message, cost growth and the fp32 rate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    fired,
    random_array,
    seeds,
    tile,
)
from _spec_testing import Growth, checker, on_each_target, priced, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["nc_matmul"]
F32 = np.float32

# Input pairs the hardware accepts: fp32 only with fp32; the narrow types mix freely.
NARROW = ("bfloat16", "float16", "float8_e4m3")
dtype_pairs = st.one_of(
    st.just(("float32", "float32")), st.tuples(st.sampled_from(NARROW), st.sampled_from(NARROW))
)


def _run(
    stationary: np.ndarray, moving: np.ndarray, accumulate: Any, dst: np.ndarray | None = None
) -> np.ndarray:
    kwargs = {} if dst is None else {"dst": dst}
    result = np.asarray(
        SPEC.semantics(stationary=stationary, moving=moving, accumulate=accumulate, **kwargs)
    )
    return cast_to(result, np.dtype(F32))  # dst is PSUM fp32


# Semantics -------------------------------------------------------------------------------


@st.composite
def operands(draw: Any) -> tuple[np.ndarray, np.ndarray]:
    """stationary [K, M] and moving [K, N], any sizes the PE array takes, an accepted dtype pair."""
    k, m, n = draw(st.integers(1, 128)), draw(st.integers(1, 128)), draw(st.integers(1, 512))
    dtypes, seed = draw(dtype_pairs), draw(seeds)
    stationary = random_array(seed, (k, m), dtypes[0], -2, 2)
    return stationary, random_array(seed + 1, (k, n), dtypes[1], -2, 2)


@settings(deadline=None)
@given(pair=operands(), accumulate=st.sampled_from([False, None]))
def test_nc_matmul_is_stationary_transposed_times_moving(
    pair: tuple[np.ndarray, np.ndarray], accumulate: Any
) -> None:
    stationary, moving = pair
    k = stationary.shape[0]
    out = _run(stationary, moving, accumulate)
    assert out.shape == (stationary.shape[1], moving.shape[1])
    expected = stationary.astype(F32).T @ moving.astype(F32)
    assert_bits_equal(out, expected)
    # And, independently of the summation order, it is the exact product within fp32 error.
    exact = stationary.astype(np.float64).T @ moving.astype(np.float64)
    bound = (
        k * 2.0**-23 * (np.abs(stationary.astype(np.float64)).T @ np.abs(moving.astype(np.float64)))
    )
    assert (np.abs(out.astype(np.float64) - exact) <= bound + 1e-30).all()


@settings(deadline=None)
@given(pair=operands(), seed=seeds)
def test_nc_matmul_accumulate_adds_to_dst(pair: tuple[np.ndarray, np.ndarray], seed: int) -> None:
    stationary, moving = pair
    dst = random_array(seed, (stationary.shape[1], moving.shape[1]), "float32", -100, 100)
    out = _run(stationary, moving, True, dst)
    expected = dst + (stationary.astype(F32).T @ moving.astype(F32))
    assert_bits_equal(out, expected)


def test_nc_matmul_flattens_the_free_dims_of_moving() -> None:
    rng = np.random.default_rng(5)
    stationary = rng.standard_normal((16, 8)).astype(F32)
    moving = rng.standard_normal((16, 4, 8)).astype(F32)
    out = _run(stationary, moving, False)
    np.testing.assert_allclose(out, stationary.T @ moving.reshape(16, 32), rtol=1e-5, atol=1e-5)


def test_nc_matmul_small_example() -> None:
    stationary = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=F32)  # [K=2, M=2]
    moving = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], dtype=F32)  # [K=2, N=3]
    np.testing.assert_array_equal(
        _run(stationary, moving, False), [[1.0, 3.0, 4.0], [2.0, 4.0, 6.0]]
    )
    np.testing.assert_array_equal(
        _run(stationary, moving, True, np.ones((2, 3), F32)), [[2.0, 4.0, 5.0], [3.0, 5.0, 7.0]]
    )


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.TENSOR,
    dst=tile("dst", (128, 512), "float32", PSUM),
    stationary=tile("stationary", (128, 128), "bfloat16", SBUF),
    moving=tile("moving", (128, 512), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("full-tile"),
    *on_each_target(
        "fp32",
        stationary=tile("stationary", (128, 128), "float32"),
        moving=tile("moving", (128, 512), "float32"),
    ),
    *on_each_target(
        "mixed-accumulate",
        attrs={"accumulate": True, "perf_mode": "none"},
        stationary=tile("stationary", (128, 128), "float16"),
        moving=tile("moving", (128, 512), "bfloat16"),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "contraction-sizes",
        ["partition sizes differ", "stationary 128", "moving 64"],
        moving=tile("moving", (64, 512), "bfloat16"),
    ),
    violation(
        "stationary-partitions",
        ["stationary partition size 129 exceeds 128", "tile_pmax"],
        stationary=tile("stationary", (129, 128), "bfloat16"),
        moving=tile("moving", (129, 512), "bfloat16"),
    ),
    violation(
        "stationary-free",
        ["stationary free size 160 exceeds 128", "gemm_stationary_fmax"],
        stationary=tile("stationary", (128, 160), "bfloat16"),
        dst=tile("dst", (160, 512), "float32", PSUM),
    ),
    violation(
        "moving-free",
        ["moving free size 640 exceeds 512", "gemm_moving_fmax"],
        moving=tile("moving", (128, 640), "bfloat16"),
        dst=tile("dst", (128, 640), "float32", PSUM),
    ),
    violation(
        "fp32-stationary-only",
        ["stationary is float32 and moving is bfloat16", "both must be"],
        stationary=tile("stationary", (128, 128), "float32"),
    ),
    violation(
        "fp32-moving-only",
        ["stationary is bfloat16 and moving is float32"],
        moving=tile("moving", (128, 512), "float32"),
    ),
    violation(
        "dst-partitions",
        ["dst has shape [64, 512]", "give [128, 512]"],
        dst=tile("dst", (64, 512), "float32", PSUM),
    ),
    violation(
        "dst-free",
        ["dst has shape [128, 256]", "N=512"],
        dst=tile("dst", (128, 256), "float32", PSUM),
    ),
    violation(
        "tile-position",
        ["tile_position (0, 64) and tile_size ()", "both"],
        attrs={"tile_position": (0, 64)},
    ),
    violation(
        "transpose-dtype",
        ["dst is float32", "writes stationary's dtype bfloat16"],
        attrs={"is_transpose": True},
    ),
    violation(
        "dst-dtype",
        ["dst has dtype bfloat16", "allowed on trn2: float32"],
        dst=tile("dst", (128, 512), "bfloat16", PSUM),
    ),
    violation(
        "perf-mode", ["perf_mode='fp8_x4'", "not supported yet"], attrs={"perf_mode": "fp8_x4"}
    ),
    violation(
        "double-row-on-trn1",
        ["double_row needs NC-v3+", "target trn1 is NC-v2"],
        target="trn1",
        attrs={"perf_mode": "double_row"},
        stationary=tile("stationary", (64, 2, 128), "float8_e4m3", SBUF),
        moving=tile("moving", (64, 2, 512), "float8_e4m3", SBUF),
    ),
    violation(
        "double-row-bf16",
        ["double_row takes fp8 inputs", "stationary is bfloat16"],
        attrs={"perf_mode": "double_row"},
        stationary=tile("stationary", (64, 2, 128), "bfloat16", SBUF),
        moving=tile("moving", (64, 2, 512), "bfloat16", SBUF),
    ),
    violation(
        "stationary-outside-its-pe-tile",
        ["does not fit the 64x128 PE tile"],
        attrs={"tile_position": (0, 0), "tile_size": (64, 128)},
    ),
]


@pytest.mark.parametrize("mode", ["double_row", "double_row_gen3"])  # the older NKI's name
def test_nc_matmul_double_row_contracts_over_both_rows(mode) -> None:
    rng = np.random.default_rng(4)
    import ml_dtypes

    stat = rng.standard_normal((16, 2, 8)).astype(ml_dtypes.float8_e4m3)
    mov = rng.standard_normal((16, 2, 12)).astype(ml_dtypes.float8_e4m3)
    out = SPEC.semantics(stat, mov, accumulate=False, perf_mode=mode)
    expected = np.einsum("krm,krn->mn", stat.astype(np.float64), mov.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    check = CHECK(
        "trn2",
        {"perf_mode": mode},
        dst=tile("dst", (8, 12), "float32", PSUM),
        stationary=tile("stationary", (16, 2, 8), "float8_e4m3", SBUF),
        moving=tile("moving", (16, 2, 12), "float8_e4m3", SBUF),
    )
    assert fired(SPEC, check) == []
    single = CHECK(
        "trn2",
        dst=tile("dst", (8, 12), "float32", PSUM),
        stationary=tile("stationary", (32, 8), "float8_e4m3", SBUF),
        moving=tile("moving", (32, 12), "float8_e4m3", SBUF),
    )
    assert SPEC.cost(check) == SPEC.cost(single)  # twice the contraction in the same time


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, k: int, m: int, n: int, dtype: str = "bfloat16") -> Any:
    return CHECK(
        target,
        dst=tile("dst", (m, n), "float32", PSUM),
        stationary=tile("stationary", (k, m), dtype),
        moving=tile("moving", (k, n), dtype),
    )


def _cost(target: str, k: int, m: int, n: int, dtype: str = "bfloat16") -> int:
    return priced(SPEC, _sized(target, k, m, n, dtype))


# Past the flat minimum, any wider moving tile costs strictly more.
COST_GROWTH = Growth(
    _sized,
    size="n",
    sizes=(1, 512),
    params={
        "target": TARGETS,
        "k": range(128, 0, -1),  # the full array first
        "m": range(128, 0, -1),
        "dtype": ("bfloat16", "float16", "float8_e4m3", "float32"),
    },
    knee=(64, 65),
    ratio=1,
    gap=1,
)


@pytest.mark.parametrize("target", TARGETS)
def test_nc_matmul_cost_is_flat_until_the_minimum_then_grows(target: str) -> None:
    min_ii = load_arch(target).cost_min_ii_cycles
    assert _cost(target, 128, 128, 1) == min_ii
    assert _cost(target, 128, 128, 64) == min_ii
    assert _cost(target, 128, 128, 65) > min_ii
    assert _cost(target, 128, 128, 512) > _cost(target, 128, 128, 256)


@pytest.mark.parametrize("target", TARGETS)
def test_nc_matmul_small_stationary_lowers_the_minimum(target: str) -> None:
    # ISA cost notes: max(min(64, N_stationary), N_moving).
    assert _cost(target, 128, 16, 8) == 16
    assert _cost(target, 128, 16, 1) < _cost(target, 128, 128, 1)


@settings(deadline=None)
@given(
    target=st.sampled_from(TARGETS),
    k=st.integers(1, 128),
    m=st.integers(1, 128),
    n=st.integers(1, 512),
)
def test_nc_matmul_fp32_costs_four_times_bf16(target: str, k: int, m: int, n: int) -> None:
    assert _cost(target, k, m, n, "float32") == 4 * _cost(target, k, m, n, "bfloat16")


def test_nc_matmul_transpose_mode_moves_bits_exactly() -> None:
    import ml_dtypes

    stat = np.array([[1.0, np.nan], [np.inf, -0.0], [3.5, -np.inf]], dtype=ml_dtypes.bfloat16)
    ident = np.identity(3, dtype=ml_dtypes.bfloat16)
    out = SPEC.semantics(stat, ident, accumulate=False, is_transpose=True)
    assert out.dtype == stat.dtype
    assert out.tobytes() == np.ascontiguousarray(stat.T).tobytes()
    perm = ident[:, [2, 0, 1]]  # a permutation picks columns in its order
    np.testing.assert_array_equal(
        SPEC.semantics(stat, perm, accumulate=False, is_transpose=True).view(np.uint16),
        np.ascontiguousarray(stat.T[:, [2, 0, 1]]).view(np.uint16),
    )


@pytest.mark.parametrize(
    ("target", "position", "size", "ok"),
    [
        ("trn2", (64, 0), (64, 128), True),
        ("trn2", (96, 32), (32, 32), True),
        ("trn1", (96, 0), (32, 128), False),  # 32-wide tiles need NC-v3
        ("trn2", (64, 0), (32, 128), True),
        ("trn2", (40, 0), (32, 128), False),  # not a multiple of the tile size
    ],
)
def test_nc_matmul_pe_tiling_rules(target, position, size, ok) -> None:
    check = CHECK(
        target,
        {"tile_position": position, "tile_size": size},
        dst=tile("dst", (32, 512), "float32", PSUM),
        stationary=tile("stationary", (32, 32), "bfloat16", SBUF),
        moving=tile("moving", (32, 512), "bfloat16", SBUF),
    )
    assert (fired(SPEC, check) == []) == ok, fired(SPEC, check)
