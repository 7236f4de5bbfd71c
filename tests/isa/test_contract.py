"""The ISA test contract, for every spec of the registry: its test module's data (CHECK,
ACCEPTED, VIOLATIONS, COST_GROWTH; the format is in `_spec_testing.py`) is present and well
formed, each violation fires one constraint with its message, the violations hit every
constraint, each accepted example passes and costs a positive int, and the cost grows with
operand size."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _isa_testing import fired
from _spec_testing import Growth, assert_every_constraint_hit, assert_single_message
from hypothesis import given, settings
from hypothesis import strategies as st

from neuronemu_isa import REGISTRY

HERE = Path(__file__).parent
SPECS = sorted(REGISTRY)
CONTRACT = ("CHECK", "ACCEPTED", "VIOLATIONS", "COST_GROWTH")


def _load(name: str) -> ModuleType | Exception | None:
    """tests/isa/test_<name>.py as a module of its own (None: no such file, which
    test_registry reports; an exception: the module does not import)."""
    path = HERE / f"test_{name}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"_isa_contract_test_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # reported by test_the_spec_test_module_provides_the_contract
        return exc
    return module


MODULES = {name: _load(name) for name in SPECS}


def _data(name: str, attr: str, default: Any = ()) -> Any:
    module = MODULES[name]
    return getattr(module, attr, default) if isinstance(module, ModuleType) else default


def _well_formed(case: Any, values: int) -> bool:
    """A pytest.param with an id, holding a change dict (and, for violations, message parts)."""
    if not (isinstance(case, type(pytest.param())) and case.id and len(case.values) == values):
        return False
    if not isinstance(case.values[0], dict):
        return False
    if values == 2:
        parts = case.values[1]
        listed = isinstance(parts, (list, tuple)) and bool(parts)
        return listed and all(isinstance(p, str) and p for p in parts)
    return True


def _cases(attr: str, values: int) -> list[Any]:
    """Every spec's well-formed `attr` entries, each as pytest.param(name, *values)."""
    return [
        pytest.param(name, *case.values, id=f"{name}-{case.id}")
        for name in SPECS
        for case in _data(name, attr)
        if _well_formed(case, values)
    ]


GROWING = [n for n in SPECS if isinstance(_data(n, "COST_GROWTH", None), Growth)]


@pytest.mark.parametrize("name", SPECS)
def test_the_spec_test_module_provides_the_contract(name: str) -> None:
    module = MODULES[name]
    assert not isinstance(module, Exception), f"tests/isa/test_{name}.py: {module!r}"
    assert module is not None, f"isa spec {name!r} has no tests/isa/test_{name}.py"
    missing = [attr for attr in CONTRACT if not hasattr(module, attr)]
    assert not missing, f"test_{name}.py does not export {missing} (see _spec_testing.py)"
    assert callable(module.CHECK)
    assert module.ACCEPTED, f"test_{name}.py: ACCEPTED has no example"
    for attr, values in (("ACCEPTED", 1), ("VIOLATIONS", 2)):
        cases = list(getattr(module, attr))
        bad = [c for c in cases if not _well_formed(c, values)]
        assert not bad, f"test_{name}.py: malformed {attr} entries {bad}"
        ids = [c.id for c in cases]
        assert len(set(ids)) == len(ids), f"test_{name}.py: repeated {attr} ids {ids}"
    growth = module.COST_GROWTH
    assert growth is None or isinstance(growth, Growth), f"COST_GROWTH is {growth!r}"
    if growth is not None:
        assert growth.sizes[0] < growth.sizes[1] and all(growth.params.values())


@pytest.mark.parametrize(("name", "change", "expected"), _cases("VIOLATIONS", 2))
def test_violation_fires_one_constraint_with_its_message(
    name: str, change: dict[str, Any], expected: list[str]
) -> None:
    assert_single_message(REGISTRY[name], _data(name, "CHECK")(**change), expected)


@pytest.mark.parametrize("name", SPECS)
def test_every_constraint_has_a_violating_case(name: str) -> None:
    make = _data(name, "CHECK", None)
    assert callable(make), f"test_{name}.py exports no CHECK"
    assert_every_constraint_hit(REGISTRY[name], make, list(_data(name, "VIOLATIONS")))


@pytest.mark.parametrize(("name", "change"), _cases("ACCEPTED", 1))
def test_cost_of_an_accepted_check_is_a_positive_int(name: str, change: dict[str, Any]) -> None:
    spec = REGISTRY[name]
    check = _data(name, "CHECK")(**change)
    assert fired(spec, check) == []
    cost = spec.cost(check)
    assert isinstance(cost, int) and cost >= 1, f"{name}: cost {cost!r}"


@pytest.mark.parametrize("name", GROWING)
@settings(deadline=None)
@given(data=st.data())
def test_cost_grows_with_operand_size(name: str, data: st.DataObject) -> None:
    growth: Growth = _data(name, "COST_GROWTH")
    params = {k: data.draw(st.sampled_from(v), label=k) for k, v in growth.params.items()}
    sizes = st.integers(*growth.sizes)
    n1, n2 = data.draw(sizes, label=growth.size), data.draw(sizes, label=growth.size)
    growth.assert_grows(REGISTRY[name], params, n1, n2)


@pytest.mark.parametrize("name", GROWING)
def test_cost_climbs_a_doubling_ladder(name: str) -> None:
    growth: Growth = _data(name, "COST_GROWTH")
    for params in growth.combinations():
        try:
            growth.assert_climbs(REGISTRY[name], params)
        except AssertionError as exc:
            raise AssertionError(f"{name} with {params}: {exc}") from exc
