"""The read and output checks (neuronemu.checks.hazards) answer the same with the program's
`Accesses` (made once per run: a program whose every read follows a whole write of what it
reads is cleared at once, only writes to outputs are looked at) as without (every
instruction's flags walked): on generated kernels that write tiles whole or in parts, copy
parts between them, read them whole, store parts to the output, and reinterpret a tile
(whole, half of one element, or every other half of its elements)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.checks.hazards import Accesses, uninitialized_reads, unwritten_outputs

HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"
SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
TILES = ("t", "u")


@st.composite
def _region(draw) -> str:
    """Rows and columns of a [128, 64] tensor: all of a dim, or a slice of it; columns also
    every third (whose bounds are all 64) or every other from the second."""
    parts = []
    for n in (128, 64):
        how = draw(st.sampled_from(["all", "slice", "stepped"] if n == 64 else ["all", "slice"]))
        if how == "all":
            parts.append(":")
        elif how == "stepped":
            parts.append(draw(st.sampled_from(["::3", "1::2"])))
        else:
            lo = draw(st.integers(0, n // 16 - 1)) * 16
            hi = draw(st.integers(lo // 16 + 1, n // 16)) * 16
            parts.append(f"{lo}:{hi}")
    return ", ".join(parts)


@st.composite
def _step(draw) -> str:
    tile, other = draw(st.permutations(TILES))
    r = draw(_region())
    kind = draw(st.sampled_from(["load", "copy", "whole", "store", "alias", "halves", "half"]))
    if kind == "load":
        return f"nisa.dma_copy(dst={tile}[{r}], src=a[{r}])"
    if kind == "copy":
        return f"nisa.tensor_copy(dst={tile}[{r}], src={other}[{r}])"
    if kind == "whole":
        return f"nisa.activation(dst={tile}, op=nl.exp, data={other})"
    if kind == "store":
        return f"nisa.dma_copy(dst=out[{r}], src={tile}[{r}])"
    if kind == "alias":
        return f"nisa.tensor_copy(dst={tile}.view(nl.int32), src={other}.view(nl.int32))"
    if kind == "half":  # half of each partition's first element (its root box: all of it)
        return f"nisa.memset(dst={tile}.view(nl.bfloat16)[:, 0:1], value=1.0)"
    # every other half of each element: the elements' boxes are whole, their bytes not
    return (
        f"nisa.tensor_copy(dst={tile}.view(nl.bfloat16)[:, ::2], "
        f"src={other}.view(nl.bfloat16)[:, ::2])"
    )


def _source(steps: list[str]) -> str:
    body = "\n".join(f"    {s}" for s in steps)
    tiles = "\n".join(
        f"    {t} = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)" for t in TILES
    )
    return (
        f"{HEADER}@nki.jit\ndef k(a):\n"
        "    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
        f"{tiles}\n{body}\n    return out\n"
    )


def _said(found) -> list[str]:
    return [f.message() for f in found]


@SETTINGS
@given(st.lists(_step(), min_size=1, max_size=7))
def test_the_checks_answer_the_same_with_the_accesses_as_without(tmp_path_factory, steps):
    program, accesses, walked, at_once = _read_checked(tmp_path_factory, steps)
    assert at_once == walked
    gaps = _said(unwritten_outputs(program))
    assert _said(unwritten_outputs(program, accesses)) == gaps


def _read_checked(tmp_path_factory, steps: list[str]) -> tuple:
    """The program of `steps`, its accesses, and what the uninitialized-read check says
    without them (every instruction's flags walked) and with them."""
    path = tmp_path_factory.mktemp("k") / "k.py"
    path.write_text(_source(steps))
    program = neuronemu.compile_kernel(path, {"a": np.zeros((128, 64), np.float32)})
    accesses = Accesses(program)
    walked = _said(uninitialized_reads(program, limit=10))
    at_once = _said(uninitialized_reads(program, limit=10, accesses=accesses))
    return program, accesses, walked, at_once


@st.composite
def _block_region(draw) -> str:
    """A block of a [128, 64] tensor on a coarse grid (32 rows, 32 columns), or a part of
    one, or two side by side: reads inside one earlier write are common."""
    r0 = draw(st.integers(0, 3)) * 32
    c0 = draw(st.integers(0, 1)) * 32
    how = draw(st.sampled_from(["block", "inner", "two rows", "all"]))
    if how == "all":
        return ":, :"
    if how == "inner":
        return f"{r0 + 8}:{r0 + 24}, {c0}:{c0 + 16}"
    if how == "two rows":
        r0 = min(r0, 64)
        return f"{r0}:{r0 + 64}, {c0}:{c0 + 32}"
    return f"{r0}:{r0 + 32}, {c0}:{c0 + 32}"


@st.composite
def _block_step(draw) -> str:
    tile, other = draw(st.permutations(TILES))
    r = draw(_block_region())
    kind = draw(st.sampled_from(["load", "load", "copy", "store", "alias"]))
    if kind == "load":
        return f"nisa.dma_copy(dst={tile}[{r}], src=a[{r}])"
    if kind == "copy":
        return f"nisa.tensor_copy(dst={tile}[{r}], src={other}[{r}])"
    if kind == "store":
        return f"nisa.dma_copy(dst=out[{r}], src={tile}[{r}])"
    return f"nisa.dma_copy(dst={tile}.view(nl.int32)[{r}], src=a.view(nl.int32)[{r}])"


@SETTINGS
@given(st.lists(_block_step(), min_size=1, max_size=8))
def test_reads_inside_earlier_writes_answer_the_same(tmp_path_factory, steps):
    # (tiles written block by block and read inside a block, across two, or where nothing
    # wrote: the accesses clear a program only where earlier exact writes cover every read,
    # neuronemu.checks.written; the walk must then find nothing)
    _, _, walked, at_once = _read_checked(tmp_path_factory, steps)
    assert at_once == walked
