"""Port every `neuronxcc.nki` kernel of the public corpus with `neuronemu migrate` and print a
table: kernel, rewrites and marked places, whether the values are equal, time old and new.

The corpus is the manifest of `corpus_refs.py` (see corpus.py). The repositories are git
checkouts or bare clones (nothing of them is committed here): each entry's revision (its
pinned one, else the checkout's HEAD) is exported into the cache folder, and the port is
written beside the original there (`<name>_migrated.py`, so that its helper modules resolve).
One subprocess per entry runs

    python -m neuronemu migrate FILE -o NEW -k NAME -i ... [--inputs F.npz] --check

on the entry's inputs. A row's verdict: `equal` (bit for bit in every output), `differ`,
`port does not run` (typically what the marked places hold), or the old kernel's own error.

    python benches/migrate_corpus.py --samples DIR --library DIR --sdk DIR [--filter S]
                                     [--cache DIR] [--timeout S] [-j N] [--markdown]
                                     [--compile-all]

`--compile-all` instead ports every .py file of those trees (every revision the manifest
names) in this process, without running anything, and checks that each port is Python.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402 - the corpus runner beside this file (revision export, arrays)
import corpus_refs  # noqa: E402 - the manifest

OLDER = re.compile(r"^\s*(from\s+neuronxcc(\.nki)?\s+import|import\s+neuronxcc\.nki)", re.M)


@dataclass
class Row:
    name: str
    rewrites: str = ""
    verdict: str = ""
    old_us: str = ""
    new_us: str = ""


def head(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip()


def locate(entry, roots: dict[str, Path | None], cache: Path) -> Path | None:
    root = roots.get(entry.repo)
    if root is None or not root.is_dir():
        return None
    tree = corpus.revision_root(root, entry.rev or head(root), cache)
    path = None if tree is None else tree / entry.path
    return path if path is not None and path.is_file() else None


def run(entry, path: Path, tmp: Path, timeout: float) -> Row:
    slug = re.sub(r"[^A-Za-z0-9]", "_", entry.name.rsplit("/", 1)[-1])
    new = path.with_name(f"{path.stem}_migrated_{slug}.py")  # (entries may share a file)
    cmd = [sys.executable, "-m", "neuronemu", "migrate", str(path), "-o", str(new), "--check"]
    if entry.kernel:
        cmd += ["-k", entry.kernel]
    for name, spec in entry.inputs.items():
        cmd += ["-i", f"{name}={spec}"]
    npz = corpus.write_arrays(entry, tmp)
    if npz is not None:
        cmd += ["--inputs", str(npz)]
    if entry.grid:
        cmd += ["--grid", ",".join(str(g) for g in entry.grid)]
    if entry.target:
        cmd += ["--target", entry.target]
    rc, out, err = corpus.run_subprocess(cmd, path.parent, timeout)
    row = Row(entry.name)
    counts = re.search(r"(\d+) rewrite\(s\), (\d+) place\(s\)", out)
    if counts:
        rewrites, marks = counts.groups()
        row.rewrites = f"{rewrites} rewrites" + (f", {marks} marked" if marks != "0" else "")
    times = re.search(r"^  time\s+([\d.]+) us\s+([\d.]+) us", out, re.M)
    if times:
        row.old_us, row.new_us = times.groups()
    if rc is None:
        row.verdict = f"timeout after {timeout:g} s"
    elif "does not run yet" in out:
        reason = re.search(r"does not run yet: (.*)", out)
        row.verdict = "port does not run: " + corpus.first_error_line(reason[1] if reason else "")
    elif rc == 0:
        row.verdict = "equal"
    elif re.search(r"differ, by up to ([\d.e+-]+|inf) ulp", out):
        worst = re.search(r"differ, by up to ([\d.e+-]+|inf) ulp", out)
        row.verdict = f"differ (up to {worst[1] if worst else '?'} ulp)"
    else:
        row.verdict = "old kernel: " + corpus.first_error_line(err)
    return row


def compile_all(roots: dict[str, Path | None], cache: Path) -> int:
    """Port every neuronxcc.nki file of the trees; count the ports that are not Python."""
    from neuronemu.errors import NeuronEmuError
    from neuronemu.migrate import migrate_file

    revisions = {(e.repo, e.rev) for e in corpus_refs.ENTRIES}
    files = ported = broken = 0
    for repo, rev in sorted(revisions, key=str):
        root = roots.get(repo)
        tree = None if root is None else corpus.revision_root(root, rev or head(root), cache)
        for path in sorted(tree.rglob("*.py")) if tree else []:
            if "_migrated" in path.name:
                continue
            files += 1
            try:
                text = migrate_file(path).text
            except NeuronEmuError:
                continue  # not an older-dialect kernel file
            ported += 1
            try:
                compile(text, str(path), "exec")
            except SyntaxError as exc:
                broken += 1
                print(f"{path}: the port is not Python: {exc}")
    print(f"{files} files, {ported} ported, {broken} ports that are not Python")
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for key in corpus.REPO_NAMES:
        parser.add_argument(f"--{key}", type=Path, default=None)
    parser.add_argument("--filter", default="")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "neuronemu-corpus")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown.")
    parser.add_argument("--compile-all", action="store_true", help="Port every file; run none.")
    args = parser.parse_args(argv)
    roots = {key: getattr(args, key) for key in corpus.REPO_NAMES}
    if args.compile_all:
        return compile_all(roots, args.cache)
    work = []
    for entry in corpus_refs.ENTRIES:
        if args.filter not in entry.name:
            continue
        path = locate(entry, roots, args.cache)
        if path is not None and OLDER.search(path.read_text(errors="replace")):
            work.append((entry, path))
    print(f"{len(work)} entries in the neuronxcc.nki dialect", flush=True)
    with tempfile.TemporaryDirectory(prefix="migrate-corpus-") as tmp:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(run, e, p, Path(tmp), args.timeout) for e, p in work]
            rows = []
            for f in futures:
                rows.append(f.result())
                r = rows[-1]
                if not args.markdown:
                    print(f"{r.name:48} {r.rewrites:22} {r.old_us:>10} {r.new_us:>10}  {r.verdict}")
    if args.markdown:
        print("| kernel | ported | values | time old / new (us) |")
        print("| --- | --- | --- | --- |")
        for r in rows:
            times = f"{r.old_us} / {r.new_us}" if r.old_us else "-"
            print(f"| {r.name} | {r.rewrites or '-'} | {r.verdict} | {times} |")
    equal = sum(r.verdict == "equal" for r in rows)
    print(f"{equal} of {len(rows)} ported with equal values", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
