"""`python -m neuronemu`: the command line."""

from neuronemu.cli import main

main()
