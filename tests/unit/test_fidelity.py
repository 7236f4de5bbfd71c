"""The fidelity report: the `check` fields, --precise/--no-precise, tf32 matmul reads, and
--explain-mismatch naming the instruction and line where a kernel's rounding goes wrong."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.errors import SourceSpan
from neuronemu.ir import ALL_DTYPES, BUFFERS, Tensor
from neuronemu.program import Instr, Program
from neuronemu.report.reference import compare
from neuronemu.sim import functional
from neuronemu_isa import REGISTRY, Engine, load_arch
from neuronemu_isa.numerics import round_tf32

BF16 = ml_dtypes.bfloat16

# fp32 in, x100 into a float16 tile (overflows past 65504), x0.01 back into fp32: line 13 is
# the instruction that loses the values.
OVERFLOW = """\
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_roundtrip(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    big = nl.ndarray(a.shape, dtype=nl.{mid}, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=big, data=x, op0=nl.multiply, operand0={up})
    nisa.tensor_scalar(dst=y, data=big, op0=nl.multiply, operand0={down})
    nisa.dma_copy(dst=out, src=y)
    return out
"""


def identity(a):
    return a


def _overflow(kernel_file, mid="float16", up=100.0, down=0.01) -> str:
    return kernel_file(OVERFLOW.format(mid=mid, up=up, down=down), "overflow.py")


def _big_values() -> np.ndarray:
    return np.random.default_rng(0).uniform(100.0, 1000.0, (128, 64)).astype(np.float32)


def test_check_keeps_the_contract_fields_and_adds_the_fidelity_ones():
    got = {"y": np.array([1.0, 2.0, np.inf, np.nan, 5.0], dtype=np.float32)}
    want = [np.array([1.0, 2.5, np.inf, np.nan, np.nan])]
    c = compare(got, want, {"y": "float32"}, None, None).to_json()
    assert list(c)[:6] == ["passed", "max_abs_err", "max_rel_err", "mismatches", "rtol", "atol"]
    assert c["passed"] is False and c["mismatches"] == 2  # 2.0 vs 2.5, and 5.0 vs NaN
    assert c["first_mismatch"] == {"output": "y", "index": [1], "got": 2.0, "expected": 2.5}
    assert c["nan"] == {"got": 1, "expected": 2} and c["inf"] == {"got": 1, "expected": 1}
    assert c["outputs"]["y"]["mismatches"] == 2 and c["explanation"] is None
    assert c["max_ulp_err"] == float("inf") and c["precise"] is True


def test_equal_infinities_are_not_mismatches():
    c = compare(
        {"y": np.array([np.inf, -np.inf], np.float32)},
        [np.array([np.inf, -np.inf])],
        {"y": "float32"},
        None,
        None,
    )
    assert c.passed and c.max_abs_err == 0.0


def test_errors_are_counted_in_units_of_the_output_dtype():
    want = np.array([1.0, 2.0, 0.5])
    got = want.astype(BF16) + np.array([2.0**-7, 0, 0]).astype(BF16)  # one bf16 ulp at 1.0
    c = compare({"y": got}, [want], {"y": "bfloat16"}, None, None)
    assert c.max_ulp_err == 1.0 and c.outputs["y"].max_ulp_err == 1.0


def test_each_output_gets_its_own_dtype_tolerance():
    want = [np.full(4, 1.0), np.full(4, 1.0)]
    got = {"lo": np.full(4, 1.01, BF16), "hi": np.full(4, 1.01, np.float32)}
    c = compare(got, want, {"lo": "bfloat16", "hi": "float32"}, None, None)
    assert c.outputs["lo"].passed and c.outputs["lo"].rtol == 2e-2
    assert not c.outputs["hi"].passed and c.outputs["hi"].rtol == 1e-4
    assert not c.passed and c.mismatches == 4


def test_no_precise_holds_low_precision_tiles_in_fp32_so_rounding_disappears(kernel_file):
    path = _overflow(kernel_file, mid="bfloat16", up=3.0, down=1 / 3)
    a = np.random.default_rng(1).uniform(-2, 2, (128, 64)).astype(np.float32)
    rounded = neuronemu.run(path, {"a": a}, ref=identity)
    exact = neuronemu.run(path, {"a": a}, ref=identity, precise=False)
    assert not rounded.check.passed and rounded.check.max_ulp_err > 1000
    assert exact.check.passed and exact.check.precise is False
    assert exact.check.max_abs_err < 1e-6


def test_tf32_operands_are_rounded_on_the_tensor_engine_only_when_precise():
    span = SourceSpan("hand.py", 1, 1)
    k, m, n = 8, 4, 6
    a = Tensor("a", (k, m), ALL_DTYPES["tfloat32"], BUFFERS["sbuf"], span, kind="input")
    b = Tensor("b", (k, n), ALL_DTYPES["tfloat32"], BUFFERS["sbuf"], span, kind="input")
    out = Tensor("out", (m, n), ALL_DTYPES["float32"], BUFFERS["psum"], span, kind="output")
    ins = Instr(
        0,
        REGISTRY["nc_matmul"],
        Engine.TENSOR,
        {"dst": out.full(), "stationary": a.full(), "moving": b.full()},
        {"accumulate": False},
        span,
    )
    program = Program(
        "hand", "hand.py", load_arch("trn2"), [ins], [a, b, out], {"a": a, "b": b}, [out]
    )
    rng = np.random.default_rng(2)
    x = rng.standard_normal((k, m)).astype(np.float32)
    y = rng.standard_normal((k, n)).astype(np.float32)
    got = functional.execute(program, {"a": x, "b": y})["out"]
    assert np.array_equal(got, round_tf32(x).T @ round_tf32(y))
    loose = functional.execute(program, {"a": x, "b": y}, precise=False)["out"]
    assert np.array_equal(loose, x.T @ y) and not np.array_equal(loose, got)


def test_the_shadow_run_leaves_the_rounded_outputs_as_execute_gives_them(kernel_file):
    path = _overflow(kernel_file)
    program = neuronemu.compile_kernel(path, {"a": _big_values()})
    plain = functional.execute(program, {"a": _big_values()})
    shadow = functional.shadow_execute(program, {"a": _big_values()})
    assert np.array_equal(plain["out"], shadow.outputs["out"])
    assert np.allclose(shadow.shadow_outputs["out"], _big_values(), rtol=1e-6)


def test_explain_mismatch_names_the_overflowing_instruction_and_its_line(kernel_file):
    path = _overflow(kernel_file)
    result = neuronemu.run(path, {"a": _big_values()}, ref=identity, explain_mismatch=True)
    assert not result.check.passed and result.check.counts("inf")["got"] > 0
    why = result.check.explanation
    assert why["verdict"] == "rounding" and why["shadow_passed"] is True
    first = why["first_departure"]
    assert first["instruction"] == "tensor_scalar" and first["index"] == 1
    assert first["location"] == f"{path}:13:5" and first["dtype"] == "float16"
    assert first["ulps"] == float("inf") and first["inputs"]["data"]["ulps"] == 0.0
    assert f"{path}:13:5" in why["message"]


def test_explain_mismatch_follows_rounding_inherited_from_an_earlier_write(kernel_file):
    # bf16 then x3 in fp32: the fp32 step is the first to depart by more than its own
    # rounding, and the report says which instruction wrote the bf16 input it inherited.
    path = _overflow(kernel_file, mid="bfloat16", up=3.0, down=1 / 3)
    a = np.random.default_rng(1).uniform(-2, 2, (128, 64)).astype(np.float32)
    why = neuronemu.run(path, {"a": a}, ref=identity, explain_mismatch=True).check.explanation
    first = why["first_departure"]
    assert first["location"] == f"{path}:14:5" and first["dtype"] == "float32"
    data = first["inputs"]["data"]
    assert data["dtype"] == "bfloat16" and 0 < data["ulps"] <= 0.5
    assert data["written_by"] == {
        "index": 1,
        "instruction": "tensor_scalar",
        "location": f"{path}:13:5",
    }


def test_explain_mismatch_blames_the_algorithm_when_the_shadow_differs_too(kernel_file):
    path = _overflow(kernel_file, mid="float32", up=2.0, down=1.0)  # doubles: a wrong kernel
    why = neuronemu.run(
        path, {"a": _big_values()}, ref=identity, explain_mismatch=True
    ).check.explanation
    assert why["verdict"] == "algorithm" and why["first_departure"] is None


def test_cli_explain_mismatch_prints_the_line_and_json_carries_it(kernel_file, tmp_path):
    path = _overflow(kernel_file)
    np.save(tmp_path / "a.npy", _big_values())
    ref = tmp_path / "ref.py"
    ref.write_text("def reference(a):\n    return a\n")
    args = [
        "run",
        path,
        "-i",
        f"a=@{tmp_path / 'a.npy'}",
        "--ref",
        f"{ref}:reference",
        "--explain-mismatch",
    ]
    human = CliRunner().invoke(main, args)
    assert human.exit_code == 1
    assert f"{path}:13:5: instruction #1 tensor_scalar" in human.stderr
    data = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    assert data["check"]["explanation"]["first_departure"]["location"] == f"{path}:13:5"
    assert data["check"]["inf"]["got"] > 0
    assert CliRunner().invoke(main, [*args, "--no-precise"]).exit_code == 0


def test_cli_explain_mismatch_without_a_reference_is_a_usage_error(kernel_file):
    result = CliRunner().invoke(
        main, ["run", _overflow(kernel_file), "-i", "a=float32[128,64]", "--explain-mismatch"]
    )
    assert result.exit_code == 2 and "--explain-mismatch needs a reference" in result.stderr


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"]
)
def test_no_precise_holds_each_low_precision_dtype_in_fp32(dtype):
    from neuronemu.sim.state import Memory

    t = Tensor("t", (2, 2), ALL_DTYPES[dtype], BUFFERS["sbuf"], SourceSpan("m.py", 1, 1))
    assert Memory([t], {}).array(t).dtype == ALL_DTYPES[dtype].np
    assert Memory([t], {}, np.dtype(np.float32)).array(t).dtype == np.float32
    assert Memory([t], {}, np.dtype(np.float64)).array(t).dtype == np.float64


def test_explain_mismatch_names_where_a_nan_first_appears_from_finite_inputs(kernel_file):
    # x -> log(x) on Scalar, then x * 2 on Vector: negative inputs make NaN at the log; the
    # multiply only passes it on.
    src = (
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
        "@nki.jit\ndef k(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "    nisa.activation(dst=t, op=nl.log, data=t)\n"
        "    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n"
    )
    path = kernel_file(src)
    a = np.linspace(-1, 3, 128 * 8, dtype=np.float32).reshape(128, 8)
    a[a == 0] = 1.0
    result = neuronemu.run(path, {"a": a}, ref=lambda a: np.abs(a), explain_mismatch=True)
    origin = result.check.explanation["non_finite"]
    assert (origin["name"], origin["line"]) == ("activation", f"{path}:10:5")
    row, col = origin["element"]
    assert a[row, col] < 0 and np.isnan(origin["value"])
    assert "makes NaN from finite inputs" in result.check.explanation["message"]


def test_the_check_says_how_much_of_its_tolerance_the_worst_element_used():
    from neuronemu.report.reference import compare

    want = np.array([[1.0, 2.0, 100.0]])
    got = want + np.array([[0.5e-4, 0.0, 0.009]])
    check = compare({"out": got}, [want], {"out": "float32"}, 1e-4, 1e-4)
    # Independently: |err| / (atol + rtol * |want|), worst element.
    used = (np.abs(got - want) / (1e-4 + 1e-4 * np.abs(want))).max()
    assert check.tolerance_used == pytest.approx(used) and check.tolerance_used < 1
    assert check.passed and check.to_json()["tolerance_used"] == pytest.approx(used)
    worse = compare({"out": got * 1.001}, [want], {"out": "float32"}, 1e-4, 1e-4)
    assert not worse.passed and worse.tolerance_used > 1


SOFTMAX = """\
import nki
import nki.language as nl


@nki.jit
def softmax(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(nl.subtract(t, m), dtype=EXP_DTYPE)
    s = nl.sum(e, axis=1, keepdims=True, dtype=nl.float32)
    nl.store(out, nl.divide(e, s))
    return out
"""


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("exp_dtype, passes", [("nl.float32", True), ("nl.bfloat16", False)])
def test_default_fp32_check_catches_a_softmax_whose_exp_is_held_in_bf16(
    kernel_file, exp_dtype, passes
):
    # The outputs are ~1/512: a fixed atol of 1e-4 would pass any error; the default atol
    # scales with the output's largest value instead.
    x = np.random.default_rng(5).standard_normal((128, 512)).astype(np.float32)
    path = kernel_file(SOFTMAX.replace("EXP_DTYPE", exp_dtype))
    r = neuronemu.run(path, {"x": x}, ref=_softmax)
    assert r.check.passed is passes
    assert r.check.atol == pytest.approx(1e-4 * _softmax(x).max())


def test_default_atol_scales_with_the_output_and_an_explicit_one_does_not():
    want = np.array([[1000.0, 0.5]])
    got = want + np.array([[0.0, 0.05]])  # 5e-5 of the largest value: within the default
    assert compare({"o": got}, [want], {"o": "float32"}, None, None).passed
    assert not compare({"o": got}, [want], {"o": "float32"}, None, 1e-4).passed
    assert compare({"o": np.zeros((2, 2))}, [np.zeros((2, 2))], {"o": "float32"}, None, None).passed
