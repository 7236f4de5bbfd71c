"""Make the fuzz campaign's parts (`tests/_fuzz.py`) importable as `_fuzz`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if "_fuzz" not in sys.modules:
    _path = Path(__file__).resolve().parent.parent / "_fuzz.py"
    _spec = importlib.util.spec_from_file_location("_fuzz", _path)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["_fuzz"] = _module
    _spec.loader.exec_module(_module)
