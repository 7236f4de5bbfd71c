"""activation: semantics vs NumPy, each constraint's message, cost growth."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _isa_testing import (
    FLOATS,
    NP_DTYPES,
    PSUM,
    SBUF,
    TARGETS,
    assert_bits_equal,
    assert_close,
    make_check,
    random_array,
    seeds,
    tile,
    tile_shapes,
)
from _spec_testing import Growth, accepted, checker, least_cost, on_each_target, violation
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import cast_to

SPEC = REGISTRY["activation"]
F32 = np.float32
F64 = np.float64

_erf = np.vectorize(math.erf, otypes=[F64])

# Functions whose fp32 result is one correctly rounded operation (or none): compared bitwise.
EXACT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "relu": lambda x: np.maximum(x, F32(0)),
    "square": lambda x: x * x,
    "abs": np.abs,
    "sign": np.sign,
    "sqrt": np.sqrt,
    "reciprocal": lambda x: F32(1) / x,
}

# Transcendental functions: the test's own definitions (fp32 NumPy, or float64 where NumPy has
# no fp32 routine); compared within fp32 rounding.
TRANSCENDENTAL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "tan": lambda x: np.sin(x) / np.cos(x),
    "arctan": np.arctan,
    "log": np.log,
    "rsqrt": lambda x: F32(1) / np.sqrt(x),
    "sigmoid": lambda x: F32(1) / (F32(1) + np.exp(-x)),
    "silu": lambda x: x / (F32(1) + np.exp(-x)),
    "gelu_apprx_sigmoid": lambda x: x / (F32(1) + np.exp(F32(-1.702) * x)),
    "softplus": lambda x: np.log1p(np.exp(x.astype(F64))),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x.astype(F64)))),
    "erf": lambda x: _erf(x.astype(F64)),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x.astype(F64) / math.sqrt(2.0))),
    "gelu_apprx_tanh": lambda x: (
        0.5
        * x
        * (1 + np.tanh(math.sqrt(2 / math.pi) * (x.astype(F64) + 0.044715 * x.astype(F64) ** 3)))
    ),
}


def _slope(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """A derivative by central differences of the test's own forward function, in float64."""
    forward, h = TRANSCENDENTAL[name], 1e-4
    return lambda x: (forward(x.astype(F64) + h) - forward(x.astype(F64) - h)) / (2 * h)


TRANSCENDENTAL.update(
    {f"{name}_dx": _slope(name) for name in ("gelu", "gelu_apprx_sigmoid", "silu", "erf")}
)
POSITIVE_DOMAIN = {"sqrt", "reciprocal", "log", "rsqrt"}


def test_activation_tests_cover_every_function_it_accepts() -> None:
    choices = {a.name: a.choices for a in SPEC.attrs}
    assert set(choices["op"]) == set(EXACT) | set(TRANSCENDENTAL)


@st.composite
def scale_and_bias(draw: Any, partitions: int, seed: int, positive: bool) -> tuple[Any, Any]:
    """scale: an immediate or a [P, 1] column; bias: None, an immediate or a [P, 1] column."""
    lo = 0.0 if positive else -0.5
    if draw(st.booleans()):
        scale: Any = draw(st.floats(0.5, 1.5))
    else:
        scale = random_array(seed, (partitions, 1), draw(st.sampled_from(FLOATS)), 0.5, 1.5)
    kind = draw(st.sampled_from(["none", "immediate", "column"]))
    if kind == "none":
        return scale, None
    if kind == "immediate":
        return scale, draw(st.floats(lo, 0.5))
    return scale, random_array(seed + 1, (partitions, 1), draw(st.sampled_from(FLOATS)), lo, 0.5)


def _pre_activation(x: np.ndarray, scale: Any, bias: Any) -> np.ndarray:
    """data * scale + bias in fp32, two roundings, scale/bias broadcast per partition."""
    rows = x.astype(F32).reshape(x.shape[0], -1)
    s = np.float32(scale) if np.ndim(scale) == 0 else scale.astype(F32)
    out = rows * s
    if bias is not None:
        out = out + (np.float32(bias) if np.ndim(bias) == 0 else bias.astype(F32))
    return out.astype(F32)


