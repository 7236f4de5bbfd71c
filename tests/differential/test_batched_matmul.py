"""Matmul chains run as one product (neuronemu.sim.batched) give the values the steps give one
by one, and NumPy's: on tiled matmuls (K innermost, stationary tiles kept in a list, loops
replayed), and on drawn chains that something interrupts: the K tiles out of order, the
PSUM region read mid-chain, a loaded tile changed in place or partly loaded again, read by
another instruction, a kernel that writes the input it loads from, a chain that adds to what
a memset left, an operand that is a box of a wider tile, fp32 and bf16 inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import NeuronEmuError
from neuronemu.sim import batched, functional

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

TILED = (
    HEADER
    + """
@nki.jit
def k(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        left = []
        for k in nl.affine_range(K // 128):
            a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
            left.append(a)
        for n in nl.affine_range(N // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=left[k], moving=b)
            o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=o)
    return out
"""
)


def _run(path, inputs, batch: bool, found: list | None = None):
    """`neuronemu.run` with chains batched or not (`found`: receives what `plan` found)."""
    functional.BATCH = batch
    original = batched.plan

    def noted(*args):
        got = original(*args)
        if found is not None:
            found.append(got)
        return got

    batched.plan = noted
    try:
        return neuronemu.run(path, inputs, print_fn=lambda _line: None)
    finally:
        functional.BATCH = True
        batched.plan = original


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_a_tiled_matmul_runs_as_products_with_numpys_values(kernel_file, dtype):
    rng = np.random.default_rng(7)
    lhsT = rng.standard_normal((1024, 256)).astype(dtype)
    rhs = rng.standard_normal((1024, 1024)).astype(dtype)
    path = kernel_file(TILED)
    found: list = []
    r = _run(path, {"lhsT": lhsT, "rhs": rhs}, True, found)
    plain = _run(path, {"lhsT": lhsT, "rhs": rhs}, False)
    plan = found[0]
    assert plan is not None and len(plan.ends) == 2 * 2  # (every output tile's chain)
    # every matmul but each chain's last, every rhs load and every lhsT load: left out
    assert len(plan.skip) == 4 * (8 - 1) + 4 * 8 + 2 * 8
    want = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(r.outputs["out"], want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(r.outputs["out"], plain.outputs["out"], rtol=1e-5, atol=1e-4)
    assert r.cycles == plain.cycles


SCORES = (
    HEADER
    + """
@nki.jit
def k(q, kt):
    d, s = q.shape
    out = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(s // 128):
        qi = nl.ndarray((d, 128), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qi, src=q[:, i * 128 : (i + 1) * 128])
        for j in nl.affine_range(s // 512):
            kj = nl.ndarray((d, 512), dtype=kt.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=kj, src=kt[:, j * 512 : (j + 1) * 512])
            qk = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=qk, stationary=qi, moving=kj)
            o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=o, op=nl.exp, data=qk, scale=0.01)
            nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, j * 512 : (j + 1) * 512], src=o)
    return out
"""
)


def test_single_products_of_a_grid_run_as_one(kernel_file):
    # Attention's scores: each [128, 512] block one matmul (K = d) into a PSUM tile of its
    # own, read at once: the blocks tile a grid, so they are one product.
    rng = np.random.default_rng(11)
    q = rng.standard_normal((64, 1024)).astype(ml_dtypes.bfloat16)
    kt = rng.standard_normal((64, 1024)).astype(ml_dtypes.bfloat16)
    path = kernel_file(SCORES)
    found: list = []
    r = _run(path, {"q": q, "kt": kt}, True, found)
    plain = _run(path, {"q": q, "kt": kt}, False)
    plan = found[0]
    assert plan is not None and len(plan.ends) == 8 * 2
    assert all(c.group is not None for c in plan.ends.values())
    assert len({id(c.group) for c in plan.ends.values()}) == 1
    want = np.exp(0.01 * (q.astype(np.float64).T @ kt.astype(np.float64)))
    np.testing.assert_allclose(r.outputs["out"], want, rtol=1e-4)
    np.testing.assert_allclose(r.outputs["out"], plain.outputs["out"], rtol=1e-5)


CHAIN = (
    HEADER
    + """
@nki.jit
def k(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 128):
        s = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[k * 128 : (k + 1) * 128, :])
        m = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m, src=b[k * 128 : (k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=s, moving=m)
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc)
    nisa.dma_copy(dst=out, src=o)
    return out
