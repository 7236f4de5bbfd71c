"""Failures the fuzz campaign of 2026-12-04 (seed 20261204, the new attack families) found:
each was an internal error and is now a located or usage error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import neuronemu
from neuronemu.cli import main
from neuronemu.nasm.write import dumps

ROOT = Path(__file__).resolve().parents[2]


def test_an_empty_slice_in_a_text_program_is_located(tmp_path):
    """`src=rhs[128:7, :]` (example 483): ZeroDivisionError counting the view's runs."""
    inputs = {"lhsT": np.ones((256, 256), np.float32), "rhs": np.ones((256, 512), np.float32)}
    program = neuronemu.compile_kernel(ROOT / "kernels" / "matmul_tiled.py", inputs)
    text = dumps(program)
    assert "rhs[128:256, :]" in text
    path = tmp_path / "m.nasm"
    path.write_text(text.replace("rhs[128:256, :]", "rhs[128:7, :]", 1))
    args = ["run", str(path), "-i", "lhsT=float32[256,256]", "-i", "rhs=float32[256,512]"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:") and "is empty" in result.stderr.splitlines()[0]


def test_an_out_file_that_cannot_be_appended_to_is_a_usage_error(tmp_path, monkeypatch):
    """`sweep --out /proc/self/status` (example 555): OSError EINVAL from os.fdopen."""
    monkeypatch.chdir(ROOT)
    args = ["sweep", "kernels/tensor_add.py", "--param", "a=0", "--out", "/proc/self/status"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "error: --out '/proc/self/status': cannot" in result.stderr


def test_making_large_sequences_reads_the_clocks_in_proportion(monkeypatch):
    """`sum(len(f'{big}') for _ in range(10**4))` over a 200,000-item dict (seed 37, example
    259 of the fuzz gate) ran to 29.5 s under trace_seconds=20: each string is one step of
    the loop, and the clocks were read once per 256 steps. Making a sequence now counts as
    work in proportion to its items."""
    from neuronemu.limits import Meter

    meter = Meter()
    polls = []
    monkeypatch.setattr(meter, "poll", lambda span: polls.append(span))
    for _ in range(10):
        meter.items(2_000_000, "a string", None)  # (the size of f'{big}')
    assert len(polls) >= 10  # (a read of the clocks for each)
    small = Meter()
    monkeypatch.setattr(small, "poll", lambda span: polls.append(span))
    before = len(polls)
    for _ in range(100):
        small.items(100, "a list", None)
    assert len(polls) == before  # (small ones cost nothing extra)


def test_measuring_wide_shared_values_reads_the_clocks_in_proportion(monkeypatch):
    """`xs = [[[*big]] for _ in range(10**4)]` with `big = [[0] * 1000] * 4000` (seed
    20261204, example 675) ended 5.7 s past trace_seconds=20: measuring each new 4000-item
    list walks its items in Python, and the walk read the clocks once per 64 * 256
    containers, whatever their width. The walk's clock now counts items looked at, carried
    from walk to walk."""
    from neuronemu.limits import Meter
    from neuronemu.trace import nesting

    inner = [0] * 1000
    big = [inner] * 4000
    meter = Meter()
    polls = []
    monkeypatch.setattr(meter, "poll", lambda span: polls.append(span))
    for _ in range(1000):
        nesting.check_made(meter, [[*big]], None)
    # 1000 walks of ~8,000 items each: ~8M items, ~2,000 ticks, ~7 reads of the clocks.
    assert len(polls) >= 5
    small = Meter()
    monkeypatch.setattr(small, "poll", lambda span: polls.append(span))
    before = len(polls)
    for _ in range(100):
        nesting.check_made(small, [[1, 2], [3]], None)
    assert len(polls) == before  # (small walks cost nothing extra)


def test_lists_of_numpy_scalars_count_the_scalars_they_make(tmp_path):
    """`{i: list(big) for i in range(10**4)}` of a 1,000,000-element array (example 7069)
    reached 2.4 GiB: each copy was charged its list's pointers, not the new NumPy scalars."""
    from _guard import Sandbox

    box = Sandbox(tmp_path)
    box.write(
        "k.py",
        "import nki\nimport numpy as np\n\n\n@nki.jit\ndef k(a):\n"
        "    big = np.zeros(1_000_000)\n    xs = {i: list(big) for i in range(10**4)}\n"
        "    return a\n",
    )
    out = box.run("run", "k.py", "-i", "a=float32[4,4]")
    out.assert_located("k.py")
    assert "loop_iterations" in out.first_line, out.describe()


def test_a_dict_with_an_unhashable_key_is_cpythons_located_type_error(tmp_path):
    """`{[1]: 1}` and `{k: 1 for k in [x]}` (examples 38, 368, 429, 1547, 1571) were
    internal TypeErrors; they are the kernel's TypeError, catchable as in CPython."""
    src = (
        "import nki\n\n\n@nki.jit\ndef k(a):\n    x = [1]\n"
        "    try:\n        y = {x: 1}\n    except TypeError as e:\n"
        "        print('caught', e.args)\n"
        "    y = {k2: 1 for k2 in [x]}\n    return a\n"
    )
    path = tmp_path / "k.py"
    path.write_text(src)
    printed: list[str] = []
    with pytest.raises(neuronemu.NeuronEmuError, match="unhashable type: 'list'") as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append)
    assert printed == ["caught (\"unhashable type: 'list'\",)"]
    assert info.value.span.line == 11


def test_a_permutation_count_of_all_n_is_sized_before_it_is_made(tmp_path):
    """`math.perm(10**6)` (seed 20261205, examples 2746 and 6997: 14-22 s): with no k it is
    n!, which the log-gamma check skipped, so the 18-million-bit integer was made first and
    refused after. It is refused before, as math.perm(n, k) and math.factorial are."""
    path = tmp_path / "k.py"
    path.write_text(
        "import nki\nimport math\n\n\n@nki.jit\ndef k(a):\n"
        "    print(math.perm(5), math.perm(5, 2))\n    n = math.perm(10**6)\n    return a\n"
    )
    printed: list[str] = []
    with pytest.raises(neuronemu.NeuronEmuError) as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append)
    assert printed == ["120 20"]
    assert str(info.value).startswith(f"{path}:8:9: error: math.perm(1000000) would have")


