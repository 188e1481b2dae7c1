"""The ``dali-migrate`` command line: the migration command (:func:`main`), and ``verify``.

``dali-migrate`` is a :class:`click.Group` whose default command is the migration: anything but
the name of a subcommand goes to :func:`main` (``dali-migrate --diff src/``,
``dali-migrate --explain DM200``); ``dali-migrate verify OLD NEW`` runs the differential harness.
"""

from __future__ import annotations

import os
import signal
import sys

from ._interrupt import guard_loading, loaded

if os.path.basename(sys.argv[0] if sys.argv else "") in ("dali-migrate", "dali-migrate.exe"):
    guard_loading()  # started as the console script: the heavy imports follow

import importlib.util
import json
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from . import __version__
from .engine import (
    ConfigError,
    FileResult,
    Mode,
    Options,
    Summary,
    describe,
    load_config,
    run,
)
from .registry import all_rules, get_rule, unknown_rules
from .report import diagnostic_markup, json_report, rule_explanation, sarif_report

EXIT_OK, EXIT_PENDING, EXIT_ERROR = 0, 1, 2
#: the reader of the output went away (``dali-migrate --diff src | head``): the status of a
#: program ended by SIGPIPE, as other command-line tools end
EXIT_BROKEN_PIPE = 128 + 13
EXIT_INTERRUPTED = 130
PROGRESS_MIN_FILES = 50

#: the subcommands, with the one-line help the migration's --help lists (the harness, which
#: holds ``verify``, is imported only when it runs)
SUBCOMMANDS = {
    "verify": "Prove that NEW computes what OLD computes "
    "(dali-migrate verify OLD.py NEW.py; verify --help).",
}


def _split(values) -> tuple[str, ...]:
    """Comma-separated option values, or a pyproject list or single string, as a tuple."""
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for v in values or ():
        if isinstance(v, str):
            out += [x.strip() for x in v.split(",") if x.strip()]
        else:
            out += list(v)
    return tuple(out)


def _explain(rule_id: str) -> None:
    rule = get_rule(rule_id)
    if rule is None:
        raise click.UsageError(f"unknown rule {rule_id!r}; `dali-migrate --list-rules` lists them")
    click.echo(rule_explanation(rule))


def _list_rules() -> None:
    for rule in all_rules():
        click.echo(f"{rule.id}  {rule.name:<16} {rule.summary}")


def _print_text(fr: FileResult, mode: str, err) -> None:
    if fr.status == "error":
        err.print(
            f"[red]error[/red]: {escape(fr.error or '')}",
            highlight=False,
            markup=True,
            soft_wrap=True,
        )
        return
    if fr.diff and mode in ("diff", "check"):
        click.echo(fr.diff, nl=False)
    for d in fr.diagnostics:
        err.print(diagnostic_markup(fr.path, d), highlight=False, markup=True, soft_wrap=True)


def _print_summary(summary: Summary, mode: str, err) -> None:
    verb = {"diff": "would change", "check": "would change", "write": "changed"}[mode]
    parts = [
        f"{summary.scanned} files scanned",
        f"{summary.parsed} parsed",
        f"{summary.changed} {verb}",
    ]
    if summary.errors:
        parts.append(f"[red]{summary.errors} errors[/red]")
    err.print(", ".join(parts), highlight=False)
    if summary.fixes_by_rule:
        err.print(
            "fixes: " + ", ".join(f"{r} x{n}" for r, n in sorted(summary.fixes_by_rule.items())),
            highlight=False,
        )
    if summary.diagnostics_by_severity:
        err.print(
            "diagnostics: "
            + ", ".join(f"{n} {s}" for s, n in sorted(summary.diagnostics_by_severity.items())),
            highlight=False,
        )
    if summary.todos:
        left = "left" if mode == "write" else "left after migrating"
        fails = " (--check fails until they are done)" if mode == "check" else ""
        markers = f"{summary.todos} TODO(dali-migrate) marker{'s' * (summary.todos != 1)}"
        files = f"{summary.todo_files} file{'s' * (summary.todo_files != 1)}"
        err.print(f"{markers} {left} in {files}{fails}", highlight=False)


@dataclass(frozen=True)
class Args:
    """What the migration command was given, as click parsed it."""

    paths: tuple[Path, ...]
    mode: Mode | None  # --diff/--write/--check (flag values)
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    unsafe: bool | None
    exclude: tuple[str, ...]
    jobs: int | None
    interactive: bool
    verify_first: bool
    verify_kwargs: str | None
    device: str
    decisions_file: Path | None
    fmt: str
    no_progress: bool
    explain: str | None
    list_rules: bool
    debug: bool

    @property
    def reviewing(self) -> bool:
        return self.interactive or self.decisions_file is not None


def _config() -> tuple[dict, int]:
    """``[tool.dali-migrate]`` of pyproject.toml, and its ``jobs``; usage errors when unusable."""
    try:
        config = load_config()
        return config, int(config.get("jobs", 0))
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    except (TypeError, ValueError):
        message = "pyproject.toml: [tool.dali-migrate] jobs must be an integer"
        raise click.UsageError(message) from None


