"""Every kernel in kernels/ against its NumPy reference, for each of the reference's CASES."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import neuronemu
from neuronemu.inputs import parse_spec
from neuronemu.reference import call_reference, compare

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _cases():
    for ref_path in sorted(KERNELS.glob("*_ref.py")):
        kernel_path = ref_path.with_name(ref_path.name.replace("_ref.py", ".py"))
        spec = importlib.util.spec_from_file_location(ref_path.stem, ref_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for i, case in enumerate(module.CASES):
            yield pytest.param(kernel_path, module.reference, case,
                               id=f"{kernel_path.stem}-{i}")


def test_every_kernel_has_a_reference_with_cases():
    kernels = {p.stem for p in KERNELS.glob("*.py") if not p.stem.endswith("_ref")}
    refs = {p.stem[:-4] for p in KERNELS.glob("*_ref.py")}
    assert kernels and kernels == refs


@pytest.mark.parametrize(("kernel_path", "reference", "case"), list(_cases()))
def test_kernel_matches_reference(kernel_path, reference, case):
    inputs = {name: parse_spec(name, spec, seed=7) for name, spec in case.items()}
    result = neuronemu.run(kernel_path, inputs)
    expected = call_reference(reference, inputs)
    check = compare(result.outputs, expected,
                    {t.name: t.dtype.name for t in result.program.outputs}, None, None)
    assert check.passed, check.message
    assert result.cycles > 0
