"""The thorough fuzz campaign of the trust boundary: generated kernels and mutants of every
kernel in `kernels/` (the generators of the property tests, `tests/_fuzz.py`), examples of
the features added since and of the attack families of issue 38 (helper modules that
escape, deep values, generators and finally, memory exhausters, command lines, planted
caches), plus the regression examples, each run with neuronemu's default caps but for two
named smaller ones (memory_bytes=256M, trace_seconds=8: `FUZZ_LIMITS` in tests/_fuzz.py) in
a forked child under the host-effect guard. Prints a table of outcomes (count, max time,
max peak RSS) and writes every failing example (its files, seed and index) to a directory.
Asserts nothing.

    python benches/fuzz.py --examples 100000 [--workers 2] [--seed N] [--out DIR]
    python benches/fuzz.py --seed N --only 4711          # example 4711 of seed N again
    python benches/fuzz.py --replay DIR/000123.json       # a written failure again

A long campaign can run in pieces: `--first N --examples M --results part.jsonl` runs
examples N..N+M-1 of the seed (regressions only with the first piece), and
`--table part1.jsonl part2.jsonl ...` prints the table of all pieces together (each example
of the seed counted once; pieces of different seeds are refused).

Outcomes: ran, located (a `path:line:col: error:`), usage (an `error:` where no file position
applies) are fine; unlocated, internal (a Python exception, i.e. "internal error"),
host-effect (a write, a process, a socket, code from a pickle, a host object printed),
timeout (over --time-limit, 30 s), over-memory (peak RSS over --rss-limit-gb, 1.5) and crash
(the example's process died) are failures.

Each of `--workers` worker processes (this script with `--worker`) imports and warms up
neuronemu once, then forks a child per example; the child's death is that example's
`crash`, and a worker that dies itself is replaced (and its example counted as a crash).
Example N of seed S is drawn from `random.Random(f"{S}:{N}")`, so it can be drawn again.
`--workers 0` runs the examples from this process (each still in a forked child).

The CI gate, `python benches/fuzz.py --gate` (the last step of `.ci/run`): every regression
example and drawn examples 0..299 of seed 37 on two workers; it exits 1 if any example
fails, printing each failing example and the commands that replay it. The failures listed
in `KNOWN_FAILURES` (neuronemu bugs found and not yet fixed) are printed, not counted; one
that no longer fails is counted, so that the list shrinks as they are fixed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GATE_SEED = 37
GATE_EXAMPLES = 300
F_LINK = " -> "  # a helper named `name -> target` is a link (tests/_fuzz.py LINK)
# (seed, index) -> the unfixed neuronemu bug it finds (remove the entry with the fix).
KNOWN_FAILURES: dict[tuple[int, int], str] = {}


def _load_fuzz():
    """tests/_fuzz.py by path (tests/ on sys.path would shadow the `isa` package)."""
    if "_fuzz" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_fuzz", ROOT / "tests" / "_fuzz.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["_fuzz"] = module
        spec.loader.exec_module(module)
    return sys.modules["_fuzz"]


def draw_example(F, seed: int, index: int):
    """Example `index` of the campaign: the regressions first, then drawn ones."""
    regressions = list(F.REGRESSIONS.values())
    if index < 0:
        return regressions[-index - 1]
    return F.any_example(F.RandomDraw(random.Random(f"{seed}:{index}")))


# -- the worker --------------------------------------------------------------------------------


def worker(seed: int, time_limit: float, rss_limit: int) -> None:
    """Read example indexes (one a line) from stdin; write one JSON result a line."""
    F = _load_fuzz()
    F.warm_up()
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the result channel
    print(json.dumps({"ready": os.getpid()}), file=out, flush=True)
    for line in sys.stdin:
        index = int(line)
        example = draw_example(F, seed, index)
        outcome = F.run_example(example, time_limit, rss_limit)
        result = {
            "index": index,
            "kind": example.kind,
            "label": example.label,
            "outcome": outcome.kind,
            "elapsed": outcome.elapsed,
            "peak_rss": outcome.peak_rss,
        }
        if outcome.failed:
            result.update(
                message=outcome.message, effects=outcome.effects, example=example.to_json()
            )
        print(json.dumps(result), file=out, flush=True)


class Worker:
    def __init__(self, args: argparse.Namespace, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--seed",
                str(args.seed),
                "--time-limit",
                str(args.time_limit),
                "--rss-limit-gb",
                str(args.rss_limit_gb),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        self.ready = False
        self.index: int | None = None
        self.started = 0.0

    def send(self, index: int) -> None:
        self.index = index
        self.started = time.monotonic()
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()


# -- the campaign ------------------------------------------------------------------------------


def campaign(args: argparse.Namespace) -> None:
    F = _load_fuzz()
    cache = tempfile.mkdtemp(prefix="neuronemu-fuzz-cache-")
    env = dict(os.environ, NEURONEMU_CACHE_DIR=cache)
    out_dir = _out_dir(args)
    regressions = args.no_regressions or args.first > 0 or args.only is not None
    indexes = [] if regressions else [-i - 1 for i in range(len(F.REGRESSIONS))]
    indexes += (
        [args.only]
        if args.only is not None
        else list(range(args.first, args.first + args.examples))
    )
    todo = list(reversed(indexes))
    print(
        f"fuzz campaign: seed {args.seed}, {len(indexes)} examples "
        f"({sum(i < 0 for i in indexes)} regression; "
        f"drawn from index {args.first}), "
        f"{args.workers} workers, time limit {args.time_limit:g} s, "
        f"RSS limit {args.rss_limit_gb:g} GiB; failures to {out_dir}/",
        flush=True,
    )
    if args.workers == 0:
        return in_process(F, args, indexes, out_dir, cache)
    sel = selectors.DefaultSelector()
    workers: list[Worker] = []

    def spawn() -> None:
        w = Worker(args, env)
        workers.append(w)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)

    for _ in range(max(1, args.workers)):
        spawn()
    results: list[dict] = []
    worker_deaths = 0
    start = time.monotonic()
    last_report = start

    log = open(args.results, "w") if args.results else None

    def record(result: dict) -> None:
        results.append(result)
        if log is not None:
            kept = {k: v for k, v in result.items() if k != "example"}
            log.write(json.dumps(dict(kept, seed=args.seed)) + "\n")
            log.flush()
        if result["outcome"] in F.FAILURES:
            write_failure(out_dir, args.seed, result)

    while todo or any(w.index is not None for w in workers):
        for w in workers:
            if w.ready and w.index is None and todo:
                w.send(todo.pop())
        for key, _ in sel.select(timeout=1.0):
            w = key.data
            line = w.proc.stdout.readline()
            if not line:  # the worker died
                sel.unregister(w.proc.stdout)
                workers.remove(w)
                w.kill()
                worker_deaths += 1
                if w.index is not None:
                    record(
                        {
                            "index": w.index,
                            "kind": "?",
                            "label": "",
                            "outcome": "crash",
                            "elapsed": time.monotonic() - w.started,
                            "peak_rss": 0,
                            "message": "the worker process died",
                            "example": draw_example(F, args.seed, w.index).to_json(),
                        }
                    )
                spawn()
                continue
            data = json.loads(line)
            if "ready" in data:
                w.ready = True
                continue
            w.index = None
            record(data)
        now = time.monotonic()
        for w in list(workers):  # a worker stuck past the child's own limit
            if w.index is not None and now - w.started > args.time_limit + 60:
                sel.unregister(w.proc.stdout)
                workers.remove(w)
                w.kill()
                worker_deaths += 1
                record(
                    {
                        "index": w.index,
                        "kind": "?",
                        "label": "",
                        "outcome": "timeout",
                        "elapsed": now - w.started,
                        "peak_rss": 0,
                        "message": "the worker did not answer; killed",
                        "example": draw_example(F, args.seed, w.index).to_json(),
                    }
                )
                spawn()
        if now - last_report > args.progress:
            last_report = now
            failures = sum(r["outcome"] in F.FAILURES for r in results)
            print(
                f"  {len(results)}/{len(indexes)} examples, {failures} failures, "
                f"{len(results) / (now - start):.1f} examples/s",
                file=sys.stderr,
                flush=True,
            )
    for w in workers:
        w.proc.stdin.close()
        w.kill()
    shutil.rmtree(cache, ignore_errors=True)
    elapsed = time.monotonic() - start
    report(F, results, elapsed, worker_deaths, out_dir, args)
    return results


def in_process(F, args: argparse.Namespace, indexes: list[int], out_dir: Path, cache: str):
    """`--workers 0`: the examples from this process, each in a forked child."""
    os.environ["NEURONEMU_CACHE_DIR"] = cache
    start = time.monotonic()
    results = []
    for index in indexes:
        example = draw_example(F, args.seed, index)
        outcome = F.run_example(example, args.time_limit, int(args.rss_limit_gb * 2**30))
        result = {
            "index": index,
            "kind": example.kind,
            "label": example.label,
            "outcome": outcome.kind,
            "elapsed": outcome.elapsed,
            "peak_rss": outcome.peak_rss,
        }
        if outcome.failed:
            result.update(
                message=outcome.message, effects=outcome.effects, example=example.to_json()
            )
            write_failure(out_dir, args.seed, result)
        results.append(result)
    shutil.rmtree(cache, ignore_errors=True)
    report(F, results, time.monotonic() - start, 0, out_dir, args)
    return results


def stem_of(result: dict) -> str:
    index = result["index"]
    return f"{'r' if index < 0 else ''}{abs(index):06d}-{result['outcome']}"


def gate(F, results: list[dict], out_dir: Path, args: argparse.Namespace) -> int:
    """The CI verdict: 1 if an example failed (other than a known failure) or a known
    failure passed; each failing example printed with the commands that replay it."""
    failed = [r for r in results if r["outcome"] in F.FAILURES]
    known = [r for r in failed if (args.seed, r["index"]) in KNOWN_FAILURES]
    new = [r for r in failed if (args.seed, r["index"]) not in KNOWN_FAILURES]
    passing = {r["index"] for r in results if r["outcome"] not in F.FAILURES}
    fixed = [i for s, i in KNOWN_FAILURES if s == args.seed and i in passing]
    for r in known:
        print(
            f"\nknown failure (not counted): example {r['index']} of seed {args.seed}, "
            f"{r['outcome']}: {KNOWN_FAILURES[(args.seed, r['index'])]}"
        )
    for index in fixed:
        print(
            f"\nexample {index} of seed {args.seed} no longer fails: remove it from "
            "KNOWN_FAILURES in benches/fuzz.py (and add the example to REGRESSIONS)"
        )
    for r in new:
        example = F.Example.from_json(r["example"])
        text = repr(example).splitlines()
        shown = "\n".join(
            text[:80] + ([f"... ({len(text) - 80} more lines)"] if len(text) > 80 else [])
        )
        which = (
            f"regression example {r['label']!r}"
            if r["index"] < 0
            else f"example {r['index']} of seed {args.seed}"
        )
        print(f"\n=== FAILED: {which} ({r['kind']}): {r['outcome']} ===")
        print("\n".join(((r.get("message") or "").strip().splitlines() or [""])[-25:]))
        for effect in r.get("effects", [])[:5]:
            print(f"host effect: {effect}")
        print(shown)
        print("replay it with:")
        print(f"  python benches/fuzz.py --replay {out_dir}/{stem_of(r)}.json")
        if r["index"] >= 0:
            print(f"  python benches/fuzz.py --seed {args.seed} --only {r['index']}")
    if new or fixed:
        print(
            f"\nfuzz gate: FAILED ({len(new)} failing examples, {len(fixed)} known failures "
            "that now pass)"
        )
        return 1
    print(f"\nfuzz gate: passed ({len(results)} examples, {len(known)} known failures)")
    return 0


def write_failure(out_dir: Path, seed: int, result: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem_of(result)
    (out_dir / f"{stem}.json").write_text(json.dumps(dict(result, seed=seed), indent=1))
    example = result.get("example")
    if example:
        folder = out_dir / stem
        folder.mkdir(exist_ok=True)
        files = {example["name"]: example["source"], **example.get("helpers", {})}
        links = [name for name in files if F_LINK in name]
        for name, text in files.items():
            if F_LINK in name:
                continue
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
        if links:  # (links and FIFOs are described, not made: they may point anywhere)
            (folder / "LINKS.txt").write_text("".join(f"{name}\n" for name in links))


def signature(result: dict) -> str:
    """A failure's kind and message with paths and numbers elided, to group alike ones."""
    if result["outcome"] == "host-effect":
        text = "; ".join(e.split("\n")[0] for e in result.get("effects", [])[:2])
    else:
        lines = [ln for ln in (result.get("message") or "").strip().splitlines() if ln.strip()]
        text = lines[-1] if result["outcome"] == "internal" and lines else lines[0] if lines else ""
    text = re.sub(r"(/[\w.-]+)+", "<path>", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "0x..", text)
    text = re.sub(r"(?<![\w.])\d+", "N", text)
    return f"{result['outcome']}: {text[:150]}"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def report(
    F,
    results: list[dict],
    elapsed: float,
    worker_deaths: int,
    out_dir: Path,
    args: argparse.Namespace,
) -> None:
    by_outcome: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_outcome[r["outcome"]].append(r)
    total = len(results)
    print(
        f"\n{total:,} examples in {elapsed:,.0f} s ({total / max(elapsed, 1e-9):.1f} "
        f"examples/s, {args.workers} workers), seed {args.seed}\n"
    )
    print("| outcome | examples | share | mean time (s) | max time (s) | max peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for outcome in F.OUTCOMES:
        rows = by_outcome.get(outcome, [])
        flag = "" if outcome in F.FINE else " (failure)"
        share = 100 * len(rows) / max(total, 1)
        mean_time = sum(r["elapsed"] for r in rows) / max(len(rows), 1)
        max_time = max((r["elapsed"] for r in rows), default=0.0)
        max_rss = max((r["peak_rss"] for r in rows), default=0)
        print(
            f"| {outcome}{flag} | {len(rows):,} | {share:.1f}% | {mean_time:.3f} | "
            f"{max_time:.2f} | {_mib(max_rss)} |"
        )
    kinds = ["generated", "token", "byte", "insert", *sorted(F.FEATURES)]
    kinds += [*sorted(F.FAMILIES), "regression"]
    kinds += sorted({r["kind"] for r in results} - set(kinds))
    print("\n| example kind | " + " | ".join(F.OUTCOMES) + " |")
    print("|---|" + "---:|" * len(F.OUTCOMES))
    for kind in kinds:
        counts = Counter(r["outcome"] for r in results if r["kind"] == kind)
        print(f"| {kind} | " + " | ".join(f"{counts.get(o, 0):,}" for o in F.OUTCOMES) + " |")
    failed = [r for r in results if r["outcome"] in F.FAILURES]
    print(f"\nfailures: {len(failed):,}; worker processes replaced: {worker_deaths}")
    if failed:
        print(
            f"failing examples written to {out_dir}/ (replay one with "
            f"`python benches/fuzz.py --replay {out_dir}/<name>.json`)"
        )
        shown = Counter(signature(r) for r in failed)
        print("most common failures (paths and numbers elided):")
        for what, n in shown.most_common(25):
            print(f"  {n:6,} x {what}")
    slowest = sorted(results, key=lambda r: -r["elapsed"])[:3]
    print(
        "slowest: "
        + ", ".join(
            f"#{r['index']} {r['kind']} {r['outcome']} {r['elapsed']:.1f} s" for r in slowest
        )
    )


def table(paths: list[str], args: argparse.Namespace) -> None:
    """The table of a campaign run in pieces, from their --results logs."""
    F = _load_fuzz()
    seen: dict[int, dict] = {}
    seeds = set()
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                result = json.loads(line)
                seeds.add(result.get("seed"))
                seen.setdefault(result["index"], result)
    if len(seeds) != 1 or None in seeds:
        sys.exit(f"error: the pieces must be of one seed (and logged with it); got {seeds}")
    args.seed = seeds.pop()
    drawn = sorted(i for i in seen if i >= 0)
    gaps = drawn[-1] + 1 - len(drawn) if drawn else 0
    print(
        f"{len(paths)} pieces; drawn examples {drawn[0] if drawn else '-'}.."
        f"{drawn[-1] if drawn else '-'} ({gaps} missing), "
        f"{len(seen) - len(drawn)} regression"
    )
    out_dir = Path(args.out or f"fuzz-failures/seed-{args.seed}")
    elapsed = sum(r["elapsed"] for r in seen.values()) / max(args.workers, 1)
    report(F, list(seen.values()), elapsed, 0, out_dir, args)


def replay(path: str, args: argparse.Namespace) -> None:
    F = _load_fuzz()
    data = json.loads(Path(path).read_text())
    example = F.Example.from_json(data["example"])
    os.environ.setdefault("NEURONEMU_CACHE_DIR", tempfile.mkdtemp(prefix="neuronemu-fuzz-cache-"))
    outcome = F.run_example(example, args.time_limit, int(args.rss_limit_gb * 2**30))
    print(repr(example))
    print(f"\noutcome: {outcome}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=None, help="default: 1000 (gate: 300)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--seed", type=int, default=None, help="default: a fresh random seed (printed)"
    )
    parser.add_argument(
        "--out", default=None, help="where failures go [default: fuzz-failures/seed-N]"
    )
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--rss-limit-gb", type=float, default=1.5)
    parser.add_argument("--only", type=int, default=None, help="run example N only")
    parser.add_argument(
        "--first", type=int, default=0, help="the first drawn example's index (a piece)"
    )
    parser.add_argument(
        "--table", nargs="+", default=None, metavar="FILE.jsonl", help="table of pieces"
    )
    parser.add_argument("--no-regressions", action="store_true")
    parser.add_argument(
        "--progress", type=float, default=30.0, help="seconds between progress lines"
    )
    parser.add_argument("--replay", default=None, metavar="FAILURE.json")
    parser.add_argument(
        "--results",
        default=None,
        metavar="FILE.jsonl",
        help="also write every example's outcome, one JSON a line",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help=f"the CI smoke: seed {GATE_SEED}, {GATE_EXAMPLES} examples; exit 1 on a failure",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.gate and args.seed is None:
        args.seed = GATE_SEED
    if args.examples is None:
        args.examples = GATE_EXAMPLES if args.gate else 1000
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    if args.worker:
        worker(args.seed, args.time_limit, int(args.rss_limit_gb * 2**30))
    elif args.replay:
        replay(args.replay, args)
    elif args.table:
        table(args.table, args)
    else:
        results = campaign(args)
        if args.gate:
            return gate(_load_fuzz(), results, _out_dir(args), args)
    return 0


def _out_dir(args: argparse.Namespace) -> Path:
    return Path(args.out or f"fuzz-failures/seed-{args.seed}")


if __name__ == "__main__":
    sys.exit(main())
