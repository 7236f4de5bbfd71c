"""`python -m neuronemu`: the command line."""

from neuronemu.cli import entry

entry()
