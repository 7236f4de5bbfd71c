"""The AST cache cannot run code and cannot make a run wrong.

A kernel's parsed AST is cached on disk (`$NEURONEMU_CACHE_DIR`, else
`$XDG_CACHE_HOME/neuronemu`, else `~/.cache/neuronemu`). These tests do not depend on the
cache's file names or format: they run a kernel once, then replace or corrupt EVERY file the
cache holds (and plant files under the names a pickle cache keyed by content hash would
use), and run again. Each run must give the values of a run with the cache off, with no
exception, no code run from the cache (a planted pickle's `__reduce__` would create a
marker file) and nothing else touched on the host (the audit-hook guard is armed).

So that these tests cannot pass vacuously, each run must actually open a file in the cache
directory (an audit hook records the reads): an in-memory cache answering instead would
make them fail loudly, not pass.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import random
import sys
from pathlib import Path

import _host_guard as G
import numpy as np
import pytest
from _guard import Sandbox

import neuronemu

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
import nki
import nki.isa as nisa
import nki.language as nl

SCALE = {scale}
OFFSET = {offset}
ROWS = 128


@nki.jit
def scaled(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // ROWS):
        t = nl.ndarray((ROWS, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * ROWS:(i + 1) * ROWS, :])
        y = nl.ndarray((ROWS, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=SCALE, op1=nl.add,
                           operand1=OFFSET + 2 ** 3)
        nisa.dma_copy(dst=out[i * ROWS:(i + 1) * ROWS, :], src=y)
    {tail}
"""
SOURCE = KERNEL.format(scale=1.5, offset=-3.25, tail="return out")
# The same program with other constants: its cache entry is a valid AST, of the wrong file.
OTHER = KERNEL.format(scale=-2.0, offset=0.5, tail="return out")
# A kernel error: its message must name the file that was run.
BROKEN = KERNEL.format(scale=1.5, offset=-3.25, tail="return nosuch_name")
A = np.arange(256 * 64, dtype=np.float32).reshape(256, 64) / 7


class _Evil:
    """A pickle whose loading creates `marker` (what a planted cache entry would do)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


# -- which cache files a run reads (so that no test passes because the disk was skipped) ----

_READS: list[str] | None = None


def _record_reads(event: str, args: tuple) -> None:
    if (
        _READS is not None
        and event == "open"
        and args
        and isinstance(args[0], (str, bytes, os.PathLike))
    ):
        _READS.append(os.fsdecode(args[0]))


sys.addaudithook(_record_reads)


def forget_in_memory_caches() -> None:
    """Clear neuronemu's in-memory AST caches, so that the next run goes to the disk (the
    read check below says if this ever stops being enough)."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("neuronemu") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if "cache" in attr.lower() and isinstance(value, dict):
                value.clear()
            elif (
                name.startswith("neuronemu.frontend")
                and attr != "_parser"
                and isinstance(value, functools._lru_cache_wrapper)
            ):
                value.cache_clear()


def legacy_names(path: Path, text: str) -> list[str]:
    """`<sha256 key>.pickle` as the pickle cache named entries (grammar, format, path, text)."""
    grammar = (ROOT / "neuronemu" / "frontend" / "nki.lark").read_text(encoding="utf-8")
    digest = hashlib.sha256()
    for part in ("1", grammar, str(path), text):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return [f"{digest.hexdigest()}.pickle"]


def cache_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(path: Path, expect_cache: Path | None = None) -> dict[str, np.ndarray]:
    """Run the kernel from disk with the guard armed; check the cache was read."""
    global _READS
    forget_in_memory_caches()
    _READS = []
    try:
        with G.HostGuard() as guard:
            result = neuronemu.run(path, {"a": A}, print_fn=lambda _: None)
    finally:
        reads, _READS = _READS, None
    guard.assert_clean()
    if expect_cache is not None:
        root = os.path.join(os.path.abspath(expect_cache), "")
        assert any(os.path.abspath(r).startswith(root) for r in reads), (
            f"no file under {expect_cache} was read: the run did not consult the disk cache"
        )
    return result.outputs


@pytest.fixture
def expected(tmp_path, monkeypatch) -> dict[str, np.ndarray]:
    """The outputs with the cache off."""
    monkeypatch.setenv("NEURONEMU_CACHE_DIR", "")
    path = tmp_path / "nocache" / "k.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    outputs = run(path)
    np.testing.assert_allclose(outputs["out"], A * 1.5 + 4.75, rtol=1e-6)
    return outputs


