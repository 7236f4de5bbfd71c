"""Programs whose output under neuronemu still differs from CPython's, each with what
neuronemu does instead; their tests are strict expected failures (fixing one fails its test
until its entry goes). docs/limitations.md lists them."""

KNOWN_DIFFERENCES: dict[str, str] = {
    # Not in the grammar (neuronemu/frontend/nki.lark) yet: a located syntax error.
    "statements.match_literal_and_capture": "invalid syntax at `match`",
    "statements.match_class_pattern_and_guard": "invalid syntax at `match`",
    # A kernel file's module level runs imports, definitions, assignments and try only.
    "statements.module_level_if_binds_names": "the module-level if is not run",
    "statements.module_level_for_builds_a_table": "the module-level for is not run",
    # Not fixed yet.
}
