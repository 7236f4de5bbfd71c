"""The instruction table itself: every spec is complete, tested, and its constraints well-typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _isa_testing import NP_DTYPES, TARGETS, make_check, tile
from hypothesis import given, settings
from hypothesis import strategies as st

import neuronemu_isa
from neuronemu_isa import REGISTRY, Buffer, Engine, InstrSpec
from neuronemu_isa.spec import (
    Check,
    max_free,
    max_partition,
    not_both_psum,
    per_partition_or_scalar,
    same_free_size,
    same_partition_size,
)

HERE = Path(__file__).parent
SPECS = sorted(REGISTRY)
FIRST_SEVEN = {
    "dma_copy",
    "tensor_copy",
    "memset",
    "tensor_tensor",
    "tensor_scalar",
    "activation",
    "nc_matmul",
}


def test_registry_holds_the_first_seven_instructions() -> None:
    assert FIRST_SEVEN <= set(REGISTRY)


@pytest.mark.parametrize("name", SPECS)
def test_every_spec_has_a_test_file(name: str) -> None:
    path = HERE / f"test_{name}.py"
    assert path.is_file(), f"isa spec {name!r} has no tests/isa/test_{name}.py"


@pytest.mark.parametrize("name", SPECS)
def test_spec_is_complete(name: str) -> None:
    spec = REGISTRY[name]
    assert isinstance(spec, InstrSpec)
    assert spec.name == name
    assert callable(spec.semantics), f"{name}: semantics is not callable"
    assert callable(spec.cost), f"{name}: cost is not callable"
    assert spec.engines, f"{name}: no engines"
    assert all(isinstance(e, Engine) for e in spec.engines)
    assert len(set(spec.engines)) == len(spec.engines)
    assert spec.outputs, f"{name}: no output operand"
    for op in spec.operands:
        assert op.role in ("in", "out"), f"{name}.{op.name}: role {op.role!r}"
        assert op.buffers, f"{name}.{op.name}: no buffers"
        assert all(isinstance(b, Buffer) for b in op.buffers)
        if op.dtypes is not None:
            assert op.dtypes, f"{name}.{op.name}: empty dtype set"
        if isinstance(op.reads_if, str):
            assert op.reads_if in {a.name for a in spec.attrs}
        elif op.reads_if is not None:
            assert callable(op.reads_if)
    for a in spec.attrs:
        if a.choices is not None and not a.required:
            assert a.default in a.choices, f"{name}.{a.name}: default not among its choices"
    for c in spec.constraints:
        assert callable(c)


@pytest.mark.parametrize("name", SPECS)
def test_names_are_unique(name: str) -> None:
    spec = REGISTRY[name]
    names = [o.name for o in spec.operands] + [a.name for a in spec.attrs]
    assert len(set(names)) == len(names), f"{name}: duplicated operand/attribute names"
    assert len(set(spec.positional)) == len(spec.positional)


@pytest.mark.parametrize("name", SPECS)
def test_positional_names_cover_every_operand(name: str) -> None:
    spec = REGISTRY[name]
    assert spec.positional, f"{name}: no positional parameter order"
    missing = {o.name for o in spec.operands} - set(spec.positional)
    assert not missing, f"{name}: operands {sorted(missing)} are not in positional"
    known = {o.name for o in spec.operands} | {a.name for a in spec.attrs} | {"engine", "name"}
    unknown = set(spec.positional) - known
    assert not unknown, f"{name}: positional names {sorted(unknown)} are neither operands nor attrs"


@pytest.mark.parametrize("name", SPECS)
def test_spec_doc_is_its_module_docstring(name: str) -> None:
    assert REGISTRY[name].doc.startswith(f"{name}:")


def test_every_target_loads() -> None:
    assert set(TARGETS) <= set(neuronemu_isa.TARGETS)
    for target in neuronemu_isa.TARGETS:
        arch = neuronemu_isa.load_arch(target)
        assert arch.name == target
        assert arch.cost_min_ii_cycles >= 1


# Constraints are total over well-formed checks: None or a non-empty message, never a crash.

_SCALAR_DTYPES = sorted(NP_DTYPES)


@st.composite
def well_formed_checks(draw: Any, spec: InstrSpec) -> Check:
    """What check_instr hands the constraints: allowed engine/buffers/dtypes, required parts."""
    n = draw(st.integers(1, 128))
    shapes = st.sampled_from([(n, n), (n, 1), (n, 2 * n), (max(1, n // 2), n)])
    operands: dict[str, Any] = {}
    for op in spec.operands:
        kinds = ["tile"]
        if op.optional:
            kinds.append("none")
        if op.scalar:
            kinds.append("number")
        kind = draw(st.sampled_from(kinds))
        dtypes = sorted(op.dtypes & set(NP_DTYPES)) if op.dtypes else _SCALAR_DTYPES
        if kind == "none":
            operands[op.name] = None
        elif kind == "number":
            operands[op.name] = draw(st.floats(-4, 4))
        else:
            operands[op.name] = tile(
                op.name,
                draw(shapes),
                draw(st.sampled_from(dtypes)),
                draw(st.sampled_from(op.buffers)),
            )
    attrs: dict[str, Any] = {}
    for a in spec.attrs:
        if a.choices is not None:
            attrs[a.name] = draw(st.sampled_from(a.choices))
        elif a.required:
            attrs[a.name] = draw(st.sampled_from([0, 1, -2.5, "x", True, None]))
        else:
            attrs[a.name] = draw(st.sampled_from([a.default, "x"]))
    return make_check(
        draw(st.sampled_from(TARGETS)), draw(st.sampled_from(spec.engines)), operands, attrs
    )


@pytest.mark.parametrize("name", SPECS)
@settings(deadline=None)
@given(data=st.data())
def test_every_constraint_returns_none_or_a_message(name: str, data: st.DataObject) -> None:
    spec = REGISTRY[name]
    check = data.draw(well_formed_checks(spec))
    for constraint in spec.constraints:
        msg = constraint(check)
        assert msg is None or (isinstance(msg, str) and msg), f"{name}: constraint returned {msg!r}"


# The cost of an accepted check: test_contract.py prices each spec's own accepted examples.


def _operands(name: str) -> st.SearchStrategy[Any]:
    """None, an immediate, or a tile of any size (past the limits too), dtype and buffer."""
    tiles = st.builds(
        tile,
        name=st.just(name),
        shape=st.tuples(st.integers(1, 200), st.integers(1, 700)),
        dtype=st.sampled_from(_SCALAR_DTYPES),
        buffer=st.sampled_from(list(Buffer)),
    )
    return st.one_of(st.none(), st.floats(-4, 4), tiles)


_HELPERS = [
    same_partition_size("a", "b"),
    same_free_size("a", "b"),
    max_partition("a", "tile_pmax"),
    max_free("a", "tile_gemm_moving_fmax"),
    not_both_psum("a", "b"),
    per_partition_or_scalar("a", "b"),
]


@settings(deadline=None)
@given(a=_operands("a"), b=_operands("b"), target=st.sampled_from(TARGETS))
def test_constraint_helpers_return_none_or_a_message(a: Any, b: Any, target: str) -> None:
    check = make_check(target, Engine.VECTOR, {"a": a, "b": b}, {})
    for helper in _HELPERS:
        msg = helper(check)
        assert msg is None or (isinstance(msg, str) and msg)


def test_constraint_helpers_accept_a_valid_pair() -> None:
    check = make_check(
        "trn2",
        Engine.VECTOR,
        {"a": tile("a", (128, 1)), "b": tile("b", (128, 1), buffer=Buffer.PSUM)},
        {},
    )
    assert [h(check) for h in _HELPERS] == [None] * len(_HELPERS)
