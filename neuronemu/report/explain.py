"""What `--explain-mismatch` finds: whether the unrounded shadow run matches the reference (the
mismatch is rounding) or not (the algorithm), and then which kernel instruction first computes
a value the reference never does, found against the reference's own intermediate arrays."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable

import numpy as np

from neuronemu.errors import UsageError
from neuronemu.ir import IndirectView, View
from neuronemu.program import Instr, Program
from neuronemu.report.reference import call_reference, compare
from neuronemu.sim import functional

__all__ = [
    "explain_mismatch",
    "explanation",
    "trace_reference",
    "RefValue",
    "Steps",
    "MAX_INTERMEDIATES",
    "MAX_RECORDED_ELEMENTS",
    "MATCH_RTOL",
]

# The reference's arrays kept to compare with: at most this many, of at most this many elements
# in all (float32 copies: 32 MiB). Inferred: a reference names a few steps, and its arrays are
# the size of the kernel's inputs and outputs.
MAX_INTERMEDIATES = 64
MAX_RECORDED_ELEMENTS = 1 << 23
# Line events of the reference looked at, at most: a reference that loops in Python over
# elements would otherwise run many times slower traced. Inferred: a NumPy reference's steps
# are a few lines; after this many, the rest runs untraced (its return value is still kept).
MAX_TRACED_LINES = 1 << 14
# A kernel value matches a reference array (or a tile of it) when every element is within
# MATCH_RTOL * (|expected| + the array's largest |value|). Inferred: the shadow run does not
# round, so what is left is fp32 arithmetic (~1e-6) and a reference that rounds its result to
# the output's dtype (bfloat16: 4e-3); a logic bug is off by far more.
MATCH_RTOL = 1e-2
# Elements of a kernel value compared at every candidate place in a reference array first;
# only places where all of them agree are compared whole.
MATCH_SAMPLES = 8
# Candidate places of a tile in one reference array (its first element at multiples of the
# tile's own size or of the partition count along each axis, or at the end), at most.
MAX_OFFSETS = 4096
# Elements compared in all: COMPARE_FLOOR, plus COMPARE_PER_ELEMENT for each element the shadow
# run writes, so the comparison costs a fixed share of the shadow run it rides on. Inferred.
COMPARE_FLOOR = 1 << 20
COMPARE_PER_ELEMENT = 2


@dataclass(frozen=True)
class RefValue:
    """An array the reference computed: the local name it was bound to (or its return value),
    where, and a float32 copy of its values as they were then."""

    name: str
    file: str
    line: int
    values: np.ndarray

    def label(self) -> str:
        """`name` quoted, or "return value" (of the reference, or "f() return value" of a
        function f it calls) as it is."""
        if self.name.endswith("return value") or self.name.startswith("output"):
            return self.name
        return f"`{self.name}`"

    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}" if self.line else "the reference"


def trace_reference(fn: Callable[..., Any], inputs: dict[str, Any]) -> tuple[list[RefValue], int]:
    """Call the reference as the check does, recording the arrays bound to local names in its
    own file as each line runs, and the values its functions return (`sys.settrace`; the
    tracer there before is put back). The reference is the user's host code, already run once
    by the check. The inputs it is given by name come first where it binds them to no local
    name of its own (a `**kwargs` reference). Returns the arrays (at most MAX_INTERMEDIATES,
    MAX_RECORDED_ELEMENTS elements in all) and how many others were left out."""
    code = getattr(fn, "__code__", None)
    recorder = _Recorder(getattr(code, "co_filename", ""), getattr(fn, "__name__", ""))
    before = sys.gettrace()
    sys.settrace(recorder.call)
    try:
        returned = call_reference(fn, inputs)
    except UsageError:  # (it ran for the check; a second run that raises shows nothing)
        returned = []
    finally:
        sys.settrace(before)
    traced = recorder.values
    recorder.values = []
    named = {r.name for r in traced}
    for name, value in inputs.items():  # (what it was given by name, first, if not traced)
        if name not in named:
            recorder.add(name, value, 0)
    recorder.values += traced
    if not traced:  # (not a function of a file: its outputs too)
        for i, value in enumerate(returned):
            recorder.add(f"output {i}", value, 0)
    return recorder.values, recorder.skipped


class _Recorder:
    """The `sys.settrace` hooks: the arrays newly bound to a local name are recorded at the next
    line event of their frame (attributed to the line that ran before it), and at the frame's
    return with the arrays changed in place since and the returned value."""

    def __init__(self, filename: str, top: str) -> None:
        self.filename = filename
        self.top = top
        self.values: list[RefValue] = []
        self.skipped = 0
        self._elements = 0
        self._count = 0
        self._lines = 0
        self._bound: dict[int, dict[str, tuple[int, int]]] = {}  # frame -> name -> (id, value)
        self._line: dict[int, int] = {}

    def call(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.filename or frame.f_code.co_filename != self.filename:
            return None
        if self._lines > MAX_TRACED_LINES and frame.f_code.co_name != self.top:
            return None
        self._line[id(frame)] = frame.f_lineno
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        key = id(frame)
        if event == "line":
            self._lines += 1
            if self._lines > MAX_TRACED_LINES:
                frame.f_trace_lines = False  # (its return is still seen)
                return self._local
            self._snapshot(frame, self._line.get(key, frame.f_lineno), False)
            self._line[key] = frame.f_lineno
        elif event == "return":
            self._snapshot(frame, frame.f_lineno, True)
            name = frame.f_code.co_name
            what = "return value" if name == self.top else f"{name}() return value"
            items = arg if isinstance(arg, (tuple, list)) else [arg]
            for i, item in enumerate(items):
                self.add(what if len(items) == 1 else f"{what} [{i}]", item, frame.f_lineno)
            self._bound.pop(key, None)
            self._line.pop(key, None)
        return self._local

    def _snapshot(self, frame: FrameType, line: int, final: bool) -> None:
        bound = self._bound.setdefault(id(frame), {})
        for name, value in list(frame.f_locals.items()):
            if not isinstance(value, np.ndarray):
                continue
            seen = bound.get(name)
            if seen is not None and seen[0] == id(value):
                if not final or _same(self.values[seen[1]].values, value):
                    continue  # (at the return: recorded again if changed in place)
            index = self.add(name, value, line)
            if index is not None:
                bound[name] = (id(value), index)

    def add(self, name: str, value: Any, line: int) -> int | None:
        """Record a copy of `value` if it is a numeric array within the budgets."""
        if not isinstance(value, np.ndarray) or value.size == 0 or value.dtype.kind in "cOSUMm":
            return None  # (not real numbers)
        if self._count >= MAX_INTERMEDIATES or (
            self._elements + value.size > MAX_RECORDED_ELEMENTS
        ):
            self.skipped += 1
            return None
        try:
            with np.errstate(over="ignore"):  # (beyond float32: inf, compared as inf)
                copy = np.array(value, dtype=np.float32)
        except (TypeError, ValueError):
            return None  # (not numbers)
        copy.flags.writeable = False
        self._elements += copy.size
        self._count += 1
        self.values.append(RefValue(name, self.filename, line, copy))
        return len(self.values) - 1


def _same(recorded: np.ndarray, value: np.ndarray) -> bool:
    try:
        with np.errstate(over="ignore"):
            return bool(np.array_equal(recorded, value.astype(np.float32), equal_nan=True))
    except (TypeError, ValueError):
        return True


@dataclass(frozen=True)
class _Match:
    ref: int
    read_as: str  # how the reference array was read: "", ".T", ".reshape(-1, n)"...
    offset: tuple[int, ...]
    shape: tuple[int, ...]
    whole: bool


class _Matcher:
    """Finds a reference array that a kernel value equals (within MATCH_RTOL), whole or as a
    tile of it: the array as it is, without its size-1 axes, transposed (2-D), or with its
    leading axes merged (3-D and more); the value as it is or without its size-1 axes."""

    def __init__(self, refs: list[RefValue], partitions: int) -> None:
        self.refs = refs
        self.partitions = partitions
        self.budget = COMPARE_FLOOR
        self.compared = 0
        self.exhausted = False
        # (ref index, form, array, its tolerance's absolute part)
        self.forms: list[tuple[int, str, np.ndarray, float]] = []
        for i, ref in enumerate(refs):
            a = ref.values
            finite = np.abs(a[np.isfinite(a)])
            slack = MATCH_RTOL * (float(finite.max()) if finite.size else 0.0)
            for form, b in _forms(a):
                self.forms.append((i, form, b, slack))
        self._places: dict[tuple[int, ...], list[tuple[int, np.ndarray, np.ndarray]]] = {}
        self._flats: dict[int, np.ndarray] = {}
        self._sampled: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def match(self, value: np.ndarray) -> tuple[str, _Match | None]:
        """("matched", the match), ("unmatched", None) when compared with some reference array
        of a shape it fits, ("no candidate", None) when none fits, ("skipped", None) when the
        comparison budget is spent."""
        self.budget += COMPARE_PER_ELEMENT * value.size
        with np.errstate(all="ignore"):  # (compared in float32, as the arrays are kept)
            full = np.asarray(value, dtype=np.float32)
            tried = False
            for k in dict.fromkeys([full.shape, _squeezed(full).shape]):
                found = self._match(full.reshape(k))
                if found[0] in ("matched", "skipped"):
                    return found
                tried = tried or found[0] == "unmatched"
        return ("unmatched" if tried else "no candidate"), None

    def _match(self, k: np.ndarray) -> tuple[str, _Match | None]:
        places = self._candidates(k.shape)
        if not places:
            return "no candidate", None
        samples, _ = self._samples(k.shape)
        picked = k.reshape(-1)[samples]
        for form_index, offsets, index in places:
            ref, form, a, slack = self.forms[form_index]
            if self.compared + len(index) > self.budget:
                self.exhausted = True
                return "skipped", None
            flat = self._flat(form_index)
            # The first sample at every place, then the others where it agrees.
            rows = np.flatnonzero(_close(picked[:1], flat[index[:, 0]], slack))
            self.compared += len(index) + rows.size * (index.shape[1] - 1)
            near = _close(picked[None, :], flat[index[rows]], slack).all(axis=1)
            for at in rows[near][:4]:  # (a few places that agree on the samples)
                box = tuple(
                    slice(int(o), int(o) + n) for o, n in zip(offsets[at], k.shape, strict=True)
                )
                self.compared += k.size
                if _close(k, a[box], slack).all():
                    start = tuple(int(o) for o in offsets[at])
                    return "matched", _Match(ref, form, start, k.shape, k.shape == a.shape)
        return "unmatched", None

    def _samples(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The flat indices of the elements of a value of `shape` compared first, and their
        coordinates (one row per axis)."""
        found = self._sampled.get(shape)
        if found is None:
            size = int(np.prod(shape))
            flat = np.unique(np.linspace(0, size - 1, MATCH_SAMPLES).round().astype(np.int64))
            coords = np.array(np.unravel_index(flat, shape), dtype=np.int64)
            found = self._sampled[shape] = (flat, coords.reshape(-1, flat.size))
        return found

    def _flat(self, form_index: int) -> np.ndarray:
        """A form's elements, C-contiguous and flat (made once, when first compared with)."""
        found = self._flats.get(form_index)
        if found is None:
            found = self._flats[form_index] = np.ascontiguousarray(
                self.forms[form_index][2]
            ).reshape(-1)
        return found

    def _candidates(self, shape: tuple[int, ...]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(form, the places to compare at, the flat indices of the samples at each place)
        of every form a value of `shape` fits in, the forms it fits whole first."""
        found = self._places.get(shape)
        if found is None:
            found = []
            size = int(np.prod(shape))
            _, coords = self._samples(shape)
            for i, (_, _, a, _) in enumerate(self.forms):
                if a.ndim != len(shape) or any(k > n for k, n in zip(shape, a.shape)):
                    continue
                if size < 2 and a.size > 1:
                    continue  # (a single number would match somewhere)
                offsets = _offsets(shape, a.shape, self.partitions)
                strides = np.array([int(np.prod(a.shape[d + 1 :])) for d in range(a.ndim)])
                index = (offsets @ strides)[:, None] + (strides @ coords)[None, :]
                found.append((i, offsets, index))
            found.sort(key=lambda item: len(item[1]))
            self._places[shape] = found
        return found


def _forms(a: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The ways a reference array is compared: without its size-1 axes (a kernel value is
    tried with and without its own), with its leading axes merged, and each 2-D one
    transposed."""
    squeezed = _squeezed(a)
    found: dict[str, np.ndarray] = {"" if squeezed.shape == a.shape else ".squeeze()": squeezed}
    if squeezed.ndim > 2:
        found[f".reshape(-1, {a.shape[-1]})"] = squeezed.reshape(-1, squeezed.shape[-1])
    for form, b in list(found.items()):
        if b.ndim == 2:
            found[f"{form}.T"] = b.T
    return list(found.items())


def _squeezed(a: np.ndarray) -> np.ndarray:
    """`a` without its size-1 axes (one axis if it has no other)."""
    return a.reshape([n for n in a.shape if n != 1] or [a.size])


def _offsets(tile: tuple[int, ...], whole: tuple[int, ...], partitions: int) -> np.ndarray:
    """Where a tile's first element may sit in an array, one row per place: along each axis at
    multiples of the tile's size or of the partition count, and at the end; at most
    MAX_OFFSETS places (every other one of the axis with the most, until they fit)."""
    axes = []
    for k, n in zip(tile, whole, strict=True):
        ends = (np.arange(0, n - k + 1, k), np.arange(0, n - k + 1, partitions), [n - k])
        axes.append(np.unique(np.concatenate(ends)).astype(np.int64))
    while int(np.prod([len(a) for a in axes])) > MAX_OFFSETS:
        longest = max(range(len(axes)), key=lambda d: len(axes[d]))
        axes[longest] = axes[longest][::2]
    if not axes:
        return np.zeros((1, 0), dtype=np.int64)
    grid = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.reshape(-1) for g in grid], axis=1)


