"""What the namespaces a kernel sees (`lib/`) may ask of the tracer running it.

`lib/` never imports the interpreter: every `nl.*`, `nisa.*`, `nki.compiler` and host
function takes a `Context` first, which the tracer is.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from neuronemu.build.builder import Builder
from neuronemu.errors import SourceSpan
from neuronemu.limits import Meter
from neuronemu_isa import Arch

__all__ = ["Context"]


class Context(Protocol):
    arch: Arch
    builder: Builder
    meter: Meter
    print_fn: Callable[[str], None]
    # The SPMD launch grid and this program instance's coordinates in it.
    grid: tuple[int, ...]
    program_ids: tuple[int, ...]
    # The variable the value being traced will be bound to (names new tiles after it).
    pending_name: str | None
    # The modules a kernel can import, by dotted name (lib.modules.namespaces).
    modules: dict[str, Any]
    # Which NKI the kernel file imports: "nki", "neuronxcc.nki" (older) or None.
    dialect: str | None
    # The kernel's inputs given as plain values, by parameter name (for messages that say
    # which input was meant as a tensor).
    kernel_values: dict[str, Any]

    def note_one_pass(self, made: range) -> None:
        """`made` is an older-NKI `nl.affine_range`/`sequential_range`: a loop over it is
        traced once (neuronemu.trace.loops.OnePass)."""

    def unique_name(self, base: str) -> str:
        """A tensor name not taken yet (`base`, or `base.N`)."""

    def call(self, func: Any, args: list[Any], kwargs: dict[str, Any], span: SourceSpan) -> Any:
        """Call a kernel value (a kernel function, a builtin) with these arguments."""

    def binop(self, op: str, a: Any, b: Any, span: SourceSpan) -> Any:
        """`a op b` with Python's meaning at trace time (metered)."""

    def to_python(self, value: Any, span: SourceSpan, numpy: bool = False) -> Any:
        """A kernel value handed to Python code (kernel functions become callables)."""

    def getattr(self, value: Any, attr: str, span: SourceSpan) -> Any:
        """`value.attr` as the kernel would write it (the same allow-list)."""

    def type_of(self, span: SourceSpan, value: Any, *rest: Any) -> Any:
        """The builtin `type(value)` (or `type(name, bases, namespace)`), for the kernel."""

    def make_super(self, span: SourceSpan, cls: Any = None, obj: Any = None) -> Any:
        """The builtin `super(cls, obj)` (zero-argument `super()` is the interpreter's)."""
