"""ALU operators and activation functions as data: name -> fp32 NumPy function.

Names follow nki.language (`nl.add`, `nl.exp`); tables from nki/api/nki.api.shared.rst
("Supported Math Operators", "Supported Activation Functions"). Engines compute in fp32.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

__all__ = ["ALU_BINARY", "ALU_UNARY", "BITVEC_OPS", "ACTIVATIONS", "ACTIVATION_RANGES", "alu"]

F = np.float32


def _logical(fn: Callable) -> Callable:
    return lambda a, b: fn(a != 0, b != 0).astype(F)


def _cmp(fn: Callable) -> Callable:
    return lambda a, b: fn(a, b).astype(F)


def _bitvec(fn: Callable) -> Callable:
    # Bitvec ops work on the raw integer bits; callers pass integer arrays.
    return fn


ALU_BINARY: dict[str, Callable[[np.ndarray | np.generic, np.ndarray | np.generic], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    # nki.language.mod: the sign of the divisor, as Python's %; nki.language.fmod: the sign
    # of the dividend, as C's fmod (the docs of both).
    "mod": np.mod,
    "fmod": np.fmod,
    "equal": _cmp(np.equal),
    "not_equal": _cmp(np.not_equal),
    "greater": _cmp(np.greater),
    "greater_equal": _cmp(np.greater_equal),
    "less": _cmp(np.less),
    "less_equal": _cmp(np.less_equal),
    "logical_and": _logical(np.logical_and),
    "logical_or": _logical(np.logical_or),
    "logical_xor": _logical(np.logical_xor),
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "bitwise_and": _bitvec(np.bitwise_and),
    "bitwise_or": _bitvec(np.bitwise_or),
    "bitwise_xor": _bitvec(np.bitwise_xor),
    "left_shift": _bitvec(np.left_shift),
    "right_shift": _bitvec(np.right_shift),  # logical shift: callers pass unsigned bits
}
BITVEC_OPS = frozenset(
    {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"}
)

ALU_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "square": np.square,
    "relu": lambda x: np.maximum(x, F(0)),
    "rsqrt": lambda x: F(1) / np.sqrt(x),
    "reciprocal": lambda x: F(1) / x,
    "invert": np.invert,
    "bypass": lambda x: x,
    # nki.language.floor / ceil / trunc (as numpy's); a Vector ALU op (lowering inferred).
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
}


def alu(op: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A binary fp32 function for an ALU op; unary ops ignore their second operand."""
    if op in ALU_BINARY:
        return ALU_BINARY[op]
    unary = ALU_UNARY[op]
    return lambda a, b: unary(a)


_erf = np.frompyfunc(math.erf, 1, 1)


def _erf32(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(x.astype(np.float64))).astype(F)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return F(1) / (F(1) + np.exp(-x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return F(0.5) * x * (F(1) + _erf32(x / F(math.sqrt(2.0))))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = F(math.sqrt(2.0 / math.pi))
    return F(0.5) * x * (F(1) + np.tanh(c * (x + F(0.044715) * x * x * x)))


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx gelu: Phi(x) + x * phi(x)."""
    return F(0.5) * (F(1) + _erf32(x / F(math.sqrt(2.0)))) + x * np.exp(F(-0.5) * x * x) * F(
        1.0 / math.sqrt(2.0 * math.pi)
    )


def _gelu_sigmoid_dx(x: np.ndarray) -> np.ndarray:
    """d/dx x * sigmoid(1.702 x)."""
    y = F(1.702) * x
    s = _sigmoid(y)
    slope = s * (F(1) - s)
    # (where the sigmoid is flat its slope is 0, even where 1.702 x overflows to +-inf)
    return s + np.where(slope == 0, F(0), y * slope)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx x * sigmoid(x)."""
    s = _sigmoid(x)
    return s * (F(1) + x * (F(1) - s))


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "square": np.square,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, F(0)),
    "gelu": _gelu,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(F(1.702) * x),
    "silu": lambda x: x * _sigmoid(x),
    "tanh": np.tanh,
    "softplus": lambda x: np.logaddexp(F(0), x).astype(F),
    "mish": lambda x: x * np.tanh(np.logaddexp(F(0), x).astype(F)),
    "erf": _erf32,
    # Derivatives (nki.language: gelu_dx, gelu_apprx_sigmoid_dx, silu_dx, erf_dx).
    "gelu_dx": _gelu_dx,
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "silu_dx": _silu_dx,
    "erf_dx": lambda x: F(2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    # nki.language.cos / tan are documented functions; the Scalar engine's table entries
    # they lower to are not (inferred, as sin's; no documented input range).
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: F(1) / np.sqrt(x),
    "reciprocal": lambda x: F(1) / x,
    "sign": np.sign,
    "abs": np.abs,
}

# Documented valid input ranges (nki.api.shared.rst); outside them hardware output is invalid.
ACTIVATION_RANGES: dict[str, tuple[float, float]] = {
    "log": (2.0**-64, 2.0**64),
    "sin": (-math.pi, math.pi),
    "arctan": (-math.pi / 2, math.pi / 2),
    "sqrt": (2.0**-116, 2.0**118),
    "rsqrt": (2.0**-87, 2.0**97),
}
