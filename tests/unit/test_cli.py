"""The command line end to end: `run --json` contract, `asm`, `--trace`, `--save`, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from neuronemu.cli import main
from neuronemu.inputs import load_npz

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
ADD = str(KERNELS / "tensor_add.py")
ADD_REF = str(KERNELS / "tensor_add_ref.py") + ":reference"
MATMUL = str(KERNELS / "matmul_tiled.py")
MATMUL_REF = str(KERNELS / "matmul_tiled_ref.py") + ":reference"
ADD_INPUTS = ["-i", "a=bfloat16[256,1024]", "-i", "b=bfloat16[256,1024]"]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def asm_counts(text: str) -> dict[str, int]:
    counts = {"tensor": 0, "vector": 0, "scalar": 0, "gpsimd": 0, "sync": 0, "dma": 0}
    for stream, n in re.findall(r"^([a-z.0-9]+):  ; (\d+) instructions?$", text, re.M):
        counts["dma" if stream.startswith("dma.") else stream] += int(n)
    return counts


def test_run_json_has_every_contract_field():
    result = invoke("run", ADD, *ADD_INPUTS, "--ref", ADD_REF, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kernel"] == "tensor_add" and data["file"] == ADD
    assert data["target"] == "trn2" and data["grid"] == [1]
    assert isinstance(data["cycles"], int) and data["cycles"] > 0
    assert data["time_ns"] > 0
    assert data["bound_by"] in ("tensor", "vector", "scalar", "gpsimd", "dma", "latency")
    assert set(data["engines"]) == {"tensor", "vector", "scalar", "gpsimd", "sync", "dma"}
    for e in data["engines"].values():
        assert set(e) == {"instructions", "busy_ns", "utilization", "active_ns"}
        assert 0.0 <= e["utilization"] <= 1.0
    assert 0.0 <= data["mfu"] <= 1.0
    assert data["hbm_bytes"] == {"read": 2 * 256 * 1024 * 2, "write": 256 * 1024 * 2}
    assert data["sbuf_peak_bytes_per_partition"] > 0
    assert data["psum_peak_bytes_per_partition"] == 0
    assert data["outputs"] == {"out": {"shape": [256, 1024], "dtype": "bfloat16"}}
    check = data["check"]
    assert check["passed"] is True and check["mismatches"] == 0
    assert set(check) >= {"passed", "max_abs_err", "max_rel_err", "mismatches", "rtol", "atol"}


def test_engine_counts_match_asm():
    run = json.loads(invoke("run", ADD, *ADD_INPUTS, "--json").stdout)
    asm = invoke("asm", ADD, *ADD_INPUTS)
    assert asm.exit_code == 0
    counts = {k: v["instructions"] for k, v in run["engines"].items()}
    assert counts == asm_counts(asm.stdout)
    tiles = (256 // 128) * (1024 // 1024)  # the kernel's [128, 1024] tiles for 2-byte dtypes
    assert counts["vector"] == tiles and counts["dma"] == 3 * tiles


def test_tiled_matmul_matches_and_is_tensor_bound_among_compute_engines():
    result = invoke(
        "run",
        MATMUL,
        "-i",
        "lhsT=bfloat16[512,128]",
        "-i",
        "rhs=bfloat16[512,1024]",
        "--ref",
        MATMUL_REF,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["check"]["passed"]
    compute = {k: data["engines"][k]["busy_ns"] for k in ("tensor", "vector", "scalar", "gpsimd")}
    assert max(compute, key=compute.get) == "tensor"
    assert data["engines"]["tensor"]["instructions"] == 4 * 2  # K tiles x N tiles
    assert 0 < data["mfu"] <= 1


def test_human_output_summarizes_the_run():
    result = invoke("run", ADD, *ADD_INPUTS, "--ref", ADD_REF)
    assert result.exit_code == 0
    assert "tensor_add" in result.stdout and "bound by" in result.stdout
    assert "check passed" in result.stdout


def test_mismatch_exits_1(tmp_path):
    ref = tmp_path / "wrong_ref.py"
    ref.write_text("def reference(a, b):\n    return a.astype('float32') - b.astype('float32')\n")
    result = invoke("run", ADD, *ADD_INPUTS, "--ref", f"{ref}:reference", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["check"]["passed"] is False
    assert "outputs differ from the reference" in result.stderr


def test_trace_is_valid_trace_event_json(tmp_path):
    out = tmp_path / "trace.json"
    result = invoke(
        "run",
        MATMUL,
        "-i",
        "lhsT=bfloat16[256,128]",
        "-i",
        "rhs=bfloat16[256,512]",
        "--trace",
        str(out),
    )
    assert result.exit_code == 0
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {"tensor", "vector"} <= set(names.values())
    for tid in names:
        track = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices if e["tid"] == tid)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(track, track[1:]))
    assert all(re.search(r"matmul_tiled\.py:\d+:\d+$", e["args"]["source"]) for e in slices)


def test_save_writes_outputs(tmp_path):
    out = tmp_path / "out.npz"
    a = tmp_path / "a.npy"
    np.save(a, np.ones((128, 512), np.float32))
    result = invoke("run", ADD, "-i", f"a=@{a}", "-i", f"b=@{a}", "--save", str(out))
    assert result.exit_code == 0, result.stderr
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["out"], np.full((128, 512), 2.0, np.float32))


def test_trace_time_prints_go_to_stderr_with_json(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(
        "import nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n@nki.jit\ndef k(a):\n"
        "    print('tracing', a.shape)\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nisa.dma_copy(dst=out, src=a)\n"
        "    return out\n"
    )
    result = invoke("run", str(path), "-i", "a=float32[2,2]", "--json")
    assert result.exit_code == 0
    assert "tracing (2, 2)" in result.stderr
    json.loads(result.stdout)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_every_target_runs(target):
    result = invoke("run", ADD, *ADD_INPUTS, "--target", target, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["target"] == target


def test_unknown_target_is_a_usage_error():
    result = invoke("run", ADD, *ADD_INPUTS, "--target", "trn9")
    assert result.exit_code == 2


@pytest.mark.parametrize("extra", [["--ref", "r.py:reference"], ["--save", "out.npz"]])
def test_timing_only_with_ref_or_save_is_a_usage_error(tmp_path, monkeypatch, extra):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.py").write_text("def reference(a, b):\n    return a + b\n")
    kernel = str(Path(__file__).resolve().parents[2] / "kernels" / "tensor_add.py")
    args = ["run", kernel, "-i", "a=float32[128,512]", "-i", "b=float32[128,512]"]
    out = CliRunner().invoke(main, [*args, "--timing-only", *extra])
    assert out.exit_code == 2 and "nothing to work on" in out.output
    assert not (tmp_path / "out.npz").exists()


def test_save_inputs_replays_the_same_run_with_inputs(tmp_path):
    kernel = str(Path(__file__).resolve().parents[2] / "kernels" / "tensor_add.py")
    saved, first, second = (str(tmp_path / n) for n in ("in.npz", "o1.npz", "o2.npz"))
    specs = ["-i", "a=bfloat16[128,512]", "-i", "b=bfloat16[128,512]~uniform(-2,2)"]
    one = invoke("run", kernel, *specs, "--save-inputs", saved, "--save", first, "--seed", "7")
    two = invoke("run", kernel, "--inputs", saved, "--save", second)
    assert one.exit_code == 0 and two.exit_code == 0, (one.output, two.output)
    replayed = load_npz(saved)
    assert {k: v.dtype for k, v in replayed.items()} == {
        "a": ml_dtypes.bfloat16,
        "b": ml_dtypes.bfloat16,
    }
    np.testing.assert_array_equal(np.load(first)["out"], np.load(second)["out"])


def test_check_filters_reports_json_and_kernels_without_a_reference(tmp_path):
    import shutil

    kernels = Path(__file__).resolve().parents[2] / "kernels"
    for name in ("tensor_add.py", "tensor_add_ref.py", "softmax_rows.py"):
        shutil.copy(kernels / name, tmp_path / name)
    (tmp_path / "wrong.py").write_text((kernels / "tensor_add.py").read_text())
    (tmp_path / "wrong_ref.py").write_text(
        "CASES = [{'a': 'float32[128,512]', 'b': 'float32[128,512]'}]\n"
        "def reference(a, b):\n    return a - b\n"
    )
    out = invoke("check", str(tmp_path), "--json", "-j", "2")
    assert out.exit_code == 1  # wrong.py mismatches
    report = json.loads(out.stdout)
    results = {(r["kernel"], r["result"]) for r in report["cases"]}
    assert ("wrong.py", "MISMATCH") in results and ("tensor_add.py", "passed") in results
    assert report["without_reference"] == ["softmax_rows.py"]
    assert report["failed"] == 1 and report["passed"] == len(report["cases"]) - 1
    only = invoke("check", str(tmp_path), "-k", "tensor_add")
    assert only.exit_code == 0 and "wrong.py" not in only.stdout
    text = invoke("check", str(tmp_path))
    assert (
        "wrong.py (MISMATCH): out:" in text.stderr and "not checked: softmax_rows.py" in text.stderr
    )


def test_the_run_reports_its_phases_in_order():
    import neuronemu

    phases: list[str] = []
    kernel = Path(__file__).resolve().parents[2] / "kernels" / "tensor_add.py"
    a = np.zeros((128, 512), np.float32)
    neuronemu.run(kernel, {"a": a, "b": a}, ref=lambda a, b: a + b, progress=phases.append)
    names = [p.split(" (")[0] for p in phases]
    assert names == [
        "tracing",
        "checking races",
        "checking reads",
        "scheduling",
        "executing",
        "comparing",
    ]


def test_check_finds_a_cases_npy_beside_its_reference(tmp_path, monkeypatch):
    import shutil

    kernels = Path(__file__).resolve().parents[2] / "kernels"
    shutil.copy(kernels / "tensor_add.py", tmp_path / "tensor_add.py")
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "a.npy", np.full((128, 512), 2.0, np.float32))
    (tmp_path / "tensor_add_ref.py").write_text(
        "CASES = [{'a': '@data/a.npy', 'b': 'float32[128,512]~ones'}]\n"
        "def reference(a, b):\n    assert (a == 2).all()\n    return a + b\n"
    )
    monkeypatch.chdir(tmp_path.parent)  # not the reference's folder
    out = invoke("check", str(tmp_path))
    assert out.exit_code == 0, out.output


DEVICE_LOOP = """import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(data, n):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)

    def body(i):
        t = nl.ndarray((1, 16), dtype=data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=data.ap([[16, 1], [1, 16]], scalar_offset=i, indirect_dim=0))
        nisa.dma_copy(dst=out.ap([[16, 1], [1, 16]], scalar_offset=i, indirect_dim=0), src=t)

    nl.fori_loop(0, nisa.scalar_load(n_sb), body)
    return out
"""


@pytest.mark.parametrize("seed", ["1", "2"])
def test_timing_only_makes_the_inputs_a_run_reads(tmp_path, seed):
    # --timing-only makes seeded data only when the run reads it: here a device loop's trip
    # count, so the time is that of the run with values, for the same seed.
    kernel = tmp_path / "loop.py"
    kernel.write_text(DEVICE_LOOP)
    args = ["run", str(kernel), "-i", "data=float32[8,16]", "-i", "n=int32[1,1]~randint(1,8)"]
    args += ["--seed", seed, "--json"]
    timed, full = invoke(*args, "--timing-only"), invoke(*args)
    assert timed.exit_code == 0 and full.exit_code == 0, timed.output + full.output
    assert json.loads(timed.stdout)["time_ns"] == json.loads(full.stdout)["time_ns"]