def _raw(x: np.ndarray, op: str, scale: Any = 1.0, bias: Any = None) -> np.ndarray:
    """The fp32 result the Scalar engine computes, before the write casts it."""
    with np.errstate(all="ignore"):
        result = np.asarray(SPEC.semantics(data=x, bias=bias, scale=scale, op=op))
    assert result.dtype == F32, result.dtype
    assert result.size == x.size
    return result.reshape(x.shape)


def _run(x: np.ndarray, dst: str, op: str, scale: Any = 1.0, bias: Any = None) -> np.ndarray:
    with np.errstate(all="ignore"):
        return cast_to(_raw(x, op, scale, bias), NP_DTYPES[dst])


# Semantics -------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(EXACT) + sorted(TRANSCENDENTAL))
@settings(deadline=None)
@given(
    shape=tile_shapes(),
    src=st.sampled_from(FLOATS),
    dst=st.sampled_from(FLOATS),
    seed=seeds,
    data=st.data(),
)
def test_activation_function_matches_numpy(
    op: str, shape: tuple[int, ...], src: str, dst: str, seed: int, data: st.DataObject
) -> None:
    """The EXACT functions bit for bit (inputs within 4), the TRANSCENDENTAL ones within fp32
    rounding (inputs within 1); positive-domain functions from 0.05."""
    exact, positive = op in EXACT, op in POSITIVE_DOMAIN
    high = 4.0 if exact else 1.0
    x = random_array(seed, shape, src, 0.05 if positive else -high, high)
    scale, bias = data.draw(scale_and_bias(shape[0], seed + 7, positive))
    function = EXACT[op] if exact else TRANSCENDENTAL[op]
    with np.errstate(all="ignore"):
        expected = function(_pre_activation(x, scale, bias)).astype(F32).reshape(shape)
        raw, written = _raw(x, op, scale, bias), _run(x, dst, op, scale, bias)
        if exact:
            assert_bits_equal(raw, expected)
            assert_bits_equal(written, expected.astype(NP_DTYPES[dst]))
        else:
            assert_close(raw, expected, "float32")
            assert_close(written, expected.astype(NP_DTYPES[dst]), dst)


def test_activation_applies_scale_then_bias_then_the_function() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=F32)
    bias = np.array([[-10.0], [0.5]], dtype=F32)
    out = _run(x, "float32", "relu", scale=2.0, bias=bias)
    np.testing.assert_array_equal(out, [[0.0, 0.0], [6.5, 8.5]])


@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh"])
def test_activation_handles_large_inputs_like_numpy(op: str) -> None:
    x = np.array([[-200.0, -50.0, 0.0, 50.0, 200.0]], dtype=F32)
    with np.errstate(all="ignore"):
        expected = TRANSCENDENTAL[op](x).astype(F32)
    assert_close(_run(x, "float32", op), expected, "float32")


# Constraints -----------------------------------------------------------------------------


CHECK = checker(
    Engine.SCALAR,
    attrs={"op": "exp"},
    dst=tile("dst", (128, 512), "bfloat16", SBUF),
    data=tile("data", (128, 512), "float32", PSUM),
    bias=tile("bias", (128, 1), "float32", SBUF),
    scale=2.0,
    reduce_res=None,
)


