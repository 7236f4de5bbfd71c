"""nki.compiler direct allocation: sbuf/psum mod_alloc and alloc(func) place each block's
tile where the kernel says; the placements are checked, reused bytes are ordered, and the
decorators and directives of nki.compiler are accepted."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.checks.hazards import first_race
from neuronemu.errors import AllocationError, ConstraintError, KernelTypeError

HEADER = (
    "from neuronxcc import nki\nimport neuronxcc.nki.language as nl\n"
    "import neuronxcc.nki.isa as nisa\nimport neuronxcc.nki.compiler as ncc\n"
    "import numpy as np\n\n"
)
RNG = np.random.default_rng(3)

KERNEL = """
def psum_at(idx, pdim_size, fdim_size):
    return (idx[0] % 2) + 4, 0, 0

@ncc.skip_middle_end_transformations
@nki.jit
def k(a, b):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)))
    acc = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32,
                     buffer=ncc.psum.alloc(psum_at))
    bt = nl.load(b)
    for i in nl.sequential_range(4, directives=ncc.no_reorder()):
        x[i] = nl.load(a[i])
        acc[i] = nisa.nc_matmul(x[i], bt)
        nl.store(out[i], value=acc[i])
    return out
"""


def compiled(kernel_file, body=KERNEL):
    a, b = (
        RNG.standard_normal((4, 128, 128)).astype(np.float32),
        RNG.standard_normal((128, 64)).astype(np.float32),
    )
    return a, b, neuronemu.run(kernel_file(HEADER + body), {"a": a, "b": b})


def test_blocks_go_where_the_allocation_functions_say(kernel_file):
    a, b, result = compiled(kernel_file)
    where = {p.tensor.name: (p.offset, p.size) for p in result.program.placements.values()}
    # mod_alloc: base 1024 + (i % 2) * 512 bytes per partition
    assert [where[f"x_b{i}"][0] for i in range(4)] == [1024, 1536, 1024, 1536]
    # alloc(func): banks 4 and 5 in turn
    assert [where[f"acc_b{i}"][0] for i in range(4)] == [4 * 2048, 5 * 2048, 4 * 2048, 5 * 2048]
    want = np.einsum("ikm,kn->imn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(result.outputs["out"], want, rtol=1e-4, atol=1e-4)
    # Block 2 reuses block 0's bytes: ordered after it, so no race.
    assert result.program.reuses and first_race(result.program) is None


def test_two_live_blocks_at_one_address_are_an_error(kernel_file):
    body = KERNEL.replace("num_free_tiles=(2,)", "num_free_tiles=(1,)").replace(
        "for i in nl.sequential_range(4, directives=ncc.no_reorder()):\n"
        "        x[i] = nl.load(a[i])",
        "for i in nl.sequential_range(4):\n        x[i] = nl.load(a[i])\n"
        "    for i in nl.sequential_range(4):",
    )
    with pytest.raises(AllocationError, match="overlaps 'x_b0'"):
        compiled(kernel_file, body)


@pytest.mark.parametrize(
    "func, error, message",
    [
        ("return (0,)", KernelTypeError, r"must return \(bank, partition, byte offset\)"),
        ("return 9, 0, 0", ConstraintError, "PSUM bank 9"),
        ("return 0, 16, 0", ConstraintError, "may start at partition 0, not 16"),
    ],
)
def test_bad_placements_are_located_errors(kernel_file, func, error, message):
    body = KERNEL.replace("return (idx[0] % 2) + 4, 0, 0", func)
    with pytest.raises(error, match=message):
        compiled(kernel_file, body)


def test_a_negative_offset_is_a_located_error(kernel_file):
    body = KERNEL.replace("return (idx[0] % 2) + 4, 0, 0", "return 4, 0, -8")
    with pytest.raises(ConstraintError, match="byte offset -8; offsets are >= 0"):
        compiled(kernel_file, body)


@pytest.mark.parametrize(
    "args, message",
    [
        ("base_addr=0, num_free_tiles=(0,)", r"num_free_tiles must be a tuple of ints > 0"),
        ("base_addr=None", "base_addr must be an int >= 0"),
    ],
)
def test_bad_mod_alloc_arguments_are_located_errors(kernel_file, args, message):
    body = KERNEL.replace("base_addr=1024, num_free_tiles=(2,)", args)
    with pytest.raises(KernelTypeError, match=message):
        compiled(kernel_file, body)


def test_a_partial_allocation_function_is_called_by_the_documented_names(kernel_file):
    """`ncc.psum.alloc(functools.partial(f, bank_map=...))` where f(bank_map, idx, pdim_size,
    fdim_size): called positionally, the index would land on bank_map (nki-samples'
    allocated attention relies on the names)."""
    import neuronemu

    src = """import functools
import numpy as np
from neuronxcc import nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.compiler as ncc

def psum_addr(bank_map, idx, pdim_size, fdim_size):
    return (bank_map[idx], 0, 0)

@nki.jit
def k(a):
    out = nl.ndarray((128, 128), dtype=np.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    place = functools.partial(psum_addr, bank_map={(0,): 3, (1,): 5})
    acc = nl.ndarray((2, nl.par_dim(128), 128), dtype=np.float32, buffer=ncc.psum.alloc(place))
    acc[1] = nisa.nc_transpose(t)
    nl.store(out, acc[1])
    return out
"""
    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    result = neuronemu.run(kernel_file(src), {"a": a})
    np.testing.assert_array_equal(result.outputs["out"], a.T)
    where = {p.tensor.name: p.offset for p in result.program.placements.values()}
    assert where["acc_b1"] == 5 * 2048  # block (1,) in bank 5, as bank_map says
