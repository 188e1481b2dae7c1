"""The ``dali-migrate`` command line."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import click
from rich.markup import escape

from . import __version__
from .engine import ConfigError, FileResult, Options, Summary, load_config, run
from .registry import all_rules, get_rule, unknown_rules
from .report import diagnostic_markup, json_report, rule_explanation, sarif_report

EXIT_OK, EXIT_PENDING, EXIT_ERROR = 0, 1, 2
PROGRESS_MIN_FILES = 50


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
        err.print(f"[red]error[/red]: {escape(fr.error or '')}", highlight=False, markup=True, soft_wrap=True)
        return
    if fr.diff and mode in ("diff", "check"):
        click.echo(fr.diff, nl=False)
    for d in fr.diagnostics:
        err.print(diagnostic_markup(fr.path, d), highlight=False, markup=True, soft_wrap=True)


def _print_summary(summary: Summary, mode: str, err) -> None:
    verb = {"diff": "would change", "check": "would change", "write": "changed"}[mode]
    parts = [f"{summary.scanned} files scanned", f"{summary.parsed} parsed", f"{summary.changed} {verb}"]
    if summary.errors:
        parts.append(f"[red]{summary.errors} errors[/red]")
    err.print(", ".join(parts), highlight=False)
    if summary.fixes_by_rule:
        err.print("fixes: " + ", ".join(f"{r} x{n}" for r, n in sorted(summary.fixes_by_rule.items())), highlight=False)
    if summary.diagnostics_by_severity:
        err.print(
            "diagnostics: " + ", ".join(f"{n} {s}" for s, n in sorted(summary.diagnostics_by_severity.items())),
            highlight=False,
        )


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, epilog="See also: dali-migrate verify OLD.py NEW.py (proves a migration computes the same outputs; verify --help).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--diff", "mode", flag_value="diff", help="Print a unified diff of the migration (default).")
@click.option("--write", "mode", flag_value="write", help="Rewrite the files in place (atomically).")
@click.option("--check", "mode", flag_value="check", help="Exit 1 if any file would change (for CI).")
@click.option("--select", multiple=True, help="Only these rules (ids or prefixes, comma-separated: DM1,DM200).")
@click.option("--ignore", multiple=True, help="Skip these rules (ids or prefixes, comma-separated).")
@click.option("--unsafe", is_flag=True, default=None, help="Also apply fixes marked unsafe.")
@click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable), e.g. 'tests/*'.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Worker processes (default: one per core).")
@click.option("-i", "--interactive", is_flag=True, help="Review the fixes one by one and write what you accept.")
@click.option(
    "--verify",
    "verify_first",
    is_flag=True,
    help="With --write: run each migrated pipeline against the original first (needs DALI; "
    "`dali-migrate verify --help`) and write only what matches.",
)
@click.option(
    "--device",
    "verify_device",
    type=click.Choice(["auto", "gpu", "cpu"]),
    default="auto",
    show_default=True,
    help="Where --verify runs the pipelines (cpu lowers both sides).",
)
@click.option(
    "--decisions",
    "decisions_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Decisions file of --interactive (default .dali-migrate/decisions.json); without -i, apply "
    "the decisions it holds, asking nothing.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True, help="Output format."
)
@click.option("--no-progress", is_flag=True, help="Never show the progress bar.")
@click.option("--explain", metavar="RULE", help="Print what a rule does, with a before/after, and exit.")
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
@click.version_option(__version__, "-V", "--version", prog_name="dali-migrate")
def main(
    paths,
    mode,
    select,
    ignore,
    unsafe,
    exclude,
    jobs,
    interactive,
    verify_first,
    verify_device,
    decisions_file,
    fmt,
    no_progress,
    explain,
    list_rules,
    debug,
):
    """Migrate NVIDIA DALI pipeline-mode code (@pipeline_def, pipe.build()/run(), fn.*) to
    DALI dynamic mode (nvidia.dali.experimental.dynamic as ndd).

    PATHS are files or directories (searched recursively; hidden directories, virtual
    environments and __pycache__ are skipped). Files that never mention DALI are not parsed.

    With --interactive (-i), each fix is shown as a diff and applied or skipped as you answer
    (y, n, a, d, A, e, ?, q; ? at the prompt lists them); answers are read one per line when
    standard input is not a terminal. Decisions are kept in .dali-migrate/decisions.json.

    \b
    Exit codes: 0 nothing to do or all done, 1 --check found pending changes (or
                --write --verify held a pipeline back), 2 usage error or a file
                that could not be processed.
    Settings can also live in pyproject.toml under [tool.dali-migrate]
    (select, ignore, unsafe, exclude, jobs).
    """
    try:
        if explain:
            _explain(explain)
            return
        if list_rules:
            _list_rules()
            return
        if not paths:
            raise click.UsageError("no PATH given (try `dali-migrate --diff .`)")
        missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
        if missing:
            raise click.UsageError(f"path does not exist: {', '.join(missing)}")
        try:
            config = load_config()
            config_jobs = int(config.get("jobs", 0))
        except ConfigError as e:
            raise click.UsageError(str(e)) from None
        except (TypeError, ValueError):
            raise click.UsageError("pyproject.toml: [tool.dali-migrate] jobs must be an integer") from None
        select_t = _split(select) or _split(config.get("select"))
        ignore_t = _split(ignore) or _split(config.get("ignore"))
        bad = unknown_rules(select_t + ignore_t)
        if bad:
            raise click.UsageError(f"unknown rule id(s): {', '.join(bad)}; see --list-rules")
        if verify_first and mode != "write":
            raise click.UsageError("--verify goes with --write: it decides what is written")
        reviewing = interactive or decisions_file is not None
        if reviewing and mode:
            raise click.UsageError(f"--{mode} cannot be combined with --interactive or --decisions")
        if reviewing and fmt != "text":
            raise click.UsageError(f"--format {fmt} cannot be combined with --interactive or --decisions")
        options = Options(
            mode=mode or "diff",
            select=select_t,
            ignore=ignore_t,
            unsafe=bool(unsafe if unsafe is not None else config.get("unsafe", False)),
            exclude=tuple(exclude) + _split(config.get("exclude")),
            jobs=jobs if jobs is not None else config_jobs,
            verify=verify_first,
            verify_device=verify_device,
        )
        if reviewing:
            from .review import review

            sys.exit(review(paths, options, interactive=interactive, decisions_file=decisions_file))
        sys.exit(_run(paths, options, fmt, no_progress))
    except click.UsageError as e:
        e.exit_code = EXIT_ERROR
        raise
    except KeyboardInterrupt:
        click.echo("interrupted: files already written are complete; the others are untouched", err=True)
        sys.exit(130)
    except Exception as e:  # pragma: no cover - last resort
        if debug:
            traceback.print_exc()
        click.echo(f"dali-migrate: internal error: {type(e).__name__}: {e} (rerun with --debug)", err=True)
        sys.exit(EXIT_ERROR)


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
            TextColumn("migrating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True
        )

    def on_progress(done: int, total: int) -> None:
        nonlocal task
        if progress is None or total < PROGRESS_MIN_FILES:
            return
        if task is None:
            progress.start()
            task = progress.add_task("files", total=total)
        progress.update(task, completed=done)

    try:
        for fr in run(paths, options, on_progress):
            summary.add(fr)
            if fmt != "text":
                results.append(fr)
            elif fr.status in ("changed", "unchanged", "error"):
                _print_text(fr, options.mode, err)
    finally:
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
    if options.mode == "check" and summary.changed:
        return EXIT_PENDING
    if options.verify and summary.diagnostics_by_severity.get("error"):
        return EXIT_PENDING  # --write --verify held back a pipeline that does not verify
    return EXIT_OK


def entry() -> None:
    """The ``dali-migrate`` console script: ``dali-migrate verify ...`` runs the differential
    harness (``dali_migrate.harness.cli``), everything else is the migration command ``main``."""
    if sys.argv[1:2] == ["verify"]:
        from .harness.cli import main as verify_main

        verify_main(sys.argv[2:])
    else:
        main(prog_name="dali-migrate")
