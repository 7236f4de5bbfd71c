"""`--explain-mismatch` on a logic bug names the first kernel instruction whose value the
reference never computes, found against the reference's own intermediate arrays (the values
its local names hold as it runs), tiles and transposes allowed (issue 43, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.report.reference import load_reference

KERNELS = Path(__file__).resolve().parents[2] / "kernels"

HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n@nki.jit\n"

# Line 15 is the matmul; line 17 the copy out of PSUM.
MATMUL = HEAD + (
    "def k(lhsT, rhs):\n"
    "    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)\n"
    "    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
    "    for kk in range(4):\n"
    "        s = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=s, src=lhsT[kk * 128:(kk + 1) * 128, :])\n"
    "        m = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=m, src=rhs[kk * 128:(kk + 1) * 128, :])\n"
    "        nisa.nc_matmul(dst=acc, stationary=s, moving=m, accumulate=ACCUMULATE)\n"
    "    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.tensor_copy(dst=r, src=acc)\n"
    "    nisa.dma_copy(dst=out, src=r)\n"
    "    return out\n"
)

# Softmax of each row; line 15 is the exponential, which should take the negated row max
# (line 12) as its bias: without it, exp overflows on large inputs.
SOFTMAX = HEAD + (
    "def softmax(x):\n"
    "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
    "    xt = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
    "    nisa.dma_copy(dst=xt, src=x)\n"
    "    neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=xt, axis=1, negate=True)\n"
    "    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)\n"
    "    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.activation(dst=e, op=nl.exp, data=xt, BIASreduce_op=nl.add, reduce_res=total,\n"
    "                    reduce_cmd=nisa.reduce_cmd.reset_reduce)\n"
    "    inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
    "    nisa.reciprocal(dst=inv, data=total)\n"
    "    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)\n"
    "    nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)\n"
    "    nisa.dma_copy(dst=out, src=y)\n"
    "    return out\n"
)

SOFTMAX_REF = (
    "import numpy as np\n"
    "\n"
    "\n"
    "def reference(x):\n"
    "    v = x.astype(np.float64)\n"
    "    e = np.exp(v - v.max(axis=1, keepdims=True))\n"
    "    return e / e.sum(axis=1, keepdims=True)\n"
)

# Line 15 adds `ta` to itself where it should add `tb`.
ADD = HEAD + (
    "def add(a, b):\n"
    "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
    "    for t in range(a.shape[0] // 128):\n"
    "        ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=ta, src=a[t * 128:(t + 1) * 128, :])\n"
    "        tb = nl.ndarray((128, a.shape[1]), dtype=b.dtype, buffer=nl.sbuf)\n"
    "        nisa.dma_copy(dst=tb, src=b[t * 128:(t + 1) * 128, :])\n"
    "        s = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)\n"
    "        nisa.tensor_tensor(dst=s, data1=ta, data2=SECOND, op=nl.add)\n"
    "        nisa.dma_copy(dst=out[t * 128:(t + 1) * 128, :], src=s)\n"
    "    return out\n"
)


def _matmul_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    return {
        "lhsT": rng.standard_normal((512, 128)).astype(ml_dtypes.bfloat16),
        "rhs": rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16),
    }


def _matmul_reference(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)


def _softmax_input() -> np.ndarray:
    # Row maxima up to 100: exp of them overflows fp32 unless the max is subtracted first.
    return np.random.default_rng(3).uniform(-100, 100, (128, 64)).astype(np.float32)


def _add_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    return {k: rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16) for k in "ab"}


def _add_reference(a, b):
    return a.astype(np.float32) + b.astype(np.float32)


def _steps(result) -> dict:
    assert not result.check.passed
    explained = result.check.explanation
    assert explained["verdict"] == "algorithm"
    return explained["steps"]


def test_a_matmul_that_overwrites_its_accumulator_is_blamed_not_the_copy(kernel_file):
    path = kernel_file(MATMUL.replace("ACCUMULATE", "False"))
    result = neuronemu.run(path, _matmul_inputs(), ref=_matmul_reference, explain_mismatch=True)
    steps = _steps(result)
    wrong = steps["first_wrong"]
    assert (wrong["instruction"], wrong["location"]) == ("nc_matmul", f"{path}:15:9")
    assert wrong["status"] == "unmatched"
    # Its inputs are the last K tile of each operand, as the reference's parameters hold them.
    assert wrong["inputs"]["reference"] == [
        f"`lhsT`[384:512, 0:128] ({__file__.rpartition('/')[2]}:{_line(_matmul_reference)})",
        f"`rhs`[384:512, 0:512] ({__file__.rpartition('/')[2]}:{_line(_matmul_reference)})",
    ]
    message = result.check.explanation["message"]
    assert f"{path}:15:9: nc_matmul's result [128, 512] matches no value" in message
    assert f"{path}:17:" not in message


def _line(fn) -> int:
    return fn.__code__.co_firstlineno


def test_a_correct_matmul_has_nothing_to_explain(kernel_file):
    path = kernel_file(MATMUL.replace("ACCUMULATE", "(kk > 0)"))
    result = neuronemu.run(path, _matmul_inputs(), ref=_matmul_reference, explain_mismatch=True)
    assert result.check.passed and result.check.explanation is None


def test_a_softmax_without_its_max_subtraction_blames_the_exponential(kernel_file, tmp_path):
    path = kernel_file(SOFTMAX.replace("BIAS", ""))
    ref = tmp_path / "softmax_ref.py"
    ref.write_text(SOFTMAX_REF)
    reference = load_reference(f"{ref}:reference")
    x = _softmax_input()
    result = neuronemu.run(path, {"x": x}, ref=reference, explain_mismatch=True)
    wrong = _steps(result)["first_wrong"]
    # Not the row max at line 12 (its value goes nowhere), not the copy out: the exp at 15.
    assert (wrong["instruction"], wrong["location"]) == ("activation", f"{path}:15:5")
    assert wrong["inputs"]["reference"] == ["`x` (softmax_ref.py:4)"]
    # With the bias, the same kernel matches: its exponentials are the reference's `e`.
    fixed = kernel_file(SOFTMAX.replace("BIAS", "bias=neg_max, "), name="fixed.py")
    assert neuronemu.run(fixed, {"x": x}, ref=reference).check.passed


def test_an_add_of_the_wrong_input_blames_the_add_and_names_the_input_it_read(kernel_file):
    path = kernel_file(ADD.replace("SECOND", "ta"))
    result = neuronemu.run(path, _add_inputs(), ref=_add_reference, explain_mismatch=True)
    wrong = _steps(result)["first_wrong"]
    assert (wrong["instruction"], wrong["location"]) == ("tensor_tensor", f"{path}:15:9")
    # The first 128-row tile of `a`, twice; nothing of `b`.
    where = f"{__file__.rpartition('/')[2]}:{_line(_add_reference)}"
    assert wrong["inputs"]["reference"] == [f"`a`[0:128, 0:512] ({where})"]
    fixed = kernel_file(ADD.replace("SECOND", "tb"), name="fixed.py")
    assert neuronemu.run(fixed, _add_inputs(), ref=_add_reference).check.passed


def test_a_step_read_in_part_vouches_for_what_wrote_it(kernel_file):
    # kernels/layernorm.py with var * eps where var + eps belongs. bn_stats and bn_aggr make
    # tiles the reference never names ([mean, var] side by side), but the later steps read
    # their columns, which match the reference's `mean` and `var`: the multiply is blamed.
    source = (KERNELS / "layernorm.py").read_text()
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "operand0=eps" in text)
    path = kernel_file(source.replace("op0=nl.add, operand0=eps", "op0=nl.multiply, operand0=eps"))
    reference = load_reference(f"{KERNELS / 'layernorm_ref.py'}:reference")
    x = np.random.default_rng(6).standard_normal((300, 256)).astype(np.float32)
    result = neuronemu.run(path, {"x": x}, ref=reference, explain_mismatch=True)
    wrong = _steps(result)["first_wrong"]
    assert (wrong["instruction"], wrong["location"]) == ("tensor_scalar", f"{path}:{line}:9")
    assert wrong["inputs"]["reference"] == ["`var`[0:128, 0:1] (layernorm_ref.py:15)"]


def _add_then_double(a, b):
    total = a.astype(np.float32) + b.astype(np.float32)
    return total * 2


def test_a_kernel_that_stops_short_of_the_reference_names_where_it_stops(kernel_file):
    path = kernel_file(ADD.replace("SECOND", "tb"))
    result = neuronemu.run(path, _add_inputs(), ref=_add_then_double, explain_mismatch=True)
    steps = _steps(result)
    assert steps["first_wrong"] is None
    where = f"{__file__.rpartition('/')[2]}:{_line(_add_then_double) + 1}"
    assert (
        f"the outputs end at its `total` ({where}), which the reference goes on"
        in (steps["message"])
    )


def test_the_command_line_prints_the_line_and_the_reference_names(kernel_file, tmp_path):
    path = kernel_file(SOFTMAX.replace("BIAS", ""))
    ref = tmp_path / "softmax_ref.py"
    ref.write_text(SOFTMAX_REF)
    np.save(tmp_path / "x.npy", _softmax_input())
    args = ["run", path, "-i", f"x=@{tmp_path / 'x.npy'}", "--ref", f"{ref}:reference"]
    human = CliRunner().invoke(main, [*args, "--explain-mismatch"])
    assert human.exit_code == 1
    assert (
        f"Against the reference's own steps: {path}:15:5: activation's result [128, 64] "
        "matches no value the reference computes; its inputs match the reference's `x` "
        "(softmax_ref.py:4)"
    ) in human.stderr
    data = json.loads(CliRunner().invoke(main, [*args, "--explain-mismatch", "--json"]).stdout)
    assert data["check"]["explanation"]["steps"]["first_wrong"]["location"] == f"{path}:15:5"


def test_the_reference_is_traced_by_local_name_and_line_and_the_tracer_put_back(tmp_path):
    from neuronemu.report.explain import trace_reference

    ref = tmp_path / "softmax_ref.py"
    ref.write_text(SOFTMAX_REF)
    reference = load_reference(f"{ref}:reference")
    x = _softmax_input()
    _sentinel_tracer.install()
    try:
        refs, skipped = trace_reference(reference, {"x": x})
        assert _sentinel_tracer.installed()  # (a debugger's or coverage's tracer is back)
    finally:
        _sentinel_tracer.remove()
    assert skipped == 0
    assert [(r.name, r.line) for r in refs] == [
        ("x", 4),
        ("v", 5),
        ("e", 6),
        ("return value", 7),
    ]
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    assert np.allclose(refs[2].values, e, rtol=1e-6)
    assert np.allclose(refs[3].values, e / e.sum(axis=1, keepdims=True), rtol=1e-6)


def test_the_reference_arrays_kept_are_capped(tmp_path):
    from neuronemu.report.explain import MAX_INTERMEDIATES, trace_reference

    ref = tmp_path / "many_ref.py"
    ref.write_text(
        "def reference(a):\n"
        "    out = a\n"
        "    for _ in range(200):\n"
        "        out = out + 1\n"
        "    return out\n"
    )
    reference = load_reference(f"{ref}:reference")
    refs, skipped = trace_reference(reference, {"a": np.zeros((4, 4), np.float32)})
    assert len(refs) == MAX_INTERMEDIATES and skipped > 0


def test_a_reference_looping_in_python_is_traced_for_a_bounded_number_of_lines(
    tmp_path, monkeypatch
):
    from neuronemu.report import explain

    ref = tmp_path / "loop_ref.py"
    ref.write_text(
        "import numpy as np\n"
        "\n"
        "\n"
        "def reference(a):\n"
        "    out = np.zeros(a.shape)\n"
        "    for i in range(a.shape[0]):\n"
        "        row = a[i] * 2\n"
        "        out[i] = row\n"
        "    return out\n"
    )
    monkeypatch.setattr(explain, "MAX_TRACED_LINES", 10)
    a = np.arange(64, dtype=np.float32).reshape(32, 2)
    refs, _ = explain.trace_reference(load_reference(f"{ref}:reference"), {"a": a})
    names = [r.name for r in refs]
    # A few rows are seen before the cap; the loop's other 28 are not; the result still is.
    assert names.count("row") < 5 and names[-1] == "return value"
    assert np.array_equal(refs[-1].values, a * 2)


def test_a_kernel_value_is_matched_as_a_transposed_tile_of_a_reference_array():
    from neuronemu.report.explain import RefValue, _Matcher

    big = np.random.default_rng(5).standard_normal((256, 384)).astype(np.float32)
    matcher = _Matcher([RefValue("w", "ref.py", 3, big)], 128)
    status, match = matcher.match(big.T[128:256, 128:256].astype(np.float64))
    assert status == "matched" and match is not None
    assert (match.read_as, match.offset) == (".T", (128, 128))
    assert matcher.match(big.T[128:256, 128:256] + 1.0)[0] == "unmatched"
    assert matcher.match(np.ones((400, 5)))[0] == "no candidate"  # (fits no form)


def test_the_comparison_stops_when_its_budget_is_spent():
    from neuronemu.report.explain import RefValue, _Matcher

    big = np.random.default_rng(7).standard_normal((256, 384)).astype(np.float32)
    matcher = _Matcher([RefValue("w", "ref.py", 3, big)], 128)
    matcher.budget = -(10**9)  # (as if the shadow run had written nothing and more was spent)
    assert matcher.match(big[0:128, 0:128]) == ("skipped", None)
    assert matcher.exhausted and matcher.compared == 0


class _Sentinel:
    """A tracer that stands for one a debugger or coverage tool set before the run."""

    def install(self) -> None:
        import sys

        self.previous = sys.gettrace()
        sys.settrace(self.trace)

    def trace(self, frame, event, arg):
        return None

    def installed(self) -> bool:
        import sys

        return sys.gettrace() == self.trace

    def remove(self) -> None:
        import sys

        sys.settrace(self.previous)


_sentinel_tracer = _Sentinel()