def test_measuring_a_wide_flat_value_reads_the_clocks_in_proportion(monkeypatch):
    """`{i: copy.deepcopy(big) for i in range(10**4)}` of a 4,000,000-item deque (seed
    20261205, examples 10890, 22306, 97553; `'%s' % (big,)` in 11550, 44008, 87435):
    each call measures `big` first, looking at its 4M items in C, and the walk counted a
    flat container as one item: 34 s under trace_seconds=8. Its items count now."""
    from neuronemu.limits import Meter
    from neuronemu.trace import nesting

    big = [0] * 1_000_000
    meter = Meter()
    polls = []
    monkeypatch.setattr(meter, "poll", lambda span: polls.append(span))
    for _ in range(10):
        nesting.check_text(meter, big, None)
    # 10 walks of 1M items, ~244 ticks each: a read of the clocks every other walk (before:
    # none, each walk counted as one item).
    assert len(polls) >= 4


def _k(body: str) -> str:
    lines = "\n".join("    " + line for line in body.splitlines())
    head = "import nki\nimport copy\nimport collections\n\n\n@nki.jit\ndef k(a):\n"
    return f"{head}{lines}\n    return a\n"


@pytest.mark.parametrize(
    "body",
    [
        "x = ()\nfor i in range(10**6):\n    x = slice(x)",  # (SIGSEGV when hashed or freed)
        "x = None\nfor i in range(10**6):\n    x = slice(x, x)",
        "class S:\n    def __getitem__(self, k):\n        return k\ns = S()\nx = ()\n"
        "for i in range(10**6):\n    x = s[x:]",
    ],
)
def test_slices_nest_as_containers_do(tmp_path, body):
    """`x = slice(x)` 400,000 deep (seed 20261205, examples 34492, 43456, 56034, 79059,
    83975, 99615) was a SIGSEGV; `x = slice((x, x))` 1,000 times then `str(x)` (16711,
    30037, 35482, 85602) ran exponentially: a slice was not a container to the nesting
    measure. It is one now, refused where it passes nesting_depth."""
    path = tmp_path / "k.py"
    path.write_text(_k(body))
    with pytest.raises(neuronemu.NeuronEmuError) as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)})
    # (slice(x, x) doubles: it passes sequence_items first)
    assert "over the nesting_depth budget of 1000" in str(info.value) or (
        "slice(x, x)" in body and "over the sequence_items budget" in str(info.value)
    )
    lines = body.splitlines()
    made = next(n for n, line in enumerate(lines) if "x = s" in line or "slice(x" in line)
    assert info.value.span.line == 8 + made  # (the line that makes the slice)


