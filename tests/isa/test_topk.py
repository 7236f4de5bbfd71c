"""topk: semantics vs a per-group NumPy loop written from the docs, each constraint's message,
cost growth."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
from _isa_testing import SBUF, TARGETS, make_check, seeds, tile
from _spec_testing import Growth, checker, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.instructions.topk import GROUP

SPEC = REGISTRY["topk"]
BF16 = ml_dtypes.bfloat16


def _snake(src: np.ndarray, group: int, n: int) -> np.ndarray:
    """Group `group`'s n snake elements: element s at partition s % 16, column s // 16."""
    return np.array([src[16 * group + s % 16, s // 16] for s in range(n)], dtype=np.float32)


def _written(out: np.ndarray, group: int, k: int) -> np.ndarray:
    """Result j of a group, read back from partition j % 16, column j // 16."""
    return np.array([out[16 * group + j % 16, j // 16] for j in range(k)])


@settings(deadline=None)
@given(
    groups=st.integers(1, 8),
    n=st.integers(8, 200),
    k_frac=st.floats(0, 1),
    extra_cols=st.integers(0, 3),
    sort=st.booleans(),
    seed=seeds,
)
def test_topk_writes_each_groups_k_largest_with_their_snake_positions(
    groups: int, n: int, k_frac: float, extra_cols: int, sort: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    p, cols = 16 * groups, math.ceil(n / 16) + extra_cols
    # Distinct values (distinct magnitude bit patterns, random signs): one top-k set.
    bits = rng.choice(np.arange(0x0100, 0x7F00, dtype=np.uint16), p * cols, replace=False)
    bits |= (rng.integers(0, 2, p * cols) << 15).astype(np.uint16)
    src = bits.reshape(p, cols).view(BF16)
    k = max(1, min(n, int(k_frac * n)))
    old_v = rng.standard_normal((p, k)).astype(BF16)
    old_i = rng.integers(0, 99, (p, k)).astype(np.uint32)
    out = SPEC.semantics(src, old_v.copy(), old_i.copy(), n=n, sorted=sort)
    vals, idx = np.asarray(out["val_dst"]), np.asarray(out["idx_dst"])
    width = math.ceil(k / 16)
    for g in range(groups):
        snake = _snake(src.astype(np.float32), g, n)
        want = sorted(range(n), key=lambda s: -snake[s])[:k]
        got_i = _written(idx, g, k).astype(np.int64)
        got_v = _written(vals, g, k).astype(np.float32)
        assert sorted(got_i.tolist()) == sorted(want)  # the k largest, by snake position
        np.testing.assert_array_equal(got_v, snake[got_i])  # paired with their values
        # (inferred) sorted=True: descending; sorted=False: ascending (docs 2.32)
        np.testing.assert_array_equal(got_v, np.sort(got_v)[::-1] if sort else np.sort(got_v))
        rows = slice(16 * g, 16 * g + 16)
        # The other free positions keep their contents, bit for bit.
        np.testing.assert_array_equal(
            vals[rows, width:].view(np.uint16), old_v[rows, width:].view(np.uint16)
        )
        np.testing.assert_array_equal(idx[rows, width:], old_i[rows, width:])
        # The unspecified slots of the last written position are marked.
        for j in range(k, 16 * width):
            assert np.isnan(float(vals[16 * g + j % 16, j // 16]))
            assert idx[16 * g + j % 16, j // 16] == 0xFFFFFFFF


def test_topk_ignores_slots_past_n() -> None:
    src = np.zeros((16, 2), np.float32)
    src[:, 0] = np.arange(16)
    src[0:4, 1] = [100, 101, 102, 103]  # positions 16..19; n = 18 keeps 16 and 17 only
    out = SPEC.semantics(
        src.astype(BF16), np.zeros((16, 3), BF16), np.zeros((16, 3), np.uint32), n=18, sorted=True
    )
    assert _written(np.asarray(out["idx_dst"]), 0, 3).tolist() == [17, 16, 15]
    assert _written(np.asarray(out["val_dst"]), 0, 3).astype(np.float32).tolist() == [101, 100, 15]


def test_topk_group_size_matches_every_target() -> None:
    for target in ("trn1", "trn2", "trn3"):
        assert load_arch(target).tile_topk_group_partitions == GROUP


CHECK = checker(
    Engine.GPSIMD,
    attrs={"n": 1000, "sorted": False},
    val_dst=tile("val_dst", (128, 64), "bfloat16", SBUF),
    idx_dst=tile("idx_dst", (128, 64), "uint32", SBUF),
    src=tile("src", (128, 63), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [
    *on_each_target("eight-groups"),
    *on_each_target(
        "doc-example",
        attrs={"n": 42, "sorted": True},
        val_dst=tile("val_dst", (16, 8), "bfloat16"),
        idx_dst=tile("idx_dst", (16, 8), "uint32"),
        src=tile("src", (16, 3), "bfloat16"),
    ),
]
VIOLATIONS: list[Any] = [
    violation(
        "partitions",
        ["partition sizes differ", "idx_dst 64"],
        idx_dst=tile("idx_dst", (64, 64), "uint32"),
    ),
    violation(
        "groups",
        ["src has 24 partitions", "multiple of 16", "tile_topk_group_partitions"],
        src=tile("src", (24, 63), "bfloat16"),
        val_dst=tile("val_dst", (24, 64), "bfloat16"),
        idx_dst=tile("idx_dst", (24, 64), "uint32"),
    ),
    violation(
        "n-small",
        ["n is 7", "8..65535", "tile_topk_n_min"],
        attrs={"n": 7},
        val_dst=tile("val_dst", (128, 4), "bfloat16"),
        idx_dst=tile("idx_dst", (128, 4), "uint32"),
    ),
    violation("n-large", ["n is 65536", "8..65535"], attrs={"n": 65536}),
    violation("n-type", ["n is 10.0", "must be an int"], attrs={"n": 10.0}),
    violation("snake", ["src has 63 elements", "n=1009 needs", "= 64"], attrs={"n": 1009}),
    violation(
        "k-pair",
        ["idx_dst has 32 elements per partition and val_dst 64"],
        idx_dst=tile("idx_dst", (128, 32), "uint32"),
    ),
    violation(
        "k-over-n",
        ["k=64 results", "only n=40"],
        attrs={"n": 40},
    ),
    violation(
        "k-limit",
        ["k=32768", "at most 32767", "tile_topk_k_max"],
        attrs={"n": 65535},
        src=tile("src", (128, 4096), "bfloat16"),
        val_dst=tile("val_dst", (128, 32768), "bfloat16"),
        idx_dst=tile("idx_dst", (128, 32768), "uint32"),
    ),
]


def _sized(target: str, n: int) -> Any:
    tiles = {
        "val_dst": tile("val_dst", (128, 8), "bfloat16"),
        "idx_dst": tile("idx_dst", (128, 8), "uint32"),
        "src": tile("src", (128, math.ceil(n / 16)), "bfloat16"),
    }
    return make_check(target, Engine.GPSIMD, tiles, {"n": n, "sorted": False})


# nki.isa.topk: 4n + k cycles, so the cost grows with the snake (n) from 4*8 + 8 at n = 8.
COST_GROWTH = Growth(_sized, size="n", sizes=(8, 65535), params={"target": TARGETS})


def test_topk_cost_is_the_documented_4n_plus_k() -> None:
    check = CHECK(attrs={"n": 1000})
    assert SPEC.cost(check) == 4 * 1000 + 64
