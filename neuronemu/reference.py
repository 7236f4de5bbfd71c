"""Load a NumPy reference function and compare kernel outputs with it (in float64)."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from neuronemu.errors import UsageError
from neuronemu_isa._numerics import ulps_apart

__all__ = [
    "load_reference",
    "call_reference",
    "compare",
    "CheckResult",
    "OutputCheck",
    "DEFAULT_TOLERANCES",
    "default_tolerance",
    "discover_cases",
    "explanation",
]

# Default (rtol, atol) per output dtype: about a few units in the last place of the dtype,
# loose enough for fp32 accumulation-order differences. The default atol is relative to the
# output's scale (its largest finite |expected|, 1 if that is 0): an error that is small next
# to the largest values passes, but an output of small values (a softmax) is held to its own
# precision, not to a fixed 1e-4 that would let any error through.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "tfloat32": (1e-3, 1e-3),
    "bfloat16": (2e-2, 2e-2),
    "float16": (2e-3, 2e-3),
    "float8_e4m3": (1.25e-1, 1.25e-1),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}


def load_reference(spec: str) -> Callable[..., Any]:
    """`FILE.py:FUNC` -> the function (the reference is the user's own Python; it is run)."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        raise UsageError(
            f"--ref {spec!r}: expected FILE.py:FUNC", hint="e.g. --ref add_ref.py:reference"
        )
    fn = getattr(_load_module(Path(path)), func, None)
    if not callable(fn):
        raise UsageError(f"--ref: {path!r} has no function {func!r}")
    return fn


def discover_cases(directory: str | Path) -> list[tuple[Path, Callable[..., Any], dict[str, str]]]:
    """(kernel file, reference, case) for every `<name>_ref.py` beside a `<name>.py` in DIR.

    A reference module defines `reference(...)` and `CASES`, a list of {input: SPEC}, or of
    {"inputs": {input: SPEC}, "rtol": x, "atol": y} for a case with tolerances of its own
    (`case_tolerances` reads them back).
    """
    found = []
    for ref_path in sorted(Path(directory).glob("*_ref.py")):
        kernel_path = ref_path.with_name(ref_path.name[: -len("_ref.py")] + ".py")
        if not kernel_path.is_file():
            continue
        module = _load_module(ref_path)
        fn = getattr(module, "reference", None)
        if not callable(fn):
            raise UsageError(f"{ref_path} defines no reference() function")
        for case in getattr(module, "CASES", []):
            found.append((kernel_path, fn, _beside(dict(case), ref_path.parent)))
    return found


def case_tolerances(case: dict[str, Any]) -> tuple[dict[str, Any], float | None, float | None]:
    """(inputs, rtol, atol) of a CASES entry, in either form."""
    if isinstance(case.get("inputs"), dict):
        return dict(case["inputs"]), case.get("rtol"), case.get("atol")
    return dict(case), None, None


