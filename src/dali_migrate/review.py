"""The interactive review (``dali-migrate --interactive``) and its replay (``--decisions FILE``).

The review walks the fixes file by file, in source order, and asks about each one. A fix comes
with the fixes it depends on that are still undecided, so accepting it never leaves the code
half-migrated; a fix that needs one the reviewer skipped is not offered. The import fix (DM100)
is never asked about: it is recomputed for whatever was accepted. Each file is written once its
fixes are decided, atomically, through :func:`dali_migrate.apply_fixes` (which re-parses), so an
interrupted review leaves every file either as it was or with exactly the accepted fixes.

Decisions are remembered per file (path relative to the working directory) and fix id in
``.dali-migrate/decisions.json``: a second review does not ask again about what was rejected,
and ``--decisions FILE`` without ``--interactive`` replays a file of decisions with no questions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule as Separator
from rich.syntax import Syntax

from .api import apply_fixes, migrate_source
from .engine import FileResult, Options, run, unified_diff
from .fixes import Fix, MigrateError, Result, SourceParseError, splice
from .project import ModuleInfo
from .registry import derived_rules, get_rule, is_derived_fix
from .report import diagnostic_markup, rule_explanation
from .review_decisions import DEFAULT_DECISIONS, Decision, Decisions, ReviewError, decisions_key
from .review_terminal import Answers, edit_text
from .sourcefile import SourceError, SourceFile, read_source, write_source

#: the answers, in the order the prompt lists them
KEYS = {
    "y": "apply this fix",
    "n": "skip this fix",
    "a": "apply this fix and the rest of this file",
    "d": "skip the rest of this file",
    "A": "apply this fix and everything left, in every file",
    "e": "edit the proposed result in $EDITOR, then apply it",
    "?": "explain the rule, with a before/after",
    "q": "quit: write what was accepted so far, nothing else",
}
PROMPT = f"Apply this fix? [{','.join(KEYS)}] "


# -- one file under review -------------------------------------------------------------------------


def _reviewable(result: Result, unsafe: bool) -> list[Fix]:
    """The fixes to ask about, in source order: not the derived ones (the import fix), and unsafe
    ones only when ``--unsafe`` was given (the review picks from what ``--write`` would apply)."""
    derived = {r.id for r in derived_rules()}
    fixes = [f for f in result.fixes if f.rule not in derived and (unsafe or f.safety == "safe")]
    return sorted(fixes, key=lambda f: (f.edits[0].start, f.edits[0].end))


@dataclass
class FileReview:
    """The decisions about one file. ``to_apply`` are ids of fixes of ``base``: the file's text
    as read, or as the reviewer last saved it from the editor (with the fixes accepted before
    that already in it)."""

    path: str
    key: str
    source: SourceFile
    base: str
    fixes: list[Fix]
    #: "name (id)" of the derived rules with a fix in this file (the imports, DM100)
    derived: list[str] = field(default_factory=list)
    #: what the other modules of the run told this one's analysis (cross-module pipelines)
    project: ModuleInfo | None = None
    to_apply: list[str] = field(default_factory=list)
    accepted: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)
    earlier: set[str] = field(default_factory=set)  # rejected in an earlier review, not asked
    blocked: set[str] = field(default_factory=set)  # needs a fix that was rejected: not offered
    left: set[str] = field(default_factory=set)  # replay: no decision to replay, left as it is

    @property
    def by_id(self) -> dict[str, Fix]:
        return {f.id: f for f in self.fixes}

    def decided(self, fix: Fix) -> bool:
        return any(
            fix.id in s
            for s in (self.accepted, self.rejected, self.earlier, self.blocked, self.left)
        )

    def next_undecided(self) -> Fix | None:
        return next((f for f in self.fixes if not self.decided(f)), None)

    def undecided(self) -> list[Fix]:
        return [f for f in self.fixes if not self.decided(f)]

    def unit(self, fix: Fix) -> list[Fix] | str:
        """``fix`` with the undecided fixes it needs, transitively, in source order; or why it
        cannot be applied."""
        by_id = self.by_id
        needed: dict[str, Fix] = {}
        todo = [fix]
        while todo:
            f = todo.pop()
            if f.id in needed or f.id in self.accepted:
                continue
            if f.id in self.rejected or f.id in self.earlier or f.id in self.blocked:
                return f"needs {f.id}, which was skipped"
            needed[f.id] = f
            for dep in f.depends_on:
                if is_derived_fix(dep):
                    continue
                if dep not in by_id:
                    return f"needs {dep}, which this file does not offer"
                todo.append(by_id[dep])
        return [f for f in self.fixes if f.id in needed]

    def dependents(self, unit: Sequence[Fix]) -> list[Fix]:
        ids = {f.id for f in unit}
        return [f for f in self.undecided() if f.id not in ids and ids & set(f.depends_on)]

    def accept(self, unit: Sequence[Fix]) -> None:
        for f in unit:
            self.accepted.add(f.id)
            self.to_apply.append(f.id)

    def reject(self, fix: Fix) -> None:
        self.rejected.add(fix.id)

    def rebase(self, text: str, result: Result, unit: Sequence[Fix], unsafe: bool) -> list[Fix]:
        """The reviewer edited the proposed result: it becomes the base, with what was accepted
        (and ``unit``) in it; the fixes still undecided are found again in it by id. Returns
        the undecided fixes that the edited text no longer has (left out, not decided)."""
        self.accepted.update(f.id for f in unit)
        before = [f for f in self.undecided() if f not in unit]
        self.base = text
        self.to_apply = []
        self.fixes = _reviewable(result, unsafe)
        now = {f.id for f in self.fixes}
        gone = [f for f in before if f.id not in now]
        self.left.update(f.id for f in gone)
        return gone

    def decisions(self) -> dict[str, Decision]:
        out: dict[str, Decision] = dict.fromkeys(self.accepted, "accepted")
        out.update(dict.fromkeys(self.rejected, "rejected"))
        return out


# -- the review ------------------------------------------------------------------------------------


@dataclass
class Tally:
    files: int = 0
    written: int = 0
    applied: int = 0
    skipped: int = 0
    earlier: int = 0
    blocked: int = 0
    undecided: int = 0
    errors: int = 0


class Review:
    """Runs the review over the results of :func:`dali_migrate.engine.run`.

    ``answers`` None replays ``decisions`` without asking: recorded acceptances are applied
    (with their dependencies, when those were accepted too), everything else is left as it is.
    """

    def __init__(
        self,
        options: Options,
        decisions: Decisions,
        answers: Answers | None,
        out: Console,
        err: Console,
    ) -> None:
        self.options = options
        self.decisions = decisions
        self.answers = answers
        self.out = out
        self.err = err
        self.tally = Tally()
        self.apply_everything = False
        self.quitting = False

    # -- driving --------------------------------------------------------------------------------

    def run(self, results: Iterable[FileResult]) -> Tally:
        for fr in results:
            if self.quitting:
                break
            if fr.status == "error":
                self._error(fr.error or f"{fr.path}: cannot be processed")
                continue
            if fr.result is None:
                continue
            for d in fr.result.diagnostics:
                self.out.print(diagnostic_markup(fr.path, d))
            state = self._open(fr)
            if state is not None and state.fixes:
                self._review(state)
                self._finish(state)
        return self.tally

    def _open(self, fr: FileResult) -> FileReview | None:
        """Read the file again (it is written from this read) and re-analyse it if it changed
        since the run analysed it."""
        assert fr.result is not None
        try:
            sf = read_source(Path(fr.path))
            state = FileReview(fr.path, decisions_key(fr.path), sf, sf.text, [], project=fr.project)
            result = fr.result if sf.text == fr.result.source else self._analyse(state, sf.text)
        except (SourceError, MigrateError) as e:
            self._error(str(e))
            return None
        state.fixes = _reviewable(result, self.options.unsafe)
        found = {f.rule for f in result.fixes}
        state.derived = [f"{r.name} ({r.id})" for r in derived_rules() if r.id in found]
        return state

    def _analyse(self, state: FileReview, code: str) -> Result:
        o = self.options
        return migrate_source(
            code,
            path=state.path,
            select=o.select or None,
            ignore=o.ignore or None,
            unsafe=o.unsafe,
            project=state.project,
        )

    def _review(self, state: FileReview) -> None:
        self.tally.files += 1
        state.earlier = {
            f.id for f in state.fixes if self.decisions.get(state.key, f.id) == "rejected"
        }
        if self.answers is not None:
            self._file_header(state)
        rest: Literal["ask", "accept", "reject"] = "ask"
        while not self.quitting and (fix := state.next_undecided()) is not None:
            remembered = self.decisions.get(state.key, fix.id)
            if remembered == "rejected":
                state.earlier.add(fix.id)
                continue
            unit = state.unit(fix)
            if isinstance(unit, str):
                state.blocked.add(fix.id)
                self.out.print(f"{escape(fix.id)} is not applied: {escape(unit)}")
                continue
            if self.answers is None:
                self._replay(state, fix, unit, remembered)
                continue
            if self.apply_everything or rest == "accept":
                state.accept(unit)
            elif rest == "reject":
                state.reject(fix)
            else:
                rest = self._ask(state, fix, unit, remembered)
        if self.answers is None:
            self._replay_line(state)

    def _replay(
        self, state: FileReview, fix: Fix, unit: list[Fix], remembered: Decision | None
    ) -> None:
        """Apply ``fix`` if it was accepted, and so was everything it needs; else leave it."""
        missing = [f.id for f in unit if self.decisions.get(state.key, f.id) != "accepted"]
        if remembered == "accepted" and not missing:
            state.accept(unit)
            return
        state.left.add(fix.id)
        if remembered == "accepted":
            self.out.print(
                f"{escape(fix.id)} is not applied: it needs {escape(', '.join(missing))}, not "
                "accepted"
            )

    def _ask(
        self, state: FileReview, fix: Fix, unit: list[Fix], remembered: Decision | None
    ) -> Literal["ask", "accept", "reject"]:
        """Show ``fix`` (with ``unit``, what it pulls in) and act on the answer; returns how to
        treat the rest of the file."""
        self._show(state, fix, unit, remembered)
        assert self.answers is not None
        while True:
            self.out.print(PROMPT, end="", markup=False)
            key = self.answers.read()
            self.out.print(
                key if key is not None else "(end of input: quitting)",
                markup=False,
                highlight=False,
            )
            if key is None or key == "q":
                self.quitting = True
                return "ask"
            if key in ("y", "a", "A"):
                state.accept(unit)
                self.apply_everything = key == "A"
                return "accept" if key == "a" else "ask"
            if key in ("n", "d"):
                state.reject(fix)
                return "reject" if key == "d" else "ask"
            if key == "e":
                if self._edit(state, unit):
                    return "ask"
            elif key == "?":
                rule = get_rule(fix.rule)
                self.out.print(
                    rule_explanation(rule) if rule else fix.rule, markup=False, highlight=False
                )
            else:
                self.out.print(f"unknown answer {key!r}; the answers are:", markup=False)
                for k, meaning in KEYS.items():
                    self.out.print(f"  {k}  {meaning}", markup=False)

    # -- showing ----------------------------------------------------------------------------------

    def _file_header(self, state: FileReview) -> None:
        n = len(state.undecided())
        if self.tally.files > 1:
            self.out.print()
        title = f"{escape(state.path)}: {n} fix{'es' if n != 1 else ''} to review"
        if state.earlier:
            title += f", {len(state.earlier)} skipped as decided in an earlier review"
        self.out.print(Separator(title, style="bold"))
        if n:
            for rule in state.derived:
                self.out.print(
                    f"{rule} are updated to match what you accept when the file is written"
                )

    def _show(
        self, state: FileReview, fix: Fix, unit: list[Fix], remembered: Decision | None
    ) -> None:
        offered = [f for f in state.fixes if f.id not in state.earlier]
        self.out.print()
        self.out.print(
            f"[bold]\\[{offered.index(fix) + 1}/{len(offered)}] {escape(fix.rule)}[/bold] "
            f"({fix.safety})  "
            f"{escape(state.path)}:{fix.span.start_line}  [dim]{escape(fix.id)}[/dim]"
        )
        self.out.print(escape(fix.message))
        for f in unit:
            if f is not fix:
                self.out.print(f"  pulls in {escape(f.id)}: {escape(f.message)}")
        for f in state.dependents(unit):
            self.out.print(f"  needed by {escape(f.id)}: skipping this fix skips it too")
        if remembered == "accepted":
            self.out.print("  accepted in an earlier review, but not in the file: asking again")
        # the change on top of what was accepted so far in this file (imports aside)
        by_id = state.by_id
        accepted = [e for i in state.to_apply for e in by_id[i].edits]
        before = splice(state.base, accepted)
        diff = unified_diff(
            state.path, before, splice(state.base, accepted + [e for f in unit for e in f.edits])
        )
        body = diff.split("\n", 2)[2] if diff.count("\n") >= 2 else diff  # the file is named above
        if self.out.is_terminal:
            self.out.print(
                Syntax(body, "diff", theme="ansi_dark", background_color="default", word_wrap=True)
            )
        else:
            self.out.print(body, end="", markup=False, highlight=False)

    def _replay_line(self, state: FileReview) -> None:
        counts = [
            f"{len(state.accepted)} applied",
            f"{len(state.earlier) + len(state.blocked)} skipped",
        ]
        if state.left:
            counts.append(f"{len(state.left)} not decided")
        self.out.print(f"{escape(state.path)}: {', '.join(counts)}")

    # -- editing and writing ----------------------------------------------------------------------

    def _proposed(self, state: FileReview, ids: Sequence[str]) -> str:
        o = self.options
        if not ids:
            return state.base
        return apply_fixes(
            state.base,
            ids,
            path=state.path,
            todo_markers=False,
            select=o.select or None,
            ignore=o.ignore or None,
            project=state.project,
        )

    def _edit(self, state: FileReview, unit: list[Fix]) -> bool:
        """Open the file as it would be with ``unit`` applied; take what the reviewer saves."""
        try:
            proposed = self._proposed(state, state.to_apply + [f.id for f in unit])
            with self.answers.paused() if self.answers else nullcontext():
                edited = edit_text(proposed, state.source)
            result = self._analyse(state, edited)
        except SourceParseError as e:
            where = f"{e.line}:{e.column}: {e.reason}"
            message = f"{state.path}: the edited file is not valid: {where}"
            self._error(f"{message}; nothing was taken from the editor", count=False)
            return False
        except (ReviewError, MigrateError) as e:
            self._error(f"{state.path}: {e}; nothing was taken from the editor", count=False)
            return False
        if edited == proposed:
            state.accept(unit)
            return True
        for f in state.rebase(edited, result, unit, self.options.unsafe):
            self.out.print(
                f"{escape(f.id)} is left out: the edited file no longer has it "
                f"({escape(f.message)})"
            )
        return True

    def _finish(self, state: FileReview) -> None:
        """Write the file with the accepted fixes (only those) and remember the decisions."""
        t = self.tally
        try:
            final = self._proposed(state, state.to_apply)
            if final != state.source.text:
                write_source(state.source, final)
                t.written += 1
        except (SourceError, MigrateError) as e:
            self._error(
                f"{state.path}: not written: {e}" if isinstance(e, MigrateError) else str(e)
            )
            return
        t.applied += len(state.accepted)
        t.skipped += len(state.rejected)
        t.earlier += len(state.earlier)
        t.blocked += len(state.blocked)
        t.undecided += len(state.left) + len(state.undecided())
        self.decisions.record(state.key, state.decisions())

    def _error(self, message: str, count: bool = True) -> None:
        if count:
            self.tally.errors += 1
        self.err.print(f"[red]error[/red]: {escape(message)}")

    # -- the end -----------------------------------------------------------------------------------

    def summary(self) -> None:
        t = self.tally
        if self.answers is not None:
            self.out.print()
        verb = "reviewed" if self.answers is not None else "replayed"
        files = f"{t.files} file{'s' if t.files != 1 else ''} {verb}, {t.written} written"
        if t.errors:
            files += f", [red]{t.errors} errors[/red]"
        self.out.print(files)
        parts = [f"{t.applied} applied", f"{t.skipped} skipped"]
        if t.earlier:
            parts.append(f"{t.earlier} skipped as decided in an earlier review")
        if t.blocked:
            parts.append(f"{t.blocked} not offered (they need a skipped fix)")
        if t.undecided:
            parts.append(f"{t.undecided} not decided")
        self.out.print("fixes: " + ", ".join(parts))
        if self.quitting:
            self.out.print("stopped before the end: files after this one were not reviewed")


def review(
    paths: Sequence[str | os.PathLike[str]],
    options: Options,
    *,
    interactive: bool,
    decisions_file: Path | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Review (``interactive``) or replay the fixes under ``paths``; returns the exit code:
    0 when done (quitting with ``q`` included), 2 when a file could not be reviewed or written."""
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    store_path = decisions_file or DEFAULT_DECISIONS
    try:
        decisions = Decisions.load(store_path, must_exist=not interactive)
    except ReviewError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}")
        return 2
    answers = None
    if interactive:
        stream = stdin or sys.stdin
        answers = Answers(stream, terminal=stream.isatty())
    session = Review(options, decisions, answers, out, err)
    try:
        with answers or nullcontext():
            session.run(run(paths, options))
    finally:
        if interactive:
            try:
                decisions.save()
            except OSError as e:
                err.print(
                    f"[red]error[/red]: {escape(str(store_path))}: decisions not saved: "
                    f"{escape(str(e))}"
                )
                session.tally.errors += 1
    session.summary()
    if interactive:
        out.print(f"decisions saved in {escape(str(store_path))}")
    return 2 if session.tally.errors else 0
