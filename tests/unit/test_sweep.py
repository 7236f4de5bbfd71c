"""`neuronemu sweep` and `neuronemu.sweep`: parameters, filters, ranking, failures with their
located errors, resuming from a results file, and the local and Ray backends agreeing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu import sweeps
from neuronemu.cli import main

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
BLOCKED = str(KERNELS / "matmul_blocked.py")
INPUTS = {"lhsT": "bfloat16[256,1024]", "rhs": "bfloat16[256,2048]"}
GRID = {"block_m": [128, 256, 512, 1024], "block_n": [512, 1024, 2048], "bufs": [1, 2]}

# trn2 PSUM: 2 MiB over 128 partitions, 16 KiB per partition, in 8 banks of 2 KiB
# (reference/neuroncore.md, trn2-arch.rst); each [128, 512] fp32 accumulator is one bank.
PSUM_BANKS = 8


def fits_psum(config: dict) -> bool:
    return (config["block_m"] // 128) * (config["block_n"] // 512) <= PSUM_BANKS


# --- parameters and filters -------------------------------------------------------------


def test_param_values_are_literals_or_ranges():
    assert sweeps.parse_param("TILE=128,256,512") == ("TILE", [128, 256, 512])
    assert sweeps.parse_param("B=1..4") == ("B", [1, 2, 3, 4])
    assert sweeps.parse_param("B = 2..10:4") == ("B", [2, 6, 10])
    assert sweeps.parse_param("mode='causal',None") == ("mode", ["causal", None])
    assert sweeps.parse_param("shape=(1, 2),(3, 4)") == ("shape", [(1, 2), (3, 4)])


@pytest.mark.parametrize(
    "text", ["TILE", "2x=1", "TILE=", "TILE=4..1", "TILE=1..4:0", "TILE=open('x')"]
)
def test_bad_param_is_a_usage_error(text):
    with pytest.raises(neuronemu.UsageError):
        sweeps.parse_param(text)


@pytest.mark.parametrize("value", ["1j", "...", "{1, 2}", "b'x'", "(1, 2j)"])
def test_a_value_json_cannot_say_is_a_usage_error(value):
    with pytest.raises(neuronemu.UsageError, match="cannot record"):
        sweeps.parse_param(f"bufs={value}")


def test_api_values_are_numbers_strings_or_lists_numpy_numbers_taken_as_pythons(tmp_path):
    with pytest.raises(neuronemu.UsageError, match="cannot record"):
        neuronemu.sweep(BLOCKED, {"bufs": [1, complex(2, 1)]}, INPUTS, workers=1)
    import numpy as np

    records = neuronemu.sweep(
        BLOCKED,
        {"bufs": [np.int64(1)], "block_m": [128], "block_n": [512]},
        INPUTS,
        workers=1,
        out=tmp_path / "r.jsonl",
    )
    assert [type(r["config"]["bufs"]) for r in records] == [int]
    written = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [r["config"]["bufs"] for r in written] == [1]


def test_programs_past_the_memo_bound_are_not_written_out(monkeypatch):
    """The memo keys programs by their text, which no budget meters: past MEMO_MAX_INSTRS
    a sweep times the program again instead of writing it out."""
    from neuronemu import sweeps as sweeps_module

    def written(program):
        raise AssertionError("a program past the bound was written out")

    monkeypatch.setattr(sweeps_module, "MEMO_MAX_INSTRS", 0)
    monkeypatch.setattr(sweeps_module, "dumps", written)
    records = neuronemu.sweep(
        BLOCKED, {"bufs": [1, 1], "block_m": [128], "block_n": [512]}, INPUTS, workers=1
    )
    assert [r["status"] for r in records] == ["ok", "ok"]


def test_where_keeps_what_the_expression_says():
    keep = sweeps.where_filter("a * b <= 8 and not (a == 2 or max(a, b) > 4)")
    kept = [(a, b) for a in range(1, 6) for b in range(1, 6) if keep({"a": a, "b": b})]
    expected = [
        (a, b)
        for a in range(1, 6)
        for b in range(1, 6)
        if a * b <= 8 and not (a == 2 or max(a, b) > 4)
    ]
    assert kept == expected
    assert sweeps.where_filter(None)({"a": 1})
    assert sweeps.where_filter("1 < a < 3")({"a": 2}) and not sweeps.where_filter("1 < a < 3")(
        {"a": 3}
    )


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "a.__class__",
        "(lambda: 1)()",
        "[x for x in range(3)]",
        "open('f')",
        "a[0]",
        "2 ** 100000",
    ],
)
def test_where_runs_no_python(expr):
    with pytest.raises(neuronemu.UsageError):
        sweeps.where_filter(expr)({"a": 1})


def test_where_names_an_unknown_parameter():
    with pytest.raises(neuronemu.UsageError, match="no parameter 'c'"):
        sweeps.where_filter("c > 1")({"a": 1})


def test_a_parameter_nobody_uses_is_a_usage_error():
    with pytest.raises(neuronemu.UsageError, match="no parameter 'tile'"):
        neuronemu.sweep(BLOCKED, {"tile": [1, 2]}, INPUTS, workers=1)


def test_a_template_field_must_be_a_parameter():
    with pytest.raises(neuronemu.UsageError, match=r"\{K\} must name a --param"):
        neuronemu.sweep(
            BLOCKED,
            {"bufs": [1]},
            {"lhsT": "bfloat16[{K},1024]", "rhs": "bfloat16[256,2048]"},
            workers=1,
        )


# --- a sweep ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid_results():
    return neuronemu.sweep(BLOCKED, GRID, INPUTS, workers=2)


def test_a_sweep_ranks_what_fits_and_locates_what_does_not(grid_results):
    configs = [
        {"block_m": m, "block_n": n, "bufs": b}
        for m in GRID["block_m"]
        for n in GRID["block_n"]
        for b in GRID["bufs"]
    ]
    assert len(configs) >= 12 and len(grid_results) == len(configs)
    assert sorted(sweeps.key_of(r["config"]) for r in grid_results) == sorted(
        map(sweeps.key_of, configs)
    )
    by_key = {sweeps.key_of(r["config"]): r for r in grid_results}
    kernel_lines = Path(BLOCKED).read_text().splitlines()
    for config in configs:
        r = by_key[sweeps.key_of(config)]
        if fits_psum(config):
            assert r["status"] == "ok", r.get("error")
        else:
            assert r["status"] == "error"
            err = r["error"]
            assert err["kind"] == "allocation" and "PSUM" in err["message"]
            assert err["path"] == BLOCKED
            assert "buffer=nl.psum" in kernel_lines[err["line"] - 1]
    ok = [r for r in grid_results if r["status"] == "ok"]
    times = [r["time_ns"] for r in ok]
    assert times == sorted(times) and grid_results[: len(ok)] == ok  # fastest first
    assert len(set(times)) > 3  # the blocking changes the time


def test_each_result_is_what_run_predicts(grid_results):
    from neuronemu.inputs import parse_spec

    for r in [grid_results[0], grid_results[5]]:
        arrays = {k: parse_spec(k, v, 0) for k, v in INPUTS.items()}
        alone = neuronemu.run(BLOCKED, {**arrays, **r["config"]}, timing_only=True)
        # (the record holds the --json figure, rounded to the picosecond)
        assert alone.time_ns == pytest.approx(r["time_ns"], abs=5e-4)
        assert alone.bound_by == r["bound_by"]
        assert alone.program.psum_peak_bytes == r["psum_peak_bytes_per_partition"]


def test_shapes_sweep_through_input_templates():
    results = neuronemu.sweep(
        BLOCKED,
        {"K": [128, 256, 512]},
        {"lhsT": "bfloat16[{K},256]", "rhs": "bfloat16[{K},1024]"},
        workers=1,
    )
    by_k = {r["config"]["K"]: r for r in results}
    assert all(r["status"] == "ok" for r in results)
    assert by_k[128]["time_ns"] < by_k[256]["time_ns"] < by_k[512]["time_ns"]
    hbm_in = by_k[512]["instructions"] > by_k[128]["instructions"]
    assert hbm_in


def test_a_mismatch_with_the_reference_fails_the_configuration(tmp_path):
    ref = tmp_path / "wrong_ref.py"
    ref.write_text(
        "import numpy as np\n"
        "def reference(lhsT, rhs, **_):\n"
        "    return (lhsT.astype(np.float32).T @ rhs.astype(np.float32) + 10).astype(lhsT.dtype)\n"
    )
    small = {"lhsT": "bfloat16[128,256]", "rhs": "bfloat16[128,1024]"}
    right = neuronemu.sweep(
        BLOCKED, {"bufs": [1]}, small, ref=f"{KERNELS / 'matmul_blocked_ref.py'}:reference"
    )
    wrong = neuronemu.sweep(BLOCKED, {"bufs": [1]}, small, ref=f"{ref}:reference")
    assert right[0]["status"] == "ok" and right[0]["check"]["passed"] is True
    assert wrong[0]["status"] == "mismatch" and wrong[0]["error"]["kind"] == "mismatch"


CLAMPED = """
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy(a, width=512):
    cols = min(width, a.shape[1])  # widths past the tensor's all give one program
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(a.shape[1] // cols):
        t = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, j * cols : (j + 1) * cols])
        nisa.dma_copy(dst=out[:, j * cols : (j + 1) * cols], src=t)
    return out
