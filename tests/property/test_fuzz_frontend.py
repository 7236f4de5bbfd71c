"""Fuzzing the front end: mutated kernel files and random generated kernels never crash
neuronemu; anything wrong comes back as a located NeuronEmuError."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import NeuronEmuError
from neuronemu.frontend import parse_source
from neuronemu.inputs import parse_spec
from neuronemu.reference import discover_cases

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
# One small case per kernel: mutated files run fast, and loops stay bounded.
SOURCES = {}
for _path, _ref, _case in discover_cases(KERNELS):
    if _path.name not in SOURCES:
        SOURCES[_path.name] = (_path.read_text(), _case)
TOKENS = ["(", ")", "[", "]", ":", ",", ".", "=", "==", "+", "-", "*", "//", "%", "**", "0",
          "1", "-1", "128", "256", "513", "0.5", "None", "True", "'s'", 'f"{x}"', "a", "nl",
          "nisa", "nl.psum", "nl.sbuf", "nl.float32", "nl.int8", "nl.add", "nl.exp", "\n",
          "    ", "\t", "if", "for", "in", "return", "lambda", "def", "class", "try:", "@", "#",
          "\\", '"""', "nisa.nc_matmul", "nisa.tensor_copy", "mask=", "dst=", "[:, None]"]

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# A rendered error: `path:line:col: error: ...` (line and col from 1), or `error: ...` for
# errors with no place in a file.
LOCATED = re.compile(r"^(\S.*:[1-9]\d*:[1-9]\d*: )?error: ")


