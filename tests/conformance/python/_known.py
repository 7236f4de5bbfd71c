"""Programs whose output under neuronemu still differs from CPython's, each with what
neuronemu does instead; their tests are strict expected failures (fixing one fails its test
until its entry goes). docs/limitations.md lists them."""

KNOWN_DIFFERENCES: dict[str, str] = {
    # Not in the grammar (neuronemu/frontend/nki.lark) yet: a located syntax error.
    "statements.match_literal_and_capture": "invalid syntax at `match`",
    "statements.match_class_pattern_and_guard": "invalid syntax at `match`",
    # Not fixed yet.
}
