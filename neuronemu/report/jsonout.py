"""The `--json` output as strict JSON: results and errors, with the schema they follow
(`schema/result.json`, shipped in the package).

JSON has no NaN or infinities: a non-finite float is written as the string "NaN",
"Infinity" or "-Infinity" (so a parser that rejects NaN tokens reads every result).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from neuronemu import errors

__all__ = ["SCHEMA_VERSION", "SCHEMA_PATH", "dumps", "error_json", "strict"]

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "result.json"

# Error class -> the `kind` of a JSON error.
_KINDS = (
    (errors.KernelSyntaxError, "syntax"),
    (errors.BudgetError, "budget"),
    (errors.ConstraintError, "constraint"),
    (errors.AllocationError, "allocation"),
    (errors.MemoryAccessError, "memory"),
    (errors.RaceError, "race"),
    (errors.MismatchError, "mismatch"),
    (errors.UsageError, "usage"),
    (errors.KernelTypeError, "kernel"),
)


def strict(value: Any) -> Any:
    """`value` with only JSON's own types: non-finite floats as strings, NumPy scalars as
    Python numbers, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    return value


def dumps(value: Any) -> str:
    return json.dumps(strict(value), indent=2, allow_nan=False)


def error_json(err: BaseException) -> dict[str, Any]:
    """A failed run as `{"schema": 1, "error": {kind, message, path, line, col, hint}}`."""
    if isinstance(err, errors.NeuronEmuError):
        kind = next((k for cls, k in _KINDS if isinstance(err, cls)), "kernel")
        span = err.span
        body = {
            "kind": kind,
            "message": err.message,
            "path": None if span is None else span.path,
            "line": None if span is None else span.line,
            "col": None if span is None else span.col,
            "hint": err.hint,
        }
    else:
        body = {
            "kind": "internal",
            "message": f"{type(err).__name__}: {err}",
            "path": None,
            "line": None,
            "col": None,
            "hint": "this is a neuronemu bug; re-run with --debug for the traceback",
        }
    return {"schema": SCHEMA_VERSION, "error": body}
