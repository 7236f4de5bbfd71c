"""Public-corpus runner: run the NKI kernels of AWS's public repositories through neuronemu.

Given local checkouts of aws-neuron/nki-samples, aws-neuron/nki-library,
aws-neuron/aws-neuron-sdk and aws-neuron/upstreaming-to-vllm (vLLM's NKI kernels; nothing of
them is committed here), run every entry of the manifest in `corpus_refs.py` (a kernel file,
its `-k` name, inputs from the kernel's own tests/docstrings, an optional grid and target,
and a NumPy reference) with
`python -m neuronemu run ... --json`, one subprocess per entry (so a crash or hang of one
does not stop the rest), and print one line per entry and a total:

    matched      ran and agreed with its reference
    ran          ran; the entry has no reference
    MISMATCH     ran and disagreed with its reference
    rounding     disagreed, but `--explain-mismatch`'s unrounded shadow run agrees: the
                 difference is the rounding of the kernel's own low-precision steps
    error: ...   the first line of neuronemu's error
    not yet: ... neuronemu said the feature is not supported yet
    skipped: ... the checkout (or the pinned revision in it) is not available

Some entries are pinned to an older revision of a repository (kernels since removed from
its main branch, e.g. nki-samples' `reference/` and `neuron-team-kernels/`); the runner
exports that revision from the checkout's git history (`git archive`) into a cache
directory outside every repository (`--cache`, default ~/.cache/neuronemu-corpus).

    python benches/corpus.py --samples DIR --library DIR --sdk DIR --vllm DIR [--filter SUBSTR]
                             [--target trn2] [--json OUT] [--timeout S] [--jobs N] [--group]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus_refs  # noqa: E402 - the manifest and the references, beside this file

REFS_FILE = HERE / "corpus_refs.py"
NOT_YET = re.compile(
    r"not (supported|modelled|implemented) (by neuronemu )?yet|in neuronemu yet", re.IGNORECASE
)
REPO_NAMES = {
    "samples": "nki-samples",
    "library": "nki-library",
    "sdk": "aws-neuron-sdk",
    "vllm": "upstreaming-to-vllm",
}


@dataclass
class Outcome:
    """What one entry did."""

    name: str
    status: str  # matched | ran | MISMATCH | rounding | error | not yet | skipped
    detail: str = ""
    seconds: float = 0.0
    cycles: int | None = None
    time_ns: float | None = None


# ---- locating the kernel file ----------------------------------------------------------------


_EXPORT_LOCK = threading.Lock()


def revision_root(checkout: Path, rev: str, cache: Path) -> Path | None:
    """The tree of `rev` of the git checkout, exported once into the cache; None if absent."""
    target = cache / f"{checkout.name}@{rev[:12]}"
    with _EXPORT_LOCK:  # entries run in threads; export each revision once
        if target.is_dir():
            return target
        known = subprocess.run(
            ["git", "-C", str(checkout), "cat-file", "-e", f"{rev}^{{commit}}"],
            capture_output=True,
            check=False,
        )
        if known.returncode != 0:
            return None
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.Popen(
            ["git", "-C", str(checkout), "archive", rev], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(partial)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            return None
        partial.rename(target)  # whole or not at all
        return target


def kernel_path(entry, roots: dict[str, Path | None], cache: Path) -> tuple[Path | None, str]:
    """The kernel file of an entry, or None and why it is skipped."""
    root = roots.get(entry.repo)
    if root is None:
        return None, f"no --{entry.repo} checkout given"
    if not root.is_dir():
        return None, f"{root} is not a directory"
    if entry.rev:
        rev_root = revision_root(root, entry.rev, cache)
        if rev_root is None:
            return None, f"revision {entry.rev[:10]} not in {root} (needs its git history)"
        root = rev_root
    path = root / entry.path
    if not path.is_file():
        return None, f"{entry.path} not in the checkout"
    return path, ""


# ---- running one entry -----------------------------------------------------------------------


def command(entry, path: Path, target: str | None, npz: Path | None) -> list[str]:
    """The `neuronemu run` command line of an entry."""
    cmd = [sys.executable, "-m", "neuronemu", "run", str(path), "--json"]
    if entry.kernel:
        cmd += ["-k", entry.kernel]
    for name, spec in entry.inputs.items():
        cmd += ["-i", f"{name}={spec}"]
    if npz is not None:
        cmd += ["--inputs", str(npz)]
    if entry.grid:
        cmd += ["--grid", ",".join(str(g) for g in entry.grid)]
    if entry.target or target:
        cmd += ["--target", entry.target or target]
    if entry.ref:
        cmd += ["--ref", f"{REFS_FILE}:{entry.ref}"]
    if entry.rtol is not None:
        cmd += ["--rtol", repr(entry.rtol)]
    if entry.atol is not None:
        cmd += ["--atol", repr(entry.atol)]
    return cmd + list(entry.extra_args)


def write_arrays(entry, tmp: Path) -> Path | None:
    """Inputs whose values matter (indices, masks, positive data) go in an .npz."""
    if not entry.arrays:
        return None
    rng = np.random.default_rng(0)
    npz = tmp / f"{re.sub(r'[^A-Za-z0-9_]', '_', entry.name)}.npz"
    np.savez(npz, **entry.arrays(rng))
    return npz


# The environment of each entry's process (None: this one's): with entries run at once,
# each one's BLAS gets its share of the cores (`main`).
CHILD_ENV: dict[str, str] | None = None

# The variables that set a BLAS's threads (OpenBLAS, as NumPy's wheels ship, and others).
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def shared_cores(jobs: int) -> dict[str, str] | None:
    """The environment for `jobs` entries at once: each BLAS on its share of the cores. Two
    processes each spinning 2 BLAS threads on 2 cores ran nki-samples' pipelined_attention in
    276 s where it takes ~30 s alone (its 36,864 small matmuls)."""
    if jobs <= 1:
        return None
    share = str(max(1, (os.cpu_count() or 1) // jobs))
    return {**os.environ, **{name: share for name in BLAS_THREADS}}


def run_subprocess(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    """(exit code or None on timeout, stdout, stderr); a timed-out run is killed as a group."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=CHILD_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def first_error_line(stderr: str) -> str:
    """neuronemu's error head line, with every file path shortened to the file's name."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    head = next(
        (ln for ln in lines if re.search(r"(^|: )(internal )?error: ", ln)),
        lines[-1] if lines else "no output",
    )
    return re.sub(r"(?<![\w.])/(?:[^\s:/]+/)+([^\s:/]+\.py)", r"\1", head)


def classify(entry, rc: int | None, out: str, err: str, timeout: float) -> Outcome:
    if rc is None:
        return Outcome(entry.name, "error", f"timeout after {timeout:g} s")
    try:
        result = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        result = None
    if result is None or "error" in result:
        line = first_error_line(err)
        if NOT_YET.search(line):
            return Outcome(entry.name, "not yet", line)
        return Outcome(entry.name, "error", line)
    outcome = Outcome(entry.name, "ran", cycles=result.get("cycles"), time_ns=result.get("time_ns"))
    check = result.get("check")
    if check is None:
        outcome.detail = "no reference"
    elif check["passed"]:
        outcome.status = "matched"
        outcome.detail = f"max abs err {check['max_abs_err']:.3g}"
    else:
        outcome.status = "MISMATCH"
        first = check.get("first_mismatch") or {}
        outcome.detail = (
            f"{check['mismatches']} elements differ, max abs err "
            f"{check['max_abs_err']:.3g}, first {first.get('output')}"
            f"{first.get('index')}: got {first.get('got')!r}, "
            f"expected {first.get('expected')!r}"
        )
    return outcome


def _verdict(out: str) -> str | None:
    """`--explain-mismatch`'s verdict from a --json result: "rounding" or "algorithm"."""
    try:
        check = (json.loads(out) if out.strip() else {}).get("check") or {}
    except json.JSONDecodeError:
        return None
    return (check.get("explanation") or {}).get("verdict")