ACCEPTED: list[Any] = [
    *on_each_target("tile-bias-immediate-scale"),
    *on_each_target("column-scale", scale=tile("scale", (128, 1), "float32", SBUF), bias=None),
    *on_each_target("no-reduce", attrs={"reduce_cmd": "idle", "reduce_op": None}),
    accepted("immediate-bias-trn2", target="trn2", bias=0.5),
]
VIOLATIONS: list[Any] = [
    violation(
        "partition-sizes",
        ["partition sizes differ", "dst 32", "data 128"],
        dst=tile("dst", (32, 512)),
    ),
    violation(
        "free-sizes",
        ["elements per partition differ", "dst 511", "data 512"],
        dst=tile("dst", (128, 511)),
    ),
    violation(
        "bias-wide", ["bias has shape [128, 512]", "[128, 1]"], bias=tile("bias", (128, 512))
    ),
    violation(
        "scale-partitions", ["scale has shape [1, 1]", "[128, 1]"], scale=tile("scale", (1, 1))
    ),
    violation(
        "bias-immediate-trn1",
        ["bias must be a [P, 1] tile on NC-v2", "NC-v3"],
        target="trn1",
        bias=0.5,
    ),
    violation("reduce-op", ["reduce_op 'maximum'", "nl.add"], attrs={"reduce_op": "maximum"}),
    violation(
        "reduce-res",
        ["reduce_res has shape [128, 2]", "[128, 1]"],
        reduce_res=tile("reduce_res", (128, 2)),
    ),
    violation("reduce-cmd", ["reduce_cmd 'bogus'", "reset_reduce"], attrs={"reduce_cmd": "bogus"}),
]


# Cost ------------------------------------------------------------------------------------


def _sized(target: str, free: int, dtype: str = "float32", bias: bool = True) -> Any:
    operands = {
        "dst": tile("dst", (128, free), dtype),
        "data": tile("data", (128, free), dtype),
        "bias": tile("bias", (128, 1)) if bias else None,
        "scale": 1.0,
        "reduce_res": None,
    }
    return make_check(target, Engine.SCALAR, operands, {"op": "exp"})


def _cost(target: str, free: int, dtype: str = "float32", bias: bool = True) -> int:
    return SPEC.cost(_sized(target, free, dtype, bias))


COST_GROWTH = Growth(
    _sized,
    least_cost(Engine.SCALAR),
    params={"target": TARGETS, "dtype": FLOATS, "bias": (True, False)},
    knee=(64, 65),
)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("free", [1, 64, 65, 512, 3000])
def test_activation_cost_is_max_64_n_with_free_scale_and_bias(target: str, free: int) -> None:
    # ScalarE streams one element per lane per cycle on both targets; scale/bias are free.
    assert _cost(target, free, bias=True) == _cost(target, free, bias=False) == max(64, free)


@pytest.mark.parametrize(
    ("cmd", "before", "expected"),
    [
        ("idle", [[5.0]], lambda regs, sums: regs),
        ("reset", [[5.0]], lambda regs, sums: np.zeros_like(regs)),
        ("reduce", [[5.0]], lambda regs, sums: regs + sums),
        ("reset_reduce", [[5.0]], lambda regs, sums: sums),
    ],
)
def test_activation_reduce_registers_follow_reduce_cmd(cmd, before, expected) -> None:
    data = np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], dtype=np.float32)
    regs = np.repeat(np.asarray(before, dtype=np.float32), 2, axis=0)
    out = SPEC.semantics(data, reduce_regs=regs, op="relu", reduce_op="add", reduce_cmd=cmd)
    relu = np.maximum(data, 0)
    sums = relu.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(out["dst"], relu)
    np.testing.assert_array_equal(out["reduce_regs"], expected(regs, sums))
    np.testing.assert_array_equal(out["reduce_res"], out["reduce_regs"])


def test_activation_reading_out_the_registers_costs_an_instruction() -> None:
    base = CHECK("trn2")
    with_res = CHECK("trn2", reduce_res=tile("reduce_res", (128, 1)))
    assert SPEC.cost(with_res) - SPEC.cost(base) == load_arch("trn2").cost_act_reduce_readout_cycles


def test_activation_reports_inputs_outside_the_documented_range() -> None:
    data = np.array([[4.0, -1.0, 0.0, 1e-30]], dtype=np.float32)
    (message,) = SPEC.diagnose(data, op="log")
    assert message.startswith("activation log: 3 of 4 inputs are outside its documented range")
    assert SPEC.diagnose(np.abs(data) + 1.0, op="log") == []
    assert SPEC.diagnose(data, op="exp") == []  # full range
    # The range applies to the function's input: data * scale + bias.
    assert SPEC.diagnose(np.array([[2.0]], np.float32), op="sin", scale=2.0) != []
