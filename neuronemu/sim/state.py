"""Backing arrays of every tensor in HBM, SBUF and PSUM, read and written through views."""

from __future__ import annotations

from typing import Any

import numpy as np

from isa._numerics import cast_to
from neuronemu.errors import InternalError
from neuronemu.trace.values import Tensor, View

__all__ = ["Memory"]


def _uninitialized(t: Tensor) -> np.ndarray:
    """Fresh memory: NaN for floats (as AWS's CPU simulator fills it), zero for integers."""
    dt = t.dtype.np
    if dt.kind == "f" or t.dtype.name.startswith(("float", "bfloat")):
        return np.full(t.shape, np.nan, dtype=np.float32).astype(dt)
    return np.zeros(t.shape, dtype=dt)


class Memory:
    """One array per tensor (input arrays are copied, never modified)."""

    def __init__(self, tensors: list[Tensor], inputs: dict[str, np.ndarray]):
        self.arrays: dict[int, np.ndarray] = {}
        for t in tensors:
            if t.kind == "input":
                self.arrays[t.id] = np.array(inputs[t.name], dtype=t.dtype.np, copy=True) \
                    .reshape(t.shape)
            else:
                self.arrays[t.id] = _uninitialized(t)

    def read(self, view: View) -> np.ndarray:
        return self.arrays[view.tensor.id][(*view.np_index(), Ellipsis)]

    def write(self, view: View, value: Any) -> None:
        target = self.arrays[view.tensor.id][(*view.np_index(), Ellipsis)]
        value = np.asarray(value)
        if value.size == target.size:
            value = value.reshape(target.shape)
        elif value.size == 1:
            value = np.broadcast_to(value.reshape(()), target.shape)
        else:
            raise InternalError(f"result of {value.size} elements for {view!r} "
                                f"({target.size} elements)")
        target[...] = cast_to(value, target.dtype)

    def array(self, t: Tensor) -> np.ndarray:
        return self.arrays[t.id]