def run_entry(entry, roots, args, tmp: Path) -> Outcome:
    path, why = kernel_path(entry, roots, args.cache)
    if path is None:
        return Outcome(entry.name, "skipped", why)
    t0 = time.perf_counter()
    npz = write_arrays(entry, tmp)
    timeout = entry.timeout or args.timeout
    cmd = command(entry, path, args.target, npz)
    rc, out, err = run_subprocess(cmd, path.parent, timeout)
    outcome = classify(entry, rc, out, err, timeout)
    if outcome.status == "MISMATCH":  # rounding, or the kernel computing something else?
        rc, out, _ = run_subprocess([*cmd, "--explain-mismatch"], path.parent, timeout)
        verdict = _verdict(out)
        if verdict == "rounding":
            outcome.status = "rounding"
            outcome.detail += " (the unrounded shadow run matches: the kernel's own rounding)"
    outcome.seconds = time.perf_counter() - t0
    return outcome


# ---- reporting -------------------------------------------------------------------------------


def line(o: Outcome) -> str:
    plain = ("matched", "ran", "MISMATCH", "rounding", "skipped")
    status = o.status if o.status in plain else o.status + ":"
    if o.status in ("matched", "ran") and o.time_ns is not None:
        timing = f"{o.time_ns / 1000:9.1f} us sim  {o.seconds:5.1f} s wall  {o.detail}"
        return f"{status:9} {o.name:48} {timing}"
    return f"{status:9} {o.name:48} {o.detail}"


