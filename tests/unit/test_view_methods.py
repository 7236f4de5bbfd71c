"""NkiTensor view methods (permute, expand_dim, squeeze_dim, reshape_dim, flatten_dims):
kernels move data through each view and the result is compared with the same view taken by
NumPy on the input.

Ref: nki.language.NkiTensor (view operations share storage; on-chip tensors keep the
partition dim first).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import NeuronEmuError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def _kernel(in_shape, tile_shape, view: str, out_shape, *, src_view: str = "a") -> str:
    """Load `src_view` of input `a` into SBUF tile `t` (tile_shape), copy `view` (of t) into
    a fresh tile with the Vector engine, and store it to `out`."""
    return (
        HEADER
        + f"""@nki.jit
def k(a):
    out = nl.ndarray({out_shape}, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray({tile_shape}, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src={src_view})
    u = nl.ndarray({out_shape}, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src={view})
    nisa.dma_copy(dst=out, src=u)
    return out
"""
    )


def _run(tmp_path, source: str, a: np.ndarray) -> np.ndarray:
    path = tmp_path / "k.py"
    path.write_text(source)
    return neuronemu.run(str(path), {"a": a}).outputs["out"]


def _data(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@settings(max_examples=5, deadline=None)
@given(p=st.integers(1, 128), b=st.integers(1, 5), c=st.integers(1, 6), seed=st.integers(0, 99))
def test_permute_free_dims(tmp_path_factory, p, b, c, seed):
    a = _data(seed, (p, b, c))
    out = _run(
        tmp_path_factory.mktemp("k"),
        _kernel((p, b, c), (p, b, c), "t.permute((0, 2, 1))", (p, c, b)),
        a,
    )
    np.testing.assert_array_equal(out, np.transpose(a, (0, 2, 1)))


def test_permute_of_an_hbm_tensor_may_move_any_dim(tmp_path):
    a = _data(1, (4, 32, 6))
    src = _kernel((4, 32, 6), (32, 4, 6), "t", (32, 4, 6), src_view="a.permute((1, 0, 2))")
    np.testing.assert_array_equal(_run(tmp_path, src, a), np.transpose(a, (1, 0, 2)))


def test_expand_dim_then_broadcast(tmp_path):
    a = _data(2, (16, 8))
    src = _kernel((16, 8), (16, 8), "t.expand_dim(dim=1).broadcast(1, size=3)", (16, 3, 8))
    np.testing.assert_array_equal(
        _run(tmp_path, src, a), np.broadcast_to(a[:, None, :], (16, 3, 8))
    )


def test_squeeze_dim_and_negative_dims(tmp_path):
    a = _data(3, (16, 1, 8))
    src = _kernel((16, 1, 8), (16, 1, 8), "t.squeeze_dim(-2)", (16, 8))
    np.testing.assert_array_equal(_run(tmp_path, src, a), a[:, 0, :])


@pytest.mark.parametrize(
    ("split", "sizes"), [("(4, 6)", (4, 6)), ("(4, -1)", (4, 6)), ("(-1, 3, 2)", (4, 3, 2))]
)
def test_reshape_dim_then_slice(tmp_path, split, sizes):
    a = _data(4, (16, 24))
    want = a.reshape(16, *sizes)[:, 1:3]
    src = _kernel((16, 24), (16, 24), f"t.reshape_dim(1, {split})[:, 1:3]", want.shape)
    np.testing.assert_array_equal(_run(tmp_path, src, a), want)


def test_flatten_dims_and_roundtrip_with_reshape_dim(tmp_path):
    a = _data(5, (8, 2, 3, 4))
    src = _kernel((8, 2, 3, 4), (8, 2, 3, 4), "t.flatten_dims(1, 2)", (8, 6, 4))
    np.testing.assert_array_equal(_run(tmp_path, src, a), a.reshape(8, 6, 4))
    src = _kernel(
        (8, 2, 3, 4),
        (8, 2, 3, 4),
        "t.flatten_dims(start_dim=1, end_dim=2).reshape_dim(1, (2, 3)).permute((0, 3, 2, 1))",
        (8, 4, 3, 2),
    )
    np.testing.assert_array_equal(_run(tmp_path, src, a), np.transpose(a, (0, 3, 2, 1)))


def test_select_removes_the_dim(tmp_path):
    a = _data(6, (16, 5, 8))
    src = _kernel((16, 5, 8), (16, 5, 8), "t.select(1, 3)", (16, 8))
    np.testing.assert_array_equal(_run(tmp_path, src, a), a[:, 3, :])
    b = _data(7, (4, 16, 8))
    src = _kernel((4, 16, 8), (16, 8), "t", (16, 8), src_view="a.select(0, 2)")
    np.testing.assert_array_equal(_run(tmp_path, src, b), b[2])


@pytest.mark.parametrize(
    ("view", "tile", "message"),
    [
        ("t.select(1, 8)", (16, 8), "index must be an int in [0, 8)"),
        ("t.select(1, t)", (16, 8), "not supported by neuronemu yet"),
        ("t.permute((1, 0))", (16, 8), "partition dim of an on-chip tensor stays first"),
        ("t.permute((0, 0))", (16, 8), "not a permutation"),
        ("t.expand_dim(0)", (16, 8), "dim 0 is the partition dim"),
        ("t.squeeze_dim(1)", (16, 8), "dim 1 has size 8, not 1"),
        ("t.reshape_dim(1, (3, 3))", (16, 8), "does not split dim 1 of size 8"),
        ("t.reshape_dim(1, (-1, -1))", (16, 8), "one may be -1"),
        ("t.reshape_dim(0, (8,))", (16, 8), "dim 0 is the partition dim"),
        ("t.permute((0, 2, 1)).flatten_dims(1, 2)", (16, 2, 4), "not contiguous"),
        ("t.flatten_dims(2, 1)", (16, 2, 4), "end_dim 1 is before start_dim 2"),
        ("t.squeeze_dim(5)", (16, 8), "dim must be an int in [-2, 2)"),
    ],
)
def test_bad_view_is_a_located_error(tmp_path, view, tile, message):
    src = _kernel(tile, tile, view, tile)
    with pytest.raises(NeuronEmuError) as info:
        _run(tmp_path, src, _data(0, tile))
    text = str(info.value)
    assert message in text, text
    assert info.value.span is not None and info.value.span.line == 11  # the tensor_copy line


def test_reshape_dim_of_the_partition_dim_to_itself_is_the_same_view(tmp_path):
    a = _data(8, (16, 8))
    src = _kernel((16, 8), (16, 8), "t.reshape_dim(0, (16,))", (16, 8))
    np.testing.assert_array_equal(_run(tmp_path, src, a), a)
