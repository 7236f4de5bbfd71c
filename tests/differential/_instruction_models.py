"""Independent NumPy models of the nki.isa instructions, for the differential test of values.

Written from the nki.isa API pages (and neuroncore.md §B4 for casting), never from
`neuronemu_isa`'s semantics or `_numerics`: the dtype table, the casts, the ALU and activation
tables and every model are this file's own, so that they can disagree with the code under test.
ml_dtypes provides the dtypes themselves.

Conventions: a model takes logical operand arrays ([P, free...], in their dtypes), immediates as
Python floats and the attributes; it returns the values each output holds after the write, in
the output's dtype (the casts are the models' job: `write` for an fp32 engine result).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

F32 = np.dtype(np.float32)

DT: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "tfloat32": np.dtype(np.float32),  # stored as fp32 (nki.api.shared: 1S,8E,10M)
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
}
FLOATS = ("float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
ALL = FLOATS + INTS


def is_int(name: str) -> bool:
    return name in INTS


def name_of(dt: np.dtype) -> str:
    for name, d in DT.items():
        if d == np.dtype(dt) and name != "tfloat32":
            return name
    raise KeyError(dt)


# Casting (neuroncore.md §B4) ------------------------------------------------------------------


def fp32(x) -> np.ndarray:
    """Values as the engines see them: converted to fp32 (an int32 beyond 2^24 rounds)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x).astype(np.float32)


def write(x, dst: str) -> np.ndarray:
    """An fp32 engine result written to `dst`: RNE for floats (overflow to inf, or NaN for
    float8_e4m3fn which has no inf); for integers round half to even, saturate, NaN -> 0 (the
    docstring of isa/_numerics.cast_to, which cites the nki.simulate release notes)."""
    x = fp32(x)
    if is_int(dst):
        info = np.iinfo(DT[dst])
        wide = x.astype(np.float64)
        wide = np.where(np.isnan(wide), 0.0, wide)
        return np.clip(np.rint(wide), info.min, info.max).astype(DT[dst])
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(DT[dst])


def exact_int(x, dst: str) -> np.ndarray:
    """An exact integer result (int64) written to `dst`: saturating for integer dtypes, RNE
    through fp32 for float dtypes."""
    x = np.asarray(x, dtype=np.int64)
    if is_int(dst):
        info = np.iinfo(DT[dst])
        return np.clip(x, int(info.min), int(info.max)).astype(DT[dst])
    return write(x.astype(np.float32), dst)


def convert(src: np.ndarray, dst: str) -> np.ndarray:
    """A copy to `dst`: the bits when the dtypes are equal, else src -> fp32 -> dst."""
    if src.dtype == DT[dst]:
        return src.copy()
    return write(fp32(src), dst)


# Values worth pinning down -----------------------------------------------------------------


def float_specials(name: str) -> np.ndarray:
    """Signed zeros, infinities, NaN, the extremes, the smallest normal and subnormals of `name`,
    ties of the narrow formats and of integer rounding, values that saturate integers."""
    fi = ml_dtypes.finfo(DT[name])
    tiny = float(fi.smallest_normal)
    sub = float(fi.smallest_subnormal)
    big = float(fi.max)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, tiny, -tiny, sub, -sub, 3 * sub]
    vals += [1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 65504.0]
    vals += [65520.0, 2.0**31, -(2.0**31), 2.0**32, 300.0, -129.0, 255.5, 3e38, 1e-40, 1e-45]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(vals, dtype=np.float64).astype(np.float32).astype(DT[name])


def int_specials(name: str) -> np.ndarray:
    info = np.iinfo(DT[name])
    vals = [0, 1, -1, 2, info.min, info.max, info.min + 1, info.max - 1, 2**24 + 1, 2**24, 127]
    return np.array([v for v in vals if info.min <= v <= info.max], dtype=np.int64).astype(DT[name])


def values(rng: np.random.Generator, shape, name: str, special: float = 0.2, low=None, high=None):
    """Seeded values of dtype `name`: a mix of ordinary magnitudes and, with probability
    `special` each, the edge values of the dtype. low/high bound ordinary values."""
    shape = tuple(shape)
    dt = DT[name]
    if is_int(name):
        info = np.iinfo(dt)
        lo = int(info.min) if low is None else max(int(low), int(info.min))
        hi = int(info.max) if high is None else min(int(high), int(info.max))
        small = rng.integers(max(lo, -20), min(hi, 20) + 1, size=shape)
        full = rng.integers(lo, hi, size=shape, endpoint=True)
        out = np.where(rng.random(shape) < 0.5, small, full).astype(dt)
        if low is None and high is None:
            pick = int_specials(name)
            out = np.where(rng.random(shape) < special, rng.choice(pick, size=shape), out)
        return out.astype(dt)
    if low is not None or high is not None:
        lo = -8.0 if low is None else low
        hi = 8.0 if high is None else high
        return rng.uniform(lo, hi, size=shape).astype(np.float32).astype(dt)
    limit = min(float(ml_dtypes.finfo(dt).max), 1e30)
    scale = np.exp(rng.uniform(-6, 6, size=shape))
    plain = np.clip(rng.standard_normal(shape) * scale, -limit, limit)
    plain = np.where(rng.random(shape) < 0.3, np.round(plain * 4) / 4, plain)
    with np.errstate(over="ignore", invalid="ignore"):
        out = plain.astype(np.float32).astype(dt)
        pick = float_specials(name)
        return np.where(rng.random(shape) < special, rng.choice(pick, size=shape), out).astype(dt)


# ALU operators (nki.api.shared "Supported Math Operators"; nki.language for mod/fmod) ----------