def _beside(case: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A case's `@file.npy` SPECs, relative to the folder of the `_ref.py` that lists them."""
    if isinstance(case.get("inputs"), dict):
        return {**case, "inputs": _beside(case["inputs"], folder)}
    out = {}
    for name, spec in case.items():
        if isinstance(spec, str) and spec.startswith("@") and not Path(spec[1:]).is_absolute():
            spec = "@" + str(folder / spec[1:])
        out[name] = spec
    return out


def _load_module(p: Path) -> Any:
    path = str(p)
    if not p.is_file():
        raise UsageError(f"--ref: no such file {path!r}")
    mod_name = f"_neuronemu_ref_{abs(hash(p.resolve()))}"
    module_spec = importlib.util.spec_from_file_location(mod_name, p)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"--ref: cannot load {path!r} as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: report, don't crash
        raise UsageError(f"--ref: importing {path!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def call_reference(fn: Callable[..., Any], inputs: dict[str, Any]) -> list[np.ndarray]:
    """Call by parameter name; return the expected outputs as a list."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind == p.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in inputs.items() if takes_all or k in params}
    try:
        result = fn(**kwargs)
    except Exception as exc:
        raise UsageError(f"the reference raised {type(exc).__name__}: {exc}") from None
    if isinstance(result, (tuple, list)):
        return [np.asarray(r) for r in result]
    if isinstance(result, dict):
        return [np.asarray(r) for r in result.values()]
    return [np.asarray(result)]


@dataclass
class OutputCheck:
    """The fidelity of one output: errors in float64 and in units of its dtype's last place."""

    name: str
    dtype: str
    passed: bool
    rtol: float
    atol: float
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    max_ulp_err: float = 0.0
    mismatches: int = 0
    first_mismatch: list[int] | None = None
    got: float | None = None  # the values at first_mismatch
    expected: float | None = None
    nan: dict[str, int] = field(default_factory=lambda: {"got": 0, "expected": 0})
    inf: dict[str, int] = field(default_factory=lambda: {"got": 0, "expected": 0})
    # The worst element's error over its tolerance (atol + rtol * |expected|): under 1
    # passes; how close a passing run came to failing.
    tolerance_used: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "tolerance_used": self.tolerance_used,
            "dtype": self.dtype,
            "passed": self.passed,
            "rtol": self.rtol,
            "atol": self.atol,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "max_ulp_err": self.max_ulp_err,
            "mismatches": self.mismatches,
            "first_mismatch": self.first_mismatch,
            "got": self.got,
            "expected": self.expected,
            "nan": dict(self.nan),
            "inf": dict(self.inf),
        }


@dataclass
class CheckResult:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    rtol: float
    atol: float
    message: str = ""
    max_ulp_err: float = 0.0
    outputs: dict[str, OutputCheck] = field(default_factory=dict)
    precise: bool = True
    explanation: dict[str, Any] | None = None  # set by --explain-mismatch

    @property
    def first_mismatch(self) -> dict[str, Any] | None:
        """The first output with a mismatch, the element's index and both values."""
        for o in self.outputs.values():
            if o.first_mismatch is not None:
                return {
                    "output": o.name,
                    "index": o.first_mismatch,
                    "got": o.got,
                    "expected": o.expected,
                }
        return None

    @property
    def tolerance_used(self) -> float:
        """The worst element's error over its tolerance, over every output (< 1 passes)."""
        return max((o.tolerance_used for o in self.outputs.values()), default=0.0)

    def counts(self, kind: str) -> dict[str, int]:
        """NaN ("nan") or inf ("inf") elements summed over the outputs, got and expected."""
        totals = {"got": 0, "expected": 0}
        for o in self.outputs.values():
            for side, n in getattr(o, kind).items():
                totals[side] += n
        return totals

    def to_json(self) -> dict[str, Any]:
        # The first six keys are the stable contract; later ones were added (never renamed).
        return {
            "passed": self.passed,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "mismatches": self.mismatches,
            "rtol": self.rtol,
            "atol": self.atol,
            "max_ulp_err": self.max_ulp_err,
            "first_mismatch": self.first_mismatch,
            "nan": self.counts("nan"),
            "inf": self.counts("inf"),
            "precise": self.precise,
            "outputs": {k: o.to_json() for k, o in self.outputs.items()},
            "explanation": self.explanation,
            "tolerance_used": self.tolerance_used,
        }


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for an output dtype: a few units in its last place; integers are exact."""
    return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def output_scale(want: np.ndarray) -> float:
    """The largest finite |expected| of an output, 1.0 if there is none or it is 0."""
    finite = np.abs(want[np.isfinite(want)])
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def compare(
    outputs: dict[str, np.ndarray],
    expected: list[np.ndarray],
    dtypes: dict[str, str],
    rtol: float | None,
    atol: float | None,
    precise: bool = True,
) -> CheckResult:
    """Compare the kernel's outputs with the reference's, in float64, each output with its
    own dtype's default tolerance unless `rtol`/`atol` are given."""
    names = list(outputs)
    loosest = max((default_tolerance(dtypes[n]) for n in names), default=(0.0, 0.0))
    top_rtol = loosest[0] if rtol is None else rtol
    top_atol = loosest[1] if atol is None else atol

    def failed(message: str, mismatches: int) -> CheckResult:
        return CheckResult(
            False,
            float("inf"),
            float("inf"),
            mismatches,
            top_rtol,
            top_atol,
            message,
            float("inf"),
            precise=precise,
        )

    if len(expected) != len(names):
        return failed(
            f"the reference returned {len(expected)} outputs; the kernel returned {len(names)}", -1
        )
    checks: dict[str, OutputCheck] = {}
    messages = []
    for name, exp in zip(names, expected):
        got = np.asarray(outputs[name]).astype(np.float64)
        try:
            want = np.asarray(exp).astype(np.float64)
        except (TypeError, ValueError):
            return failed(f"the reference output for {name!r} is not numeric", -1)
        if got.shape != want.shape:
            if got.size != want.size:
                return failed(
                    f"output {name!r} has shape {list(got.shape)}; the reference "
                    f"has {list(want.shape)}",
                    got.size,
                )
            want = want.reshape(got.shape)
        default = default_tolerance(dtypes[name])
        o = _compare_one(
            name,
            dtypes[name],
            got,
            want,
            default[0] if rtol is None else rtol,
            default[1] * output_scale(want) if atol is None else atol,
        )
        checks[name] = o
        if o.mismatches:
            messages.append(
                f"{name}: {o.mismatches} of {got.size} elements differ; first at "
                f"{o.first_mismatch}: got {o.got!r}, expected {o.expected!r}"
            )
    mismatches = sum(o.mismatches for o in checks.values())
    if atol is None and checks:  # the loosest scaled default
        top_atol = max(o.atol for o in checks.values())
    return CheckResult(
        mismatches == 0,
        max((o.max_abs_err for o in checks.values()), default=0.0),
        max((o.max_rel_err for o in checks.values()), default=0.0),
        mismatches,
        top_rtol,
        top_atol,
        "; ".join(messages),
        max((o.max_ulp_err for o in checks.values()), default=0.0),
        checks,
        precise,
    )


def _compare_one(
    name: str, dtype: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float
) -> OutputCheck:
    same = (got == want) | (np.isnan(got) & np.isnan(want))  # equal infs and NaNs agree
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        rel = np.where(np.isnan(rel), np.inf, rel)  # a NaN on one side only
    bad = (diff > atol + rtol * np.abs(want)) | (np.isnan(got) != np.isnan(want))
    o = OutputCheck(
        name,
        dtype,
        not bad.any(),
        rtol,
        atol,
        nan={"got": int(np.isnan(got).sum()), "expected": int(np.isnan(want).sum())},
        inf={"got": int(np.isinf(got).sum()), "expected": int(np.isinf(want).sum())},
    )
    if diff.size:
        with np.errstate(invalid="ignore", divide="ignore"):
            used = diff / (atol + rtol * np.abs(want))
        used = np.where(np.isnan(used), np.inf, used)
        o.tolerance_used = float(used.max())
        o.max_abs_err = float(diff.max())
        o.max_rel_err = float(np.nanmax(rel))
        o.max_ulp_err = float(ulps_apart(got, want, dtype).max())
    o.mismatches = int(bad.sum())
    if o.mismatches:
        first = np.unravel_index(int(np.argmax(bad)), bad.shape)
        o.first_mismatch = [int(i) for i in first]
        o.got, o.expected = float(got[first]), float(want[first])
    return o


def explanation(
    first: Any, shadow: CheckResult, departure_ulps: float, non_finite: Any = None
) -> dict[str, Any]:
    """What `--explain-mismatch` found: whether the unrounded shadow run matches the reference
    (so the mismatch is rounding) and the first instruction that departs from its shadow.

    `first` is the executor's first departure (with `to_json` and `describe`) or None.
    """
    if shadow.passed:
        verdict = "rounding"
        message = (
            "the unrounded shadow run matches the reference, so the mismatch comes from rounding"
        )
    else:
        verdict = "algorithm"
        message = (
            f"the unrounded shadow run differs from the reference too ({shadow.mismatches} "
            "mismatches), so the kernel computes something else, not only a rounding "
            "error"
        )
    if first is not None:
        message += f"; {first.describe()}"
    else:
        message += f"; no instruction departs from its shadow by more than {departure_ulps:g} ulp"
    if non_finite is not None:
        message += f"; {non_finite.describe()}"
    return {
        "non_finite": None if non_finite is None else non_finite.to_json(),
        "verdict": verdict,
        "shadow_passed": shadow.passed,
        "shadow_max_abs_err": shadow.max_abs_err,
        "shadow_mismatches": shadow.mismatches,
        "departure_ulps": departure_ulps,
        "first_departure": None if first is None else first.to_json(),
        "message": message,
    }
