"""One module per nki.isa instruction, each exporting `SPEC`; discovered by `isa.REGISTRY`."""
