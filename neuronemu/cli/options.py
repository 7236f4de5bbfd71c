"""The options and error handling `neuronemu`'s commands share."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sys
import traceback
from typing import IO, Any, Callable, Iterator

import click

import neuronemu
from neuronemu.errors import shown
from neuronemu.host.files import output_refusal
from neuronemu.report import jsonout
from neuronemu.sweeps import MAX_WORKERS
from neuronemu_isa import TARGETS

__all__ = [
    "MAX_WORKERS",
    "Count",
    "check_tolerance",
    "handle_errors",
    "input_options",
    "output_file",
    "parse_grid",
    "parse_limits",
    "path_option",
    "results_file",
    "writable_file",
]


# The most digits a command-line count is read with (Python reads no int of over 4,300
# digits; a launch grid, a seed or a budget is far shorter).
COUNT_DIGITS = 19
# The most a count option may be (2**63 - 1: what a budget or a seed holds, and the most
# items a Python sequence may have); -j takes at most MAX_WORKERS processes.
MAX_COUNT = 2**63 - 1


class Count(click.IntRange):
    """A whole number from `min` to `max` on the command line (click's IntRange, always with
    both bounds): one too long for Python to read is out of the range too, and so said."""

    def __init__(self, min: int, max: int = MAX_COUNT) -> None:
        super().__init__(min=min, max=max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, str):
            digits = value.strip().lstrip("+-").lstrip("0")
            if digits.isdigit() and len(digits) > COUNT_DIGITS:
                self.fail(
                    f"{shown(value.strip())} is not in the range {self.min}<=x<={self.max}.",
                    param,
                    ctx,
                )
        return super().convert(value, param, ctx)


def parse_grid(ctx: click.Context, param: click.Parameter, value: str | None):
    if value is None:
        return None
    sizes = [g.strip() for g in value.split(",")]
    if not all(re.fullmatch("[0-9]+", g) for g in sizes) or not all(g.strip("0") for g in sizes):
        raise click.BadParameter(f"{shown(value)}: expected positive integers such as 2 or 2,4")
    if any(len(g.lstrip("0")) > COUNT_DIGITS for g in sizes):
        raise click.BadParameter(
            f"{shown(value)}: a size of more than {COUNT_DIGITS} digits (a launch has at most "
            "grid_instances program instances, 4096 unless --limit raises it)"
        )
    return tuple(int(g) for g in sizes)


def check_tolerance(ctx: click.Context, param: click.Parameter, value: float | None):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value!r}: a tolerance is a finite number >= 0")
    return value


def tolerance_option(name: str, help: str) -> Callable[[Any], Any]:
    """`--rtol` or `--atol`: a finite number >= 0, or None (the default tolerance)."""
    return click.option(f"--{name}", type=float, default=None, callback=check_tolerance, help=help)


def writable_file(ctx: click.Context, param: click.Parameter, value: str | None):
    """An output path whose folder exists, and which writing changes no state of the host:
    checked before the run, so no result is lost."""
    if value is not None:
        folder = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(folder):
            raise click.BadParameter(f"{value!r}: folder {folder!r} does not exist")
        if os.path.isdir(value):
            raise click.BadParameter(f"{value!r} is a folder, not a file")
        refusal = output_refusal(value)
        if refusal is not None:  # (as `output_file` says it, before the run)
            option = param.opts[0] if param.opts else param.name
            raise click.UsageError(f"{option} {value!r}: cannot write it ({refusal})", ctx)
    return value


@contextlib.contextmanager
def output_file(option: str, path: str) -> Iterator[IO[bytes]]:
    """An output file, open for writing at exactly `path`: one whose writing would change the
    host's state (/proc/self/comm, a disk), a failed write (a full disk, /dev/full, no
    permission) or a FIFO no one reads is a usage error naming the option and the file, not a
    traceback or a wait without end."""
    refusal = output_refusal(path)
    if refusal is not None:
        raise neuronemu.UsageError(f"{option} {path!r}: cannot write it ({refusal})")
    try:
        # (O_NONBLOCK: a FIFO without a reader fails at once with ENXIO instead of waiting)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as f:
            yield f
    except OSError as exc:
        raise neuronemu.UsageError(
            f"{option} {path!r}: cannot write it ({exc.strerror or exc})"
        ) from None


def results_file(ctx: click.Context, param: click.Parameter, value: str | None):
    """A results file that is read and appended to: a regular file, or none yet (a FIFO or a
    device would be read without end)."""
    value = writable_file(ctx, param, value)
    if value is not None and os.path.lexists(value) and not os.path.isfile(value):
        raise click.BadParameter(f"{value!r} is not a regular file")
    return value


def parse_limits(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]):
    limits = neuronemu.Limits()
    for text in values:
        try:
            limits = limits.parse(text)
        except neuronemu.UsageError as err:
            raise click.BadParameter(err.message) from None
    return limits


LIMITS_HELP = (
    "Raise (or lower) a budget of the run, e.g. trace_seconds=60, memory_bytes=8G, "
    "instructions=5000000. Repeatable. Budgets (defaults): "
    + ", ".join(f"{name} ({default})" for name, default, _ in neuronemu.Limits().describe())
)


def parse_passes(ctx: Any, param: Any, value: str | None) -> tuple[str, ...] | None:
    """`--passes a,b`: those passes; `none`: none; absent: every pass (None)."""
    if value is None:
        return None
    names = tuple(p.strip() for p in value.split(",") if p.strip())
    return () if names in (("none",), ()) else names


def path_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--path DIR` (repeatable): source trees helper modules also come from."""
    return click.option(
        "--path",
        "import_path",
        multiple=True,
        type=click.Path(exists=True, file_okay=False),
        metavar="DIR",
        help="A folder holding other packages' source trees that the kernel's imports "
        "also come from (e.g. nki-library/src/nkilib_src of a checkout), after the kernel's "
        "folder and package; then NEURONEMU_PATH. Repeatable, searched in order.",
    )(fn)


