"""tensor_copy: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

from typing import Any

import pytest
from _isa_testing import (
    FLOATS,
    PSUM,
    SBUF,
    TARGETS,
    make_check,
    tile,
)
from _spec_testing import (
    Growth,
    accepted,
    checker,
    least_cost,
    on_each_target,
    violation,
)

from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["tensor_copy"]


# Semantics: tests/isa/test_copy_semantics.py (shared with the other plain copy).


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.VECTOR,
    dst=tile("dst", (128, 64), "bfloat16", SBUF),
    src=tile("src", (128, 64), "float32", PSUM),
)


_SRC = tile("src", (128, 4, 16), "float32", SBUF)
ACCEPTED: list[Any] = [
    *on_each_target("vector", engine=Engine.VECTOR, src=_SRC),
    *on_each_target("gpsimd", engine=Engine.GPSIMD, src=_SRC),
    accepted("scalar-trn2", target="trn2", engine=Engine.SCALAR),
]
VIOLATIONS: list[Any] = [
    violation(
        "partition-sizes",
        ["partition sizes differ", "dst 64", "src 128"],
        dst=tile("dst", (64, 64), "float32"),
    ),
    violation(
        "free-sizes",
        ["elements per partition differ", "dst 32", "src 64"],
        dst=tile("dst", (128, 32), "float32"),
    ),
    violation("gpsimd-psum-src", ["src is in PSUM", "GpSimd"], engine=Engine.GPSIMD),
    violation(
        "gpsimd-psum-dst",
        ["dst is in PSUM", "GpSimd"],
        engine=Engine.GPSIMD,
        dst=tile("dst", (128, 64), "float32", PSUM),
        src=tile("src", (128, 64), "float32", SBUF),
    ),
    violation(
        "scalar-on-trn1",
        ["Scalar engine", "tensor_copy", "NC-v2"],
        target="trn1",
        engine=Engine.SCALAR,
    ),
]


# Cost ------------------------------------------------------------------------------------


def _sized(
    target: str, engine: Engine, free: int, dtype: str = "float32", dst_dtype: str | None = None
) -> Any:
    tiles = {
        "dst": tile("dst", (128, free), dst_dtype or dtype),
        "src": tile("src", (128, free), dtype),
    }
    return make_check(target, engine, tiles, {})


def _cost(*args: Any, **kwargs: Any) -> int:
    return SPEC.cost(_sized(*args, **kwargs))


# Priced on every engine and target, the Scalar engine on trn1 included.
COST_GROWTH = Growth(
    _sized,
    least_cost(),
    params={"target": TARGETS, "engine": SPEC.engines, "dtype": FLOATS + ("int32",)},
    knee=(64, 4096),
    accepted=False,
)


@pytest.mark.parametrize("free", [1, 63, 64, 65, 512, 4096])
def test_tensor_copy_cost_on_trn1_vector_is_max_64_n(free: int) -> None:
    # nki.isa cost notes (NC-v2): most Vector instructions take max(64, N) cycles.
    assert _cost("trn1", Engine.VECTOR, free) == max(64, free)


def test_tensor_copy_of_16bit_tiles_is_faster_on_trn2_vector() -> None:
    assert _cost("trn2", Engine.VECTOR, 8192, "bfloat16") < _cost(
        "trn2", Engine.VECTOR, 8192, "float32"
    )
    assert _cost("trn2", Engine.VECTOR, 8192, "bfloat16", "float32") == _cost(
        "trn2", Engine.VECTOR, 8192, "float32"
    )
