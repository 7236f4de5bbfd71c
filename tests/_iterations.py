"""Which loop bodies a trace interprets (the replay's tests): `count_interpreted`."""

from __future__ import annotations

from typing import Any


def count_interpreted(monkeypatch: Any) -> list[int]:
    """From now on (for the test), the line of each loop whose body is interpreted, once per
    iteration it interprets."""
    from neuronemu.trace import loops

    seen: list[int] = []
    original = loops.Loops._iteration

    def counted(self, loop, env):
        seen.append(loop.span.line)
        return original(self, loop, env)

    monkeypatch.setattr(loops.Loops, "_iteration", counted)
    return seen
