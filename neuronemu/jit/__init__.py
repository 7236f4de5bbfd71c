"""The only Numba code: jitted passes over arrays (each with a plain twin) and the worker
process that loads them beside a long trace. A leaf: it imports nothing of neuronemu's."""
