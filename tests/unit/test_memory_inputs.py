"""The executor reads an input no instruction writes where the caller's array is (no copy,
through a read-only view), copies one some instruction writes, and never changes the
caller's arrays."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.sim import state

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
KERNEL = HEADER + (
    "@nki.jit\n"
    "def k(a, b):\n"
    "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=t, src=a)\n"
    "    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=u, src=b)\n"
    "    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)\n"
    "    nisa.dma_copy(dst=out, src=t)\n"
    "    WRITE_B\n"
    "    return out\n"
)


def _arrays(monkeypatch) -> list[dict]:
    """Each Memory's arrays by tensor name, as the run left them."""
    made: list[tuple[state.Memory, list]] = []
    original = state.Memory.__init__

    def init(self, tensors, *args, **kwargs):
        original(self, tensors, *args, **kwargs)
        made.append((self, tensors))

    monkeypatch.setattr(state.Memory, "__init__", init)
    return made


def test_an_input_nothing_writes_is_read_in_place(kernel_file, monkeypatch):
    made = _arrays(monkeypatch)
    rng = np.random.default_rng(21)
    a, b = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    kept = a.copy(), b.copy()
    out = neuronemu.run(kernel_file(KERNEL.replace("WRITE_B", "pass")), {"a": a, "b": b})
    np.testing.assert_array_equal(out.outputs["out"], kept[0] + kept[1])
    ((mem, tensors),) = made
    held = {t.name: mem.arrays[t.id] for t in tensors if t.kind == "input"}
    for name, given in (("a", a), ("b", b)):
        assert np.shares_memory(held[name], given) and not held[name].flags.writeable
    np.testing.assert_array_equal(a, kept[0])


def test_an_input_the_kernel_writes_is_copied_and_the_callers_array_kept(kernel_file, monkeypatch):
    made = _arrays(monkeypatch)
    rng = np.random.default_rng(22)
    a, b = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    kept = a.copy(), b.copy()
    source = KERNEL.replace("WRITE_B", "nisa.dma_copy(dst=b, src=t)")
    out = neuronemu.run(kernel_file(source), {"a": a, "b": b})
    np.testing.assert_array_equal(out.outputs["out"], kept[0] + kept[1])
    ((mem, tensors),) = made
    held = {t.name: mem.arrays[t.id] for t in tensors if t.kind == "input"}
    assert np.shares_memory(held["a"], a) and not np.shares_memory(held["b"], b)
    np.testing.assert_array_equal(held["b"], kept[0] + kept[1])  # (written in the run)
    np.testing.assert_array_equal(b, kept[1])  # (not in the caller's array)


def test_outputs_are_arrays_of_their_own(kernel_file):
    # (the output the run wrote, and an input returned as it was, read in place)
    source = KERNEL.replace("WRITE_B", "pass").replace("return out", "return out, a")
    rng = np.random.default_rng(23)
    a, b = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    outputs = neuronemu.run(kernel_file(source), {"a": a, "b": b}).outputs
    assert set(outputs) == {"out", "a"}
    np.testing.assert_array_equal(outputs["a"], a)
    assert not np.shares_memory(outputs["a"], a) and outputs["a"].flags.writeable
    assert outputs["out"].flags.writeable
    assert not np.shares_memory(outputs["out"], a) and not np.shares_memory(outputs["out"], b)


@pytest.mark.parametrize("layout", ["strided", "fortran"])
def test_inputs_of_any_layout_are_read_as_c_ordered_bytes(kernel_file, layout):
    # (an input viewed as bytes: read in place only when its array is C-contiguous)
    source = HEADER + (
        "@nki.jit\n"
        "def k(a):\n"
        "    as_bytes = nl.ndarray((128, 256), dtype=nl.uint8, buffer=nl.shared_hbm)\n"
        "    nisa.dma_copy(dst=as_bytes, src=a.view(nl.uint8))\n"
        "    return as_bytes\n"
    )
    big = np.random.default_rng(24).standard_normal((128, 128)).astype(np.float32)
    a = big[:, ::2] if layout == "strided" else np.asfortranarray(big[:, :64])
    got = neuronemu.run(kernel_file(source), {"a": a}).outputs["as_bytes"]
    np.testing.assert_array_equal(got, np.ascontiguousarray(a).view(np.uint8))
