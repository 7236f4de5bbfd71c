"""tensor_tensor on int32/uint32 tiles: the default engine and its integer arithmetic.

Ref: nki.isa.tensor_tensor: when every input/output tile is int32 or uint32 the operation
defaults to the GpSimd engine, whose native integer arithmetic is exact for all 32-bit
values; engine=nki.isa.engine.vector overrides it (fp32 math), and a PSUM tile falls back to
the Vector engine. nl.power runs on GpSimd only. Expected values are computed here in int64
(or fp32 for the Vector path), never by the emulator's own semantics.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import ConstraintError

P, F = 16, 40
I32, U32 = np.dtype(np.int32), np.dtype(np.uint32)

# The int64 reference of each op the GpSimd path computes exactly.
EXACT = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "less": lambda a, b: (a < b).astype(np.int64),
    "equal": lambda a, b: (a == b).astype(np.int64),
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
}


def _source(
    op: str, dt1: str, dt2: str, dst: str, *, engine: str | None = None, acc: str = "sbuf"
) -> str:
    eng = f", engine=nisa.engine.{engine}" if engine else ""
    # DMA cannot read PSUM: a PSUM result is copied out to SBUF first.
    evacuate = (
        (
            f"    s = nl.ndarray(({P}, {F}), dtype=nl.{dst}, buffer=nl.sbuf)\n"
            f"    nisa.tensor_copy(dst=s, src=y)\n    y = s\n"
        )
        if acc == "psum"
        else ""
    )
    return f"""import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(a, b):
    out = nl.ndarray(({P}, {F}), dtype=nl.{dst}, buffer=nl.shared_hbm)
    x = nl.ndarray(({P}, {F}), dtype=nl.{dt1}, buffer=nl.sbuf)
    z = nl.ndarray(({P}, {F}), dtype=nl.{dt2}, buffer=nl.sbuf)
    y = nl.ndarray(({P}, {F}), dtype=nl.{dst}, buffer=nl.{acc})
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=z, src=b)
    nisa.tensor_tensor(dst=y, data1=x, data2=z, op=nl.{op}{eng})
{evacuate}    nisa.dma_copy(dst=out, src=y)
    return out
"""


def _run(tmp_path, source: str, a: np.ndarray, b: np.ndarray):
    path = tmp_path / "k.py"
    path.write_text(source)
    result = neuronemu.run(str(path), {"a": a, "b": b})
    engines = [i.engine.value for i in result.program.instrs if i.spec.name == "tensor_tensor"]
    return result.outputs["out"], engines


def _ints(seed: int, dtype: np.dtype) -> np.ndarray:
    """Full-range 32-bit values, with the ones fp32 cannot hold and the extremes mixed in."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, size=(P, F), dtype=np.int64)
    x[0, :8] = [info.min, info.max, 0, 1, 2**24 + 1, 16777217, info.max - 64, 123456789]
    x[:, -1] = rng.integers(-50, 50, size=P) if dtype == I32 else rng.integers(0, 100, size=P)
    return x.astype(dtype)


def _saturate(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x, int(info.min), int(info.max)).astype(dtype)


@pytest.mark.parametrize("op", sorted(EXACT))
@pytest.mark.parametrize(
    "dts",
    [("int32", "int32", "int32"), ("uint32", "int32", "int32"), ("uint32", "uint32", "uint32")],
    ids="-".join,
)
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_all_int32_defaults_to_gpsimd_and_is_exact(tmp_path_factory, op, dts, seed):
    dt1, dt2, dst = (np.dtype(d) for d in dts)
    a, b = _ints(seed, dt1), _ints(seed + 1, dt2)
    out, engines = _run(tmp_path_factory.mktemp("k"), _source(op, *dts), a, b)
    assert engines == ["gpsimd"]
    want = _saturate(EXACT[op](a.astype(np.int64), b.astype(np.int64)), dst)
    np.testing.assert_array_equal(out, want)


def test_engine_vector_override_computes_in_fp32(tmp_path):
    a, b = _ints(7, I32), _ints(8, I32)
    out, engines = _run(tmp_path, _source("add", "int32", "int32", "int32", engine="vector"), a, b)
    assert engines == ["vector"]
    with np.errstate(over="ignore"):
        fp32_sum = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float64)
    want = _saturate(np.rint(fp32_sum), I32)
    np.testing.assert_array_equal(out, want)
    # The inputs hold values fp32 cannot represent, so the two paths must differ somewhere.
    assert (want != _saturate(a.astype(np.int64) + b.astype(np.int64), I32)).any()


@pytest.mark.parametrize(
    "dst,acc,engine",
    [
        ("float32", "sbuf", "vector"),  # a float tile: not all-int32
        ("int32", "psum", "vector"),  # GpSimd cannot reach PSUM: falls back to Vector
        ("int32", "sbuf", "gpsimd"),
    ],
)
def test_default_engine_choice(tmp_path, dst, acc, engine):
    a, b = _ints(1, I32), _ints(2, I32)
    _, engines = _run(tmp_path, _source("add", "int32", "int32", dst, acc=acc), a, b)
    assert engines == [engine]


def test_power_runs_on_gpsimd_and_rejects_vector(tmp_path):
    a = np.full((P, F), 3.0, np.float32)
    b = np.full((P, F), 2.0, np.float32)
    out, engines = _run(tmp_path, _source("power", "float32", "float32", "float32"), a, b)
    assert engines == ["gpsimd"]
    np.testing.assert_array_equal(out, np.full((P, F), 9.0, np.float32))
    with pytest.raises(ConstraintError, match="GpSimd engine only"):
        _run(tmp_path, _source("power", "float32", "float32", "float32", engine="vector"), a, b)
