"""Fuzzing the front end and the trust boundary: generated kernels and mutants of every kernel
in `kernels/` never crash neuronemu, never touch the host, and stay within time and memory;
anything wrong comes back as a located NeuronEmuError (`path:line:col: error: ...`, line and
col >= 1), or a usage error where no position in the kernel files applies.

The generators (`tests/_fuzz.py`) include what untrusted kernel files try: trace-time NumPy
methods that write files, `str.format`/`%` formatting that follows attributes, huge literals,
powers, shifts and repetitions, deep nesting, non-UTF-8 bytes, f-strings with odd fields.
Every example runs with neuronemu's real default caps, in a forked child under the
host-effect guard (`tests/_host_guard.py`), killed past 30 s, failed past 2 GiB peak RSS.

Seeds: each session draws a fresh random seed (CI included), printed in pytest's header;
`NEURONEMU_FUZZ_SEED=N python -m pytest tests/property/test_fuzz_frontend.py` replays that
session's examples. `REGRESSIONS` (one example per class of trust bug found) run every time.
The thorough campaign (>= 100,000 examples, with a table of outcomes) is
`python benches/fuzz.py --examples 100000`.
"""

from __future__ import annotations

import os
from pathlib import Path

import _fuzz as F
import numpy as np
from hypothesis import HealthCheck, example, find, given, seed, settings
from hypothesis import strategies as st

import neuronemu
from neuronemu.errors import NeuronEmuError
from neuronemu.frontend import parse_source

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SEED = int(os.environ.get("NEURONEMU_FUZZ_SEED", "0"))
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def generated(draw):
    return F.generated_example(F.HypothesisDraw(draw))


@st.composite
def token_mutants(draw):
    return F.token_mutant(F.HypothesisDraw(draw))


@st.composite
def byte_mutants(draw):
    return F.byte_mutant(F.HypothesisDraw(draw))


@st.composite
def insertion_mutants(draw):
    return F.insertion_mutant(F.HypothesisDraw(draw))


@st.composite
def plain_kernels(draw):
    return F.plain_kernel(F.HypothesisDraw(draw))


def with_regressions(test):
    """Every regression example, each time (explicit examples run before generated ones)."""
    for ex in reversed(list(F.REGRESSIONS.values())):
        test = example(ex)(test)
    return test


@seed(SEED)
@SETTINGS
@with_regressions
@given(generated())
def test_generated_kernels_give_only_trusted_outcomes(ex):
    outcome = F.run_example(ex)
    assert not outcome.failed, f"{outcome}\n\n{ex!r}"


@seed(SEED)
@SETTINGS
@given(token_mutants())
def test_token_mutants_of_every_kernel_give_only_trusted_outcomes(ex):
    outcome = F.run_example(ex)
    assert not outcome.failed, f"{outcome}\n\n{ex!r}"


@seed(SEED)
@SETTINGS
@given(byte_mutants())
def test_byte_mutants_of_every_kernel_give_only_trusted_outcomes(ex):
    outcome = F.run_example(ex)
    assert not outcome.failed, f"{outcome}\n\n{ex!r}"


@seed(SEED)
@SETTINGS
@given(insertion_mutants())
def test_kernels_with_inserted_untrusted_statements_give_only_trusted_outcomes(ex):
    outcome = F.run_example(ex)
    assert not outcome.failed, f"{outcome}\n\n{ex!r}"


def test_every_kernel_runs_unmutated_under_the_guard():
    """The control: each kernel of kernels/ as it is runs, with nothing seen by the guard
    (so a mutant's host effect or failure is the mutation's doing)."""
    for name, (text, case) in F.SOURCES.items():
        ex = F.Example("control", name, text.encode(), case, F._helpers_for(text))
        outcome = F.run_example(ex)
        assert outcome.kind == "ran", f"{outcome}\n{ex!r}"


# Grammar-level generated tile programs (no trust statements): the machine's side.


@seed(SEED)
@SETTINGS
@given(plain_kernels())
def test_generated_kernels_parse(source):
    module = parse_source(source, "generated.py")  # always valid syntax
    assert any(getattr(node, "name", None) == "k" for node in module.body), source


def test_generated_kernels_reach_the_machine(tmp_path):
    """Some generated kernels run to the end with instructions on several engines, so the
    fuzzing exercises more than the error paths."""

    def runs(source: str) -> bool:
        path = tmp_path / "found.py"
        path.write_text(source)
        try:
            result = neuronemu.run(
                path, {"a": np.zeros((256, 128), np.float32)}, print_fn=lambda _: None
            )
        except NeuronEmuError:
            return False
        return len({i.engine for i in result.program.instrs}) >= 2

    found = find(
        plain_kernels(), runs, settings=settings(max_examples=500, deadline=None, database=None)
    )
    assert "nisa." in found


@seed(SEED)
@SETTINGS
@given(plain_kernels())
def test_the_dependency_builder_never_causes_a_race(tmp_path_factory, source):
    """Sequential NKI programs: the semaphores derived from data hazards order every pair of
    conflicting accesses."""
    from neuronemu.checks.hazards import first_race

    path = tmp_path_factory.mktemp("race") / "k.py"
    path.write_text(source)
    try:
        program = neuronemu.compile_kernel(
            path, {"a": np.zeros((256, 128), np.float32)}, print_fn=lambda _: None
        )
    except NeuronEmuError as err:
        assert F.LOCATED.match(err.render()), err.render()
        return
    race = first_race(program)
    assert race is None, race.render()


@seed(SEED)
@settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(plain_kernels())
def test_shuffled_execution_orders_give_identical_results(tmp_path_factory, source):
    """Any order the streams and semaphores allow gives the same bits (20 seeded orders)."""
    path = tmp_path_factory.mktemp("shuffle") / "k.py"
    path.write_text(source)
    a = np.random.default_rng(5).standard_normal((256, 128)).astype(np.float32)
    options = dict(print_fn=lambda _: None, allow_uninit=True)
    try:
        base = neuronemu.run(path, {"a": a}, **options)
    except NeuronEmuError:
        return
    for shuffle in range(20):
        again = neuronemu.run(path, {"a": a}, shuffle_seed=shuffle, **options)
        for name, out in base.outputs.items():
            assert again.outputs[name].tobytes() == out.tobytes(), (shuffle, name)


def test_shuffling_really_reorders():
    """The seeded orders differ from program order (so the property above has teeth)."""
    from neuronemu.sim.functional import interleaving

    program = neuronemu.compile_kernel(
        KERNELS / "tensor_add.py",
        {"a": np.zeros((256, 1024), np.float32), "b": np.zeros((256, 1024), np.float32)},
    )
    orders = {tuple(interleaving(program, s)) for s in range(20)}
    assert len(orders) > 10
    assert tuple(range(len(program.instrs))) not in orders or len(orders) > 1
    for order in orders:
        assert sorted(order) == list(range(len(program.instrs)))
