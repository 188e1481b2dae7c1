"""Running the migration over files: discovery, the cheap prefilter, worker processes, per-file
isolation and atomic writes. The CLI is a thin view over :func:`run`; :func:`migrate_paths` is
its library form (``migrate_paths`` reads files; writing is the caller's choice)."""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .api import migrate_source
from .catalog import get_catalog
from .fixes import TODO_PREFIX, Diagnostic, Result, SourceParseError, one_line
from .project import ModuleInfo, plan
from .registry import all_rules
from .sourcefile import (
    WRITE_LOCK,
    SourceError,
    iter_python_files,
    mentions_dali,
    read_bytes,
    read_source,
    write_source,
)
from .wrap import DEFAULT_LINE_LENGTH

Mode = Literal["diff", "write", "check"]
#: below this many candidate files, worker processes cost more than they save
PARALLEL_THRESHOLD = 8


@dataclass(frozen=True)
class Options:
    mode: Mode = "diff"
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe: bool = False
    exclude: tuple[str, ...] = ()
    jobs: int = 0  # 0: one per core
    #: with mode "write": verify each migrated pipeline first (the harness, on ``device``);
    #: a pipeline that does not match is not written
    verify: bool = False
    #: with ``verify``: the pipelines' arguments, as canonical JSON (``--kwargs``)
    verify_kwargs: str | None = None
    #: "cpu": the migrated code is lowered to run on the CPU (and verified there); "auto" and
    #: "gpu" keep the devices of the code
    device: str = "auto"
    #: calls on lines the migration writes are wrapped at this length (0: never)
    line_length: int = DEFAULT_LINE_LENGTH


@dataclass
class FileResult:
    """The outcome for one file. ``status``: unchanged, changed (fixes pending or written),
    skipped (never mentions DALI) or error (``error`` says why, in one line). ``result`` holds
    the fixes, diagnostics and migrated code, ``diff`` a unified diff, ``written`` whether the
    file was rewritten. ``project`` is what the other modules of the run told this one's
    analysis: pass it to :func:`~dali_migrate.apply_fixes` to apply a subset of ``result.fixes``."""

    path: str
    status: Literal["unchanged", "changed", "skipped", "error"]
    result: Result | None = None
    error: str | None = None
    diff: str = ""
    written: bool = False
    project: ModuleInfo | None = None

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.result.diagnostics if self.result else []

    def to_dict(self) -> dict:
        d = {"path": self.path, "status": self.status, "written": self.written}
        if self.error:
            d["error"] = self.error
        if self.result is not None:
            d.update(self.result.to_dict())
        return d


@dataclass
class Summary:
    scanned: int = 0
    parsed: int = 0
    changed: int = 0
    written: int = 0
    errors: int = 0
    fixes_by_rule: Counter = field(default_factory=Counter)
    diagnostics_by_severity: Counter = field(default_factory=Counter)
    #: TODO(dali-migrate) markers the files hold once migrated (written or not), and in how many
    todos: int = 0
    todo_files: int = 0

    def add(self, fr: FileResult) -> None:
        self.scanned += 1
        if fr.status == "error":
            self.errors += 1
        if fr.result is not None:
            self.parsed += 1
            markers = sum(
                line.lstrip().startswith(TODO_PREFIX) for line in fr.result.code.splitlines()
            )
            self.todos += markers
            self.todo_files += markers > 0
            applied = set(fr.result.applied)
            for f in fr.result.fixes:
                if f.id in applied:
                    self.fixes_by_rule[f.rule] += 1
            for d in fr.result.diagnostics:
                self.diagnostics_by_severity[d.severity] += 1
        if fr.status == "changed":
            self.changed += 1
        if fr.written:
            self.written += 1

    def to_dict(self) -> dict:
        return {
            "files_scanned": self.scanned,
            "files_parsed": self.parsed,
            "files_changed": self.changed,
            "files_written": self.written,
            "errors": self.errors,
            "fixes_by_rule": dict(sorted(self.fixes_by_rule.items())),
            "diagnostics": dict(sorted(self.diagnostics_by_severity.items())),
            "todo_markers": self.todos,
            "files_with_todo_markers": self.todo_files,
        }


