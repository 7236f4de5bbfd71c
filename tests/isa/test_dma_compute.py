"""dma_compute: the sum of the sources in fp32 vs NumPy, each constraint's message, cost
growth with the bytes read, and a kernel run through the text form."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from _isa_testing import HBM, SBUF, make_check, random_array, seeds, tile
from _spec_testing import Growth, accepted, checker, violation
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.nasm.write import dumps
from neuronemu_isa import REGISTRY, Engine

SPEC = REGISTRY["dma_compute"]


@settings(deadline=None)
@given(n=st.integers(1, 16), dtype=st.sampled_from(["float32", "bfloat16", "float16"]), seed=seeds)
def test_the_sources_add_up_in_fp32_in_order(n: int, dtype: str, seed: int) -> None:
    srcs = [random_array(seed + i, (8, 12), dtype, -100.0, 100.0) for i in range(n)]
    want = srcs[0].astype(np.float32)
    for s in srcs[1:]:
        want = (want + s.astype(np.float32)).astype(np.float32)
    got = SPEC.semantics(**{f"src{i}": s for i, s in enumerate(srcs)})
    np.testing.assert_array_equal(np.asarray(got, np.float32).reshape(8, 12), want)


CHECK = checker(
    Engine.DMA,
    attrs={"reduce_op": "add"},
    dst=tile("dst", (128, 64), "float32", HBM),
    src0=tile("src0", (128, 64), "float32", HBM),
    src1=tile("src1", (64, 128), "bfloat16", SBUF),
)


ACCEPTED: list[Any] = [accepted("unit-scales", attrs={"scales": (1.0, 1.0)})]
VIOLATIONS: list[Any] = [
    violation(
        "count",
        ["src1 has 4096 elements and dst 8192"],
        src1=tile("src1", (128, 32), "float32", SBUF),
    ),
    violation("scale", ["every scale must be 1.0"], attrs={"scales": (1.0, 2.0)}),
    violation("empty", ["srcs is empty"], src0=None, src1=None),
]


def _sized(target: str, sources: int) -> Any:
    ops = {f"src{i}": tile(f"src{i}", (128, 2048), "float32", HBM) for i in range(sources)}
    dst = {"dst": tile("dst", (128, 2048), "float32", SBUF)}
    return make_check(target, Engine.DMA, dst | ops, {})


COST_GROWTH = Growth(_sized, size="sources", sizes=(1, 16))


def test_dma_compute_costs_more_with_more_sources() -> None:
    one, two, four = (SPEC.cost(_sized("trn2", n)) for n in (1, 2, 4))
    assert one < two < four


def test_a_kernel_adds_three_tensors(kernel_file, tmp_path) -> None:
    rng = np.random.default_rng(8)
    a, b, c = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(3))
    path = kernel_file("""import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a, b, c):
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=b)
    nisa.dma_compute(dst=out, srcs=[a, t, c], reduce_op=nl.add, scales=[1.0, 1.0, 1.0])
    return out
""")
    inputs = {"a": a, "b": b, "c": c}
    result = neuronemu.run(path, inputs)
    want = ((a + b).astype(np.float32) + c).astype(ml_dtypes.bfloat16)
    assert result.outputs["out"].view(np.uint16).tolist() == want.view(np.uint16).tolist()
    (tmp_path / "k.nasm").write_text(dumps(result.program))
    again = neuronemu.run(tmp_path / "k.nasm", inputs)
    assert again.outputs["out"].tobytes() == result.outputs["out"].tobytes()
