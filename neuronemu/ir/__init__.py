"""What a program is made of: dtypes, buffers, tensors, views and their footprints."""

from neuronemu.ir.buffers import BUFFERS, REGISTERS, BufferKind
from neuronemu.ir.dtypes import ALL_DTYPES, DType
from neuronemu.ir.indirect import IndirectView, restrict
from neuronemu.ir.tensor import PatternView, Tensor, View, alias_shape, strided

__all__ = [
    "ALL_DTYPES",
    "DType",
    "BUFFERS",
    "REGISTERS",
    "BufferKind",
    "Tensor",
    "alias_shape",
    "View",
    "PatternView",
    "IndirectView",
    "restrict",
    "strided",
]
