"""Specialization: evaluate a kernel's meta-program and emit the instruction program."""
