"""Load a NumPy reference function and compare kernel outputs with it (in float64)."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import ml_dtypes
import numpy as np

from neuronemu.errors import SourceSpan, UsageError
from neuronemu_isa.numerics import ulp, ulps_apart

__all__ = [
    "load_reference",
    "call_reference",
    "compare",
    "CheckResult",
    "OutputCheck",
    "DEFAULT_TOLERANCES",
    "default_tolerance",
    "discover_cases",
]

# The elements of an output read at once: the check's temporaries are a few arrays of this
# many float64 (256 KiB each), whatever the output's size.
BLOCK_ELEMENTS = 1 << 15

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
        params: Mapping[str, inspect.Parameter] = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind == p.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in inputs.items() if takes_all or k in params}
    try:
        result = fn(**kwargs)
    except Exception as exc:
        raise _reference_error(fn, exc) from None
    if isinstance(result, (tuple, list)):
        return [np.asarray(r) for r in result]
    if isinstance(result, dict):
        return [np.asarray(r) for r in result.values()]
    return [np.asarray(result)]


def _reference_error(fn: Callable[..., Any], exc: Exception) -> UsageError:
    """The reference's exception, located at the last line of the reference's own file that
    it went through, with the traceback of the user's code (the reference is theirs)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[1:]  # (not call_reference's own frame)
    try:
        own = str(Path(inspect.getsourcefile(fn) or "").resolve())
    except (TypeError, OSError):
        own = ""
    mine = [f for f in frames if f.filename and str(Path(f.filename).resolve()) == own]
    where = mine[-1] if mine else (frames[-1] if frames else None)
    span = None
    if where is not None and where.lineno:
        span = SourceSpan(where.filename, where.lineno, (where.colno or 0) + 1)
    shown_frames = "".join(traceback.format_list(frames[-8:])).rstrip()
    return UsageError(
        f"the reference raised {type(exc).__name__}: {exc}",
        span,
        hint=f"the reference's traceback (most recent call last):\n{shown_frames}"
        if shown_frames
        else None,
    )


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
    block_elements: int = BLOCK_ELEMENTS,
) -> CheckResult:
    """Compare the kernel's outputs with the reference's, with the figures of float64, each
    output with its own dtype's default tolerance unless `rtol`/`atol` are given. Outputs
    are read `block_elements` at a time: the check's temporaries are bounded by that, not by
    the outputs' size."""
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
        got = _numeric(np.asarray(outputs[name]))
        try:
            want = _numeric(np.asarray(exp))
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
            default[1] * _blocked_scale(want, block_elements) if atol is None else atol,
            block_elements,
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


def _numeric(a: np.ndarray) -> np.ndarray:
    """`a` as it is when its values are numbers (read a block at a time later), else (objects,
    strings, complex) converted whole to float64 as before, raising what that raises."""
    if a.dtype.kind in "biuf" or _exact_bits(a.dtype) is not None:
        return a
    return a.astype(np.float64)


def _exact_bits(dt: np.dtype) -> int | None:
    """The significand bits and exponent range a dtype's values need, as the width of the
    narrowest IEEE float holding them all exactly (32 or 64); None if it is not a number
    type (an ml_dtypes type is one)."""
    if dt.kind == "b":
        return 32
    if dt.kind in "iu":
        return 32 if dt.itemsize <= 2 else 64
    try:
        info = ml_dtypes.finfo(dt)
    except ValueError:
        try:
            return 32 if ml_dtypes.iinfo(dt).bits <= 24 else 64
        except ValueError:
            return None
    fits = info.nmant <= 23 and info.maxexp <= 128 and info.minexp - info.nmant >= -149
    return 32 if fits else 64


def _wide(*dts: np.dtype) -> type:
    """The narrowest float type holding every value of these dtypes exactly: float32 for
    bf16, fp16, fp8, fp32 and small integers, float64 otherwise (as the check always was).
    Equality, NaN and inf tests in it are those of float64."""
    return np.float32 if all(_exact_bits(dt) == 32 for dt in dts) else np.float64


def _ordered_bits(dt: np.dtype) -> tuple[np.dtype, int, int] | None:
    """(unsigned type, magnitude mask, largest finite magnitude) of a float dtype whose
    magnitudes order as their bits, inf and NaN above every finite value (IEEE formats, and
    fp8 e4m3fn whose NaN is 0x7f): a block's equality and largest |value| are then read from
    its bits, without converting it. None for other dtypes."""
    if dt not in _ORDERED:
        return None
    unsigned = np.dtype(f"u{dt.itemsize}")
    top = np.asarray(ml_dtypes.finfo(dt).max, dt).view(unsigned)
    return unsigned, (1 << (8 * dt.itemsize - 1)) - 1, int(top)


_ORDERED = frozenset(
    np.dtype(t)
    for t in (
        np.float16,
        np.float32,
        np.float64,
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
    )
)


