"""The namespaces a kernel sees at trace time (`nki`, `nl`, `nisa`, `nki.compiler`, host
modules), each function taking the tracer as a `Context` (lib/context.py)."""
