"""One module per nki.isa instruction, each exporting `SPEC`; discovered by
`neuronemu_isa.REGISTRY`."""
