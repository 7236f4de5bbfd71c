"""Testing NKI kernels with pytest: `assert_kernel_matches` makes a kernel test one line, and
this module is a pytest plugin (entry point `pytest11`, on whenever neuronemu is installed)
that adds `--neuronemu-target` and the `neuronemu_target` fixture.

    import pytest
    from neuronemu.testing import assert_kernel_matches, kernel_cases

    @pytest.mark.parametrize("case", kernel_cases("kernels"), ids=str)
    def test_kernel(case, neuronemu_target):
        assert_kernel_matches(case, target=neuronemu_target)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from neuronemu.errors import MismatchError

__all__ = ["KernelCase", "KernelMismatch", "assert_kernel_matches", "kernel_cases"]


@dataclass(frozen=True)
class KernelCase:
    """One kernel of a directory with one entry of its `<name>_ref.py` CASES."""

    kernel: Path
    reference: Callable[..., Any]
    inputs: dict[str, str] = field(hash=False)
    rtol: float | None = None
    atol: float | None = None

    def __str__(self) -> str:
        specs = ",".join(f"{k}={v}" for k, v in self.inputs.items())
        return f"{self.kernel.stem}[{specs}]"


def kernel_cases(directory: str | Path) -> list[KernelCase]:
    """Every (kernel, reference, CASE) of `directory`, as `neuronemu check` runs them."""
    from neuronemu.report.reference import case_tolerances, discover_cases

    cases = []
    for k, ref, entry in discover_cases(directory):
        inputs, rtol, atol = case_tolerances(entry)
        cases.append(KernelCase(k, ref, inputs, rtol, atol))
    return cases


def assert_kernel_matches(
    kernel: str | Path | KernelCase,
    reference: Callable[..., Any] | None = None,
    inputs: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    target: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    explain: bool = True,
    **run_options: Any,
) -> Any:
    """Run `kernel` on `inputs` and check its outputs against `reference`; if they do not
    match, a KernelMismatch (an AssertionError and a neuronemu.MismatchError) carrying the
    check's report (and, with `explain`, why it differs). Returns the run's Result. An
    input is an array, a compile-time value, or a SPEC string as `-i` takes
    ("float32[128,512]~uniform(-1,1)", '"causal"' for a string value)."""
    __tracebackhide__ = True  # (pytest shows the test's line and the report, not this body)
    import neuronemu
    from neuronemu.inputs import parse_spec

    if isinstance(kernel, KernelCase):  # a case of kernel_cases(): its own tolerances
        case = kernel
        kernel, reference, inputs = case.kernel, case.reference, case.inputs
        rtol = case.rtol if rtol is None else rtol
        atol = case.atol if atol is None else atol
    if reference is None or inputs is None:
        raise TypeError("assert_kernel_matches needs a reference and inputs (or a KernelCase)")
    arrays = {k: parse_spec(k, v, seed) if isinstance(v, str) else v for k, v in inputs.items()}
    result = neuronemu.run(
        kernel,
        arrays,
        kernel=name,
        target=target,
        ref=reference,
        rtol=rtol,
        atol=atol,
        explain_mismatch=explain,
        print_fn=lambda _: None,
        **run_options,
    )
    check = result.check
    if check is not None and not check.passed:
        lines = [f"{kernel}: outputs differ from the reference: {check.message}"]
        for out_name, out in check.outputs.items():
            lines.append(f"  {out_name}: {out.to_json()}")
        if check.explanation is not None:
            lines.append(f"explanation: {check.explanation['message']}")
        raise KernelMismatch("\n".join(lines))
    return result


class KernelMismatch(MismatchError, AssertionError):
    """`assert_kernel_matches` failed: a `neuronemu.MismatchError` that pytest reports as a
    failed assertion (its message is the check report)."""


# -- the pytest plugin -----------------------------------------------------------------------


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("neuronemu")
    group.addoption(
        "--neuronemu-target",
        default=None,
        choices=("trn1", "trn2", "trn3"),
        help="the NeuronCore target kernels run on (default: trn2, or each file's override)",
    )


def _target_fixture(request: Any) -> str | None:
    return request.config.getoption("--neuronemu-target")


try:  # a fixture only where pytest is installed (this module is also plain API)
    import pytest as _pytest

    neuronemu_target = _pytest.fixture(name="neuronemu_target")(_target_fixture)
except ImportError:  # pragma: no cover - pytest absent
    pass