#: a line as Python (and patch) sees it: U+2028, U+2029, form feeds... do not end one
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff that ``patch`` and ``git apply`` take: lines end where Python's do, and a
    last line without a newline is marked as git marks it."""
    old_lines, new_lines = _SOURCE_LINE.findall(old), _SOURCE_LINE.findall(new)
    lines = difflib.unified_diff(old_lines, new_lines, fromfile=f"a/{path}", tofile=f"b/{path}")
    missing = "\n\\ No newline at end of file\n"
    return "".join(line if line.endswith(("\n", "\r")) else line + missing for line in lines)


def process_file(
    path: str,
    options: Options,
    project: ModuleInfo | None = None,
    known: tuple[str, Result] | None = None,
) -> FileResult:
    """Migrate one file; never raises for a bad file (the result says what went wrong).
    ``project``: what other modules of the run say about this one (it may then not mention DALI).
    ``known``: (text, result) of a migration of this file with the same ``project`` done earlier
    in the run, used when the file still holds that text."""
    try:
        sf = read_source(Path(path))
    except SourceError as e:
        return FileResult(path, "error", error=str(e))
    if project is None and not mentions_dali(sf.raw):
        return FileResult(path, "skipped")
    try:
        result = (
            known[1]
            if known is not None and known[0] == sf.text
            else _migrate(sf.text, path, options, project)
        )
        held_back = False
        if options.mode == "write" and options.verify and result.changed:
            result, held_back = _verified(path, sf.text, result, options)
        if options.device == "cpu" and not held_back:
            # (a pipeline --verify held back stays exactly as it was: not lowered either)
            result = on_cpu(path, result)
    except SourceParseError as e:
        return FileResult(path, "error", error=str(e))
    except RecursionError:
        return FileResult(path, "error", error=f"{path}: too deeply nested to analyse")
    except Exception as e:  # a bug in a rule must not stop the run over the other files
        return FileResult(path, "error", error=f"{path}: internal error: {describe(e)}")
    if not result.changed:
        return FileResult(path, "unchanged", result=result, project=project)
    fr = FileResult(
        path,
        "changed",
        result=result,
        diff=unified_diff(path, sf.text, result.code),
        project=project,
    )
    if options.mode == "write":
        try:
            write_source(sf, result.code)
            fr.written = True
        except SourceError as e:
            fr.status, fr.error = "error", str(e)
    return fr


def describe(e: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception, on one line and at most ``limit`` characters, even
    when its message cannot be made (a KeyError's message is the repr of its key, which can
    recurse past the limit or fail)."""
    try:
        message = str(e)
    except Exception:
        message = "(its message could not be made)"
    text = one_line(f"{type(e).__name__}: {message}" if message else type(e).__name__)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def on_cpu(path: str, result: Result) -> Result:
    """``--device cpu``: ``result`` with its code lowered to run on the CPU (the harness's
    lowering: ``mixed``/``gpu`` devices to ``cpu``, ``.gpu()`` dropped, ``device_id`` to None),
    and a note that says what was lowered. Needs neither DALI nor numpy."""
    from dataclasses import replace

    from .api import _guarded  # the lowering parses the code with libcst: same stack guard
    from .harness.lower import lower_to_cpu

    lowering = _guarded(result.code, path, lambda _tree: lower_to_cpu(result.code))
    if not lowering.changes:
        return result
    what = f"lowered to CPU (--device cpu): {lowering.summary()}"
    note = Diagnostic("device", what, 1, 0, "info")
    return replace(result, code=lowering.code, diagnostics=[*result.diagnostics, note])


def _verified(path: str, text: str, result: Result, options: Options) -> tuple[Result, bool]:
    """``--write --verify``: the result with only the fixes whose pipelines verify (or cannot
    be verified), and the verdicts as diagnostics; and whether a fix was held back. Needs DALI
    (the harness runs both sides)."""
    from dataclasses import replace

    from .harness.migration import verify_migration

    kwargs = json.loads(options.verify_kwargs) if options.verify_kwargs else None
    vm = verify_migration(
        path,
        text,
        result=result,
        device=options.device,
        kwargs=kwargs,
        line_length=options.line_length,
    )
    notes = list(vm.diagnostics)
    if vm.report is not None:
        for p in vm.report.pipelines:
            if p.verdict in ("match", "skipped"):
                what = (
                    "verified: outputs match"
                    if p.verdict == "match"
                    else f"not verified: {p.reason}"
                )
                notes.append(Diagnostic("verify", f"pipeline {p.name}: {what}", 1, 0, "info"))
    diagnostics = [*result.diagnostics, *notes]
    verified = replace(result, code=vm.code, applied=list(vm.applied), diagnostics=diagnostics)
    return verified, bool(vm.rejected)


