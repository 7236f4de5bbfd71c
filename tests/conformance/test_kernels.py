"""Every kernel in kernels/ against its NumPy reference, for each of the reference's CASES."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import neuronemu
from neuronemu.inputs import parse_spec
from neuronemu.report.reference import call_reference, compare, discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
GOLDEN = Path(__file__).resolve().parent / "golden" / "cycles.json"
# A timing change shows in review as a golden-file change; within this the figures may move
# (the scheduler is deterministic; the tolerance is for float summation order only).
GOLDEN_RTOL = 1e-3


def _cases():
    for kernel_path, reference, case in discover_cases(KERNELS):
        yield pytest.param(
            kernel_path, reference, case, id=f"{kernel_path.stem}-{'-'.join(case.values())}"
        )


def test_every_kernel_has_a_reference_with_cases():
    kernels = {
        p.stem
        for p in KERNELS.glob("*.py")
        if not p.stem.endswith("_ref") and not p.stem.startswith("_")
    }
    refs = {p.stem[:-4] for p in KERNELS.glob("*_ref.py")}
    assert kernels and kernels == refs


@pytest.fixture(scope="module")
def golden(request):
    figures = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    yield figures
    if request.config.getoption("--update-golden"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(figures.items())), indent=1) + "\n")


@pytest.mark.parametrize(("kernel_path", "reference", "case"), list(_cases()))
def test_kernel_matches_reference(kernel_path, reference, case, golden, request):
    inputs = {name: parse_spec(name, spec, seed=7) for name, spec in case.items()}
    result = neuronemu.run(kernel_path, inputs)
    expected = call_reference(reference, inputs)
    check = compare(
        result.outputs, expected, {t.name: t.dtype.name for t in result.program.outputs}, None, None
    )
    assert check.passed, check.message
    key = f"{kernel_path.stem} {' '.join(f'{k}={v}' for k, v in case.items())}"
    if request.config.getoption("--update-golden"):
        golden[key] = result.cycles
        return
    assert key in golden, f"no golden cycles for {key}: run with --update-golden"
    assert result.cycles == pytest.approx(golden[key], rel=GOLDEN_RTOL), (
        f"{key}: {result.cycles} cycles, golden {golden[key]}; if the model changed on "
        "purpose, run with --update-golden and say why cycles moved in the commit message"
    )


def test_check_command_runs_every_case():
    from click.testing import CliRunner

    from neuronemu.cli import main

    result = CliRunner().invoke(main, ["check", str(KERNELS)])
    assert result.exit_code == 0, result.output
    n = len(list(discover_cases(KERNELS)))
    assert f"{n} passed, 0 failed" in result.stdout