def error_groups(outcomes: list[Outcome]) -> list[str]:
    """Errors and not-yets grouped by their message (the location dropped), biggest first."""
    groups: dict[str, list[str]] = {}
    for o in outcomes:
        if o.status in ("error", "not yet"):
            message = re.sub(r"^(\S+:\d+:\d+: )?error: ", "", o.detail)
            groups.setdefault(f"{o.status}: {message}", []).append(o.name)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return [f"{len(names):3}  {msg}\n       e.g. {names[0]}" for msg, names in ranked]


def checkout_note(key: str, root: Path | None) -> str:
    if root is None:
        return f"note: no --{key} given; its entries are skipped"
    rev = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{REPO_NAMES[key]}: {root}" + (f" at {rev}" if rev else "")


def totals(outcomes: list[Outcome]) -> str:
    counts = {
        s: sum(o.status == s for o in outcomes)
        for s in ("matched", "ran", "MISMATCH", "rounding", "error", "not yet", "skipped")
    }
    return f"{len(outcomes)} entries: " + ", ".join(f"{n} {s}" for s, n in counts.items())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for key, name in REPO_NAMES.items():
        p.add_argument(f"--{key}", type=Path, metavar="DIR", help=f"checkout of aws-neuron/{name}")
    p.add_argument("--filter", default="", metavar="SUBSTR", help="only entries whose name has it")
    p.add_argument(
        "--target",
        choices=("trn1", "trn2", "trn3"),
        help="target for entries that do not pin one (default: neuronemu's)",
    )
    p.add_argument("--json", type=Path, metavar="OUT", help="write the outcomes as JSON")
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="per-entry timeout in seconds [120]",
    )
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="entries run at once")
    p.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "neuronemu-corpus",
        help="where pinned revisions are exported",
    )
    p.add_argument("--list", action="store_true", help="list the entries and exit")
    p.add_argument("--group", action="store_true", help="also print the errors grouped by message")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    entries = [e for e in corpus_refs.ENTRIES if args.filter in e.name]
    if args.list:
        for e in entries:
            where = f"{e.repo}:{e.path}{'@' + e.rev[:10] if e.rev else ''}"
            print(f"{e.name:48} {where} -k {e.kernel}" + (f"  ({e.note})" if e.note else ""))
        return 0
    roots = {key: getattr(args, key) for key in REPO_NAMES}
    for key, root in roots.items():
        print(checkout_note(key, root))
    global CHILD_ENV
    CHILD_ENV = shared_cores(args.jobs)
    with (
        tempfile.TemporaryDirectory(prefix="corpus-") as tmp,
        ThreadPoolExecutor(max(1, args.jobs)) as pool,
    ):
        futures = [pool.submit(run_entry, e, roots, args, Path(tmp)) for e in entries]
        outcomes = []
        for f in futures:  # in manifest order, as each finishes
            outcomes.append(f.result())
            print(line(outcomes[-1]), flush=True)
    print(totals(outcomes))
    if args.group:
        print("\n".join(error_groups(outcomes)))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
