"""Programs whose output under neuronemu still differs from CPython's: each is a bug not
fixed yet (its test is an expected failure, strict: fixing it fails the test until the entry
goes). Each value says what neuronemu does instead."""

KNOWN_DIFFERENCES: dict[str, str] = {
    "contexts.with_as_tuple_target": "invalid syntax: unexpected '('",
    "datamodel.dataclass_frozen": "cannot assign to field 'p' of frozen dataclass Shape",
    "datamodel.class_name_and_qualname": "Inner has no attribute '__qualname__'",
    "datamodel.intenum_arithmetic": "operator '+': unsupported operand type(s) for +: 'EnumMemb...",
    "expressions.dict_methods": "Builtin.fromkeys is not available in NKI kernels",
    "expressions.dict_order_and_merge": "'**' in dict literals are not supported in NKI kernels",
    "expressions.integer_methods": "int.to_bytes is not available in NKI kernels",
    "fstrings.str_format_with_attribute_and_index": "reading the attribute 'x' in a format fiel...",
    "generators.close_raises_generator_exit_inside": "KernelGenerator.close is not available in...",
    "numpy_trace.np_repeat": "numpy has no attribute 'repeat'",
    "numpy_trace.np_integer_ceil_division": "ndarray.astype(): Cannot interpret '<built-in int>...",
    "scopes.unbound_local_error": "2",
    "statements.del_statement": "'del' is not supported in NKI kernels",
    "statements.del_attribute": "'del' is not supported in NKI kernels",
    "statements.walrus_in_comprehension_and_while": "':=' (walrus) is not supported in NKI kernels",
    "statements.walrus_in_if": "':=' (walrus) is not supported in NKI kernels",
    "statements.keyword_only_and_positional_only": "(1, 2, 3, 4) (1, 2, 5, 6)",
    "statements.match_literal_and_capture": "invalid syntax: unexpected 'v'",
    "statements.match_class_pattern_and_guard": "invalid syntax: unexpected 'p'",
    "statements.module_level_if_binds_names": "name 'TILE' is not defined",
    "statements.module_level_for_builds_a_table": "{}",
    "stdlib.itertools_accumulate_and_chain": "Builtin.from_iterable is not available in NKI ker...",
    "stdlib.operator_itemgetter_attrgetter": "operator has no attribute 'attrgetter'",
    "stdlib.collections_counter": "Counter.most_common is not available in NKI kernels",
    "stdlib.collections_ordereddict": "OrderedDict.move_to_end is not available in NKI kernels",
    "stdlib.collections_chainmap": "cannot import 'ChainMap' from collections",
    "stdlib.typing_typevar_generic_class": "TypeError: 'NoneType' object is not subscriptable",
    "unpacking.double_star_in_dict_display": "'**' in dict literals are not supported in NKI ke...",
}
