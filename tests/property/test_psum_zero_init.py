"""The PSUM zero-init fold (neuronemu/psum_init.py) never changes values: every kernel of
kernels/ and generated accumulation patterns give the same outputs with the fold on and off,
and it takes the memsets off the Vector engine where the first matmul covers the tile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neuronemu
from neuronemu.inputs import parse_spec
from neuronemu.report.reference import discover_cases

ROOT = Path(__file__).resolve().parents[2]
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


def _run(monkeypatch, path, inputs, fold: bool, **kw):
    return neuronemu.run(path, inputs, passes=None if fold else [], **kw)


def _seeded(case: dict[str, str]) -> dict[str, np.ndarray]:
    return {name: parse_spec(name, spec, seed=3) for name, spec in case.items()}


@pytest.mark.parametrize(
    "path, case",
    [pytest.param(p, c, id=p.stem) for p, _ref, c in discover_cases(ROOT / "kernels")],
)
def test_kernels_compute_the_same_values_with_the_fold_on_and_off(monkeypatch, path, case):
    inputs = _seeded(case)
    on = _run(monkeypatch, path, inputs, True)
    off = _run(monkeypatch, path, inputs, False)
    assert on.outputs.keys() == off.outputs.keys()
    for name in on.outputs:
        np.testing.assert_array_equal(on.outputs[name], off.outputs[name])


# One accumulator tile and a random sequence of what kernels do to it: matmuls over all of it
# or half of it (accumulate None, True or False), a copy out (a read), a memset, a fresh
# nl.zeros; its value at the end and at every copy goes to the output.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("mm"), st.sampled_from(["None", "True", "False"]), st.booleans()),
        st.tuples(st.just("read"), st.just(""), st.just(False)),
        st.tuples(st.just("zeros"), st.just(""), st.just(False)),
        st.tuples(st.just("memset"), st.just(""), st.just(False)),
    ),
    min_size=1,
    max_size=8,
)


def _kernel(steps) -> str:
    lines = [
        "@nki.jit",
        "def k(s, m):",
        f"    out = nl.ndarray(({len(steps) + 1}, 128, 64), dtype=nl.float32, "
        "buffer=nl.shared_hbm)",
        "    st = nl.ndarray((128, 128), dtype=s.dtype, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=st, src=s)",
        "    mv = nl.ndarray((128, 64), dtype=m.dtype, buffer=nl.sbuf)",
        "    nisa.dma_copy(dst=mv, src=m)",
        "    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)",
        "    res = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)",
    ]
    for i, (kind, flag, half) in enumerate(steps):
        if kind == "mm":
            cols = "0:32" if half else "0:64"
            lines.append(
                f"    nisa.nc_matmul(dst=acc[:, {cols}], stationary=st, moving=mv[:, {cols}], "
                f"accumulate={flag})"
            )
        elif kind == "zeros":
            lines.append("    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)")
        elif kind == "memset":
            lines.append("    nisa.memset(dst=acc, value=0.0)")
        lines.append("    r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)")
        lines.append("    nisa.tensor_copy(dst=r, src=acc)")
        lines.append(f"    nisa.dma_copy(dst=out[{i}], src=r)")
    lines += [
        "    nisa.tensor_copy(dst=res, src=acc)",
        f"    nisa.dma_copy(dst=out[{len(steps)}], src=res)",
        "    return out",
    ]
    return HEADER + "\n".join(lines) + "\n"


@given(steps=STEPS)
def test_generated_accumulation_patterns_compute_the_same_values(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("fold") / "k.py"
    path.write_text(_kernel(steps))
    rng = np.random.default_rng(len(steps))
    inputs = {
        "s": rng.standard_normal((128, 128)).astype(np.float32),
        "m": rng.standard_normal((128, 64)).astype(np.float32),
    }
    with pytest.MonkeyPatch.context() as mp:
        try:
            on = _run(mp, path, inputs, True, allow_uninit=True)
        except neuronemu.NeuronEmuError as err:  # (the same error either way)
            with pytest.raises(neuronemu.NeuronEmuError) as off_err:
                _run(mp, path, inputs, False, allow_uninit=True)
            assert off_err.value.message == err.message
            return
        off = _run(mp, path, inputs, False, allow_uninit=True)
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])


def test_a_zeroed_accumulator_of_matmuls_takes_no_vector_memset(kernel_file, monkeypatch):
    path = kernel_file(_kernel([("mm", "None", False)] * 3))
    inputs = {"s": np.ones((128, 128), np.float32), "m": np.ones((128, 64), np.float32)}
    on = _run(monkeypatch, path, inputs, True)
    off = _run(monkeypatch, path, inputs, False)

    def memsets(r):
        return [i for i in r.program.instrs if i.spec.name == "memset"]

    assert len(memsets(off)) == 1 and memsets(on) == []
    first = next(i for i in on.program.instrs if i.spec.name == "nc_matmul")
    assert first.attrs["accumulate"] is False
    np.testing.assert_array_equal(on.outputs["out"], off.outputs["out"])
