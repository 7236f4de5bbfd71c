"""Front end: NKI kernel text to a frozen, located AST."""

from neuronemu.frontend.parser import parse_file, parse_source

__all__ = ["parse_file", "parse_source"]
