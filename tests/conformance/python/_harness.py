"""Running one conformance program: by CPython (the oracle: these are our own test programs,
so `exec` is fine) and inside a kernel through neuronemu, each giving the lines it printed.

A program is module text that defines `main()`; its prints are what both must agree on. Each
`print` call is one entry: its arguments' `str` joined by `sep`, then `end` unless it is the
default newline (the form neuronemu hands to `print_fn`)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

import neuronemu

KERNEL_TAIL = (
    "\n\nimport nki as _conformance_nki\n\n\n"
    "@_conformance_nki.jit\ndef conformance_kernel(a):\n    main()\n    return a\n"
)
INPUTS = {"a": np.zeros((1, 1), np.float32)}


def _jit(fn: Any = None, **_: Any) -> Any:
    return fn if fn is not None else _jit


_NKI_STUB = types.ModuleType("nki")
_NKI_STUB.__dict__["jit"] = _jit
_NKI_STUB.__dict__["language"] = types.ModuleType("nki.language")
# CPython has no nki: a program that defines a kernel (never run by main) imports this stub.
_STUBS = {"nki": _NKI_STUB, "nki.language": _NKI_STUB.__dict__["language"]}


def run_cpython(name: str, source: str) -> list[str]:
    """What the program prints under CPython; an uncaught exception ends it with one more
    entry, `!! Type: message` (a program that means to fail says so)."""
    printed: list[str] = []

    def record(*args: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        printed.append(sep.join(str(a) for a in args) + ("" if end == "\n" else end))

    stubbed = [k for k in _STUBS if k not in sys.modules]
    sys.modules.update({k: _STUBS[k] for k in stubbed})
    module = types.ModuleType(f"conformance_{name}")
    module.__dict__["print"] = record
    sys.modules[module.__name__] = module  # (dataclasses looks its class's module up)
    try:
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
        module.__dict__["main"]()
    except Exception as e:  # noqa: BLE001 - the program's own exception is its output
        printed.append(f"!! {type(e).__name__}: {e}")
    finally:
        del sys.modules[module.__name__]
        for k in stubbed:
            del sys.modules[k]
    return printed


def run_neuronemu(name: str, source: str, folder: Path) -> list[str]:
    """What the program prints inside a kernel (`main()` called from its body); an uncaught
    kernel exception is its located error's message, as `!! Type: message`."""
    path = folder / f"{name}.py"
    path.write_text(source + KERNEL_TAIL)
    printed: list[str] = []
    try:
        neuronemu.compile_kernel(path, INPUTS, print_fn=printed.append)
    except neuronemu.NeuronEmuError as e:
        printed.append(f"!! {e.message}")
    return printed
