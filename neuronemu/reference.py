"""Load a NumPy reference function and compare kernel outputs with it (in float64)."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from neuronemu.errors import UsageError

__all__ = ["load_reference", "call_reference", "compare", "CheckResult", "DEFAULT_TOLERANCES",
           "discover_cases"]

# Default (rtol, atol) per output dtype: about a few units in the last place of the dtype,
# loose enough for fp32 accumulation-order differences.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
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
        raise UsageError(f"--ref {spec!r}: expected FILE.py:FUNC",
                         hint="e.g. --ref add_ref.py:reference")
    fn = getattr(_load_module(Path(path)), func, None)
    if not callable(fn):
        raise UsageError(f"--ref: {path!r} has no function {func!r}")
    return fn


def discover_cases(directory: str | Path) -> list[tuple[Path, Callable[..., Any], dict[str, str]]]:
    """(kernel file, reference, case) for every `<name>_ref.py` beside a `<name>.py` in DIR.

    A reference module defines `reference(...)` and `CASES`, a list of {input: SPEC}.
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
            found.append((kernel_path, fn, dict(case)))
    return found


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
        raise UsageError(f"--ref: importing {path!r} failed: {type(exc).__name__}: {exc}") \
            from None
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
class CheckResult:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: int
    rtol: float
    atol: float
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "max_abs_err": self.max_abs_err,
                "max_rel_err": self.max_rel_err, "mismatches": self.mismatches,
                "rtol": self.rtol, "atol": self.atol}


def compare(outputs: dict[str, np.ndarray], expected: list[np.ndarray], dtypes: dict[str, str],
            rtol: float | None, atol: float | None) -> CheckResult:
    names = list(outputs)
    loosest = max((DEFAULT_TOLERANCES.get(dtypes[n], (0.0, 0.0)) for n in names),
                  default=(0.0, 0.0))
    rtol = loosest[0] if rtol is None else rtol
    atol = loosest[1] if atol is None else atol
    if len(expected) != len(names):
        return CheckResult(False, float("inf"), float("inf"), -1, rtol, atol,
                           f"the reference returned {len(expected)} outputs; the kernel "
                           f"returned {len(names)}")
    max_abs = max_rel = 0.0
    mismatches = 0
    messages = []
    for name, exp in zip(names, expected):
        got = np.asarray(outputs[name]).astype(np.float64)
        try:
            want = np.asarray(exp).astype(np.float64)
        except (TypeError, ValueError):
            return CheckResult(False, float("inf"), float("inf"), -1, rtol, atol,
                               f"the reference output for {name!r} is not numeric")
        if got.shape != want.shape:
            if got.size == want.size:
                want = want.reshape(got.shape)
            else:
                return CheckResult(False, float("inf"), float("inf"), got.size, rtol, atol,
                                   f"output {name!r} has shape {list(got.shape)}; the "
                                   f"reference has {list(want.shape)}")
        both_nan = np.isnan(got) & np.isnan(want)
        diff = np.where(both_nan, 0.0, np.abs(got - want))
        diff = np.where(np.isnan(diff), np.inf, diff)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        bad = diff > atol + rtol * np.abs(want)
        bad |= np.isnan(got) != np.isnan(want)
        n_bad = int(bad.sum())
        if n_bad:
            first = np.unravel_index(int(np.argmax(bad)), bad.shape)
            messages.append(f"{name}: {n_bad} of {bad.size} elements differ; first at "
                            f"{list(map(int, first))}: got {got[first]!r}, expected {want[first]!r}")
        mismatches += n_bad
        if diff.size:
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float(np.nanmax(rel)))
    return CheckResult(mismatches == 0, max_abs, max_rel, mismatches, rtol, atol,
                       "; ".join(messages))
