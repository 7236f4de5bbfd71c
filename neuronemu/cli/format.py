"""What `neuronemu run` and `neuronemu sweep` print for people: rich tables on stdout."""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import neuronemu

__all__ = ["console", "print_result"]


def console():
    from rich.console import Console

    # Piped output is not wrapped to 80 columns: tables stay one row per line.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def print_result(result: neuronemu.Result) -> None:
    from rich.markup import escape
    from rich.table import Table

    p = result.program
    out = console()
    grid = "" if p.grid == (1,) else f", grid {list(p.grid)}"
    dialect = f", NKI dialect {p.dialect}" if p.dialect else ""
    out.print(f"[bold]{p.kernel}[/bold] ({p.file}) on {p.arch.name}{grid}{dialect}")
    out.print(
        f"  {result.cycles:,} cycles, {result.time_ns / 1000:.3f} us, "
        f"bound by [bold]{result.bound_by}[/bold], MFU {100 * result.mfu:.1f}%"
    )
    out.print(f"  {result.critical_path.summary()}")
    out.print(f"  {result.fidelity.summary()}", markup=False)
    if p.cores > 1:
        out.print(
            "  cores: "
            + ", ".join(
                f"nc{c['core']} {c['time_ns'] / 1000:.3f} us ({c['instructions']:,} instructions)"
                for c in result.cores
            )
        )
    table = Table(box=None, padding=(0, 2))
    for col in ("engine", "instructions", "busy ns", "utilization"):
        table.add_column(col, justify="left" if col == "engine" else "right")
    for row in result.summary_rows():
        table.add_row(*row)
    out.print(table)
    top = result.stalls.lines()[:5]
    if top:
        lines = Table(
            box=None,
            padding=(0, 2),
            title="  top source lines by instruction time (waiting and working, by cause)",
            title_justify="left",
        )
        for col in ("line", "instrs", "total us", "causes", "source"):
            # (one row each: a long source line is cut, not wrapped)
            lines.add_column(
                col,
                justify="right" if col in ("instrs", "total us") else "left",
                no_wrap=True,
                overflow="ellipsis",
            )
        for entry in top:
            lines.add_row(
                escape(f"{os.path.basename(entry['file'])}:{entry['line']}"),
                f"{entry['instructions']:,}",
                f"{entry['total_ns'] / 1000:,.3f}",
                escape(_causes(entry)),
                escape(entry["source"] or ""),
            )
        out.print(lines)
    hbm = result.hbm_bytes
    out.print(
        f"  HBM read {hbm['read']:,} B, written {hbm['write']:,} B; peak SBUF "
        f"{p.sbuf_peak_bytes:,} B/partition, PSUM {p.psum_peak_bytes:,} B/partition"
    )
    for t in p.outputs:
        out.print(f"  output {t.name}: {t.dtype.name}{list(t.out_shape or t.shape)}")
    c = result.check
    if c is not None:
        verdict = "[green]passed[/green]" if c.passed else "[red]FAILED[/red]"
        out.print(
            f"  check {verdict}: max abs err {c.max_abs_err:.3g}, max rel err "
            f"{c.max_rel_err:.3g}, {c.mismatches} mismatches "
            f"(rtol {c.rtol:g}, atol {c.atol:g}); the worst element used "
            f"{_share(c.tolerance_used)} of its tolerance"
        )
        for name, o in c.outputs.items():
            nonfinite = "".join(
                f", {kind} got {n['got']} expected {n['expected']}"
                for kind, n in (("NaN", o.nan), ("inf", o.inf))
                if n["got"] or n["expected"]
            )
            out.print(
                f"    {name} ({o.dtype}): max {_ulps(o.max_ulp_err)}, "
                f"{o.mismatches} mismatches (rtol {o.rtol:g}, atol {o.atol:g})"
                f"{nonfinite}",
                markup=False,
            )
        if not c.precise:
            out.print("  (--no-precise: low-precision tensors were held in fp32)")


