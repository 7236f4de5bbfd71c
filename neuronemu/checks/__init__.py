"""Checks of a finished program before it runs: races, uninitialized reads, unwritten
outputs, and the access table they read."""
