"""``dali-migrate verify OLD.py NEW.py``: the command line of the differential harness."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .runner import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2

_EPILOG = """\b
Verdicts per pipeline: match, mismatch (where and how much), error (which side raised, or
crashed, hung, ran out of memory), skipped (why). Exit status: 0 when every verified pipeline
matched, 1 on any mismatch or error (or when nothing could be verified), 2 on a usage error.

\b
Floats are compared with abs(old-new) <= atol + rtol*abs(old); defaults per dtype:
float16 1e-3/1e-3, bfloat16 1e-2/1e-2, float32 1e-6/1e-6, float64 1e-12/1e-12. Integers,
booleans and decoded images are compared exactly. --atol 1e-4 sets every float dtype,
--atol float16=1e-2 one of them (repeatable).
"""


def load_kwargs(value: str | None) -> dict:
    """``--kwargs``: a JSON object, or a .json / .toml file holding one."""
    if not value:
        return {}
    path = Path(value)
    if path.suffix in (".json", ".toml") and path.is_file():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - Python 3.10
                import tomli as tomllib
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    else:
        data = json.loads(value)
    if not isinstance(data, dict):
        raise ValueError("--kwargs must be a JSON object (or a .json/.toml file holding one)")
    return data


def _render(report, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    styles = {"match": "green", "mismatch": "bold red", "error": "bold red", "skipped": "yellow"}
    where = f"on {report.device}"
    if report.lowered:
        where += ", lowered to CPU"
    console.print(
        f"[bold]verify[/] {escape(report.old)} -> {escape(report.new)} ({where})", soft_wrap=True
    )
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("program" if getattr(report, "mode", "") == "program" else "pipeline")
    table.add_column("verdict")
    table.add_column("iter", justify="right")
    table.add_column("random ops", justify="right")
    benched = any(p.bench for p in report.pipelines)
    if benched:
        table.add_column("new/old speed", justify="right")
    table.add_column("details", overflow="fold")
    for p in report.pipelines:
        speed = [f"{p.bench['ratio']:.2f}x" if p.bench else "-"] if benched else []
        table.add_row(
            escape(p.name),
            f"[{styles[p.verdict]}]{p.verdict}[/]",
            str(p.iterations),
            str(p.random_ops),
            *speed,
            escape(p.summary()),
        )
    console.print(table)
    for p in report.pipelines:
        for line in p.rng[1:4]:
            console.print(f"  {escape(p.name)}: {escape(line)}", soft_wrap=True)
        for line in p.notes:
            console.print(f"  [dim]{escape(p.name)}: {escape(line)}[/]", soft_wrap=True)
    for line in getattr(report, "not_run", [])[:10]:
        console.print(
            f"  [yellow]not run[/] (runs the program on import): {escape(line)}", soft_wrap=True
        )
    if report.lowered:
        console.print(
            f"  [dim]lowered to CPU: {len(report.lowering)} change(s) "
            f"({escape(', '.join(sorted(set(report.lowering)))[:300])})[/]",
            soft_wrap=True,
        )


def _random_outputs(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        return [int(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        raise click.BadParameter("a comma-separated list of output indices, e.g. 0,1") from None


@click.command(
    name="verify", epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.argument("old", type=click.Path())
@click.argument("new", type=click.Path())
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--program",
    "program",
    is_flag=True,
    help="Run OLD and NEW as whole programs (python OLD ARGS...) and compare exit "
    "status, standard output, files written and returned values; OLD/NEW may be "
    "project folders with --entry.",
)
@click.option(
    "--entry",
    metavar="[MODULE][:FUNCTION]",
    help="With --program: a function to call with ARGS (main, or pkg.train:main), or "
    "the module of a project folder to run (pkg.train, as python -m).",
)
@click.option(
    "--random-outputs",
    "random_outputs",
    metavar="0,1",
    help="With --program --entry FUNCTION: returned outputs computed by random "
    "operators; only their dtype and shape are compared.",
)
@click.option("--pipeline", "pipeline", metavar="NAME", help="Verify only this pipeline of OLD.")
@click.option(
    "--kwargs",
    "kwargs_text",
    metavar="JSON|FILE",
    help="Pipeline arguments: a JSON object or a .json/.toml file. Data arguments left out get "
    "synthetic data.",
)
@click.option(
    "--data",
    "data",
    type=click.Path(exists=True),
    help="Your data: the path every data argument (file_root=...) of the pipelines gets; for a "
    "folder, "
    "file arguments (path=, index_path=, annotations_file=) get its one .tfrecord/.idx/.json file.",
)
@click.option(
    "--iterations",
    type=click.IntRange(min=1),
    help="Batches to compare (default: one past the first epoch boundary).",
)
@click.option(
    "--max-iterations",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Cap on the default number of batches.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "gpu", "cpu"]),
    default="auto",
    show_default=True,
    help="cpu lowers both sides to CPU (mixed/gpu -> cpu, .gpu() dropped); auto picks gpu when "
    "one is visible.",
)
@click.option("--atol", multiple=True, metavar="[DTYPE=]TOL", help="Absolute tolerance for floats.")
@click.option("--rtol", multiple=True, metavar="[DTYPE=]TOL", help="Relative tolerance for floats.")
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Size of synthetic datasets.",
)
@click.option(
    "--image-format",
    type=click.Choice(["jpeg", "png"]),
    default="jpeg",
    show_default=True,
    help="Synthetic images for readers.file.",
)
@click.option(
    "--adapter",
    type=click.Path(exists=True, dir_okay=False),
    help="A Python file with build_old(old, **kw) and new_batches(new, **kw) (hand-written "
    "migrations).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds per side (more than 0).",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(min=0),
    default=DEFAULT_MEMORY_MB,
    show_default=True,
    help="Memory cap per side (0: none).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="Keep the copies, specs and results in this directory.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--bench",
    type=click.IntRange(min=0),
    default=0,
    metavar="BATCHES",
    help="Also time BATCHES batches of each side of every matching pipeline and report new/old "
    "throughput.",
)
@click.option("--debug", is_flag=True, help="Show the tracebacks of errors.")
def verify_command(
    old,
    new,
    args,
    program,
    entry,
    random_outputs,
    pipeline,
    kwargs_text,
    data,
    iterations,
    max_iterations,
    device,
    atol,
    rtol,
    samples,
    image_format,
    adapter,
    timeout,
    memory_mb,
    keep,
    fmt,
    bench,
    debug,
) -> None:
    """Prove that NEW computes what OLD computes: every output of every batch, sample by sample.

    Each pipeline of OLD (a @pipeline_def function, a Pipeline subclass or a factory returning
    a Pipeline) is run against the object of the same name in NEW, with the same arguments, each
    side in its own subprocess. Random operators are made comparable by recording the random
    states the new code draws and replaying them into the old pipeline; shuffling readers get the
    new code's seeds.

    With --program, OLD and NEW run whole, as their users run them
    (`dali-migrate verify --program legacy/train.py train.py -- --epochs 1 /data`): every
    pipeline of each in one process, compared by exit status, output and files written.
    """
    from .verify import VerifyDependencyError, check_dependencies

    fail = _usage_error
    if args and not program:
        fail(
            f"unexpected extra argument(s) {' '.join(args)!r} (program arguments go with --program)"
        )
    if not program and (entry or random_outputs):
        fail("--entry and --random-outputs go with --program")
    common = {
        "device": device,
        "atol": list(atol) or None,
        "rtol": list(rtol) or None,
        "timeout": timeout,
        "memory_mb": memory_mb,
        "workdir": keep,
    }
    try:
        check_dependencies()
        if program:
            report = _run_program(old, new, list(args), entry, random_outputs, common)
        else:
            report = _run_pipelines(
                old,
                new,
                kwargs_text,
                common,
                pipeline=pipeline,
                data=data,
                iterations=iterations,
                max_iterations=max_iterations,
                samples=samples,
                image_format=image_format,
                adapter=adapter,
                bench=bench,
            )
    except (ValueError, VerifyDependencyError, click.BadParameter) as e:
        fail(str(e.format_message() if isinstance(e, click.BadParameter) else e))
    _show(report, fmt, debug)
    sys.exit(report.exit_code)


def _show(report, fmt: str, debug: bool) -> None:
    """Print the report as JSON or as text (with the tracebacks of errors under ``--debug``)."""
    from rich.console import Console

    if fmt == "json":
        click.echo(report.to_json())
        return
    console = Console(highlight=False)
    _render(report, console)
    if debug:
        for p in report.pipelines:
            if p.traceback:
                console.print(f"[bold]{p.name}[/] ({p.side} side):", soft_wrap=True)
                console.out(p.traceback)


def _usage_error(message: str) -> None:
    line = message.splitlines()[0] if message else "error"
    click.echo(f"dali-migrate verify: error: {line}", err=True)
    sys.exit(EXIT_USAGE)


def _run_program(
    old: str, new: str, args: list[str], entry: str | None, random_outputs: str | None, common: dict
):
    from .program import verify_program

    return verify_program(
        old, new, args=args, entry=entry, random_outputs=_random_outputs(random_outputs), **common
    )


def _run_pipelines(old: str, new: str, kwargs_text: str | None, common: dict, **options):
    from .verify import verify

    try:
        kwargs = load_kwargs(kwargs_text)
    except (ValueError, OSError) as e:
        raise ValueError(f"--kwargs: {e}") from None
    return verify(old, new, kwargs=kwargs, **common, **options)


def main(argv: list[str] | None = None) -> None:
    verify_command.main(args=argv, prog_name="dali-migrate verify")
