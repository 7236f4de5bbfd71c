"""The machine: memory state, the functional executor and the timing scheduler."""
