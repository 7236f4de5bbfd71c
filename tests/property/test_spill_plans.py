"""What `neuronemu.build.allocator.allocate_planned` rests on: the jitted placement declines a
program exactly where the first spill plan (no hoisted loads) gives up a tile or fails, so
that skipping that plan where it declines changes nothing; and a program is placed by the
plan with hoisted loads whenever tiles outgrow SBUF, whichever path found it out.

Kernels are drawn: tiles of 4 to 16 KiB per partition loaded from an input, some computed from
others, some only half written (never spilled), consumed in a drawn order, on trn1 (176 KiB
usable per partition): some fit, some spill, some cannot be placed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.build import allocator, builder
from neuronemu.build.spill import Planner
from neuronemu.errors import AllocationError
from neuronemu.jit import compiled as _jit
from neuronemu.nasm.write import dumps

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n"


# The kinds of kernel drawn: few tiles (they fit), many (they spill), many half written
# (they cannot be placed).
KINDS = ["few", "many", "stuck"]


@st.composite
def kernels(draw, kind: str) -> str:
    """A kernel of drawn tiles of `kind`: each loaded, computed from an earlier one, or half
    written; then read in a drawn order into an accumulator."""
    count = draw(st.integers(2, 8) if kind == "few" else st.integers(13, 18))
    ways = {
        "few": ["load", "computed", "half"],
        "many": ["load", "load", "computed"],
        "stuck": ["half"],  # (12 half tiles or more: 192 KiB and up)
    }
    lines = [
        "@nki.jit",
        "def k(a):",
        "    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)",
    ]
    for i in range(count):  # (11 tiles of 16 KiB fill trn1's SBUF)
        width = draw(st.sampled_from([1024, 2048, 4096] if kind == "few" else [4096]))
        how = draw(st.sampled_from(ways[kind]))
        how = how if i else "load"
        lines.append(f"    t{i} = nl.ndarray((128, {width}), dtype=nl.float32, buffer=nl.sbuf)")
        if how == "load":
            lines.append(f"    nisa.dma_copy(dst=t{i}, src=a[:, 0:{width}])")
        elif how == "computed":
            j = draw(st.integers(0, i - 1))
            lines.append(
                f"    nisa.tensor_scalar(dst=t{i}[:, 0:1024], data=t{j}[:, 0:1024], "
                f"op0=nl.multiply, operand0={i + 1}.0)"
            )
            if width > 1024:
                lines.append(f"    nisa.memset(dst=t{i}[:, 1024:{width}], value=0.0)")
        else:  # (only its first half written: never given up)
            lines.append(f"    nisa.memset(dst=t{i}[:, 0:{width // 2}], value=1.0)")
    lines += [
        "    acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)",
        "    nisa.memset(dst=acc, value=0.0)",
    ]
    for i in draw(st.permutations(range(count))):
        lines.append(
            f"    nisa.tensor_tensor(dst=acc[:, 0:512], data1=acc[:, 0:512], "
            f"data2=t{i}[:, 0:512], op=nl.add)"
        )
    lines += ["    nisa.dma_copy(dst=out[:, 0:512], src=acc[:, 0:512])", "    return out"]
    return HEADER + "\n".join(lines) + "\n"


def _first_plan(tensors, uses, instrs, arch, planner) -> str:
    """What the first plan (no hoisted loads) makes of the program: "fits", "spills" or
    "fails"."""
    first = Planner(planner.instrs, planner.written)
    try:
        allocator.allocate(tensors, uses, instrs, arch, planner=first, use_jit=False)
    except AllocationError:
        return "fails"
    return "spills" if first.spills else "fits"


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_the_jitted_placement_declines_where_the_first_plan_spills_or_fails(
    tmp_path_factory, kind, data
):
    source = data.draw(kernels(kind))
    path = tmp_path_factory.mktemp("k") / "kernel.py"
    path.write_text(source)
    seen: list[tuple[bool, str]] = []  # (jitted declined, first plan)
    planned = builder.allocate_planned

    def watched(tensors, uses, instrs, arch, planner):
        fitted = allocator.allocate_columns(tensors, uses, arch, allocator.ROTATE, _jit.place)
        seen.append((fitted is None, _first_plan(tensors, uses, instrs, arch, planner)))
        return planned(tensors, uses, instrs, arch, planner)

    a = np.ones((128, 4096), np.float32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builder, "allocate_planned", watched)
        try:
            neuronemu.compile_kernel(str(path), {"a": a}, target="trn1")
        except AllocationError:
            pass
    assert len(seen) == 1
    declined, first = seen[0]
    assert declined == (first != "fits"), (first, source)
    assert first == {"few": "fits", "many": "spills", "stuck": "fails"}[kind]  # (all three)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_past_the_jit_size_a_program_is_the_one_the_plain_path_makes(tmp_path_factory, kind, data):
    source = data.draw(kernels(kind))
    # (below JIT_ABOVE the first plan is made and decides; past it, the jitted placement)
    path = tmp_path_factory.mktemp("k") / "kernel.py"
    path.write_text(source)
    a = np.ones((128, 4096), np.float32)

    def compiled() -> str:
        try:
            program = neuronemu.compile_kernel(str(path), {"a": a}, target="trn1")
        except AllocationError as e:
            return f"error: {e}"
        return dumps(program) + "\n".join(program.notes)

    plain = compiled()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(allocator, "JIT_ABOVE", 0)
        jitted = compiled()
    assert jitted == plain