def input_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("kernel_file", type=click.Path(dir_okay=False)),
        click.option(
            "-k",
            "--kernel",
            "kernel",
            metavar="NAME",
            help="Kernel to run when the file has several @nki.jit functions.",
        ),
        click.option(
            "-i",
            "--input",
            "input_specs",
            multiple=True,
            metavar="NAME=SPEC",
            help="A kernel input: dtype[d0,d1,...] (seeded random), @file.npy, or for "
            "compile-time parameters a Python literal or a dtype (nl.bfloat16). Repeatable.",
        ),
        click.option(
            "--inputs",
            "inputs_npz",
            type=click.Path(dir_okay=False),
            metavar="FILE.npz",
            help="Many inputs at once, by array name.",
        ),
        click.option(
            "--target",
            type=click.Choice(TARGETS),
            default=None,
            help="NeuronCore generation to model [default: the file's "
            "NEURON_PLATFORM_TARGET_OVERRIDE, else trn2].",
        ),
        click.option(
            "--grid",
            callback=parse_grid,
            metavar="GX[,GY...]",
            help="SPMD launch grid (default: the file's kernel[...] launch, else 1); "
            "instances run in turn on the core.",
        ),
        click.option(
            "--seed",
            type=Count(min=0),
            default=0,
            show_default=True,
            help="Seed of the random input data.",
        ),
        click.option(
            "--max-instructions",
            type=Count(min=1),
            default=None,
            metavar="N",
            help="Stop a kernel that emits more than N instructions "
            "(the same as --limit instructions=N).",
        ),
        click.option(
            "--limit",
            "limits",
            multiple=True,
            metavar="NAME=VALUE",
            callback=parse_limits,
            help=LIMITS_HELP,
        ),
        click.option(
            "--passes",
            callback=parse_passes,
            metavar="LIST",
            help="The NKI compiler's documented transformations to apply, comma-separated "
            "[default: all: psum-zero-init,write-in-place]; 'none' runs the kernel "
            "instruction for instruction, to see what the compiler changes.",
        ),
        click.option("--debug", is_flag=True, help="Show Python tracebacks on errors."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = kwargs.get("debug", False)
        as_json = kwargs.get("as_json", False)
        try:
            return fn(*args, **kwargs)
        except neuronemu.NeuronEmuError as err:
            if debug:
                traceback.print_exc()
            if as_json:  # the error as JSON on stdout too, for whoever parses it
                click.echo(jsonout.dumps(jsonout.error_json(err)))
            click.echo(err.render(), err=True)
            sys.exit(err.exit_code)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            sys.exit(0)
        except Exception as exc:  # a neuronemu bug, never the user's fault
            if debug:
                raise
            if as_json:
                click.echo(jsonout.dumps(jsonout.error_json(exc)))
            click.echo(
                f"internal error: {type(exc).__name__}: {exc}\n"
                "this is a neuronemu bug; re-run with --debug for the traceback",
                err=True,
            )
            sys.exit(1)

    return wrapper