def test_a_slice_dag_is_sized_before_it_is_printed(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(_k("x = {}\nfor i in range(100):\n    x = slice((x, x))\ny = len(str(x))"))
    with pytest.raises(neuronemu.NeuronEmuError, match="over the sequence_items budget"):
        neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)})


def test_deepcopy_copies_deques_slices_and_cycles_as_cpython_does(tmp_path):
    """copy.deepcopy returned a deque (and a slice) as it was, shared; a list holding itself
    copies to a list holding its copy."""
    body = (
        "x = [1, 2]\nx.append(x)\ny = copy.deepcopy(x)\n"
        "d = collections.deque([1, [2]], 3)\ne = copy.deepcopy(d)\ne[1].append(3)\n"
        "s = slice([1], 2)\nt = copy.deepcopy(s)\nt.start.append(9)\n"
        "dd = collections.defaultdict(list)\ndd[1].append(2)\nee = copy.deepcopy(dd)\n"
        "ee[2].append(5)\nprint(y[2] is y, y is x, d, e, s, t, dict(dd), dict(ee))"
    )
    path = tmp_path / "k.py"
    path.write_text(_k(body))
    printed: list[str] = []
    neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)}, print_fn=printed.append)
    namespace: dict = {}
    exec(  # (the same body as CPython runs it)
        "import copy, collections\ndef k():\n"
        + "\n".join("    " + line for line in body.replace("print(", "return (").splitlines())
        + "\nr = k()",
        namespace,
    )
    want = " ".join(str(v) for v in namespace["r"])
    assert printed == [want]


@pytest.mark.parametrize(
    "body",
    [
        "x = 'a' * 1_500_000\ny = np.stack([x] * 100_000)",  # (a str: 6 MB an element)
        "x = 'a' * 1_500_000\ny = np.concatenate([[x] * 1000] * 100)",
        "x = b'a' * 1_500_000\ny = np.hstack([[x]] * 100_000)",
    ],
)
def test_joining_strings_sizes_them_at_their_width(tmp_path, body):
    """`np.stack([x] * 100_000)` of a 1.5M-character str (seed 20261206, example 717)
    reached 2.6 GiB under memory_bytes=256M: the joined arrays were sized at 8 bytes an
    element, the strings among them not looked at (and a list of them counted by np.size,
    which makes the array it counts). They are sized at the widest string's width now."""
    path = tmp_path / "k.py"
    path.write_text(
        "import nki\nimport numpy as np\n\n\n@nki.jit\ndef k(a):\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "    return a\n"
    )
    # (sized before NumPy makes it: not "the machine ran out of memory" after 2.6 GiB)
    with pytest.raises(neuronemu.NeuronEmuError, match=r"np\.\w+\(\) needs \d+") as info:
        neuronemu.compile_kernel(
            path, {"a": np.zeros((1, 1), np.float32)}, limits={"memory_bytes": 1 << 28}
        )
    assert info.value.span.line == 8


@pytest.mark.parametrize(
    "line, what",
    [
        ("x = bytes(10**12)", "bytes()"),
        ("x = (5).to_bytes(10**12, 'big')", "int.to_bytes()"),
        ("x = collections.Counter(a=10**12).elements()", "Counter.elements()"),
        ("x = np.arange(1000).repeat(10**9)", "ndarray.repeat()"),
        ("x = np.arange(3).repeat([10**12, 1, 1])", "ndarray.repeat()"),
    ],
)
def test_methods_allowed_for_cpython_conformance_are_sized_first(tmp_path, line, what):
    """bytes(), int.to_bytes, Counter.elements and ndarray.repeat came into the allow-list
    with the conformance programs that use them; what each makes is sized before it is."""
    path = tmp_path / "k.py"
    path.write_text(
        "import nki\nimport numpy as np\nimport collections\n\n\n@nki.jit\ndef k(a):\n"
        f"    {line}\n    return a\n"
    )
    with pytest.raises(neuronemu.NeuronEmuError, match="over the sequence_items budget") as info:
        neuronemu.compile_kernel(path, {"a": np.zeros((1, 1), np.float32)})
    assert str(info.value).split("error: ")[1].startswith(what)
    assert info.value.span.line == 8