def same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return got.keys() == want.keys() and all(
        got[k].dtype == want[k].dtype and got[k].tobytes() == want[k].tobytes() for k in want
    )


def use_cache(monkeypatch, tmp_path: Path, mode: str) -> Path:
    """Point the cache at tmp_path the way `mode` says; return the directory it lives in."""
    if mode == "env":
        monkeypatch.setenv("NEURONEMU_CACHE_DIR", str(tmp_path / "cache"))
        return tmp_path / "cache"
    monkeypatch.delenv("NEURONEMU_CACHE_DIR", raising=False)
    if mode == "xdg":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        return tmp_path / "xdg" / "neuronemu"
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home" / ".cache" / "neuronemu"


# -- a planted pickle never runs ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["env", "xdg", "home"])
def test_a_planted_pickle_never_runs(tmp_path, monkeypatch, expected, mode):
    cache = use_cache(monkeypatch, tmp_path, mode)
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    assert same(run(path), expected)
    files = cache_files(cache)
    assert files, f"nothing was cached under {cache}"
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(marker))
    targets = set(files)
    for name in legacy_names(path, SOURCE):
        targets |= {cache / name, cache / "ast" / name}
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(evil)
    outputs = run(path, expect_cache=cache)
    assert not marker.exists(), "a pickle planted in the cache ran"
    assert same(outputs, expected)


def test_a_planted_pickle_never_runs_from_the_command_line(tmp_path):
    box = Sandbox(tmp_path / "box", cache_mode="home")
    box.write("k.py", SOURCE)
    box.write("r.py", "def reference(a):\n    return a * 1.5 + 4.75\n")
    args = ("run", "k.py", "-i", "a=float32[256,64]", "--ref", "r.py:reference")
    first = box.run(*args)
    first.assert_confined()
    assert first.returncode == 0, first.describe()
    # Numba's machine code for the scheduler lives beside the AST cache (numba/); it is
    # compiled code and pickles by Numba's design, which the README says not to restore from
    # an untrusted source: the guarantee is for neuronemu's own cache entries.
    files = {p: d for p, d in cache_files(box.cache_root).items() if "numba" not in p.parts}
    assert files, f"nothing was cached under {box.cache_root}"
    marker = box.root / "pwned"
    evil = pickle.dumps(_Evil(marker))
    targets = set(files)
    for name in legacy_names(Path("k.py"), SOURCE):
        targets |= {box.cache_root / name, box.cache_root / "ast" / name}
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(evil)
    again = box.run(*args)
    assert not marker.exists(), f"a pickle planted in the cache ran\n{again.describe()}"
    again.assert_confined()
    assert again.returncode == 0, again.describe()


# -- corrupted entries behave as a miss --------------------------------------------------------

CORRUPTIONS = [
    "flip",
    "flip",
    "flip",
    "truncate",
    "garbage",
    "empty",
    "append",
    "insert",
    "other-kernel",
    "evil",
    "doubled",
    "swap-halves",
    "zero-run",
]


def corrupt(data: bytes, kind: str, rng: random.Random, other: list[bytes], evil: bytes) -> bytes:
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if out:
                out[rng.randrange(len(out))] ^= rng.randint(1, 255)
        return bytes(out)
    if kind == "truncate":
        return data[: rng.randrange(max(len(data), 1))]
    if kind == "garbage":
        return rng.randbytes(rng.randint(1, 2 * len(data) + 1))
    if kind == "empty":
        return b""
    if kind == "append":
        return data + rng.randbytes(rng.randint(1, 64))
    if kind == "insert":
        at = rng.randint(0, len(data))
        return data[:at] + rng.randbytes(rng.randint(1, 16)) + data[at:]
    if kind == "other-kernel":
        return rng.choice(other)
    if kind == "evil":
        return evil
    if kind == "doubled":
        return data + data
    if kind == "swap-halves":
        half = len(data) // 2
        return data[half:] + data[:half]
    if kind == "zero-run":  # a run of zero bytes, as a torn write leaves
        at = rng.randrange(max(len(data), 1))
        n = rng.randint(1, 256)
        return data[:at] + bytes(min(n, len(data) - at)) + data[at + n :]
    raise AssertionError(kind)


