"""Command-line input SPECs and the reference comparison."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuronemu
from neuronemu.errors import InternalError, UsageError
from neuronemu.inputs import Unmade, load_npz, made, parse_assignment, parse_spec, save_npz
from neuronemu.report.reference import compare


def test_array_spec_gives_seeded_data_of_that_dtype_and_shape():
    a = parse_spec("a", "bfloat16[4, 8]", seed=3)
    assert a.dtype == np.dtype(ml_dtypes.bfloat16) and a.shape == (4, 8)
    np.testing.assert_array_equal(a, parse_spec("a", "bfloat16[4,8]", seed=3))
    assert not np.array_equal(a, parse_spec("a", "bfloat16[4,8]", seed=4))
    # Each input's data depends on its name, not on the order of -i options.
    assert not np.array_equal(a, parse_spec("b", "bfloat16[4,8]", seed=3))


def test_integer_spec():
    x = parse_spec("x", "int32[16,16]", seed=0)
    assert x.dtype == np.int32 and -64 <= x.min() and x.max() <= 64


@pytest.mark.parametrize(
    ("text", "value"),
    [("2", 2), ("0.5", 0.5), ("(3, 4)", (3, 4)), ('"causal"', "causal"), ("[1, 2]", [1, 2])],
)
def test_literal_specs_are_compile_time_parameters(text, value):
    assert parse_spec("p", text, seed=0) == value


@pytest.mark.parametrize(
    ("text", "name"),
    [("nl.bfloat16", "bfloat16"), ("np.float16", "float16"), ("nki.language.int32", "int32")],
)
def test_a_dtype_spec_is_the_dtype_the_name_gives_a_kernel(kernel_file, text, name):
    # `-i kernel_dtype=nl.bfloat16`: the parameter is what `nl.bfloat16` is in the kernel.
    src = (
        "import nki\nimport nki.isa as nisa\nimport nki.language as nl\nimport numpy as np\n\n"
        "@nki.jit\ndef k(a, kernel_dtype):\n"
        f"    assert kernel_dtype == {text.replace('nki.language', 'nl')}\n"
        "    out = nl.ndarray(a.shape, dtype=kernel_dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray(a.shape, dtype=kernel_dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "    nisa.dma_copy(dst=out, src=t)\n"
        "    return out\n"
    )
    value = parse_spec("kernel_dtype", text, seed=0)
    a = np.ones((4, 8), np.float32)
    result = neuronemu.run(kernel_file(src), {"a": a, "kernel_dtype": value})
    assert [t.dtype.name for t in result.program.outputs] == [name]


def test_npy_file_spec(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(
        parse_spec("x", f"@{path}", 0), np.arange(6, dtype=np.float32).reshape(2, 3)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=floaty32[4,4]", "unknown dtype 'floaty32'"),
        ("a=float32[]", "has no dimensions"),
        ("a=float32[0,4]", "must be positive"),
        ("a=@/nonexistent.npy", "no such file"),
        ("a=not valid(", "cannot read"),
        ("a=nl.floaty32", "unknown dtype 'nl.floaty32'"),
        ("=float32[4]", "expected NAME=SPEC"),
        ("float32[4]", "expected NAME=SPEC"),
    ],
)
def test_bad_specs_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message) as info:
        parse_assignment(text, seed=0)
    assert info.value.exit_code == 2


def test_malformed_npy_and_npz_are_usage_errors(tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a numpy file")
    with pytest.raises(UsageError, match="not a valid .npy"):
        parse_spec("x", f"@{bad}", 0)
    with pytest.raises(UsageError, match="not a valid .npz"):
        load_npz(str(bad))


def test_compare_counts_mismatches_beyond_tolerance():
    got = {"out": np.array([1.0, 2.0, 3.0, np.nan], dtype=np.float32)}
    want = [np.array([1.0, 2.1, 3.0, np.nan])]
    result = compare(got, want, {"out": "float32"}, rtol=0.0, atol=0.05)
    assert not result.passed and result.mismatches == 1
    assert result.max_abs_err == pytest.approx(0.1, rel=1e-5)
    assert "first at [1]" in result.message
    ok = compare(got, want, {"out": "float32"}, rtol=0.0, atol=0.2)
    assert ok.passed and ok.mismatches == 0


def test_compare_flags_nan_against_number_and_shape_mismatch():
    got = {"out": np.array([np.nan], dtype=np.float32)}
    assert compare(got, [np.array([1.0])], {"out": "float32"}, None, None).mismatches == 1
    bad = compare({"out": np.zeros(3, np.float32)}, [np.zeros(4)], {"out": "float32"}, None, None)
    assert not bad.passed and "shape" in bad.message


def test_default_tolerance_follows_output_dtype():
    r = compare(
        {"out": np.zeros(2, ml_dtypes.bfloat16)}, [np.zeros(2)], {"out": "bfloat16"}, None, None
    )
    assert (r.rtol, r.atol) == (2e-2, 2e-2)


def test_a_spec_can_name_the_distribution_of_its_data():
    u = parse_spec("a", "float32[64,512]~uniform(-30, 30)", seed=1)
    assert u.dtype == np.float32 and -30 <= u.min() < -25 and 25 < u.max() < 30
    n = parse_spec("a", "float32[256,512]~normal(3,0.5)", seed=1)
    assert abs(n.mean() - 3) < 0.01 and abs(n.std() - 0.5) < 0.01
    r = parse_spec("a", "int32[128,64]~randint(0,10)", seed=1)
    assert r.dtype == np.int32 and set(np.unique(r)) == set(range(10))
    np.testing.assert_array_equal(
        parse_spec("a", "float32[2,3]~arange", 0), np.arange(6.0).reshape(2, 3)
    )
    np.testing.assert_array_equal(parse_spec("a", "int8[2,2]~ones", 0), np.ones((2, 2), np.int8))
    np.testing.assert_array_equal(parse_spec("a", "float32[2]~zeros", 0), np.zeros(2, np.float32))
    clipped = parse_spec("a", "int8[1000]~uniform(-1000,1000)", seed=2)
    assert clipped.min() == -128 and clipped.max() == 127  # clipped to the dtype
    again = parse_spec("a", "float32[64,512]~uniform(-30, 30)", seed=1)
    np.testing.assert_array_equal(u, again)  # seeded


@pytest.mark.parametrize(
    "spec, words",
    [
        ("float32[4]~gamma(1,2)", "unknown distribution"),
        ("float32[4]~uniform(1)", "takes 2 finite numbers"),
        ("float32[4]~uniform(2,1)", "low < high"),
        ("float32[4]~normal(0,-1)", "std >= 0"),
        ("float32[4]~uniform(0,inf)", "takes numbers|finite"),
        ("3~zeros", "goes with an array SPEC"),
    ],
)
def test_a_bad_distribution_is_a_usage_error(spec, words):
    with pytest.raises(UsageError, match=words):
        parse_spec("a", spec, seed=0)


def test_a_bfloat16_npy_loads_with_its_dtype_named(tmp_path):
    a = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", a)
    raw = parse_spec("x", f"@{tmp_path / 'x.npy'}", 0)
    assert raw.dtype.kind == "V"  # NumPy alone keeps the bytes, not the type
    got = parse_spec("x", f"@{tmp_path / 'x.npy'}:bfloat16", 0)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), a.astype(np.float32))
    with pytest.raises(UsageError, match="2-byte raw items"):
        parse_spec("x", f"@{tmp_path / 'x.npy'}:float32", 0)
    as_f16 = parse_spec("x", f"@{tmp_path / 'x.npy'}:float16", 0)  # same size: the bytes
    assert as_f16.dtype == np.float16


def test_an_unmade_input_has_the_shape_and_dtype_and_makes_the_same_values():
    made_now = parse_spec("x", "bfloat16[64,32]~uniform(-2,2)", seed=3)
    later = parse_spec("x", "bfloat16[64,32]~uniform(-2,2)", seed=3, unmade=True)
    assert isinstance(later, Unmade) and later.strides == (0, 0)  # (no memory of its own)
    assert later.shape == made_now.shape and later.dtype == made_now.dtype
    values = made(later)
    assert type(values) is np.ndarray and values.tobytes() == made_now.tobytes()
    assert made(made_now) is made_now
    with pytest.raises(InternalError):
        made(later[:2])  # a view of it is not the input


def test_save_npz_keeps_an_input_named_like_a_savez_flag(tmp_path):
    # np.savez(path, **arrays) takes an array named allow_pickle for its own flag.
    inputs = {"allow_pickle": np.arange(4, dtype=np.int32), "x": np.ones((2, 3), np.float32)}
    path = tmp_path / "in.npz"
    with open(path, "wb") as f:
        save_npz(f, inputs)
    loaded = load_npz(str(path))
    assert sorted(loaded) == ["allow_pickle", "x"]
    np.testing.assert_array_equal(loaded["allow_pickle"], inputs["allow_pickle"])
    np.testing.assert_array_equal(loaded["x"], inputs["x"])
