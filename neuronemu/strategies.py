"""Hypothesis strategies for kernel tests: tile shapes within a target's limits and input
arrays of any supported dtype, with adversarial values on request. Needs `hypothesis`
(neuronemu's `test` extra).

    from hypothesis import given
    from neuronemu import strategies as nst

    @given(x=nst.arrays("float32", nst.shapes(max_free=512), values="large"))
    def test_softmax(x):
        assert_kernel_matches("softmax.py", reference, {"x": x})
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from neuronemu_isa.numerics import cast_to, dtype_of, is_float

__all__ = ["shapes", "arrays", "VALUES", "cast_to", "dtype_of"]

PMAX = 128  # nki.language.tile_size.pmax on every target


def shapes(
    *,
    max_partitions: int = PMAX,
    max_free: int = 512,
    free_dims: int = 1,
    tiles: int = 1,
    ragged: bool = True,
) -> st.SearchStrategy[tuple[int, ...]]:
    """[P, F...] shapes: P up to `tiles` x `max_partitions` (a multiple of it unless `ragged`),
    each free dim up to `max_free`."""
    if ragged:
        rows = st.integers(1, tiles * max_partitions)
    else:
        rows = st.integers(1, tiles).map(lambda t: t * max_partitions)
    free = st.tuples(*(st.integers(1, max_free) for _ in range(free_dims)))
    return st.tuples(rows, free).map(lambda rf: (rf[0], *rf[1]))


# Value families, as (low, high) magnitudes of a uniform draw or a named set.
VALUES = {
    "normal": "standard normal values",
    "small": "uniform in [-1, 1]",
    "large": "magnitudes up to 1e4 (exp overflows fp32 past ~88.7)",
    "near_overflow": "within a few units of the dtype's largest finite value, and of 88.7",
    "subnormal": "values below the dtype's smallest normal",
    "integers": "small integers, exact in every float dtype",
    "adversarial": "a mix of all of the above, zeros and signed zeros",
}


def _family(name: str, dtype: str, nan: bool, inf: bool) -> st.SearchStrategy[float]:
    info = np.finfo(np.float32) if not is_float(dtype) else _finfo(dtype)
    big, tiny = float(info.max), float(info.tiny)
    families = {
        "normal": st.floats(-4, 4, allow_nan=False, allow_infinity=False),
        "small": st.floats(-1, 1, allow_nan=False, allow_infinity=False),
        "large": st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False),
        "near_overflow": st.sampled_from([big, -big, big * 0.999, 88.0, 88.7, 89.0, -88.7]),
        "subnormal": st.floats(-tiny, tiny, allow_nan=False, allow_infinity=False),
        "integers": st.integers(-64, 64).map(float),
    }
    if name == "adversarial":
        strat = st.one_of(*families.values(), st.sampled_from([0.0, -0.0]))
    elif name in families:
        strat = families[name]
    else:
        raise ValueError(f"values={name!r}: one of {', '.join(VALUES)}")
    extra = [float("nan")] * nan + [float("inf"), float("-inf")] * inf
    return st.one_of(strat, st.sampled_from(extra)) if extra else strat


def _finfo(dtype: str) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(dtype_of(dtype))


def arrays(
    dtype: str,
    shape: tuple[int, ...] | st.SearchStrategy[tuple[int, ...]],
    *,
    values: str = "normal",
    nan: bool = False,
    inf: bool = False,
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype` (any neuronemu dtype name: "bfloat16", "float8_e4m3", "int32"...)
    whose values come from the family `values` (see VALUES); `nan` / `inf` mix those in.
    Float values are rounded to the dtype (so they are exactly representable in it)."""
    shape_st = shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))
    dt = dtype_of(dtype)

    def build(shape_and_seed: tuple[tuple[int, ...], list[float]]) -> np.ndarray:
        shape_, flat = shape_and_seed
        data = np.array(flat, dtype=np.float64).reshape(shape_)
        if is_float(dtype):
            with np.errstate(over="ignore", invalid="ignore"):
                return np.asarray(cast_to(data.astype(np.float32), dt))
        info = np.iinfo(dt) if dt.kind != "b" else None
        data = np.nan_to_num(np.rint(data))
        if info is not None:
            data = np.clip(data, info.min, info.max)
        return data.astype(dt)

    element = _family(values, dtype, nan and is_float(dtype), inf and is_float(dtype))

    @st.composite
    def drawn(draw: Any) -> np.ndarray:
        # (a composite: a failing example prints as the array, not as the calls that made it)
        shape_ = draw(shape_st)
        n = int(np.prod(shape_))
        # A few drawn values spread over the array: drawing every element one by one would
        # make Hypothesis slow on [128, 512] tiles; the rest repeat them.
        seeds = draw(st.lists(element, min_size=1, max_size=min(n, 64)))
        return build((shape_, [seeds[i % len(seeds)] for i in range(n)]))

    return drawn()
