"""The machine constants: each cites its source or says it is inferred, and the ones fitted
to published figures are the ones isa/arch/fitted.md lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuronemu_isa import TARGETS, load_arch

ARCH = Path(__file__).resolve().parents[2] / "isa" / "arch"
CONSTANT = re.compile(r"^(\w+)\s*=\s*[^#]+?(#.*)?$")


def _constants(target: str) -> dict[str, str]:
    """`section_key` -> its comment, for every constant line of a target's file."""
    section, out = "", {}
    for line in (ARCH / f"{target}.toml").read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[] ") + "_"
        elif (m := CONSTANT.match(line)) and section:
            out[section + m.group(1)] = (m.group(2) or "").lstrip("# ")
    return out


def _fitted_table() -> set[str]:
    """The `section.key` names of the first table of fitted.md, as `section_key`."""
    text = (ARCH / "fitted.md").read_text()
    first = text.split("\n\n| constant")[1].split("\n\n")[0]
    return {m.replace(".", "_") for m in re.findall(r"^\| `([\w.]+)`", "| constant" + first, re.M)}


@pytest.mark.parametrize("target", TARGETS)
def test_every_constant_cites_a_document_or_says_it_is_inferred(target):
    missing = [k for k, comment in _constants(target).items() if not comment]
    assert not missing, f"{target}: constants without a source: {missing}"


@pytest.mark.parametrize("target", TARGETS)
def test_constants_fitted_to_figures_are_the_ones_fitted_md_lists(target):
    constants = _constants(target)
    fitted = {k for k, comment in constants.items() if "fitted" in comment}
    table = _fitted_table()
    assert table, "fitted.md has no table"
    assert fitted == table
    arch = load_arch(target)
    for key in table:  # each is a real constant the model reads
        assert getattr(arch, key) is not None
