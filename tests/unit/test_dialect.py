"""Which NKI a kernel file is written for, inferred from its imports and reported; block
dimensions belong to the older dialect only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.errors import KernelTypeError

CURRENT = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
OLDER = "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n\n"
OLDER_DOTTED = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n"

COPY = """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, value=t)
    return out
"""

BLOCKS = """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for b in range(2):
        buf[b] = nl.load(a[b * 128:(b + 1) * 128, :])
        nl.store(out[b * 128:(b + 1) * 128, :], value=buf[b])
    return out
"""


@pytest.mark.parametrize(
    ("header", "dialect"),
    [(CURRENT, "nki"), (OLDER, "neuronxcc.nki"), (OLDER_DOTTED, "neuronxcc.nki")],
)
def test_the_dialect_is_inferred_from_the_imports_and_reported(kernel_file, header, dialect):
    path = kernel_file(header + COPY)
    result = neuronemu.run(path, {"a": np.ones((128, 64), np.float32)})
    assert result.program.dialect == dialect
    out = CliRunner().invoke(main, ["run", path, "-i", "a=float32[128,64]", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["nki_dialect"] == dialect


def test_block_dims_in_the_older_dialect_run(kernel_file):
    a = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    result = neuronemu.run(kernel_file(OLDER + BLOCKS), {"a": a})
    np.testing.assert_array_equal(result.outputs["out"], a)


def test_block_dims_in_the_current_dialect_name_their_removal(kernel_file):
    path = kernel_file(CURRENT + BLOCKS)
    with pytest.raises(KernelTypeError, match="block dimensions .* were removed") as info:
        neuronemu.run(path, {"a": np.ones((256, 64), np.float32)})
    assert info.value.span.line == 9  # the nl.ndarray with a block dim