def _blocks(shape: tuple[int, ...], block_elements: int) -> Iterator[tuple[Any, int]]:
    """(index, flat offset) of blocks covering an array of `shape` in C order, each of at
    most `block_elements` elements (whole rows when they fit, else part of one row)."""
    size = math.prod(shape)
    if size == 0:
        return
    if not shape:
        yield ..., 0
        return
    axis, inner = 0, size // shape[0]
    while inner > block_elements:  # (the last axis's rows are single elements)
        axis += 1
        inner //= shape[axis]
    step = max(1, block_elements // inner)
    start = 0
    for lead in np.ndindex(*shape[:axis]):
        for a in range(0, shape[axis], step):
            b = min(a + step, shape[axis])
            yield (*lead, slice(a, b)), start
            start += (b - a) * inner


def _block(a: np.ndarray, index: Any, wide: type) -> np.ndarray:
    """One block of `a`, flat, in `wide` (a view where it can be; never written to)."""
    return a[index].astype(wide, copy=False).reshape(-1)


def _blocked_scale(want: np.ndarray, block_elements: int) -> float:
    """`output_scale(want)`, a block at a time."""
    wide, bits = _wide(want.dtype), _ordered_bits(want.dtype)
    top = 0.0
    for index, _ in _blocks(want.shape, block_elements):
        if bits is not None:  # (the largest magnitude's bits, when it is finite)
            unsigned, magnitude, finite_bits = bits
            most_bits = int((want[index].view(unsigned) & magnitude).max())
            if most_bits <= finite_bits:
                top = max(top, float(np.asarray(most_bits, unsigned).view(want.dtype)))
                continue
        size = np.abs(_block(want, index, wide))
        most = size.max()  # NaN or inf when there is one: then the finite ones' own
        if not np.isfinite(most):
            finite = size[np.isfinite(size)]
            most = finite.max() if finite.size else 0.0
        top = max(top, float(most))
    return top if top > 0 else 1.0


def _compare_one(
    name: str,
    dtype: str,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    atol: float,
    block_elements: int = BLOCK_ELEMENTS,
) -> OutputCheck:
    """One output's figures, a block at a time, each as float64 gives it: a block is read in
    the narrowest exact type (`_wide`), where its equal elements are found (`_unequal`); the
    figures are worked out in float64 for the other elements only."""
    wide = _wide(got.dtype, want.dtype)
    plain = atol > 0 and rtol >= 0
    exact_want = _exact_bits(want.dtype) == 32
    o = OutputCheck(name, dtype, True, rtol, atol)
    nan = {"got": 0, "expected": 0}
    inf = {"got": 0, "expected": 0}
    used = -math.inf  # (a negative tolerance makes it negative)
    bits = _ordered_bits(got.dtype) if got.dtype == want.dtype and plain else None
    for index, start in _blocks(got.shape, block_elements):
        if bits is not None and _same_finite_bits(got[index], want[index], *bits):
            used = max(used, 0.0)  # (an equal block of finite values adds 0 to every figure)
            continue
        g, w = _block(got, index, wide), _block(want, index, wide)
        rest, n_unbounded = _unequal(g, w, rtol, atol, nan, inf)
        n_rest = 0 if rest is None else int(np.count_nonzero(rest))
        if n_unbounded:
            used = math.inf
        elif n_rest < g.size:  # (equal elements: 0 over a tolerance over 0)
            used = max(used, 0.0)
        if rest is None or not n_rest:
            continue
        picked = np.flatnonzero(rest) if n_rest < g.size else None
        if picked is not None:
            g, w = g[picked], w[picked]
        gf, wf = g.astype(np.float64, copy=False), w.astype(np.float64, copy=False)
        if plain:
            errors, bad = _differing(gf, wf, rtol, atol, dtype, exact_want)
        else:
            errors, bad = _figures(gf, wf, rtol, atol, dtype)
        o.max_abs_err = max(o.max_abs_err, errors[0])
        o.max_rel_err = max(o.max_rel_err, errors[1])
        used = max(used, errors[2])
        o.max_ulp_err = max(o.max_ulp_err, errors[3])
        n_bad = int(np.count_nonzero(bad))
        if n_bad and o.first_mismatch is None:
            at = int(np.argmax(bad))
            first = np.unravel_index(start + (at if picked is None else int(picked[at])), got.shape)
            o.first_mismatch = [int(i) for i in first]
            o.got, o.expected = float(gf[at]), float(wf[at])
        o.mismatches += n_bad
    o.passed = o.mismatches == 0
    o.nan, o.inf = nan, inf
    o.tolerance_used = used if got.size else 0.0
    return o


def _same_finite_bits(
    g: np.ndarray, w: np.ndarray, unsigned: np.dtype, magnitude: int, finite: int
) -> bool:
    """Whether two blocks of one `_ordered_bits` dtype hold the same bits, all finite."""
    expected = w.view(unsigned)
    return (
        bool((g.view(unsigned) == expected).all()) and int((expected & magnitude).max()) <= finite
    )


def _unequal(
    g: np.ndarray,
    w: np.ndarray,
    rtol: float,
    atol: float,
    nan: dict[str, int],
    inf: dict[str, int],
) -> tuple[np.ndarray | None, int]:
    """Of one block (adding its NaNs and infs to `nan` and `inf`): which elements may add to
    the figures (None: none), and how many others use their tolerance infinitely.

    An equal element (or NaN on both sides) has an error of 0. Over a tolerance
    atol + rtol*|expected| over 0, it adds 0 and is no mismatch, which is plain to see when
    atol > 0 and rtol >= 0: only an expected NaN (or inf, with rtol 0) makes the tolerance
    NaN, and 0/NaN counts as infinite use. Under other tolerances, it is worked out."""
    equal = g == w
    plain = atol > 0 and rtol >= 0
    if plain and np.isfinite(w).all():  # (the usual block: nothing to count)
        if equal.all():
            return None, 0
        if np.isfinite(g).all():
            return ~equal, 0
    nan_g, nan_w, inf_w = np.isnan(g), np.isnan(w), np.isinf(w)
    nan["got"] += int(np.count_nonzero(nan_g))
    nan["expected"] += int(np.count_nonzero(nan_w))
    inf["got"] += int(np.count_nonzero(np.isinf(g)))
    inf["expected"] += int(np.count_nonzero(inf_w))
    same = equal | (nan_g & nan_w)
    if plain:
        return ~same, int(np.count_nonzero(same & (nan_w | inf_w if rtol == 0 else nan_w)))
    with np.errstate(invalid="ignore", over="ignore"):
        tolerance = atol + rtol * np.abs(w.astype(np.float64))
    unbounded = same & ~(tolerance > 0) & ~(tolerance < 0)  # (0 or NaN)
    return ~same | (tolerance < 0), int(np.count_nonzero(unbounded))


def _differing(
    got: np.ndarray, want: np.ndarray, rtol: float, atol: float, dtype: str, exact_want: bool
) -> tuple[tuple[float, float, float, float], np.ndarray]:
    """`_figures` of float64 elements that differ (not equal, not both NaN), with atol > 0
    and rtol >= 0: |got - want| is over 0, and NaN only where one side is NaN, which makes
    every figure of the element infinite and the element a mismatch."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.subtract(got, want)
        np.abs(diff, out=diff)
        size = np.abs(want)
        ratio = np.divide(diff, size)
        rel = _top(ratio)
        np.multiply(size, rtol, out=size)
        size += atol  # (the tolerance, atol + rtol * |want|)
        used = _top(np.divide(diff, size, out=ratio))
        bad = diff > size
        abs_err = _top(diff)
        if math.isinf(abs_err):  # (a NaN on one side; no NaN compares over the tolerance)
            bad |= np.isnan(diff)
            # An expected inf makes the tolerance inf too: a value that is not that inf is
            # still wrong (it passed, silently, under any rtol > 0).
            bad |= np.isinf(want)
        apart = _top(_ulps(got, want, diff, dtype, exact_want, out=ratio))
    return (abs_err, rel, used, apart), bad


def _top(a: np.ndarray) -> float:
    """The largest element, NaN counting as inf."""
    most = float(a.max())
    return float("inf") if math.isnan(most) else most


def _ulps(
    got: np.ndarray,
    want: np.ndarray,
    diff: np.ndarray,
    dtype: str,
    exact_want: bool,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """`ulps_apart(got, want, dtype)` of elements that differ (NaN where it has inf), given
    `diff` = |got - want|: the ulp of `want` is that of its binade, looked up by its exponent
    bits. log2, which `ulp` floors, may round up to the next binade just below its top (a
    float64 fraction of 39 leading ones, which no float32 value has): those use `ulp`."""
    bits = want.view(np.int64)
    apart = np.divide(diff, _ulp_table(dtype)[(bits >> 52) & 0x7FF], out=out)
    if not exact_want:
        near = np.flatnonzero((bits & _FRACTION) > _LOG2_ROUNDS_UP)
        if near.size:
            apart[near] = ulps_apart(got[near], want[near], dtype)
    return apart


_FRACTION = (1 << 52) - 1
_LOG2_ROUNDS_UP = (1 << 52) - (1 << 13)


@functools.lru_cache(maxsize=None)
def _ulp_table(dtype: str) -> np.ndarray:
    """`ulp(v, dtype)` of each float64 exponent field's binade (NaN for the field of inf)."""
    with np.errstate(over="ignore"):
        return ulp(np.ldexp(1.0, np.arange(2048) - 1023), dtype)


def _figures(
    got: np.ndarray, want: np.ndarray, rtol: float, atol: float, dtype: str
) -> tuple[tuple[float, float, float, float], np.ndarray]:
    """Max abs, rel, tolerance-used and ulp errors of float64 elements, and which are
    mismatches: equal infs and NaNs agree, a NaN on one side only is an infinite error."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        rel = np.where(np.isnan(rel), np.inf, rel)
        tolerance = atol + rtol * np.abs(want)
        used = diff / tolerance
    used = np.where(np.isnan(used), np.inf, used)
    bad = (diff > tolerance) | (np.isnan(got) != np.isnan(want)) | (~same & np.isinf(want))
    ulps = ulps_apart(got, want, dtype)
    errors = (float(diff.max()), float(rel.max()), float(used.max()), float(ulps.max()))
    return errors, bad