"""


def test_identical_programs_are_timed_once(monkeypatch, tmp_path):
    import neuronemu.api

    kernel = tmp_path / "clamped.py"
    kernel.write_text(CLAMPED)
    calls = []
    real = neuronemu.api.run_program
    monkeypatch.setattr(
        neuronemu.api, "run_program", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    results = neuronemu.sweep(
        kernel, {"width": [256, 512, 1024, 2048]}, {"a": "float32[128,512]"}, workers=1
    )
    assert len(calls) == 2  # 256; then 512, 1024 and 2048, one program
    by_width = {r["config"]["width"]: r for r in results}
    same = [{k: v for k, v in by_width[w].items() if k != "config"} for w in (512, 1024, 2048)]
    assert same[0] == same[1] == same[2]
    assert by_width[256]["instructions"] == 2 * by_width[512]["instructions"]


# --- the command line -------------------------------------------------------------------


def _cli_args(out: Path | None = None, *extra: str) -> list[str]:
    args = ["sweep", BLOCKED, *(f"-i{k}={v}" for k, v in INPUTS.items())]
    for name, values in GRID.items():
        args += ["--param", f"{name}={','.join(map(str, values))}"]
    if out is not None:
        args += ["--out", str(out)]
    return args + list(extra)


def test_cli_table_and_the_best_configuration_command(grid_results):
    result = CliRunner().invoke(main, _cli_args(None, "-j", "2", "--top", "5"))
    assert result.exit_code == 0, result.output
    out = result.stdout
    best = grid_results[0]
    assert f"{best['time_ns'] / 1000:,.2f}" in out
    assert "\n    block_m=1024 block_n=1024 bufs=1\n" in out
    assert f"{BLOCKED}:" in out and "PSUM over capacity" in out
    command = out.splitlines()[-2].strip()
    assert command.startswith(f"neuronemu run {BLOCKED} -i 'lhsT=")
    # The printed command runs the best configuration alone, and takes the same time.
    argv = [a.strip("'") for a in command.split()][1:]
    alone = CliRunner().invoke(main, [*argv, "--timing-only", "--json"])
    assert alone.exit_code == 0, alone.output
    assert json.loads(alone.stdout)["time_ns"] == pytest.approx(best["time_ns"], rel=1e-9)


def test_cli_json_is_the_ranked_results(grid_results):
    result = CliRunner().invoke(main, _cli_args(None, "--json", "-j", "2"))
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["results"] == grid_results
    assert data["best"] == grid_results[0]
    assert data["ran"] + data["failed"] == len(grid_results)


@pytest.mark.parametrize(
    "args, message",
    [
        (["sweep", BLOCKED, "-i", "lhsT=bfloat16[128,256]"], "nothing to sweep"),
        (["sweep", BLOCKED, "--param", "bufs"], "expected NAME=VALUES"),
        (["sweep", BLOCKED, "--param", "bufs=1,2", "--where", "bufs.real"], "not allowed"),
    ],
)
def test_cli_usage_errors(args, message):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_cli_fails_when_no_configuration_runs():
    args = ["sweep", BLOCKED, "-i", "lhsT=bfloat16[256,1024]", "-i", "rhs=bfloat16[256,2048]"]
    result = CliRunner().invoke(main, [*args, "--param", "block_m=1024", "--param", "block_n=2048"])
    assert result.exit_code == 1
    assert "no configuration ran" in result.stderr


def test_ray_without_ray_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    with pytest.raises(neuronemu.UsageError) as err:
        neuronemu.sweep(BLOCKED, {"bufs": [1]}, INPUTS, backend="ray")
    assert "pip install 'neuronemu[ray]'" in (err.value.hint or "")
    result = CliRunner().invoke(main, [*_cli_args()[:4], "--param", "bufs=1", "--ray"])
    assert result.exit_code == 2 and "neuronemu[ray]" in result.stderr


# --- resuming ---------------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, "-m", "neuronemu", *_cli_args(out, "-j", "1")]
    total = 24
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 6:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = _lines(out) if out.read_text().endswith("\n") else _lines(out)[:-1]
    with out.open("a") as f:
        f.write('{"config": {"block_m": 1')  # a line cut short, as a kill mid-write leaves
    assert 6 <= len(before) < total
    again = CliRunner().invoke(main, _cli_args(out, "-j", "1"))
    assert again.exit_code == 0, again.output
    ran_again = [line for line in again.stderr.splitlines() if line.startswith("[")]
    assert len(ran_again) == total - len(before)
    assert f"{len(before)} of {total} configurations are in" in again.stderr
    after = _lines(out)
    keys = [sweeps.key_of(r["config"]) for r in after]
    assert len(keys) == len(set(keys)) == total
    assert after[: len(before)] == before


# --- Ray --------------------------------------------------------------------------------


def _ray():
    if os.environ.get("CI"):  # CI installs the test extra, Ray included: never skip there
        import ray
    else:
        ray = pytest.importorskip("ray")
    return ray


def test_local_and_ray_backends_give_the_same_results(tmp_path):
    ray = _ray()
    params = {"block_m": [128, 1024], "block_n": [1024, 2048], "bufs": [1, 2]}
    local_out, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    # From another folder, with a relative kernel path: paths must come back as given.
    helper_dir = tmp_path / "k"
    helper_dir.mkdir()
    (helper_dir / "blocked.py").write_text(Path(BLOCKED).read_text())
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        neuronemu.sweep("k/blocked.py", params, INPUTS, workers=2, out=local_out)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            neuronemu.sweep("k/blocked.py", params, INPUTS, backend="ray", out=ray_out)
        finally:
            ray.shutdown()
    finally:
        os.chdir(cwd)
    local = sorted(local_out.read_text().splitlines())
    remote = sorted(ray_out.read_text().splitlines())
    assert len(local) == 8 and local == remote
    assert any('"status": "error"' in line and '"path": "k/blocked.py"' in line for line in local)