def _check_combinations(args: Args) -> None:
    if args.verify_first and args.mode != "write":
        raise click.UsageError("--verify goes with --write: it decides what is written")
    if args.verify_kwargs and not args.verify_first:
        raise click.UsageError(
            "--kwargs goes with --write --verify: the pipelines' arguments to run them with"
        )
    if args.verify_first and not all(_importable(m) for m in ("numpy", "nvidia.dali")):
        raise click.UsageError(
            "--verify runs the pipelines and needs DALI and numpy: "
            "pip install 'dali-migrate[verify]' "
            "(or '.[verify]' from a checkout)"
        )
    if args.reviewing and args.mode in ("diff", "check"):
        raise click.UsageError(
            f"--{args.mode} cannot be combined with --interactive or --decisions, "
            "which write what is accepted"
        )
    if args.reviewing and args.fmt != "text":
        raise click.UsageError(
            f"--format {args.fmt} cannot be combined with --interactive or --decisions"
        )
    if args.reviewing and args.device == "cpu":
        raise click.UsageError("--device cpu cannot be combined with --interactive or --decisions")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a broken one
        return False


def build_options(args: Args) -> Options:
    """The engine's options from the command line and pyproject.toml (the command line wins)."""
    missing = [str(p) for p in args.paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise click.UsageError(f"path does not exist: {', '.join(missing)}")
    config, config_jobs = _config()
    select = _split(args.select) or _split(config.get("select"))
    ignore = _split(args.ignore) or _split(config.get("ignore"))
    bad = unknown_rules(select + ignore)
    if bad:
        raise click.UsageError(f"unknown rule id(s): {', '.join(bad)}; see --list-rules")
    _check_combinations(args)
    return Options(
        # a review writes what is accepted itself
        mode="diff" if args.reviewing else args.mode or "diff",
        select=select,
        ignore=ignore,
        unsafe=bool(args.unsafe if args.unsafe is not None else config.get("unsafe", False)),
        exclude=tuple(args.exclude) + _split(config.get("exclude")),
        jobs=args.jobs if args.jobs is not None else config_jobs,
        verify=args.verify_first,
        verify_kwargs=_verify_kwargs(args.verify_kwargs),
        device=args.device,
    )


def _verify_kwargs(value: str | None) -> str | None:
    """``--kwargs`` checked now (a usage error, before any file), kept as canonical JSON."""
    if not value:
        return None
    import json

    from .harness.cli import load_kwargs

    try:
        return json.dumps(load_kwargs(value), sort_keys=True)
    except (OSError, ValueError) as e:
        raise click.UsageError(f"--kwargs: {e}") from None


class _MigrationCommand(click.Command):
    """The migration command; its --help also lists the subcommands of ``dali-migrate``."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(SUBCOMMANDS.items()))
        super().format_epilog(ctx, formatter)


@click.command(cls=_MigrationCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--diff", "mode", flag_value="diff", help="Print a unified diff of the migration (default)."
)
@click.option(
    "--write", "mode", flag_value="write", help="Rewrite the files in place (atomically)."
)
@click.option(
    "--check",
    "mode",
    flag_value="check",
    help="Exit 1 if any file would change, or still holds a TODO(dali-migrate) marker (for CI).",
)
@click.option(
    "--select",
    multiple=True,
    help="Only these rules (ids or prefixes, comma-separated: DM1,DM200).",
)
@click.option(
    "--ignore", multiple=True, help="Skip these rules (ids or prefixes, comma-separated)."
)
@click.option("--unsafe", is_flag=True, default=None, help="Also apply fixes marked unsafe.")
@click.option(
    "--exclude", multiple=True, help="Glob of paths to skip (repeatable), e.g. 'tests/*'."
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=0),
    default=None,
    help="Worker processes (default: one per core).",
)
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="Review the fixes one by one and write what you accept (--write is implied).",
)
@click.option(
    "--verify",
    "verify_first",
    is_flag=True,
    help="With --write: run each migrated pipeline against the original first (needs DALI; "
    "`dali-migrate verify --help`) and write only what matches.",
)
@click.option(
    "--kwargs",
    "verify_kwargs",
    metavar="JSON|FILE",
    help="With --verify: arguments of the pipelines (a JSON object, or a .json/.toml file), as for "
    "`dali-migrate verify --kwargs`, e.g. '{\"data_dir\": \"data/\"}'.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "gpu", "cpu"]),
    default="auto",
    show_default=True,
    help="cpu: the migrated program runs on the CPU (mixed/gpu devices to cpu, .gpu() dropped, "
    "device_id to None), and --verify runs both sides there; auto and gpu keep the devices of "
    "the code.",
)
@click.option(
    "--decisions",
    "decisions_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Decisions file of --interactive (default .dali-migrate/decisions.json); without -i, "
    "apply the decisions it holds, asking nothing.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--no-progress", is_flag=True, help="Never show the progress bar.")
@click.option(
    "--explain", metavar="RULE", help="Print what a rule does, with a before/after, and exit."
)
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.version_option(__version__, "-V", "--version", prog_name="dali-migrate")
def main(**params: Any) -> None:
    """Migrate NVIDIA DALI pipeline-mode code (@pipeline_def, pipe.build()/run(), fn.*) to
    DALI dynamic mode (nvidia.dali.experimental.dynamic as ndd).

    PATHS are files or directories (searched recursively; hidden directories, virtual
    environments and __pycache__ are skipped). Files that never mention DALI are not parsed.

    With --interactive (-i), each fix is shown as a diff and applied or skipped as you answer
    (y, n, a, d, A, e, ?, q; ? at the prompt lists them); answers are read one per line when
    standard input is not a terminal. Decisions are kept in .dali-migrate/decisions.json.

    \b
    Exit codes: 0 nothing to do or all done, 1 --check found pending changes or TODO markers (or
                --write --verify held a pipeline back), 2 usage error or a file
                that could not be processed, 141 the reader of the output went
                away (| head), 130 interrupted.
    Settings can also live in pyproject.toml under [tool.dali-migrate]
    (select, ignore, unsafe, exclude, jobs).
    """
    args = Args(**params)
    try:
        sys.exit(_main(args))
    except click.UsageError:
        raise  # click shows it and exits with UsageError.exit_code: 2, EXIT_ERROR
    except KeyboardInterrupt:
        # a second Ctrl-C during the clean-up: no traceback
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        click.echo(
            "interrupted: files already written are complete; the others are untouched", err=True
        )
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except Exception as e:  # pragma: no cover - last resort
        if args.debug:
            traceback.print_exc()
        click.echo(f"dali-migrate: internal error: {describe(e)} (rerun with --debug)", err=True)
        sys.exit(EXIT_ERROR)


def _main(args: Args) -> int:
    if args.explain:
        _explain(args.explain)
        return EXIT_OK
    if args.list_rules:
        _list_rules()
        return EXIT_OK
    if not args.paths:
        raise click.UsageError("no PATH given (try `dali-migrate --diff .`)")
    options = build_options(args)
    if args.reviewing:
        from .review import review

        return review(
            args.paths, options, interactive=args.interactive, decisions_file=args.decisions_file
        )
    return _run(args.paths, options, args.fmt, args.no_progress)


def _quiet_stdout() -> None:
    """Send what is left of standard output nowhere, so that the interpreter's last flush
    does not report the broken pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests, embedding)
        pass