"""
)


def test_a_product_that_overflows_one_way_is_summed_step_by_step(kernel_file):
    # The steps' partial sums: 3e38 (first K tile), then 3e38 - 3e38 = 0 (the second): 3e38.
    # One product over all of K adds 3e38 + 3e38 first: inf. Such a chain is summed as its
    # steps sum it (found by a review of the batched path).
    a = np.zeros((256, 128), dtype=np.float32)
    b = np.zeros((256, 512), dtype=np.float32)
    a[0, 0], a[128, 0], a[129, 0] = 3e38, 3e38, -3e38
    b[0, 0] = b[128, 0] = b[129, 0] = 1.0
    path = kernel_file(CHAIN)
    found: list = []
    r = _run(path, {"a": a, "b": b}, True, found)
    plain = _run(path, {"a": a, "b": b}, False)
    assert found[0] is not None  # (it was taken as a chain)
    assert r.outputs["out"][0, 0] == np.float32(3e38) == plain.outputs["out"][0, 0]
    np.testing.assert_array_equal(r.outputs["out"], plain.outputs["out"])


# A drawn chain: per K step, what happens around its matmul.
EVENTS = ["none"] * 6 + ["scale", "peek", "reread", "reload_half", "poke_input"]


@st.composite
def chains(draw) -> tuple[str, dict]:
    steps = draw(st.integers(2, 6))
    order = list(range(steps))
    how = draw(st.sampled_from(["ascending", "ascending", "descending", "shuffled"]))
    if how == "descending":
        order.reverse()
    elif how == "shuffled":
        order = draw(st.permutations(order))
    events = [draw(st.sampled_from(EVENTS)) for _ in range(steps)]
    memset = draw(st.booleans())  # the chain adds to what a memset left
    wide = draw(st.booleans())  # stationary: the right half of a [128, 256] tile
    dtype = draw(st.sampled_from(["float32", "bfloat16"]))
    body = [
        "out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)",
        "side = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)",
        "acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)",
        "seen = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)",
        "nisa.memset(dst=seen, value=0.0)",
    ]
    if memset:
        body.append("nisa.memset(dst=acc, value=1.0)")
    for j, k in enumerate(order):
        rows = f"{k * 128} : {(k + 1) * 128}"
        event = events[j]
        if event == "poke_input":  # the kernel writes the rows it is about to load
            body += [f"nisa.dma_copy(dst=rhs[{rows}, :], src=seen)"]
        if wide:
            body += [
                f"a{j} = nl.ndarray((128, 256), dtype=lhsT.dtype, buffer=nl.sbuf)",
                f"nisa.dma_copy(dst=a{j}, src=lhsT[{rows}, 0:256])",
            ]
            stationary = f"a{j}[:, 128:256]"
        else:
            body += [
                f"a{j} = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)",
                f"nisa.dma_copy(dst=a{j}, src=lhsT[{rows}, 128:256])",
            ]
            stationary = f"a{j}"
        body += [
            f"b{j} = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)",
            f"nisa.dma_copy(dst=b{j}, src=rhs[{rows}, :])",
        ]
        if event == "scale":
            body.append(f"nisa.tensor_scalar(dst=b{j}, data=b{j}, op0=nl.multiply, operand0=2.0)")
        elif event == "reread":
            body.append(f"nisa.tensor_tensor(dst=seen, data1=seen, data2=b{j}, op=nl.add)")
        elif event == "reload_half":
            other = (k + 1) % steps
            body.append(
                f"nisa.dma_copy(dst=b{j}[0:64, :], src=rhs[{other * 128} : {other * 128 + 64}, :])"
            )
        accumulate = "True" if (memset or j) else "False"
        body.append(
            f"nisa.nc_matmul(dst=acc, stationary={stationary}, moving=b{j}, "
            f"accumulate={accumulate})"
        )
        if event == "peek":
            body.append("nisa.tensor_tensor(dst=seen, data1=seen, data2=acc, op=nl.add)")
    body += [
        "o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)",
        "nisa.tensor_copy(dst=o, src=acc)",
        "nisa.dma_copy(dst=out, src=o)",
        "nisa.dma_copy(dst=side, src=seen)",
        "return out, side",
    ]
    source = HEADER + "@nki.jit\ndef k(lhsT, rhs):\n" + "".join(f"    {s}\n" for s in body)
    return source, {"steps": steps, "dtype": dtype}


def _outcome(path, inputs, batch: bool) -> tuple:
    try:
        r = _run(path, inputs, batch)
    except NeuronEmuError as e:
        return ("error", type(e).__name__, str(e))
    return ("ran", r.cycles, r.outputs["out"], r.outputs["side"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chain=chains(), seed=st.integers(0, 2**16))
def test_drawn_chains_give_what_their_steps_give(kernel_file, chain, seed):
    source, info = chain
    rng = np.random.default_rng(seed)
    dtype = ml_dtypes.bfloat16 if info["dtype"] == "bfloat16" else np.float32
    rows = 128 * info["steps"]
    inputs = {
        "lhsT": rng.standard_normal((rows, 256)).astype(dtype),
        "rhs": rng.standard_normal((rows, 512)).astype(dtype),
    }
    path = kernel_file(source)
    got, want = _outcome(path, inputs, True), _outcome(path, inputs, False)
    assert got[0] == want[0]
    if got[0] == "error":
        assert got == want
        return
    assert got[1] == want[1]  # (the same program: the same time)
    for a, b in zip(got[2:], want[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3)
