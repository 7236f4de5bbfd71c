"""Programs whose output under neuronemu still differs from CPython's, each with what
neuronemu does instead; their tests are strict expected failures (fixing one fails its test
until its entry goes). docs/limitations.md lists them."""

KNOWN_DIFFERENCES: dict[str, str] = {
    # Not in the grammar (neuronemu/frontend/nki.lark) yet: a located syntax error.
    "contexts.with_as_tuple_target": "invalid syntax at `with m as (a, b)`",
    "expressions.dict_order_and_merge": "'**' in dict literals are not supported",
    "unpacking.double_star_in_dict_display": "'**' in dict literals are not supported",
    "statements.del_statement": "'del' is not supported",
    "statements.del_attribute": "'del' is not supported",
    "statements.walrus_in_comprehension_and_while": "':=' (walrus) is not supported",
    "statements.walrus_in_if": "':=' (walrus) is not supported",
    "statements.match_literal_and_capture": "invalid syntax at `match`",
    "statements.match_class_pattern_and_guard": "invalid syntax at `match`",
    # Methods outside the allow-list of trace/confine.py: "not available in NKI kernels".
    "expressions.integer_methods": "int.to_bytes is not available",
    "numpy_trace.np_repeat": "ndarray.repeat is not available (np.repeat is)",
    "stdlib.collections_counter": "Counter.most_common is not available",
    "stdlib.collections_ordereddict": "OrderedDict.move_to_end is not available",
    # A kernel file's module level runs imports, definitions, assignments and try only.
    "statements.module_level_if_binds_names": "the module-level if is not run",
    "statements.module_level_for_builds_a_table": "the module-level for is not run",
    # Not fixed yet.
    "statements.keyword_only_and_positional_only": "a positional-only name given by keyword",
}
