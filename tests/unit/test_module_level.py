"""A kernel file's module level (issue 41): the statements that bind names run as CPython runs
them on import (`if`, `for` and `while` too), errors wait until a name they bind is used, a
`__main__` block is not run (a kernel's `__name__` is not "__main__"), and a loop there spends
the trace budget like any other."""

from __future__ import annotations

import numpy as np
import pytest

import neuronemu
from neuronemu.errors import BudgetError, NeuronEmuError

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"

COPY = """
@nki.jit
def k(a):
    print("cols", COLS, "table", TABLE)
    out = nl.ndarray((128, COLS), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, COLS), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:COLS])
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def _run(kernel_file, top: str, kernel: str = COPY, **kw):
    printed: list[str] = []
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    result = neuronemu.run(
        kernel_file(HEADER + top + kernel), {"a": a}, print_fn=printed.append, **kw
    )
    return result, a, printed


def test_if_for_and_while_at_module_level_bind_their_names(kernel_file):
    top = (
        "WIDE = False\n"
        "if WIDE:\n    COLS = 64\nelse:\n    COLS = 16\n"
        "TABLE = {}\n"
        "for _n in range(3):\n    TABLE[_n] = _n * _n\n"
        "_k = 0\n"
        "while _k < 2:\n    _k += 1\n"
        "TABLE['k'] = _k\n"
    )
    result, a, printed = _run(kernel_file, top)
    np.testing.assert_array_equal(result.outputs["out"], a[:, :16])
    assert "cols 16 table {0: 0, 1: 1, 2: 4, 'k': 2}" in printed


def test_a_main_block_is_not_run(kernel_file):
    top = 'COLS = 32\nTABLE = None\nif __name__ == "__main__":\n    COLS = 1 // 0\n'
    result, a, _ = _run(kernel_file, top)
    np.testing.assert_array_equal(result.outputs["out"], a[:, :32])


def test_an_error_at_module_level_waits_until_a_name_it_binds_is_used(kernel_file):
    # (torch is not there: the if fails; the kernel below does not use what it binds)
    top = "import torch\nCOLS = 8\nTABLE = 0\nif torch.cuda.is_available():\n    DEVICE = 'cuda'\n"
    result, a, _ = _run(kernel_file, top)
    np.testing.assert_array_equal(result.outputs["out"], a[:, :8])
    uses = COPY.replace('print("cols", COLS, "table", TABLE)', "print(DEVICE)")
    with pytest.raises(NeuronEmuError) as caught:
        _run(kernel_file, top, uses)
    # (the first cause: the import the `if` used)
    assert caught.value.span is not None and caught.value.span.line == 5
    assert "torch" in str(caught.value)


def test_a_loop_at_module_level_spends_the_trace_budget(kernel_file):
    top = "COLS = 8\nTABLE = 0\nwhile True:\n    TABLE += 1\n"
    with pytest.raises(BudgetError) as caught:
        _run(kernel_file, top, limits={"trace_seconds": 1})
    assert caught.value.span is not None and caught.value.span.line in (7, 8)


@pytest.mark.parametrize(
    "code",
    [
        "if True:\n    break\n",
        "for i in range(2):\n    pass\nelse:\n    continue\n",
        "try:\n    return 3\nexcept Exception:\n    pass\n",
        "def f():\n    class C:\n        break\n",
        "while True:\n    def g():\n        continue\n    break\n",
    ],
)
def test_break_continue_return_out_of_place_are_syntax_errors_as_in_cpython(kernel_file, code):
    with pytest.raises(SyntaxError) as expected:
        compile(code, "k.py", "exec")
    with pytest.raises(NeuronEmuError) as caught:
        neuronemu.run(kernel_file(HEADER + code + COPY), {"a": np.zeros((128, 64), np.float32)})
    assert expected.value.msg in str(caught.value)
    assert caught.value.span is not None and caught.value.span.line == 4 + expected.value.lineno


def test_a_finished_program_is_freed_with_its_table(kernel_file):
    import gc
    import weakref

    path = kernel_file(HEADER + "COLS = 8\nTABLE = 0\n" + COPY)
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    assert len(program.table().instrs) == len(program.instrs)
    gone = weakref.ref(program)
    was = gc.isenabled()
    gc.disable()  # (freed by its count, not by the cycle collector)
    try:
        del program
        assert gone() is None
    finally:
        if was:
            gc.enable()
