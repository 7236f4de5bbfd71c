"""The `--json` contract: every outcome (a passing run, a mismatch, non-finite figures, a
kernel error, a usage error) prints strict JSON that the schema shipped in the package
accepts, with the exit code of the text form."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
from click.testing import CliRunner

from neuronemu.cli import main

KERNEL = """import nki
import nki.isa as nisa
import nki.language as nl

@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.log, data=t)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
REFERENCES = """import numpy as np

def right(a):
    with np.errstate(invalid="ignore"):
        return np.log(a.astype(np.float64))

def wrong(a):
    return right(a) + 1.0

def nan(a):
    return np.full(a.shape, np.nan)
"""


def _schema() -> dict:
    text = resources.files("neuronemu").joinpath("schema/result.json").read_text()
    return json.loads(text)


def _strict(text: str):
    """json.loads that refuses NaN and Infinity tokens, as strict parsers do."""

    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "refs.py").write_text(REFERENCES)

    def run(*args: str):
        out = CliRunner().invoke(main, list(args))
        return out.exit_code, _strict(out.stdout)

    return run


@pytest.mark.parametrize(
    "ref, exit_code, passed",
    [("right", 0, True), ("wrong", 1, False), ("nan", 1, False)],
)
def test_runs_print_strict_json_the_schema_accepts(cli, ref, exit_code, passed):
    code, result = cli(
        "run", "k.py", "-i", "a=float32[128,64]", "--ref", f"refs.py:{ref}", "--json"
    )
    assert code == exit_code
    jsonschema.validate(result, _schema())
    assert result["schema"] == 1 and result["check"]["passed"] is passed


def test_non_finite_figures_are_written_as_strings(cli):
    # log of random values in [-1, 1) makes NaN outputs; the reference is all NaN too, so
    # the error figures themselves are not finite.
    code, result = cli("run", "k.py", "-i", "a=float32[128,64]", "--ref", "refs.py:nan", "--json")
    figures = [result["check"]["max_abs_err"], result["check"]["max_rel_err"]]
    assert any(f in ("NaN", "Infinity", "-Infinity") for f in figures), figures


def test_a_kernel_error_is_a_located_json_error(cli, tmp_path):
    tile = "a.shape, dtype=a.dtype, buffer=nl.sbuf"
    (tmp_path / "bad.py").write_text(
        KERNEL.replace(tile, "(256, 4), dtype=a.dtype, buffer=nl.sbuf")
    )
    code, result = cli("run", "bad.py", "-i", "a=float32[128,64]", "--json")
    assert code == 1
    jsonschema.validate(result, _schema())
    error = result["error"]
    assert (error["kind"], error["path"], error["line"]) == ("constraint", "bad.py", 8)
    assert "256" in error["message"] and error["hint"]


@pytest.mark.parametrize(
    "args", [("run", "missing.py", "--json"), ("run", "k.py", "--json", "--no-such-option")]
)
def test_a_usage_error_is_a_json_error_with_exit_code_2(cli, args):
    code, result = cli(*args)
    assert code == 2
    jsonschema.validate(result, _schema())
    assert result["error"]["kind"] == "usage" and result["error"]["line"] is None


def test_the_schema_rejects_what_the_contract_forbids():
    schema = _schema()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema": 1, "error": {"kind": "oops"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema": 2, "kernel": "k"}, schema)