def _run(paths, options: Options, fmt: str, no_progress: bool) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True, highlight=False)
    summary = Summary()
    results: list[FileResult] = []
    show_progress = fmt == "text" and not no_progress and err.is_terminal

    progress = None
    task = None
    if show_progress:
        progress = Progress(
            TextColumn("migrating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )

    def on_progress(done: int, total: int) -> None:
        nonlocal task
        if progress is None or total < PROGRESS_MIN_FILES:
            return
        if task is None:
            progress.start()
            task = progress.add_task("files", total=total)
        progress.update(task, completed=done)

    files = run(paths, options, on_progress)
    try:
        for fr in files:
            summary.add(fr)
            if fmt != "text":
                results.append(fr)
            elif fr.status in ("changed", "unchanged", "error"):
                _print_text(fr, options.mode, err)
    finally:
        files.close()  # the worker processes end here, not whenever the generator is collected
        if progress is not None and task is not None:
            progress.stop()

    if fmt == "json":
        click.echo(json.dumps(json_report(results, summary, options.mode), indent=2))
    elif fmt == "sarif":
        click.echo(json.dumps(sarif_report(results), indent=2))
    else:
        _print_summary(summary, options.mode, err)

    if summary.errors:
        return EXIT_ERROR
    if options.mode == "check" and (summary.changed or summary.todos):
        return EXIT_PENDING  # not migrated yet, or a TODO marker still asks for a person
    if options.verify and summary.diagnostics_by_severity.get("error"):
        return EXIT_PENDING  # --write --verify held back a pipeline that does not verify
    return EXIT_OK


class MigrateGroup(click.Group):
    """``dali-migrate``: a group whose default command is the migration. Arguments that do not
    start with a subcommand's name are the migration command's, exactly as if it were the
    program (its usage line, help, errors and exit codes)."""

    def __init__(self, *args: Any, default: click.Command, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default = default

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "verify":
            from .harness.cli import verify_command

            return verify_command
        return None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in SUBCOMMANDS:
            return super().parse_args(ctx, args)
        ctx.meta["dali_migrate.default_args"] = list(args)
        return []

    def invoke(self, ctx: click.Context) -> Any:
        args = ctx.meta.pop("dali_migrate.default_args", None)
        if args is None:
            return super().invoke(ctx)
        with self.default.make_context(ctx.info_name, args) as sub:
            return self.default.invoke(sub)


cli = MigrateGroup(name="dali-migrate", default=main, help=main.help)


def entry() -> None:
    """The ``dali-migrate`` console script (and ``python -m dali_migrate``)."""
    loaded()  # from here on, main reports a Ctrl-C
    cli(prog_name="dali-migrate")
