"""The fuzz runner (`tests/_fuzz.py`) classifies outcomes as the trust rules ask, so that a
passing fuzz test means something: a hang, a big resident set, a dead child, a host effect,
a leaked host object, an unlocated or internal error are all failures."""

from __future__ import annotations

import builtins
import os
import signal
import sys

import _fuzz as F
import pytest

from neuronemu.errors import KernelTypeError, NeuronEmuError, SourceSpan, UsageError

UTF8 = F.Example("unit", "k.py", b"x = 1\n", ())
NOT_UTF8 = F.Example("unit", "k.py", b"x = '\xff'\n", ())


def classify(example, action):
    F.warm_up()  # plants the canary, as for real examples
    return F._classify(example, lambda print_fn: action(print_fn))["kind"]


def test_a_hang_is_killed_at_the_time_limit():
    import time

    outcome = F.run_in_child(lambda: time.sleep(60) or {"kind": "ran"}, time_limit=1.0)
    assert outcome.kind == "timeout" and outcome.elapsed < 5


def test_a_big_resident_set_is_over_memory():
    def grab():
        block = bytearray(600 << 20)
        block[::4096] = b"x" * len(block[::4096])
        return {"kind": "ran"}

    outcome = F.run_in_child(grab, rss_limit=400 << 20)
    assert outcome.kind == "over-memory", outcome
    assert F.run_in_child(lambda: {"kind": "ran"}, rss_limit=2 << 30).kind == "ran"


@pytest.mark.parametrize(
    "death", [lambda: os._exit(7), lambda: os.kill(os.getpid(), signal.SIGSEGV)]
)
def test_a_child_that_dies_is_a_crash(death):
    assert F.run_in_child(death).kind == "crash"


def test_errors_are_classified(tmp_path):
    located = KernelTypeError("bad", SourceSpan(str(tmp_path / "k.py"), 3, 5))
    at_zero = KernelTypeError("bad", SourceSpan(str(tmp_path / "k.py"), 0, 5))

    def raising(exc):
        def action(print_fn):
            raise exc

        return action

    assert classify(UTF8, lambda pf: None) == "ran"
    assert classify(UTF8, raising(located)) == "located"
    assert classify(UTF8, raising(at_zero)) == "unlocated"
    assert classify(UTF8, raising(NeuronEmuError("no place"))) == "unlocated"
    assert classify(UTF8, raising(UsageError("missing input"))) == "usage"
    # a file that is not UTF-8 has a position to name
    assert classify(NOT_UTF8, raising(UsageError("cannot read"))) == "unlocated"
    assert classify(UTF8, raising(KeyError("x"))) == "internal"
    assert classify(UTF8, raising(RecursionError())) == "internal"


def test_host_effects_and_leaks_are_classified(tmp_path):
    assert classify(UTF8, lambda pf: open(tmp_path / "x", "w").close()) == "host-effect"
    assert classify(UTF8, lambda pf: pf(repr(vars(builtins)))) == "host-effect"  # canary
    assert classify(UTF8, lambda pf: pf(repr(os.environ))) == "host-effect"
    assert classify(UTF8, lambda pf: pf(str(sys.modules["os"]))) == "host-effect"
    assert classify(UTF8, lambda pf: pf(str(F.warm_up))) == "host-effect"
    assert classify(UTF8, lambda pf: pf("<built-in len> [1, 2] {'a': 1}")) == "ran"


def test_run_example_on_a_kernel_of_kernels():
    name = "tensor_add.py"
    text, case = F.SOURCES[name]
    assert F.run_example(F.Example("unit", name, text.encode(), case)).kind == "ran"
    broken = text.replace("nl.add", "nl.nosuch", 1).encode()
    outcome = F.run_example(F.Example("unit", name, broken, case))
    assert outcome.kind == "located" and "nosuch" in outcome.message


def test_examples_round_trip_through_json():
    for ex in list(F.REGRESSIONS.values()) + [NOT_UTF8]:
        assert F.Example.from_json(ex.to_json()) == ex


def test_the_seeded_generators_are_reproducible():
    import random

    one = [F.any_example(F.RandomDraw(random.Random(s))) for s in range(50)]
    two = [F.any_example(F.RandomDraw(random.Random(s))) for s in range(50)]
    assert one == two
    kinds = {e.kind for e in one}
    assert {"generated", "token", "byte", "insert"} <= kinds


def test_every_feature_kind_draws_reproducible_examples_that_round_trip():
    import random

    for kind, make in {**F.FEATURES, **F.FAMILIES}.items():
        for s in range(5):
            one = make(F.RandomDraw(random.Random(s)))
            assert one == make(F.RandomDraw(random.Random(s)))
            assert one.kind == kind and F.Example.from_json(one.to_json()) == one
    assert {".nasm"} == {name[-5:] for name in F.nasm_programs()}


def test_the_attack_families_are_drawn_by_the_campaign():
    import random

    kinds = {F.any_example(F.RandomDraw(random.Random(s))).kind for s in range(400)}
    assert set(F.FAMILIES) <= kinds


def _helper_kernel(imports: str, use: str) -> bytes:
    return (
        "import nki\nimport nki.language as nl\n"
        f"{imports}\n\n@nki.jit\ndef k(a):\n    print({use})\n    return a\n"
    ).encode()


def test_links_are_made_and_a_secret_read_through_one_is_a_host_effect():
    host = (f"{F.OUTSIDE}settings.py", f'TOKEN = "{F.HOST_SECRET}"\n'.encode())
    inside = F.Example(
        "unit",
        "work/k.py",
        _helper_kernel("from helper import VALUE", "VALUE"),
        (("a", "float32[4,4]"),),
        (("work/real.py", b"VALUE = 'helper-ok'\n"), (f"work/helper.py{F.LINK}real.py", b"")),
    )
    assert F.run_example(inside).kind == "ran"
    out = F.Example(
        "unit",
        "work/k.py",
        _helper_kernel("from creds import TOKEN", "TOKEN"),
        (("a", "float32[4,4]"),),
        (host, (f"work/creds.py{F.LINK}@/host/settings.py", b"")),
    )
    outcome = F.run_example(out)
    assert outcome.kind == "located" and F.HOST_SECRET not in outcome.message, outcome
    # had the secret been printed, the run would be a host effect
    assert classify(out, lambda pf: pf(f"TOKEN = {F.HOST_SECRET}")) == "host-effect"
    assert classify(out, lambda pf: pf("HOME=/root\x00PATH=/usr/bin")) == "host-effect"


def test_command_line_options_run_through_the_command_line():
    text = F.SWEEP_KERNEL.encode()
    full = F.Example(
        "unit",
        "sweep.py",
        text,
        (("a", "float32[128,512]"),),
        options=(("argv", "--kernel\ncopy\n--trace\n/dev/full"),),
    )
    outcome = F.run_example(full)
    assert outcome.kind == "usage" and "/dev/full" in outcome.message, outcome
    planted = F.Example(
        "unit",
        "sweep.py",
        text,
        (("a", "float32[128,512]"),),
        (("results.jsonl", b'{"config": [5]}\n' + b"[" * 100_000 + b"\n"),),
        options=(("params", "width=128,256"), ("out", "results.jsonl")),
    )
    assert F.run_example(planted).kind == "ran"


@pytest.mark.parametrize("form", ["private", "shared", "entries-fifo", "entries-swapped"])
def test_a_planted_cache_is_set_up_in_the_child(form):
    name = "tensor_add.py"
    text, case = F.SOURCES[name]
    example = F.Example("cache", name, text.encode(), case, options=(("cache", form),))
    assert F.run_example(example).kind == "ran"
