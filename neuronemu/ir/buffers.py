"""Where tensors live: `nl.sbuf`, `nl.psum`, `nl.hbm`, `nl.shared_hbm`, `nl.private_hbm`,
and the engines' register files."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from neuronemu_isa import Buffer

__all__ = ["BufferKind", "BUFFERS", "REGISTERS"]


@dataclass(frozen=True)
class BufferKind:
    """`nl.sbuf`, `nl.psum`, `nl.hbm`, `nl.shared_hbm`, `nl.private_hbm`."""

    name: str

    @functools.cached_property
    def buffer(self) -> Buffer:
        return {"sbuf": Buffer.SBUF, "psum": Buffer.PSUM, "reg": Buffer.REG}.get(
            self.name, Buffer.HBM
        )

    def __repr__(self) -> str:
        return f"nl.{self.name}"


BUFFERS = {n: BufferKind(n) for n in ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")}
# Engine registers are tensors too, so that their ordering, races and text form come free;
# kernels never name this buffer.
REGISTERS = BufferKind("reg")
