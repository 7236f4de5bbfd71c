"""The tracer: evaluates a kernel's meta-program as the NKI compiler does (unroll, inline,
emit instructions). Nothing in the kernel file is imported or executed by Python.

It is composed of the interpreter (statements, assignment, calls), expressions, the kernel's
own classes, imports, and kernel launch, each part seeing the others through the state they
share (state.py); the namespaces a kernel sees (`lib/`) reach it only through the `Context` it
implements (lib/context.py).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from neuronemu.build.builder import Builder
from neuronemu.errors import SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.limits import Meter
from neuronemu.replay import templates
from neuronemu.trace.augmented import Augmented
from neuronemu.trace.classes import Classes
from neuronemu.trace.contexts import Contexts
from neuronemu.trace.expressions import Expressions
from neuronemu.trace.imports import Imports, import_roots, kernel_tree
from neuronemu.trace.interpreter import Interpreter
from neuronemu.trace.kernel import KernelLaunch, dialect_of
from neuronemu.trace.lib import host, modules
from neuronemu.trace.loops import Loops, OnePass
from neuronemu.trace.patterns import Patterns
from neuronemu.trace.pytypes import PyTypes
from neuronemu.trace.scopes import Scopes
from neuronemu.trace.state import Env
from neuronemu.trace.values import Namespace
from neuronemu_isa import Arch

__all__ = ["Tracer"]


class Tracer(
    Augmented,
    Interpreter,
    Loops,
    Expressions,
    Classes,
    PyTypes,
    Contexts,
    Scopes,
    Patterns,
    Imports,
    KernelLaunch,
    templates.Replay,
):
    """One kernel file's meta-program, traced for one kernel launch."""

    def __init__(
        self,
        module: A.Module,
        path: str,
        arch: Arch,
        builder: Builder,
        print_fn: Callable[[str], None] = print,
        meter: Meter | None = None,
        import_path: Sequence[str] = (),
    ):
        self.module = module
        self.dialect = dialect_of(module)  # which NKI the file imports
        self.path = path
        self.arch = arch
        self.builder = builder
        self.print_fn = print_fn
        self.meter = meter or builder.meter
        self.depth = 0
        self.handling: list[Exception] = []  # exceptions being handled (`raise` re-raises)
        self.trying = 0  # `try` blocks being run (imports fail at once inside them)
        self.live_generators: list[Any] = []  # suspended generators, closed when tracing ends
        self.generator_functions: dict[int, tuple[Any, bool]] = {}
        self.local_name_sets: dict[int, tuple[Any, frozenset[str]]] = {}  # (interpreter.py)
        self.built_kernels: dict[Any, Any] = {}  # kernels builder functions made (kernel.py)
        self._name_counts: dict[str, int] = {}
        self.templates = templates.ENABLED  # replay loops whose iterations match
        self.pending_name: str | None = None  # the variable an allocation is being bound to
        self._local_modules: dict[str, Namespace] = {}  # helper modules by resolved path
        self.tree = kernel_tree(path)  # the folder helper modules may come from
        self.import_path = import_roots(import_path)  # and source trees of other packages
        self._module_roots: dict[str, Any] = {}  # (see imports.py)
        self.kernel_values: dict[str, Any] = {}  # the kernel's inputs that are no array
        self.traced_once: dict[int, range] = {}  # (loops.py)
        self.one_pass: dict[tuple[int, int], OnePass] = {}
        self._fields: dict[tuple[str, SourceSpan], A.Node] = {}  # parsed f-string fields
        self.grid: tuple[int, ...] = (1,)  # the SPMD launch grid, and this instance's ids
        self.program_ids: tuple[int, ...] = (0,)
        self.builtins = Env()
        self.builtins.vars.update(host.builtin_names(self))
        self.modules = modules.namespaces(self)
        self.globals = Env(self.builtins)
        self._bind_module()

    def close_generators(self) -> None:
        """Close every generator still suspended (their `finally` blocks run); one whose
        `finally` spends a budget ends the trace, and the rest are aborted."""
        try:
            while self.live_generators:
                self.live_generators[-1].close()
        except BaseException:
            self.abort_generators()
            raise

    def abort_generators(self) -> None:
        """Unwind every generator still suspended, running none of their code."""
        while self.live_generators:
            self.live_generators[-1].abort()