def _close(got: np.ndarray, want: np.ndarray, slack: float) -> np.ndarray:
    """Which elements of `got` are within the match tolerance of `want` (equal infinities and
    NaN on both sides agree). Under the caller's np.errstate."""
    near = np.abs(got - want) <= np.abs(want) * np.float32(MATCH_RTOL) + np.float32(slack)
    if near.all():
        return near
    return near | (got == want) | (np.isnan(got) & np.isnan(want))


@dataclass
class _Node:
    """One output of one executed instruction: how its value compares with the reference's,
    and which earlier nodes (and kernel inputs) each of its inputs read."""

    instr: Instr
    operand: str
    shape: tuple[int, ...]
    # matched, unmatched, no candidate (no reference array of a shape it fits), skipped (the
    # budget is spent), source (reads no tensor: a memset, an iota), scattered (rows an
    # indirect copy scattered: as right as what it read)
    status: str
    match: _Match | None
    deps: dict[str, tuple[frozenset[int], frozenset[str]]] = field(default_factory=dict)
    # Inputs that read part of what earlier nodes wrote and matched a reference array as read
    # (a column of bn_aggr's [mean, var]): operand -> the match.
    reads: dict[str, _Match] = field(default_factory=dict)


class Steps:
    """The observer of the shadow run: each instruction's results compared with the
    reference's arrays, and the data flow between them, element by element (which node last
    wrote each element of each tensor), to find the first wrong step."""

    def __init__(self, program: Program, refs: list[RefValue], skipped: int) -> None:
        self.program = program
        self.refs = refs
        self.skipped = skipped
        self.matcher = _Matcher(refs, program.arch.sbuf_partitions)
        self.nodes: list[_Node] = []
        self._writers: dict[int, np.ndarray] = {}  # root tensor id -> node per element (0: none)
        self.vouched: set[int] = set()  # nodes part of which matched as a later step read it

    def observe(
        self,
        ins: Instr,
        inputs: list[tuple[str, View, Any]],
        results: list[tuple[str, View, Any]],
    ) -> None:
        deps = {name: self._producers(view) for name, view in ins.views("in")}
        source = not any(nodes or given for nodes, given in deps.values())
        reads = self._partial_reads(inputs, deps)
        for name, view, stored in results:
            if source:
                status, match = "source", None
            else:
                status, match = self.matcher.match(stored)
            self.nodes.append(_Node(ins, name, tuple(view.shape), status, match, deps, reads))
            self._wrote(view, len(self.nodes))
        dst = ins.operands.get("dst")
        if ins.indirect and isinstance(dst, IndirectView):  # (scattered: the whole tensor)
            self.nodes.append(_Node(ins, "dst", tuple(dst.shape), "scattered", None, deps, reads))
            self._writers_of(dst.tensor.root)[...] = len(self.nodes)

    def _partial_reads(
        self,
        inputs: list[tuple[str, View, Any]],
        deps: dict[str, tuple[frozenset[int], frozenset[str]]],
    ) -> dict[str, _Match]:
        """The inputs that read part of what unmatched nodes wrote, and match a reference
        array as read: those nodes are vouched for (a tile of several results, such as
        bn_aggr's mean and variance side by side, matches nothing whole)."""
        found: dict[str, _Match] = {}
        for name, _, value in inputs:
            nodes = deps.get(name, (frozenset(), frozenset()))[0]
            unmatched = [d for d in nodes if self.nodes[d - 1].status not in ("matched", "source")]
            if not unmatched:
                continue
            whole = len(nodes) == 1 and np.size(value) == np.prod(
                self.nodes[unmatched[0] - 1].shape
            )
            if whole:
                continue  # (the node's own value, compared already)
            _, match = self.matcher.match(np.asarray(value))
            if match is not None:
                found[name] = match
                self.vouched.update(nodes)
        return found

    def _writers_of(self, root: Any) -> np.ndarray:
        found = self._writers.get(root.id)
        if found is None:
            found = self._writers[root.id] = np.zeros(root.shape, dtype=np.int32)
        return found

    def _wrote(self, view: View, node: int) -> None:
        rooted = view.as_root()
        rooted.np_view(self._writers_of(rooted.tensor))[...] = node

    def _producers(self, view: View) -> tuple[frozenset[int], frozenset[str]]:
        """The nodes that wrote what `view` reads, and the kernel input it reads unwritten."""
        root = view.tensor.root
        kernel_input = frozenset([root.name]) if root.kind == "input" else frozenset()
        whole = self._writers.get(root.id)
        if whole is None:
            return frozenset(), kernel_input
        if isinstance(view, IndirectView):
            written = whole
        else:
            rooted = view.as_root()
            written = rooted.np_view(whole)
        if not written.size:
            return frozenset(), frozenset()
        low, high = int(written.min()), int(written.max())
        ids = {low}
        if low != high:
            ids = set(np.flatnonzero(np.bincount(written.reshape(-1))).tolist())
        if 0 not in ids:
            kernel_input = frozenset()
        ids.discard(0)
        return frozenset(ids), kernel_input

    def first_wrong(self) -> dict[str, Any]:
        """The first node, in the order the instructions ran, that leads to an output, is
        neither equal to a value of the reference nor leads to one, while every input it reads
        is (or is a kernel input): the step where the kernel's values leave the reference's."""
        n = len(self.nodes)
        live = [False] * (n + 1)
        for t in self.program.outputs:
            written = self._writers.get(t.root.id)
            if written is not None:
                for i in np.flatnonzero(np.bincount(written.reshape(-1))).tolist():
                    live[i] = True
        reaches = [False] * (n + 1)  # some node fed by it matches the reference
        for i in range(n, 0, -1):
            node = self.nodes[i - 1]
            found = node.status == "matched" or reaches[i] or i in self.vouched
            for nodes, _ in node.deps.values():
                for d in nodes:
                    live[d] = live[d] or live[i]
                    reaches[d] = reaches[d] or found
        good = [True] * (n + 1)
        blamed = None
        for i, node in enumerate(self.nodes, 1):
            inputs_good = all(good[d] for nodes, _ in node.deps.values() for d in nodes)
            good[i] = (
                node.status in ("matched", "source")
                or reaches[i]
                or i in self.vouched
                or (node.status == "scattered" and inputs_good)
            )
            if blamed is None and live[i] and not good[i] and inputs_good:
                blamed = i
        ends = [i for i in range(1, n + 1) if live[i] and self.nodes[i - 1].match is not None]
        return self._described(blamed, [i for i in ends if not reaches[i]])

    def _label(self, match: _Match) -> str:
        ref = self.refs[match.ref]
        form, offset, shape = match.read_as, list(match.offset), list(match.shape)
        if form == ".squeeze()":  # (said in the array's own axes)
            form, at = "", iter(zip(offset, shape, strict=True))
            offset, shape = [], []
            for n in ref.values.shape:
                o, k = (0, 1) if n == 1 else next(at)
                offset.append(o)
                shape.append(k)
        if match.whole:
            return f"{ref.label()}{form} ({ref.where()})"
        box = ", ".join(f"{o}:{o + k}" for o, k in zip(offset, shape, strict=True))
        return f"{ref.label()}{form}[{box}] ({ref.where()})"

    def _inputs(self, node: _Node) -> tuple[list[str], list[str], list[str]]:
        """What the inputs of `node` read: values of the reference (by name, where), kernel
        inputs read as they are, and steps the reference does not name (that lead to values
        it does)."""
        named: dict[str, None] = {}
        given: dict[str, None] = {}
        unnamed: dict[str, None] = {}
        for operand, (nodes, inputs) in node.deps.items():
            for name in sorted(inputs):
                given[f"`{name}`"] = None
            if operand in node.reads:
                named[self._label(node.reads[operand])] = None
                continue
            for d in sorted(nodes):
                producer = self.nodes[d - 1]
                if producer.match is not None:
                    named[self._label(producer.match)] = None
                else:
                    unnamed[f"{producer.instr.spec.name} at {producer.instr.span}"] = None
        return list(named), list(given), list(unnamed)

    def _described(self, blamed: int | None, ends: list[int]) -> dict[str, Any]:
        """The message and figures of `first_wrong`: `ends` are the nodes that match the
        reference last on the way to an output (for when no node is blamed)."""
        figures = {
            "reference_arrays": len(self.refs),
            "reference_arrays_left_out": self.skipped,
            "compared_elements": self.matcher.compared,
            "budget_exhausted": self.matcher.exhausted,
        }
        if not self.refs:
            message = (
                "the reference's arrays are too large to keep for comparison (over "
                f"{MAX_RECORDED_ELEMENTS:,} elements), so no step can be compared"
                if self.skipped
                else "the reference holds no array to compare with, so no step can be compared"
            )
            return {**figures, "first_wrong": None, "message": message}
        if blamed is None:
            last = {
                f"{self.refs[m.ref].label()} ({self.refs[m.ref].where()})": None
                for m in (self.nodes[i - 1].match for i in ends)
                if m is not None
            }
            if last:
                message = (
                    "every kernel value on the way to the outputs matches a value the reference "
                    f"computes, and the outputs end at its {_joined(list(last)[:4])}, which the "
                    "reference goes on to change: a step missing at the end of the kernel, or "
                    "one the reference should not take"
                )
            else:
                message = (
                    "no single instruction could be told apart: every kernel value on the way "
                    "to the outputs matches a value the reference computes, or leads to one"
                )
            return {**figures, "first_wrong": None, "message": message}
        node = self.nodes[blamed - 1]
        ins = node.instr
        inputs = self._inputs(node)
        shape = list(node.shape)
        what = f"{ins.span}: {ins.spec.name}"
        result = "result" if node.operand == "dst" else f"{node.operand} result"
        if node.status == "unmatched":
            message = f"{what}'s {result} {shape} matches no value the reference computes"
        elif node.status == "no candidate":
            message = (
                f"{what}'s {result} {shape} is the first value that cannot be vouched for: "
                f"the reference binds no array of that shape to a name (name its steps, "
                "e.g. `m = x.max(axis=1, keepdims=True)`, to compare with them); if it is a "
                "step the reference does not name, the bug is at a later line"
            )
        else:
            message = (
                f"the comparison budget ({self.matcher.compared:,} elements) ran out at "
                f"{what}; no step could be singled out after it"
            )
        named, given, unnamed = inputs
        if named:
            message += f"; its inputs match the reference's {_joined(named)}"
        if given:
            message += f"; it reads the kernel input {_joined(given)}"
        if unnamed:
            message += (
                f"; it reads what {_joined(unnamed)} computes (a step the reference does not "
                "name, whose later use matches the reference)"
            )
        return {
            **figures,
            "first_wrong": {
                "index": ins.index,
                "instruction": ins.spec.name,
                "location": str(ins.span),
                "operand": node.operand,
                "shape": shape,
                "status": node.status,
                "inputs": {"reference": named, "kernel_inputs": given, "unnamed_steps": unnamed},
            },
            "message": message,
        }


