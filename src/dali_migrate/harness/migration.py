"""``--write --verify``: migrate a file and verify every migrated pipeline before writing it.

:func:`verify_migration` runs the codemod on a file's source, verifies the result against the
original with the harness (each side in its own subprocess: the codemod itself never runs user
code), and keeps only the fixes whose pipelines do not fail: a pipeline fix whose pipeline
verifies ``mismatch`` or ``error`` is not applied (with the fixes that depend on it) and becomes a
diagnostic carrying the verify verdict. Pipelines the harness cannot build inputs for
(``skipped``) keep their fixes, and the report says they were not verified.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .verify import InputError, PipelineReport, VerifyReport, verify_code

__all__ = ["PROGRAM", "VerifiedMigration", "verify_migration"]

#: the name of the whole-program entry in the report
PROGRAM = "(program)"


@dataclass
class VerifiedMigration:
    path: str
    code: str  # what to write: the source with the verified (and unverifiable) fixes applied
    applied: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    diagnostics: list = field(default_factory=list)
    report: VerifyReport | None = None

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def _whole_program(
    path: Path, code: str, new_code: str, args: list[str], entry: str | None, options: dict
) -> PipelineReport:
    """The file run whole, as it is and as migrated (a copy, its folder on the import path)."""
    import tempfile

    from .program import verify_program

    names = ("device", "timeout", "memory_mb", "atol", "rtol")
    keep = {k: options[k] for k in names if k in options}
    with tempfile.TemporaryDirectory(prefix="dali-verify-program-") as tmp:
        old, new = Path(tmp) / "old" / path.name, Path(tmp) / "new" / path.name
        for target, text in ((old, code), (new, new_code)):
            target.parent.mkdir()
            target.write_text(text, encoding="utf-8")
        report = verify_program(
            old, new, args=args, entry=entry, extra_paths=[str(path.parent.resolve())], **keep
        )
    (entry_report,) = report.pipelines
    entry_report.name = PROGRAM
    return entry_report


def _fix_pipelines(fix, names: list[str]) -> set[str]:
    parts = fix.id.split(":")
    found = {n for n in names if len(parts) > 1 and parts[1] == n}
    found |= {n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", fix.message)}
    return found


def verify_migration(
    path: str | os.PathLike,
    code: str | None = None,
    *,
    result=None,
    kwargs: dict | None = None,
    program_args: list[str] | None = None,
    program_entry: str | None = None,
    line_length: int | None = None,
    **options,
) -> VerifiedMigration:
    """Migrate ``path`` (or ``code``, the source of ``path``), verify, keep what verifies.

    ``result``: a :class:`dali_migrate.Result` already computed for this source; ``kwargs``:
    the pipelines' arguments (``--kwargs``); ``program_args``: also run the file whole, before
    and after, with these command-line arguments (``program_entry``: a function to call with
    them instead, see :mod:`.program`): if the two runs differ (exit status, output, files),
    nothing of the file is written; ``line_length``: where the code written is wrapped when
    only some fixes are kept (the migration's default when None); ``options``: those of
    :func:`dali_migrate.verify`."""
    from ..api import apply_fixes, migrate_source
    from ..wrap import DEFAULT_LINE_LENGTH

    path = Path(path)
    if code is None:
        code = path.read_text(encoding="utf-8")
    result = result if result is not None else migrate_source(code, path=str(path))
    if not result.changed:
        return VerifiedMigration(str(path), code)
    report = _verify_report(path, code, result.code, kwargs, options)
    if program_args is not None:
        whole = _whole_program(path, code, result.code, program_args, program_entry, options)
        report.pipelines.append(whole)
    applied_ids = set(result.applied) or {f.id for f in result.fixes if f.safety == "safe"}
    rejected, diagnostics = _rejected(result.fixes, applied_ids, report)
    keep = [f.id for f in result.fixes if f.id in applied_ids and f.id not in rejected]
    if rejected:
        wrap_at = DEFAULT_LINE_LENGTH if line_length is None else line_length
        new_code = apply_fixes(code, keep, path=str(path), line_length=wrap_at)
    else:
        new_code = result.code
    return VerifiedMigration(str(path), new_code, keep, sorted(rejected), diagnostics, report)


def _verify_report(
    path: Path, code: str, new_code: str, kwargs: dict | None, options: dict
) -> VerifyReport:
    """The pipelines of ``code`` verified against ``new_code`` (an error entry for the whole
    file when the migrated code cannot be run at all)."""
    try:
        return verify_code(
            code,
            new_code,
            old_name=path.name,
            new_name=path.name,
            base_dir=path.parent,
            kwargs=kwargs,
            **options,
        )
    except InputError as e:  # the migrated code itself cannot be run: nothing of it is written
        report = VerifyReport(str(path), str(path), options.get("device", "auto"), False)
        report.pipelines.append(PipelineReport(PROGRAM, "error", str(e), side="new"))
        return report


def _rejected(fixes: list, applied_ids: set[str], report: VerifyReport) -> tuple[set[str], list]:
    """The applied fixes not to write (those of pipelines that failed, what depends on them,
    and everything when the whole file fails), and the diagnostics that say why."""
    from ..fixes import Diagnostic

    failing: dict[str, PipelineReport] = {
        p.name: p for p in report.pipelines if p.verdict in ("mismatch", "error")
    }
    rejected: set[str] = set()
    diagnostics = []
    for fix in fixes:
        if fix.id not in applied_ids:
            continue
        bad = sorted(_fix_pipelines(fix, list(failing)))
        if bad:
            rejected.add(fix.id)
            for name in bad:
                p = failing[name]
                diagnostics.append(
                    Diagnostic(
                        rule=fix.rule,
                        line=fix.line or fix.span.start_line,
                        severity="error",
                        message=f"not written: verify found {p.verdict} for pipeline {name}: "
                        f"{p.summary()}",
                    )
                )
    changed = True
    while changed:  # fixes that need a rejected fix go too
        changed = False
        for fix in fixes:
            if (
                fix.id in applied_ids
                and fix.id not in rejected
                and any(d in rejected for d in fix.depends_on)
            ):
                rejected.add(fix.id)
                changed = True
    program = failing.get(PROGRAM)
    # the file as a whole does not run the same (or at all): it stays as it was
    if program is not None:
        rejected |= applied_ids
        message = (
            f"not written: verify found {program.verdict} for the whole file: {program.summary()}"
        )
        diagnostics.append(Diagnostic(rule="verify", line=1, severity="error", message=message))
    if rejected:
        # as when the codemod refuses a pipeline: no local rewrite is written either, so the
        # file is never left half pipeline mode, half dynamic mode
        rejected |= {f.id for f in fixes if f.id in applied_ids and _local(f.rule)}
    return rejected, diagnostics


def _local(rule_id: str) -> bool:
    """Whether ``rule_id`` is a rule outside the pipelines: a local or derived one (DM1xx)."""
    from ..registry import get_rule

    rule = get_rule(rule_id)
    return rule is not None and not rule.structural and not rule.last
