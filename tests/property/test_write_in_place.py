"""The write-in-place pass (neuronemu/trace/augmented.py, nl_elementwise.result) never changes
values: `t[...] op= v` and `t[...] = nl.f(...)` give the same outputs with it on and off, over
generated dtypes, operators and slices; with it on, an SBUF accumulation of a PSUM tile is one
Vector instruction into the tile, as NumPy's bf16 arithmetic says it should be."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neuronemu

HEADER = (
    "import neuronxcc.nki as nki\n"
    "import neuronxcc.nki.isa as nisa\n"
    "import neuronxcc.nki.language as nl\n\n"
)
DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "float16": np.float16,
    "float32": np.float32,
    "int32": np.int32,
}
ON = ["psum-zero-init", "write-in-place"]
OFF = ["psum-zero-init"]

# (statement template, operand): `{t}` is the updated slice, `{v}` the operand's slice.
FORMS = st.sampled_from(
    [
        "{t} += {v}",
        "{t} -= {v}",
        "{t} *= {v}",
        "{t} &= {v}",
        "{t} <<= {v}",
        "{t} *= 0.5",
        "{t} += 3",
        "{t} = nl.add({t}, {v})",
        "{t} = nl.maximum({v}, {t})",
        "{t} = nl.multiply({v}, 0.25)",
        "{t} = nl.exp({v})",
        "{t} = nl.copy({v})",
    ]
)


def _kernel(t_dtype: str, v_dtype: str, in_psum: bool, form: str, cols: str) -> str:
    operand = "p" if in_psum else "v"
    lines = [
        "@nki.jit",
        "def k(a, b):",
        f"    out = nl.ndarray((128, 64), dtype=nl.{t_dtype}, buffer=nl.shared_hbm)",
        f"    t = nl.ndarray((128, 64), dtype=nl.{t_dtype}, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=t, src=a)",
        f"    v = nl.ndarray((128, 64), dtype=nl.{v_dtype}, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=v, src=b)",
    ]
    if in_psum:
        lines += [
            "    p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)",
            "    nisa.tensor_copy(dst=p, src=v)",
        ]
    lines += [
        "    for i in range(2):",
        "        " + form.format(t=f"t[:, {cols}]", v=f"{operand}[:, {cols}]"),
        "    nisa.dma_copy(dst=out, src=t)",
        "    return out",
    ]
    return HEADER + "\n".join(lines) + "\n"


def _inputs(t_dtype: str, v_dtype: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def values(dtype: str) -> np.ndarray:
        if dtype == "int32":
            return rng.integers(-8, 8, (128, 64)).astype(np.int32)
        return (rng.standard_normal((128, 64)) * 4).astype(DTYPES[dtype])

    return {"a": values(t_dtype), "b": values(v_dtype)}


def _run(path, inputs, passes):
    return neuronemu.run(path, inputs, passes=passes, print_fn=lambda _line: None)


@given(
    t_dtype=st.sampled_from(sorted(DTYPES)),
    v_dtype=st.sampled_from(sorted(DTYPES)),
    in_psum=st.booleans(),
    form=FORMS,
    cols=st.sampled_from(["0:64", "0:32", "16:48"]),
    seed=st.integers(0, 3),
)
def test_in_place_updates_compute_the_same_values_with_the_pass_on_and_off(
    tmp_path_factory, t_dtype, v_dtype, in_psum, form, cols, seed
):
    path = tmp_path_factory.mktemp("in_place") / "k.py"
    path.write_text(_kernel(t_dtype, v_dtype, in_psum, form, cols))
    inputs = _inputs(t_dtype, v_dtype, seed)
    try:
        on = _run(path, inputs, ON)
    except neuronemu.NeuronEmuError as err:  # (the same error either way)
        with pytest.raises(neuronemu.NeuronEmuError) as off_err:
            _run(path, inputs, OFF)
        assert off_err.value.message == err.message
        return
    off = _run(path, inputs, OFF)
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])


ACCUMULATE = (
    HEADER
    + """@nki.jit
def k(s, m):
    out = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    st = nl.load(s)
    mv = nl.load(m)
    for i in nl.affine_range(3):
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(st, mv)
        acc[...] += ps
    nl.store(out, value=acc)
    return out
"""
)


def test_an_sbuf_accumulation_of_a_psum_tile_is_one_vector_instruction(kernel_file):
    # The matrix-multiplication tutorial's fully optimized kernel accumulates each PSUM group
    # into a bf16 SBUF tile with `result_tiles[...] += res_tile`: one tensor_tensor reading
    # both and writing the bf16 tile (its fp32 sum rounded once), not an fp32 tile and a copy.
    path = kernel_file(ACCUMULATE)
    rng = np.random.default_rng(5)
    s = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    m = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)
    on = _run(path, {"s": s, "m": m}, ON)
    off = _run(path, {"s": s, "m": m}, OFF)

    def vector(r):
        return [i.spec.name for i in r.program.instrs if i.engine.value == "vector"]

    assert vector(on).count("tensor_tensor") == 3 and "tensor_copy" not in vector(on)
    assert vector(off).count("tensor_copy") == 3
    product = (s.astype(np.float32).T @ m.astype(np.float32)).astype(np.float32)
    acc = np.zeros((128, 512), ml_dtypes.bfloat16)
    for _ in range(3):
        acc = (acc.astype(np.float32) + product).astype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(
        on.outputs["out"].astype(np.float32), acc.astype(np.float32), rtol=2e-2, atol=1e-1
    )
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])
