"""The pytest face of neuronemu: `assert_kernel_matches`, `kernel_cases` and the
`neuronemu_target` fixture of the plugin (loaded by its pytest11 entry point)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuronemu
from neuronemu.testing import assert_kernel_matches, kernel_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


# The README's example, as a kernel author writes it: every kernel of a directory over the
# CASES of its `<name>_ref.py`, on the target `--neuronemu-target` names.
@pytest.mark.parametrize("case", kernel_cases(KERNELS), ids=str)
def test_kernel(case, neuronemu_target):
    assert_kernel_matches(case, target=neuronemu_target)


def test_a_mismatch_fails_with_the_check_report():
    def off_by_one(a, b):
        return a.astype(np.float64) + b + 1

    with pytest.raises(AssertionError) as info:
        assert_kernel_matches(
            KERNELS / "tensor_add.py",
            off_by_one,
            {"a": "float32[128,512]", "b": "float32[128,512]~zeros"},
        )
    report = str(info.value)
    assert isinstance(info.value, neuronemu.MismatchError)  # catchable as the API's error
    assert "outputs differ from the reference: out: 65536 of 65536 elements differ" in report
    assert "'max_abs_err': 1.0" in report  # the per-output figures
    assert "the kernel computes something else" in report  # why, from the shadow run


def test_the_target_fixture_reads_the_option(request, neuronemu_target):
    assert neuronemu_target == request.config.getoption("--neuronemu-target")
    assert neuronemu_target in (None, "trn1", "trn2", "trn3")


def test_inputs_may_be_arrays_specs_or_values():
    a = np.ones((128, 512), np.float32)
    result = assert_kernel_matches(
        KERNELS / "tensor_add.py",
        lambda a, b: a + b,
        {"a": a, "b": "float32[128,512]~ones"},
        target="trn1",
    )
    assert result.program.arch.name == "trn1" and result.check.passed
    np.testing.assert_array_equal(result.outputs[result.program.outputs[0].name], 2 * a)


def test_a_case_carries_its_own_tolerances(tmp_path):
    import shutil

    shutil.copy(KERNELS / "tensor_add.py", tmp_path / "tensor_add.py")
    (tmp_path / "tensor_add_ref.py").write_text(
        "CASES = [{'inputs': {'a': 'float32[128,512]~zeros', 'b': 'float32[128,512]~zeros'},\n"
        "          'atol': 0.5}]\n"
        "def reference(a, b):\n    return a + b + 0.25\n"  # off by 0.25: within the case's atol
    )
    (case,) = kernel_cases(tmp_path)
    assert (case.rtol, case.atol) == (None, 0.5)
    assert_kernel_matches(case).check.passed
    with pytest.raises(AssertionError):
        assert_kernel_matches(case, atol=0.1)  # an explicit tolerance wins