def _migrate(text: str, path: str, options: Options, project: ModuleInfo | None) -> Result:
    return migrate_source(
        text,
        path=path,
        select=options.select or None,
        ignore=options.ignore or None,
        unsafe=options.unsafe,
        project=project,
        line_length=options.line_length,
    )


def _candidates(files: Sequence[Path]) -> Iterator[tuple[str, bool]]:
    """(path, worth parsing) for each file: a raw read and a substring test, nothing more."""
    for p in files:
        try:
            raw = read_bytes(p)  # never blocks on a FIFO
        except SourceError:
            yield str(p), True  # process_file reports it properly
            continue
        yield str(p), mentions_dali(raw)


def discover(paths: Sequence[str | os.PathLike[str]], exclude: Sequence[str] = ()) -> list[Path]:
    """Files under ``paths``; raises FileNotFoundError for a path that does not exist."""
    return list(iter_python_files(paths, exclude))


def run(
    paths: Sequence[str | os.PathLike[str]],
    options: Options,
    progress: Callable[[int, int], None] | None = None,
) -> Generator[FileResult, None, None]:
    """Process every Python file under ``paths``, in a stable order.

    Files that never mention DALI are skipped without being parsed. The others are migrated in
    worker processes when there are enough of them to pay for the pool (``options.jobs``).
    The files are found at once, so a missing path raises :class:`FileNotFoundError` here,
    before the first result is asked for.
    """
    return _process(discover(paths, options.exclude), options, progress, [Path(p) for p in paths])


def migrate_paths(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    unsafe: bool = False,
    exclude: Sequence[str] = (),
    jobs: int = 0,
    write: bool = False,
) -> Iterator[FileResult]:
    """Migrate every Python file under ``paths`` (files or directories), as the CLI does.

    Yields one :class:`~dali_migrate.engine.FileResult` per file found, in a stable order:
    ``status`` is ``"changed"``, ``"unchanged"``, ``"skipped"`` (never mentions DALI, not
    parsed) or ``"error"`` (``error`` says why in one line; a bad file never stops the others).
    ``result`` holds the file's :class:`Result` (fixes, diagnostics, migrated code) and ``diff``
    a unified diff. Files are migrated in ``jobs`` worker processes (0: one per core) when there
    are enough of them. Nothing is written unless ``write=True``: then each changed file is
    replaced atomically, keeping its encoding and newlines, and ``written`` says so.

    ``paths`` is one path or a list of them. Directories are searched as by the CLI (hidden
    directories, virtual environments and ``__pycache__`` skipped; ``exclude`` takes globs).
    Raises :class:`FileNotFoundError` for a path that does not exist, at the call, before any
    file is read. Never prints; the caller decides what to do with each result.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    options = Options(
        mode="write" if write else "diff",
        select=tuple(select or ()),
        ignore=tuple(ignore or ()),
        unsafe=unsafe,
        exclude=tuple(exclude),
        jobs=jobs,
    )
    return run(paths, options)


def _process(
    files: list[Path],
    options: Options,
    progress: Callable[[int, int], None] | None,
    roots: list[Path] | None = None,
) -> Generator[FileResult, None, None]:
    total = len(files)
    candidates = list(_candidates(files))
    dali = {path for path, wanted in candidates if wanted}
    jobs = options.jobs or os.cpu_count() or 1
    pool = worker_pool(jobs) if jobs > 1 and len(dali) >= PARALLEL_THRESHOLD else None
    try:
        yield from _process_with(candidates, dali, total, options, progress, roots, pool, jobs)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


#: files handed to a worker at a time (the cost of a hand-over is small next to a DALI file's)
MAX_CHUNK = 8
#: how often a worker process looks whether the process that started it is still there
WATCHDOG_INTERVAL_S = 0.2


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` worker processes that leave Ctrl-C to their parent and end when it ends. The
    rules and the catalog are loaded here first: workers forked from this process start with
    them instead of each importing them again (workers start at the first task)."""
    all_rules()
    get_catalog()
    return ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init)


def _worker_init() -> None:
    # the terminal sends SIGINT to the whole process group: the parent reports it, once;
    # a worker would print its own KeyboardInterrupt traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    watchdog = threading.Thread(
        target=_watch_parent, args=(parent,), name="dali-migrate-watchdog", daemon=True
    )
    watchdog.start()


