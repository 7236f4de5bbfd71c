"""Random chains of short-lived tiles on several engines, placed first fit so that freed bytes
are reused at once: every reuse is ordered (no race), every order the semaphores allow gives
NumPy's values, and so does rotating placement."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.build import allocator
from neuronemu.checks.hazards import first_race
from neuronemu.sim import functional

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
F32 = np.float32

# Each step makes a new tile from a recent one, on an engine of its own.
STEPS = {
    "vector": (
        "nisa.tensor_scalar(dst={d}, data={s}, op0=nl.add, operand0=1.0)",
        lambda v: (v + F32(1)).astype(F32),
    ),
    "gpsimd": ("nisa.tensor_copy(dst={d}, src={s}, engine=nisa.engine.gpsimd)", lambda v: v),
    "scalar": (
        "nisa.activation(dst={d}, op=nl.copy, data={s}, scale=2.0)",
        lambda v: (v * F32(2)).astype(F32),
    ),
    "dma": ("nisa.dma_copy(dst={d}, src={s})", lambda v: v),
}


@st.composite
def chains(draw):
    n = draw(st.integers(4, 14))
    width = draw(st.sampled_from([512, 2048, 8192]))  # 2, 8 or 32 KiB per partition
    body = [
        f"    x0 = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.sbuf)",
        f"    nisa.dma_copy(dst=x0, src=a[:, 0:{width}])",
    ]
    plan = []
    for i in range(1, n):
        src = draw(st.integers(max(0, i - 3), i - 1))
        engine = draw(st.sampled_from(sorted(STEPS)))
        plan.append((i, src, engine))
        body.append(f"    x{i} = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.sbuf)")
        body.append("    " + STEPS[engine][0].format(d=f"x{i}", s=f"x{src}"))
    body.append(f"    nisa.dma_copy(dst=out, src=x{n - 1})")
    text = (
        HEADER + "@nki.jit\ndef k(a):\n"
        f"    out = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        + "\n".join(body)
        + "\n    return out\n"
    )
    return text, width, plan


@settings(deadline=None, max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.integers(0, 2**16))
def test_reused_bytes_are_safe_in_every_order(tmp_path_factory, chain, seed):
    text, width, plan = chain
    path = tmp_path_factory.mktemp("chain") / "k.py"
    path.write_text(text)
    a = np.random.default_rng(seed).standard_normal((128, 8192)).astype(F32)
    values = {0: a[:, :width]}
    for i, src, engine in plan:
        values[i] = STEPS[engine][1](values[src])
    want = values[len(plan)]
    saved, allocator.ROTATE = allocator.ROTATE, False
    try:
        packed = neuronemu.compile_kernel(path, {"a": a})
    finally:
        allocator.ROTATE = saved
    assume(packed.reuses)
    assert first_race(packed) is None
    for order in (None, *range(8)):
        got = functional.execute(packed, {"a": a}, shuffle_seed=order)["out"]
        np.testing.assert_array_equal(got, want)
    rotated = neuronemu.run(path, {"a": a})
    np.testing.assert_array_equal(rotated.outputs["out"], want)
