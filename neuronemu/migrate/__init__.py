"""Port kernels from the older `neuronxcc.nki` dialect to NKI 0.7 (`migrate`) and list the
deprecated and removed constructs of a kernel file (`lint`), from its text and AST."""

from neuronemu.migrate.finder import Finding
from neuronemu.migrate.rewrite import (
    MARK,
    Migration,
    OutputDiff,
    compare_outputs,
    lint_file,
    migrate_file,
)
from neuronemu.migrate.rules import RULES, Rule

__all__ = [
    "MARK",
    "RULES",
    "Finding",
    "Migration",
    "OutputDiff",
    "Rule",
    "compare_outputs",
    "lint_file",
    "migrate_file",
]