def _watch_parent(parent: int) -> None:
    """End this worker when its parent is gone (killed by SIGKILL too, which runs no clean-up):
    orphaned workers went on writing files, then idled holding the terminal."""
    while os.getppid() == parent:
        time.sleep(WATCHDOG_INTERVAL_S)
    with WRITE_LOCK:  # a write under way is completed first; none starts after
        os._exit(1)


def _process_with(
    candidates, dali, total, options, progress, roots, pool, jobs
) -> Iterator[FileResult]:
    done = 0
    files = [Path(path) for path, _ in candidates]
    # pipelines defined in one module and run in another: settled before any file is migrated
    # (in the pool when there is one); a migration done there with the inputs the file ends up
    # with is not done again
    memo: dict[str, tuple[tuple, str, Result]] = {}

    def migrate_in_plan(items: list[tuple[str, str, ModuleInfo]]) -> None:
        inputs = [_project_inputs(info) for _, _, info in items]
        work = [(text, path, options, info) for text, path, info in items]
        outcomes = (
            pool.map(_plan_migration, work)
            if pool is not None and len(work) > 1
            else map(_plan_migration, work)
        )
        for (text, path, info), before, (reports, result) in zip(items, inputs, outcomes):
            info.use_reasons, info.migrated, info.first_made = reports
            if result is not None:
                memo[path] = (before, text, result)

    links = plan(files, roots or [], dali, migrate_in_plan)
    known = {
        path: (text, result)
        for path, (inputs, text, result) in memo.items()
        if path in links and inputs == _project_inputs(links[path])
    }
    todo = [path for path, _ in candidates if path in dali or path in links]
    for path, wanted in candidates:
        if not wanted and path not in links:
            done += 1
            if progress:
                progress(done, total)
            yield FileResult(path, "skipped")
    infos = [links.get(path) for path in todo]
    knowns = [known.get(path) for path in todo]
    if pool is not None and len(todo) > 1:
        # small chunks: a Ctrl-C waits for the chunks under way (workers finish what they started)
        chunk = min(MAX_CHUNK, max(1, len(todo) // (jobs * 4)))
        for fr in pool.map(
            process_file, todo, [options] * len(todo), infos, knowns, chunksize=chunk
        ):
            done += 1
            if progress:
                progress(done, total)
            yield fr
    else:
        for path, info, earlier in zip(todo, infos, knowns):
            fr = process_file(path, options, info, earlier)
            done += 1
            if progress:
                progress(done, total)
            yield fr


def _plan_migration(work: tuple[str, str, Options, ModuleInfo]) -> tuple[tuple, Result | None]:
    """One in-memory migration of the cross-module plan (in a worker process or not): what it
    reports through its ModuleInfo, and its result (None when it failed: the file's own run
    reports the error; here it takes no part)."""
    text, path, options, info = work
    try:
        result = _migrate(text, path, options, info)
    except Exception:
        info.migrated.clear()
        info.first_made = None
        result = None
    return (info.use_reasons, info.migrated, info.first_made), result


def _project_inputs(info: ModuleInfo) -> tuple:
    """What a migration reads of ``info`` (its other fields are what it reports)."""
    return (
        tuple(sorted(info.external_uses.items())),
        tuple(sorted(info.foreign.items())),
        tuple(sorted((k, tuple(v)) for k, v in info.use_reasons.items())),
        tuple(sorted(info.migrated)),
        tuple(sorted(info.capture)),
        info.given,
        info.names,
    )


class ConfigError(Exception):
    """pyproject.toml cannot be read; the message names the file."""


def load_config(start: Path | None = None) -> dict:
    """``[tool.dali-migrate]`` of the nearest pyproject.toml at or above ``start`` (cwd); its
    ``line-length`` defaults to the one of ``[tool.ruff]`` or ``[tool.black]`` there."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    here = (start or Path.cwd()).resolve()
    for d in [here, *here.parents]:
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            try:
                with open(candidate, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise ConfigError(f"{candidate}: cannot read [tool.dali-migrate]: {e}") from None
            tools = data.get("tool", {})
            config = dict(tools.get("dali-migrate", {}))
            for formatter in ("ruff", "black"):  # the project's own line length, if it has one
                if "line-length" not in config and "line-length" in tools.get(formatter, {}):
                    config["line-length"] = tools[formatter]["line-length"]
            return config
    return {}