def _causes(row: dict, shown: int = 3) -> str:
    """A line's largest causes: `52% dependency, 30% dma fixed latency, 18% dma transfer`."""
    total = row["total_ns"]
    parts = list(row["by_cause"].items())[:shown]
    return ", ".join(f"{100 * ns / total:.0f}% {cause}" for cause, ns in parts) if total else ""


def _share(x: float) -> str:
    """A fraction of a tolerance, readably: 37%, 25x, or a non-finite error."""
    if not math.isfinite(x):
        return "all (a non-finite error)"
    if 0 < x < 0.01:
        return "<1%"
    return f"{100 * x:.0f}%" if x < 10 else f"{x:,.0f}x"


def _ulps(x: float) -> str:
    """Units in the last place, readably: 0.5 ulp, 1,680 ulp, 2.2e+12 ulp (a wrong value)."""
    if not math.isfinite(x):
        return "inf ulp"
    if x < 10:
        return f"{x:.2g} ulp"
    return f"{x:,.0f} ulp" if x < 1e7 else f"{x:.2g} ulp (not a rounding error)"


def _cause(path: dict) -> str:
    """The critical path's largest causes, briefly: `41% tensor :55, 30% dma queueing :50`."""
    shown = []
    for cause in path.get("causes", [])[:2]:
        lines = cause.get("lines") or []
        parts = lines[0]["line"].split(":") if lines else []  # (`k.py:55:9`: `:55`)
        where = f" :{parts[-2]}" if len(parts) >= 3 else ""
        shown.append(f"{100 * cause['share']:.0f}% {cause['cause']}{where}")
    return ", ".join(shown)


def print_sweep(results: list[dict], params: list[str], top: int, best_command: str) -> None:
    """The ranked table of a sweep (the `top` fastest, then every failed configuration with
    its error), and the command that runs the best one."""
    from rich.markup import escape
    from rich.table import Table

    ok = [r for r in results if r["status"] == "ok"]
    failed = [r for r in results if r["status"] != "ok"]
    out = console()
    table = Table(box=None, padding=(0, 2))
    for col in ("#", *params, "time us", "vs best", "bound by", "MFU", "SBUF B/p", "PSUM B/p"):
        table.add_column(col, justify="left" if col in params else "right")
    table.add_column("critical path (largest causes, line)")
    best = ok[0]["time_ns"] if ok else 0.0
    for rank, r in enumerate(ok[: top or None], 1):
        table.add_row(
            str(rank),
            *(escape(repr(r["config"][p])) for p in params),
            f"{r['time_ns'] / 1000:,.2f}",
            f"{r['time_ns'] / best:.2f}x" if best else "",
            r["bound_by"],
            f"{100 * r['mfu']:.1f}%",
            f"{r['sbuf_peak_bytes_per_partition']:,}",
            f"{r['psum_peak_bytes_per_partition']:,}",
            escape(_cause(r["critical_path"])),
        )
    out.print(table)
    if top and len(ok) > top:
        out.print(f"  ({len(ok) - top} slower configurations not shown; --top 0 shows all)")
    by_error: dict[str, list[dict]] = {}  # one message for the configurations it stopped
    for r in failed:
        err = r["error"]
        where = f"{err['path']}:{err['line']}:{err['col']}: " if err.get("line") else ""
        by_error.setdefault(where + err["message"], []).append(r["config"])
    for message, configs in by_error.items():
        out.print(f"  [red]failed[/red] ({len(configs)}): {escape(message)}")
        for config in configs:
            out.print(f"    {escape(_show(config))}")
    if ok:
        out.print(f"best: {escape(_show(ok[0]['config']))}, {ok[0]['time_ns'] / 1000:,.2f} us")
        out.print(f"  {escape(best_command)}", soft_wrap=True)
    out.print(f"{len(ok)} ran, {len(failed)} failed")


def _show(config: dict) -> str:
    return " ".join(f"{k}={v!r}" for k, v in config.items())
