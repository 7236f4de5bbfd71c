"""Find the deprecated and removed NKI constructs of a parsed kernel file, each with its
place and, where `migrate` can make it mechanically, the edits of the text that port it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator

from neuronemu.errors import SourceSpan
from neuronemu.frontend import ast as A
from neuronemu.migrate.rules import RULES, Rule
from neuronemu.migrate.source import Argument, Source
from neuronemu_isa import REGISTRY

__all__ = ["Edit", "Finding", "find"]

OLDER = "neuronxcc.nki"
_RANGES = ("affine_range", "sequential_range", "static_range")
_BUFFERS = ("sbuf", "psum", "hbm", "shared_hbm", "private_hbm")
_KERNEL_DECORATORS = ("jit", "trace", "baremetal", "benchmark", "profile", "simulate_kernel")


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `text` (an insertion when start == end)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Finding:
    rule: Rule
    span: SourceSpan
    statement: int  # offset of the statement it is in: a mark goes on the line above
    edits: tuple[Edit, ...] = ()  # empty: not rewritten, the place is marked
    detail: str = ""  # the construct as written, when the rule names a family
    lint: bool = True  # reported by `lint` (nl.load/nl.store exist again in NKI 0.7)
    call: str = ""  # the nisa instruction, for a rule whose replacement names it

    def message(self) -> str:
        what = self.detail or self.rule.what
        return f"{what}: {self.rule.status}; use {self.rule.instead.replace('<call>', self.call)}"


def _children(node: A.Node) -> Iterator[A.Node]:
    for f in dataclasses.fields(node):
        if f.name == "span":
            continue
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, A.Node):
                yield item
            elif isinstance(item, tuple):  # (With items: (context, target) pairs)
                yield from (x for x in item if isinstance(x, A.Node))


def _walk(node: A.Node) -> Iterator[A.Node]:
    stack = [node]
    while stack:
        item = stack.pop()
        yield item
        stack.extend(reversed(list(_children(item))))


class _Finder:
    def __init__(self, module: A.Module, source: Source) -> None:
        self.module = module
        self.src = source
        self.found: list[Finding] = []
        self.parents: dict[int, A.Node | None] = {}  # id of an expression node -> its parent
        self.aliases: dict[str, tuple[str, ...]] = {}  # local name -> path inside nki
        self.older = False
        for stmt in module.body:
            self._imports(stmt)
        self.nl = next((k for k, v in self.aliases.items() if v == ("language",)), "nl")
        self.nisa = next((k for k, v in self.aliases.items() if v == ("isa",)), None)
        # Imports in functions bind their names there only; read as if they were global (the
        # module's own names win): a kernel that imports nki inside is read all the same.
        module_level = dict(self.aliases)
        for node in _walk(module):
            if isinstance(node, (A.Import, A.ImportFrom)):
                self._imports(node)
        self.aliases.update(module_level)
        self.index_names = self._index_names()
        self.kernels = {
            s.name: s
            for s in _walk(module)
            if isinstance(s, A.FunctionDef) and any(self._is_jit(d) for d in s.decorators)
        }
        self.sub_kernels = {  # kernels another kernel calls
            n.func.id
            for k in self.kernels.values()
            for n in self._own_nodes(k)
            if isinstance(n, A.Call)
            and isinstance(n.func, A.Name)
            and n.func.id in self.kernels
            and n.func.id != k.name
        }

    # Names -------------------------------------------------------------------------------

    def _imports(self, stmt: A.Node) -> None:
        if isinstance(stmt, A.Import):
            for dotted, alias in stmt.names:
                path = self._nki_path(dotted)
                if path is not None:
                    self.aliases[alias or dotted.split(".")[0]] = path if alias else ()
        elif isinstance(stmt, A.ImportFrom) and stmt.level == 0:
            for name, alias in stmt.names:
                path = self._nki_path(f"{stmt.module}.{name}")
                if path is not None:
                    self.aliases[alias or name] = path

    def _nki_path(self, dotted: str) -> tuple[str, ...] | None:
        parts = tuple(dotted.split("."))
        if parts[:2] == ("neuronxcc", "nki"):
            self.older = True
            return parts[2:]
        if parts[0] == "nki":
            return parts[1:]
        return None

    def qual(self, node: A.Node) -> tuple[str, ...] | None:
        """The path inside nki that `node` names (("language", "load") for `nl.load`)."""
        if isinstance(node, A.Name):
            return self.aliases.get(node.id)
        if isinstance(node, A.Attribute):
            base = self.qual(node.value)
            return None if base is None else (*base, node.attr)
        return None

    def _is_jit(self, d: A.Node) -> bool:
        q = self.qual(d.func if isinstance(d, A.Call) else d)
        return q is not None and len(q) == 1 and q[0] in _KERNEL_DECORATORS

    def _index_names(self) -> set[str]:
        """Names bound (anywhere) to nl.arange/nl.mgrid index expressions or to arithmetic on
        them: where they index a tensor, the index is not a slice."""
        assigns = [n for n in _walk(self.module) if isinstance(n, A.Assign)]
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for node in assigns:
                if not self._mentions_index(node.value, found):
                    continue
                for target in node.targets:
                    for t in _walk(target):
                        if isinstance(t, A.Name) and t.id not in found:
                            found.add(t.id)
                            changed = True
        return found

    def _mentions_index(self, node: A.Node, names: set[str]) -> bool:
        for n in _walk(node):
            if isinstance(n, A.Name) and n.id in names:
                return True
            if isinstance(n, A.Attribute) and self.qual(n) in (
                ("language", "arange"),
                ("language", "mgrid"),
            ):
                return True
        return False

    # Reporting ---------------------------------------------------------------------------

    def add(self, rule: str, node: A.Node | int, stmt: int, *edits: Edit, **kw: Any) -> None:
        span = self.src.span(node) if isinstance(node, int) else node.span
        self.found.append(Finding(RULES[rule], span, stmt, tuple(edits), **kw))

    def end_of(self, node: A.Node) -> int:
        return self.src.offset(node.span.end_line or node.span.line, node.span.end_col or 1)

    # The walk ----------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        for stmt in self.module.body:
            self.statement(stmt, None)
        self.found.sort(key=lambda f: (f.span.line, f.span.col))
        return self.found

    def statement(self, stmt: A.Node, kernel: A.FunctionDef | None) -> None:
        at = self.src.at(stmt.span)
        if isinstance(stmt, (A.Import, A.ImportFrom)):
            self.import_stmt(stmt, at)
            return
        if isinstance(stmt, A.FunctionDef):
            self.function(stmt, kernel, at)
            return
        if isinstance(stmt, A.ClassDef):
            for d in stmt.decorators:
                self.expression(d, at)
            for s in stmt.body:
                self.statement(s, kernel)
            return
        handled: set[int] = set()
        if isinstance(stmt, A.Assign) and isinstance(stmt.value, A.Call):
            if self.load(stmt, at):
                handled.add(id(stmt.value))
        elif isinstance(stmt, A.ExprStmt) and isinstance(stmt.value, A.Call):
            if self.store(stmt.value, at):
                handled.add(id(stmt.value))
        elif isinstance(stmt, A.AugAssign) and isinstance(stmt.value, A.Call):
            if self.accumulate(stmt, at):
                handled.add(id(stmt.value))
        for child in _children(stmt):
            if child.__class__.__name__ in _STATEMENTS:
                self.statement(child, kernel)
            elif isinstance(child, A.ExceptHandler):
                for s in child.body:
                    self.statement(s, kernel)
            else:
                self.expression(child, at, used=not isinstance(stmt, A.ExprStmt), done=handled)

    def function(self, fn: A.FunctionDef, kernel: A.FunctionDef | None, at: int) -> None:
        head = self.src.at(fn.decorators[0].span) if fn.decorators else at
        for d in fn.decorators:
            self.expression(d, head)
        for p in fn.params:
            if p.default is not None:
                self.expression(p.default, head)
        if self.kernels.get(fn.name) is fn and kernel is None:
            returns = any(
                isinstance(n, A.Return) and n.value is not None for n in self._own_nodes(fn)
            )
            if fn.name in self.sub_kernels:  # (a helper once its decorator goes)
                self.add("sub_kernel", fn, head)
            elif not returns:
                self.add("output_args", fn, head)
        inner = fn if self.kernels.get(fn.name) is fn else kernel
        for s in fn.body:
            self.statement(s, inner)

    def _own_nodes(self, fn: A.FunctionDef) -> Iterator[A.Node]:
        """The nodes of a function's body, not those of functions defined in it."""
        stack = list(reversed(fn.body))
        while stack:
            n = stack.pop()
            yield n
            if not isinstance(n, (A.FunctionDef, A.Lambda, A.ClassDef)):
                stack.extend(reversed(list(_children(n))))

    def expression(
        self, node: A.Node, stmt: int, used: bool = True, done: set[int] | None = None
    ) -> None:
        done = done or set()
        stack: list[tuple[A.Node, bool, A.Node | None]] = [(node, used, None)]
        while stack:
            n, n_used, parent = stack.pop()
            self.parents[id(n)] = parent
            if isinstance(n, (A.FunctionDef, A.ClassDef)):
                self.statement(n, None)
                continue
            if isinstance(n, A.Lambda):
                stack.append((n.body, True, n))
                continue
            if isinstance(n, A.Call):
                self.call(n, stmt, n_used and id(n) not in done, parent)
            elif isinstance(n, A.Subscript) and self.qual(n.value) == ("language", "mgrid"):
                self.add("arange", n, stmt, detail="nl.mgrid index grid")
            elif isinstance(n, A.Attribute) and n.attr == "total_available_sbuf_size":
                self.add("sbuf_size", n, stmt)
            stack.extend((c, True, n) for c in reversed(list(_children(n))))

    # Constructs --------------------------------------------------------------------------

    def call(self, call: A.Call, stmt: int, used: bool, parent: A.Node | None) -> None:
        q = self.qual(call.func) or ()
        name = q[-1] if q else ""
        paren = self.src.call_parens(self.end_of(call.func))
        args = self.src.arguments(paren[0]) if paren else []
        for k in call.keywords:
            if k.name == "mask" and q[:1] in (("language",), ("isa",)):
                self.add("mask", k, stmt)
            if k.name == "buffer" and isinstance(k.value, A.Const) and k.value.value in _BUFFERS:
                arg = next((a for a in args if a.keyword == "buffer"), None)
                named = (
                    [] if arg is None else [Edit(arg.start, arg.end, f"{self.nl}.{k.value.value}")]
                )
                self.add("buffer_string", k, stmt, *named)
        if len(q) == 1 and name in _KERNEL_DECORATORS:
            for k in call.keywords:
                if k.name in ("mode", "platform_target"):
                    self.add("jit_args", k, stmt, detail=f"nki.jit({k.name}=...)")
        if q[:1] == ("language",) and len(q) == 2:
            if name in _RANGES:
                start = self.src.at(call.func.span)
                renamed = Edit(start, self.end_of(call.func), "range")
                self.add("range", call, stmt, renamed, detail=f"nl.{name}")
            elif name == "dynamic_range":
                self.add("dynamic_range", call, stmt)
            elif name == "arange":
                self.add("arange", call, stmt, detail="nl.arange index expression")
            elif name == "par_dim":
                self.par_dim(call, stmt, parent, args)
        elif q[:1] == ("isa",) and len(q) == 2:
            if name.startswith("register_"):
                self.add("register", call, stmt, detail=f"nisa.{name}")
            elif name.startswith("tensor_copy_dynamic_"):
                self.add("copy_dynamic", call, stmt, detail=f"nisa.{name}")
            elif (
                used
                and self.older
                and name in REGISTRY
                and not any(k.name == "dst" for k in call.keywords)
            ):
                self.add("dst", call, stmt, detail=f"nisa.{name}", call=name)

    def par_dim(self, call: A.Call, stmt: int, parent: A.Node | None, args: list[Argument]) -> None:
        """The first dim of a shape written out as an argument: the partition dim, a plain size
        in NKI 0.7; anywhere else (after other dims, or in a shape built by an expression such
        as `[2] + [nl.par_dim(p), f]`) it may be a block dim's partition dim: marked."""
        shape = isinstance(parent, (A.TupleExpr, A.ListExpr)) and parent.elts[0] is call
        argument = isinstance(self.parents.get(id(parent)), (A.Call, A.Keyword))
        if not (shape and argument):
            self.add("block_dims", call, stmt)
            return
        edits: list[Edit] = []
        if len(args) == 1 and args[0].keyword is None:
            paren = self.src.call_parens(self.end_of(call.func))
            assert paren is not None
            size = self.src.text[args[0].start : args[0].end]
            edits.append(Edit(self.src.at(call.span), paren[1] + 1, size))
        self.add("par_dim", call, stmt, *edits)

    def _plain_index(self, node: A.Node) -> bool:
        """No nl.arange/nl.mgrid index names in it: its `.shape` is what a load reads."""
        return not any(isinstance(n, A.Name) and n.id in self.index_names for n in _walk(node))

    def _isa(self) -> str:
        return self.nisa or "nisa"

    def load(self, stmt: A.Assign, at: int) -> bool:
        """`x = nl.load(src)`: x allocated as src's shape and dtype, then a DMA into it;
        `t[...] = nl.load(src)`: a DMA into t[...]."""
        call = stmt.value
        assert isinstance(call, A.Call)
        if self.qual(call.func) != ("language", "load") or len(stmt.targets) != 1:
            return False
        paren = self.src.call_parens(self.end_of(call.func))
        if paren is None or not self.src.begins_line(at):
            return False
        args = self.src.arguments(paren[0])
        if len(args) != 1 or args[0].keyword not in (None, "src") or call.args[1:]:
            return False
        src = call.args[0] if call.args else call.keywords[0].value
        if not self._plain_index(src):
            return False
        target = stmt.targets[0]
        src_text = self.src.text[args[0].start : args[0].end]
        equals = self.src.next_op(at, "=")
        assert equals is not None
        target_text = self.src.text[at:equals].strip()
        edits = [Edit(at, args[0].start, f"{self._isa()}.dma_copy(dst={target_text}, src=")]
        if isinstance(target, A.Name):
            base = src
            while isinstance(base, (A.Subscript, A.Attribute)):
                base = base.value
            dtype = f"{base.id}.dtype" if isinstance(base, A.Name) else f"{src_text}.dtype"
            alloc = (
                f"{target_text} = {self.nl}.ndarray({src_text}.shape, dtype={dtype}, "
                f"buffer={self.nl}.sbuf)\n{self.src.indent(at)}"
            )
            edits.insert(0, Edit(at, at, alloc))
        elif not isinstance(target, A.Subscript):
            return False
        self.add("load", call, at, *edits, lint=False)
        return True

    def store(self, call: A.Call, at: int) -> bool:
        """`nl.store(dst, value=v)` -> `nisa.dma_copy(dst=dst, src=v)`."""
        if self.qual(call.func) != ("language", "store"):
            return False
        paren = self.src.call_parens(self.end_of(call.func))
        if paren is None:
            return False
        args = self.src.arguments(paren[0])
        if len(args) != 2 or args[0].keyword not in (None, "dst"):
            return False
        if args[1].keyword not in (None, "value", "src"):
            return False
        func = Edit(self.src.at(call.func.span), self.end_of(call.func), f"{self._isa()}.dma_copy")
        edits = [func]
        if args[0].keyword is None:
            edits.append(Edit(args[0].start, args[0].start, "dst="))
        if args[1].keyword is None:
            edits.append(Edit(args[1].start, args[1].start, "src="))
        elif args[1].keyword == "value":
            kw = self.src.text.rindex("value", 0, args[1].start)
            edits.append(Edit(kw, args[1].start, "src="))
        self.add("store", call, at, *edits, lint=False)
        return True

    def accumulate(self, stmt: A.AugAssign, at: int) -> bool:
        """`psum += nisa.nc_matmul(a, b)` -> `nisa.nc_matmul(psum, a, b, accumulate=True)`."""
        call = stmt.value
        assert isinstance(call, A.Call)
        q = self.qual(call.func)
        spec = REGISTRY.get(q[1]) if q and len(q) == 2 and q[0] == "isa" else None
        if stmt.op != "+" or spec is None or not any(a.name == "accumulate" for a in spec.attrs):
            return False
        paren = self.src.call_parens(self.end_of(call.func))
        plus = self.src.next_op(at, "+=")
        if paren is None or plus is None or any(k.name == "dst" for k in call.keywords):
            return False
        args = self.src.arguments(paren[0])
        if not args or any(a.keyword == "accumulate" for a in args):
            return False
        target = self.src.text[at:plus].strip()
        func = self.src.text[self.src.at(call.func.span) : self.end_of(call.func)]
        space = "" if self.src.text[paren[0] + 1] == "\n" else " "
        edits = (
            Edit(at, paren[0] + 1, f"{func}({target},{space}"),
            Edit(args[-1].end, args[-1].end, ", accumulate=True"),
        )
        self.add(
            "accumulate", call, at, *edits, detail=f"psum += nisa.{spec.name}(...)", call=spec.name
        )
        return True

    def import_stmt(self, stmt: A.Import | A.ImportFrom, at: int) -> None:
        end = self.src.statement_end(at)
        if isinstance(stmt, A.Import):
            if not any(d.split(".")[:2] == ["neuronxcc", "nki"] for d, _ in stmt.names):
                return
            names = []
            for dotted, alias in stmt.names:
                new = (
                    dotted.removeprefix("neuronxcc.")
                    if dotted.startswith("neuronxcc.nki")
                    else dotted
                )
                names.append(
                    new
                    if alias is None or (new == "nki" and alias == "nki")
                    else f"{new} as {alias}"
                )
            self.add("namespace", stmt, at, Edit(at, end, "import " + ", ".join(names)))
        elif stmt.level == 0 and (
            stmt.module == "neuronxcc" or stmt.module.startswith("neuronxcc.nki")
        ):
            if stmt.module == "neuronxcc":
                if any(n != "nki" for n, _ in stmt.names):
                    self.add("namespace", stmt, at)  # nki beside other names: by hand
                    return
                alias = stmt.names[0][1]
                text = "import nki" + (f" as {alias}" if alias and alias != "nki" else "")
            else:
                shown = ", ".join(n if a is None else f"{n} as {a}" for n, a in stmt.names)
                text = f"from {stmt.module.removeprefix('neuronxcc.')} import {shown}"
            self.add("namespace", stmt, at, Edit(at, end, text))


_STATEMENTS = {
    "ExprStmt", "Assign", "AugAssign", "AnnAssign", "If", "For", "While", "With", "Return",
    "Raise", "Try", "Assert", "Pass", "Break", "Continue", "FunctionDef", "ClassDef",
    "Import", "ImportFrom", "Global", "Nonlocal",
}  # fmt: skip


def find(module: A.Module, source: Source) -> tuple[list[Finding], bool, str | None]:
    """(findings in file order, whether the file imports neuronxcc.nki, the local name of
    nki.isa if it imports it)."""
    finder = _Finder(module, source)
    return finder.run(), finder.older, finder.nisa