def _joined(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + f" and {items[-1]}"


def explain_mismatch(
    program: Program,
    arrays: dict[str, np.ndarray],
    ref: Callable[..., Any],
    inputs: dict[str, Any],
    expected: list[np.ndarray],
    dtypes: dict[str, str],
    rtol: float | None,
    atol: float | None,
    precise: bool,
) -> dict[str, Any]:
    """The explanation of a failed check: the shadow run, observed against the reference's
    own intermediate arrays, and what it shows."""
    refs, skipped = trace_reference(ref, inputs)
    steps = Steps(program, refs, skipped)
    shadow = functional.shadow_execute(program, arrays, precise=precise, observe=steps.observe)
    shadow_check = compare(shadow.shadow_outputs, expected, dtypes, rtol, atol)
    found = None if shadow_check.passed else steps.first_wrong()
    return explanation(
        shadow.first, shadow_check, functional.DEPARTURE_ULPS, shadow.non_finite, found
    )


def explanation(
    first: Any,
    shadow: Any,
    departure_ulps: float,
    non_finite: Any = None,
    steps: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What `--explain-mismatch` found: whether the unrounded shadow run matches the reference
    (so the mismatch is rounding) and the first instruction that departs from its shadow; when
    it does not, `steps` (`Steps.first_wrong`): the first step whose value the reference never
    computes.

    `first` is the executor's first departure (with `to_json` and `describe`) or None;
    `shadow` the shadow run's CheckResult.
    """
    if shadow.passed:
        verdict = "rounding"
        message = (
            "the unrounded shadow run matches the reference, so the mismatch comes from rounding"
        )
    else:
        verdict = "algorithm"
        message = (
            f"the unrounded shadow run differs from the reference too ({shadow.mismatches} "
            "mismatches), so the kernel computes something else, not only a rounding "
            "error: the bug is in what the kernel computes (an accumulation flag, an index, a "
            "missing step), not at the line where its rounding first shows"
        )
        if steps is not None:
            message += f". Against the reference's own steps: {steps['message']}"
    if first is not None and shadow.passed:
        message += f"; {first.describe()}"
    elif first is not None:  # (rounding only: where the kernel's dtypes first round)
        message += (
            f" (for rounding alone: instruction #{first.index} at {first.span} is the first "
            "to round away from the unrounded run)"
        )
    elif shadow.passed:
        message += f"; no instruction departs from its shadow by more than {departure_ulps:g} ulp"
    if non_finite is not None:
        message += f"; {non_finite.describe()}"
    return {
        "non_finite": None if non_finite is None else non_finite.to_json(),
        "verdict": verdict,
        "shadow_passed": shadow.passed,
        "shadow_max_abs_err": shadow.max_abs_err,
        "shadow_mismatches": shadow.mismatches,
        "departure_ulps": departure_ulps,
        "first_departure": None if first is None else first.to_json(),
        "steps": steps,
        "message": message,
    }