def test_300_random_corruptions_all_behave_as_a_miss(tmp_path, monkeypatch, expected):
    seed = int(os.environ.get("NEURONEMU_FUZZ_SEED", "0"))
    rng = random.Random(seed)
    # The other kernel's cache entries (valid, for another file).
    other_cache = use_cache(monkeypatch, tmp_path / "other", "env")
    other_path = tmp_path / "other" / "k.py"
    other_path.parent.mkdir(exist_ok=True)
    other_path.write_text(OTHER)
    run(other_path)
    other = list(cache_files(other_cache).values())
    assert other
    cache = use_cache(monkeypatch, tmp_path, "env")
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    assert same(run(path), expected)
    originals = cache_files(cache)
    assert originals, "nothing was cached"
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(marker))
    failures: list[str] = []
    for i in range(300):
        for p in list(cache_files(cache)):  # back to the entries of the first run
            if p not in originals:
                p.unlink()
        for p, data in originals.items():
            p.write_bytes(data)
        kind = rng.choice(CORRUPTIONS)
        victims = list(originals) if rng.random() < 0.2 else [rng.choice(list(originals))]
        for victim in victims:
            victim.write_bytes(corrupt(originals[victim], kind, rng, other, evil))
        try:
            outputs = run(path, expect_cache=cache)
            if not same(outputs, expected):
                failures.append(f"#{i} {kind}: wrong outputs")
        except Exception as exc:  # noqa: BLE001 - a miss, never an exception
            first = (str(exc).splitlines() or [""])[0][:160]
            failures.append(f"#{i} {kind}: {type(exc).__name__}: {first}")
        if marker.exists():
            failures.append(f"#{i} {kind}: the planted pickle ran")
            marker.unlink()
    by_kind: dict[str, int] = {}
    for f in failures:
        by_kind[f.split()[1].rstrip(":")] = by_kind.get(f.split()[1].rstrip(":"), 0) + 1
    assert not failures, (
        f"{len(failures)} of 300 corrupted cache entries did not behave as a "
        f"miss (NEURONEMU_FUZZ_SEED={seed}); by corruption: {by_kind}\n" + "\n".join(failures[:25])
    )


# -- an entry belongs to one file ---------------------------------------------------------------


def test_an_entry_copied_from_another_kernel_is_not_used(tmp_path, monkeypatch, expected):
    other_cache = use_cache(monkeypatch, tmp_path / "other", "env")
    other_path = tmp_path / "other" / "k.py"
    other_path.parent.mkdir(exist_ok=True)
    other_path.write_text(OTHER)
    other_outputs = run(other_path)
    assert not same(other_outputs, expected)  # the two kernels differ
    other = cache_files(other_cache)
    cache = use_cache(monkeypatch, tmp_path, "env")
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    run(path)
    mine = cache_files(cache)
    # Each of this kernel's files in turn replaced by each of the other kernel's; then the
    # other kernel's files beside ours under their own names.
    for target in mine:
        for data in other.values():
            for p, original in mine.items():
                p.write_bytes(original)
            target.write_bytes(data)
            assert same(run(path, expect_cache=cache), expected), (
                f"{target.name} replaced by the other kernel's entry was used"
            )
    for p, data in other.items():
        dest = cache / p.relative_to(other_cache)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    assert same(run(path, expect_cache=cache), expected)


def test_an_entry_of_the_same_text_at_another_path_does_not_move_errors(tmp_path, monkeypatch):
    """The same text in two files: errors name the file that was run, not the one whose
    entry was copied."""
    from neuronemu.errors import NeuronEmuError

    cache = use_cache(monkeypatch, tmp_path, "env")
    mine = tmp_path / "mine" / "k.py"
    theirs = tmp_path / "theirs" / "k.py"
    for p in (mine, theirs):
        p.parent.mkdir()
        p.write_text(BROKEN)

    def error_of(path: Path) -> str:
        forget_in_memory_caches()
        with pytest.raises(NeuronEmuError) as info:
            neuronemu.run(path, {"a": A}, print_fn=lambda _: None)
        return info.value.render()

    assert str(mine) in error_of(mine)
    mine_files = cache_files(cache)
    for p in mine_files:
        p.unlink()
    assert str(theirs) in error_of(theirs)
    theirs_files = cache_files(cache)
    for target in mine_files:  # their entries under my names
        for data in theirs_files.values():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            message = error_of(mine)
            assert str(mine) in message and str(theirs) not in message, message