def run_source(tmp_path: Path, name: str, text: str, case: dict[str, str]) -> str | None:
    """Run a kernel file: None if it ran, else the rendered NeuronEmuError (anything else
    escapes and fails the test)."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    inputs = {k: parse_spec(k, v, seed=0) for k, v in case.items()}
    try:
        neuronemu.run(path, inputs, print_fn=lambda _: None, max_instructions=4000,
                      max_loop_iterations=20000)
    except NeuronEmuError as err:
        return err.render()
    return None


@st.composite
def token_mutation(draw):
    name = draw(st.sampled_from(sorted(SOURCES)))
    text, case = SOURCES[name]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 8))
        insert = draw(st.sampled_from(TOKENS + [""]))
        text = text[:at] + insert + text[at + cut:]
    return name, text, case


@st.composite
def byte_mutation(draw):
    name = draw(st.sampled_from(sorted(SOURCES)))
    text, case = SOURCES[name]
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    return name, data.decode("utf-8", "surrogateescape"), case


@SETTINGS
@given(token_mutation())
def test_token_mutations_of_every_kernel_give_only_located_errors(tmp_path_factory, mutated):
    name, text, case = mutated
    error = run_source(tmp_path_factory.mktemp("tok"), name, text, case)
    assert error is None or LOCATED.match(error), error


@SETTINGS
@given(byte_mutation())
def test_byte_mutations_of_every_kernel_give_only_located_errors(tmp_path_factory, mutated):
    name, text, case = mutated
    error = run_source(tmp_path_factory.mktemp("byte"), name, text, case)
    assert error is None or LOCATED.match(error), error


# Grammar-level generation of kernels: random statements over two pools of tiles, SBUF
# `tiles` of [128, 64] and PSUM `acc` of [64, 64] fp32, mostly used as the ISA expects (so
# that many kernels run) and sometimes not (so that the errors are exercised too).

_DTYPES = ["nl.float32", "nl.float32", "nl.bfloat16", "nl.float16", "nl.int32"]
_SHAPES = ["(128, 64)", "(128, 64)", "(128, 64)", "(64, 64)", "(256, 64)", "(128, 1)"]
_BUFFERS = ["nl.sbuf", "nl.sbuf", "nl.sbuf", "nl.psum", "nl.hbm"]


@st.composite
def expressions(draw, depth=0):
    if depth > 2 or draw(st.booleans()):
        return draw(st.sampled_from(["i", "n", "3", "0", "-2", "rows", "len(tiles)", "2.5"]))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "**", "<", "==", "and", "or"]))
    return f"({draw(expressions(depth + 1))} {op} {draw(expressions(depth + 1))})"


@st.composite
def statements(draw, depth=0):
    kind = draw(st.sampled_from(
        ["alloc", "copy", "binary", "binary", "scalar", "act", "matmul", "evict", "loop", "if",
         "assert", "assign", "store"]))
    sb = f"tiles[{draw(st.sampled_from([0, -1, -1, 1, 5]))}]"
    sb2 = f"tiles[{draw(st.sampled_from([0, -1, 0, 2]))}]"
    ps = f"acc[{draw(st.sampled_from([0, 0, -1, 3]))}]"
    if kind == "alloc":
        return [f"tiles.append(nl.ndarray({draw(st.sampled_from(_SHAPES))}, "
                f"dtype={draw(st.sampled_from(_DTYPES))}, "
                f"buffer={draw(st.sampled_from(_BUFFERS))}))"]
    if kind == "copy":
        return [f"nisa.tensor_copy(dst={sb}, src={sb2})"]
    if kind == "binary":
        op = draw(st.sampled_from(["nl.add", "nl.multiply", "nl.maximum", "nl.bitwise_and"]))
        return [f"nisa.tensor_tensor(dst={sb}, data1={sb2}, data2={sb}, op={op})"]
    if kind == "scalar":
        return [f"nisa.tensor_scalar(dst={sb}, data={sb2}, op0=nl.multiply, "
                f"operand0={draw(expressions())})"]
    if kind == "act":
        return [f"nisa.activation(dst={sb}, op=nl.{draw(st.sampled_from(['exp', 'tanh']))}, "
                f"data={sb2}, scale=0.5)"]
    if kind == "matmul":
        return [f"nisa.nc_matmul(dst={ps}, stationary={sb2}, moving={sb})"]
    if kind == "evict":
        return [f"nisa.tensor_copy(dst=tiles[0][0:64, :], src={ps})"]
    if kind == "store":
        return [f"nisa.dma_copy(dst=a[0:{draw(st.sampled_from([128, 128, 64, 300]))}, 0:64], "
                f"src={sb})"]
    if kind == "assign":
        return [f"n = {draw(expressions())}"]
    if kind == "assert":
        return [f"assert {draw(expressions())}, f'n={{n}}'"]
    if depth >= 2:
        return ["pass"]
    body = [s for _ in range(draw(st.integers(1, 3))) for s in draw(statements(depth + 1))]
    head = (f"for i in nl.affine_range({draw(st.integers(0, 3))}):" if kind == "loop"
            else f"if {draw(expressions())}:")
    return [head] + ["    " + line for line in body]


@st.composite
def kernels(draw):
    body = [s for _ in range(draw(st.integers(1, 8))) for s in draw(statements())]
    lines = ["import nki", "import nki.isa as nisa", "import nki.language as nl", "",
             "@nki.jit", "def k(a):", "    rows = a.shape[0]", "    n = 1", "    i = 0",
             "    tiles = [nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)]",
             "    nisa.dma_copy(dst=tiles[0], src=a[0:128, 0:64])",
             "    acc = [nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)]"]
    lines += ["    " + line for line in body] + ["    return a"]
    return "\n".join(lines) + "\n"


@SETTINGS
@given(kernels())
def test_generated_kernels_run_or_give_located_errors(tmp_path_factory, source):
    parse_source(source, "generated.py")  # always valid syntax
    error = run_source(tmp_path_factory.mktemp("gen"), "generated.py", source,
                       {"a": "float32[256,128]"})
    assert error is None or LOCATED.match(error), error


def test_generated_kernels_reach_the_machine(tmp_path):
    """Some generated kernels run to the end with instructions on several engines, so the
    fuzzing exercises more than the error paths."""

    def runs(source: str) -> bool:
        path = tmp_path / "found.py"
        path.write_text(source)
        try:
            result = neuronemu.run(path, {"a": np.zeros((256, 128), np.float32)},
                                   print_fn=lambda _: None, max_instructions=4000,
                                   max_loop_iterations=20000)
        except NeuronEmuError:
            return False
        return len({i.engine for i in result.program.instrs}) >= 2

    found = find(kernels(), runs, settings=settings(max_examples=500, deadline=None,
                                                    database=None))
    assert "nisa." in found


@SETTINGS
@given(kernels())
def test_the_dependency_builder_never_causes_a_race(tmp_path_factory, source):
    """Sequential NKI programs: the semaphores derived from data hazards order every pair of
    conflicting accesses."""
    from neuronemu.hazards import first_race

    path = tmp_path_factory.mktemp("race") / "k.py"
    path.write_text(source)
    try:
        program = neuronemu.compile_kernel(path, {"a": np.zeros((256, 128), np.float32)},
                                           print_fn=lambda _: None, max_instructions=4000,
                                           max_loop_iterations=20000)
    except NeuronEmuError as err:
        assert LOCATED.match(err.render()), err.render()
        return
    race = first_race(program)
    assert race is None, race.render()


@settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(kernels())
def test_shuffled_execution_orders_give_identical_results(tmp_path_factory, source):
    """Any order the streams and semaphores allow gives the same bits (20 seeded orders)."""
    path = tmp_path_factory.mktemp("shuffle") / "k.py"
    path.write_text(source)
    a = np.random.default_rng(5).standard_normal((256, 128)).astype(np.float32)
    options = dict(print_fn=lambda _: None, max_instructions=4000, max_loop_iterations=20000,
                   allow_uninit=True)
    try:
        base = neuronemu.run(path, {"a": a}, **options)
    except NeuronEmuError:
        return
    for seed in range(20):
        again = neuronemu.run(path, {"a": a}, shuffle_seed=seed, **options)
        for name, out in base.outputs.items():
            assert again.outputs[name].tobytes() == out.tobytes(), (seed, name)


def test_shuffling_really_reorders():
    """The seeded orders differ from program order (so the property above has teeth)."""
    from neuronemu.sim.functional import interleaving

    program = neuronemu.compile_kernel(KERNELS / "tensor_add.py", {
        "a": np.zeros((256, 1024), np.float32), "b": np.zeros((256, 1024), np.float32)})
    orders = {tuple(interleaving(program, seed)) for seed in range(20)}
    assert len(orders) > 10
    assert tuple(range(len(program.instrs))) not in orders or len(orders) > 1
    for order in orders:
        assert sorted(order) == list(range(len(program.instrs)))