def _b(fn):
    return lambda a, b: fn(a, b).astype(np.float32)


ARITH = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "mod": np.mod,  # nl.mod: the sign of the divisor, as Python's %
    "fmod": np.fmod,  # nl.fmod: the sign of the dividend, as C's fmod
    "equal": _b(np.equal),
    "not_equal": _b(np.not_equal),
    "greater": _b(np.greater),
    "greater_equal": _b(np.greater_equal),
    "less": _b(np.less),
    "less_equal": _b(np.less_equal),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
}
UNARY = {
    "abs": np.abs,
    "square": lambda x: x * x,
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
    "reciprocal": lambda x: np.float32(1) / x,
    "bypass": lambda x: x,  # nki.language: passes data through
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": lambda x: np.where(x < 0, np.ceil(x), np.floor(x)),
}
BITVEC = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
# Ops whose result the docs do not promise bit for bit (fp32 library functions): compared
# within a few units in the last place.
INEXACT_OPS = frozenset({"power", "rsqrt", "mod", "fmod", "divide", "reciprocal"})


def arith(op: str, a, b) -> np.ndarray:
    """fp32 `a <op> b` (a unary op ignores b)."""
    a = fp32(a)
    with np.errstate(all="ignore"):
        if op in UNARY:
            return fp32(UNARY[op](a))
        return fp32(ARITH[op](a, fp32(b)))


def bitvec(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Raw integer bits of a and b (b as a's type); shifts are logical (nki.isa: right_shift
    is a logical shift) and shift by the amount's low bits (inferred: shifts past the width
    are not used here)."""
    b = np.asarray(b).astype(a.dtype)
    u = np.dtype(f"u{a.dtype.itemsize}")
    ua, ub = a.view(u) if a.ndim else a.astype(u), b.astype(u)
    if op == "bitwise_and":
        r = ua & ub
    elif op == "bitwise_or":
        r = ua | ub
    elif op == "bitwise_xor":
        r = ua ^ ub
    elif op == "left_shift":
        r = ua << ub
    elif op == "right_shift":
        r = ua >> ub
    else:
        raise KeyError(op)
    return np.asarray(r, dtype=u).view(a.dtype)


def on_lanes(x) -> np.ndarray:
    """An immediate (0-d) or a [P, 1] column, as fp32 broadcastable against [P, F]."""
    x = fp32(x)
    return x if x.ndim == 0 else x.reshape(-1, 1)


def flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


# Activation functions, in float64 then fp32 (nki.api.shared "Supported Activation Functions")


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x


def _sig(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


ACTIVATIONS = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "square": lambda x: x * x,
    "sigmoid": _sig,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_apprx_tanh": lambda x: (
        0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    ),
    "gelu_apprx_sigmoid": lambda x: x * _sig(1.702 * x),
    "silu": lambda x: x * _sig(x),
    "tanh": np.tanh,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "erf": _erf,
    "gelu_dx": lambda x: (
        0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    ),
    # (at x = +-inf, its limits 1 and 0: the second term's inf * 0 is no value there)
    "gelu_apprx_sigmoid_dx": lambda x: (
        _sig(1.702 * x)
        + np.where(np.isinf(x), 0.0, 1.702 * x * _sig(1.702 * x) * (1 - _sig(1.702 * x)))
    ),
    "silu_dx": lambda x: _sig(x) * (1 + x * (1 - _sig(x))),
    "erf_dx": lambda x: 2.0 / math.sqrt(math.pi) * np.exp(-x * x),
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": lambda x: np.sin(x) / np.cos(x),
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "sign": np.sign,
    "abs": np.abs,
}
# nki.api.shared: the documented valid input ranges; outside them results are invalid.
VALID_RANGE = {
    "log": (2.0**-64, 2.0**64),
    "sin": (-math.pi, math.pi),
    "arctan": (-math.pi / 2, math.pi / 2),
    "sqrt": (2.0**-116, 2.0**118),
    "rsqrt": (2.0**-87, 2.0**97),
    "reciprocal": (2.0**-42, 2.0**42),  # ± this range (neuroncore.md §B4)
}
EXACT_ACTIVATIONS = frozenset({"copy", "identity", "square", "relu", "abs", "sign"})


def activation_fn(op: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return fp32(ACTIVATIONS[op](x.astype(np.float64)))


def in_valid_range(op: str, x: np.ndarray) -> np.ndarray:
    """Where the input of activation `op` lies in its documented valid range."""
    if op not in VALID_RANGE:
        return np.ones(x.shape, dtype=bool)
    lo, hi = VALID_RANGE[op]
    with np.errstate(invalid="ignore"):
        if op == "reciprocal":
            return (np.abs(x) >= lo) & (np.abs(x) <= hi)
        return (x >= lo) & (x <= hi)


# XORWOW (Marsaglia 2003), the PRNG nki.isa.rand_set_state documents ---------------------------

M32 = 0xFFFFFFFF


def xorwow_lane(words: list[int], count: int) -> list[int]:
    """`count` outputs of one lane whose state is `words` (6 per generator; several
    generators are used in turn: the Vector engine's 24 words are 4 generators, inferred)."""
    gens = [list(words[i : i + 6]) for i in range(0, len(words), 6)]
    out = []
    for i in range(count):
        x, y, z, w, v, d = gens[i % len(gens)]
        t = (x ^ (x >> 2)) & M32
        x, y, z, w = y, z, w, v
        v = (v ^ ((v << 4) & M32)) ^ (t ^ ((t << 1) & M32))
        d = (d + 362437) & M32
        gens[i % len(gens)] = [x, y, z, w, v, d]
        out.append((v + d) & M32)
    return out
