"""Backing arrays of every tensor in HBM, SBUF and PSUM, read and written through views."""

from __future__ import annotations

from typing import Any

import numpy as np

from isa._numerics import FLOAT_DTYPES, cast_to
from neuronemu.errors import InternalError
from neuronemu.trace.values import Tensor, View

__all__ = ["Memory"]


class Memory:
    """One array per tensor (input arrays are copied, never modified).

    `widen`: hold every float tensor narrower than this dtype in it instead, so writes round
    only to `widen` (float32: `--no-precise`; float64: the shadow of `--explain-mismatch`).
    """

    def __init__(self, tensors: list[Tensor], inputs: dict[str, np.ndarray],
                 widen: np.dtype | None = None):
        self.arrays: dict[int, np.ndarray] = {}
        for t in tensors:
            held = self.held_dtype(t, widen)
            if t.kind in ("input", "constant"):
                value = np.asarray(inputs[t.name] if t.kind == "input" else t.data)
                if held != t.dtype.np:  # exact: the input is first given its own dtype
                    value = value.astype(t.dtype.np)
                self.arrays[t.id] = np.array(value, dtype=held, copy=True).reshape(t.shape)
            else:
                self.arrays[t.id] = _uninitialized(t, held)

    @staticmethod
    def held_dtype(t: Tensor, widen: np.dtype | None) -> np.dtype:
        dt = t.dtype.np
        if widen is not None and t.dtype.name in FLOAT_DTYPES and dt.itemsize < widen.itemsize:
            return np.dtype(widen)
        return dt

    def read(self, view: View) -> np.ndarray:
        return view.np_view(self.arrays[view.tensor.id])

    def write(self, view: View, value: Any) -> np.ndarray:
        """Store `value` (cast to the held dtype) into `view`; return the stored view."""
        target = view.np_view(self.arrays[view.tensor.id])
        value = np.asarray(value)
        if value.size == target.size:
            value = value.reshape(target.shape)
        elif value.size == 1:
            value = np.broadcast_to(value.reshape(()), target.shape)
        else:
            raise InternalError(f"result of {value.size} elements for {view!r} "
                                f"({target.size} elements)")
        target[...] = cast_to(value, target.dtype)
        return target

    def array(self, t: Tensor) -> np.ndarray:
        return self.arrays[t.id]


def _uninitialized(t: Tensor, held: np.dtype) -> np.ndarray:
    """Fresh memory: NaN for floats (as AWS's CPU simulator fills it), zero for integers."""
    if t.dtype.name in FLOAT_DTYPES:
        return np.full(t.shape, np.nan, dtype=np.float32).astype(held)
    return np.zeros(t.shape, dtype=held)
