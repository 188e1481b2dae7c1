"""Renderings of results: one-line text records, the JSON document and SARIF 2.1.0.

Pure functions from :class:`~dali_migrate.engine.FileResult` lists to text or JSON-ready dicts;
the CLI and the review print them, the library returns them.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from rich.markup import escape

from . import __version__
from .engine import FileResult, Summary
from .fixes import Diagnostic, Edit, Fix, LineIndex
from .registry import all_rules
from .rules import Rule

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_VERSION = "2.1.0"
#: the base every relative artifact URI of a SARIF log is resolved against (the working directory)
SRCROOT = "SRCROOT"

_SEVERITY_COLOUR = {"todo": "yellow", "info": "blue", "error": "red"}
_SEVERITY_LEVEL = {"todo": "warning", "info": "note", "error": "error"}


# -- text ------------------------------------------------------------------------------------------


def rule_explanation(rule: type[Rule]) -> str:
    """What ``--explain`` and the review's ``?`` print: a title line and the rule's docstring,
    which shows a before/after."""
    doc = inspect.getdoc(inspect.getmodule(rule)) or rule.summary
    return f"{rule.id} {rule.name} ({rule.safety})\n\n{doc}"


def diagnostic_markup(path: str, d: Diagnostic) -> str:
    """One rich-markup line ``path:line:col: RULE severity: message`` (paths, messages escaped)."""
    colour = _SEVERITY_COLOUR[d.severity]
    where = f"{escape(path)}:{d.line}:{d.col}"
    return f"{where}: [{colour}]{d.rule} {d.severity}[/{colour}]: {escape(d.message)}"


# -- JSON ------------------------------------------------------------------------------------------


def json_report(results: Iterable[FileResult], summary: Summary, mode: str) -> dict[str, Any]:
    """The ``--format json`` document: every file that was parsed or failed, and the summary."""
    return {
        "version": __version__,
        "mode": mode,
        "files": [fr.to_dict() for fr in results if fr.status != "skipped"],
        "summary": summary.to_dict(),
    }


# -- SARIF -----------------------------------------------------------------------------------------


def sarif_report(results: Iterable[FileResult], *, root: Path | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: a result for each fix (with the fix's replacements, so
    code-scanning tools can show and apply it) and for each diagnostic (with its TODO marker as
    the fix, where one is proposed). Files that could not be processed are tool notifications.

    Relative paths are resolved against ``root`` (default: the working directory), which the log
    names as the ``SRCROOT`` base. Columns count Unicode code points, as Python strings do.
    """
    rules = list(all_rules())
    rule_index = {r.id: i for i, r in enumerate(rules)}
    sarif_results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for fr in results:
        location = _artifact_location(fr.path)
        if fr.status == "error":
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": fr.error or "cannot be processed"},
                    "locations": [{"physicalLocation": {"artifactLocation": location}}],
                }
            )
        if fr.result is None:
            continue
        lines = LineIndex(fr.result.source)
        applied = set(fr.result.applied)
        for fix in fr.result.fixes:
            sarif_results.append(
                _fix_result(fix, fix.id in applied, fr.written, location, lines, rule_index)
            )
        for d in fr.result.diagnostics:
            sarif_results.append(_diagnostic_result(d, location, lines, rule_index))
    base = (root or Path.cwd()).resolve().as_uri().rstrip("/") + "/"
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "dali-migrate",
                "version": __version__,
                "rules": [_rule_descriptor(r) for r in rules],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": base}},
        "columnKind": "unicodeCodePoints",
        "invocations": [
            {"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}
        ],
        "results": sarif_results,
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "help": {"text": rule_explanation(rule)},
        "properties": {"safety": rule.safety},
    }


def _artifact_location(path: str) -> dict[str, Any]:
    p = PurePath(path)
    if p.is_absolute():
        return {"uri": Path(path).as_uri()}
    # the bytes of the name, as the file system has them: a name that is not valid UTF-8 is
    # percent-encoded byte by byte (its str holds surrogates, which no text encoding takes)
    return {"uri": quote(os.fsencode(p.as_posix())), "uriBaseId": SRCROOT}


def _region(lines: LineIndex, start: int, end: int) -> dict[str, int]:
    """A SARIF region: 1-based lines and columns, the end column just past the last character."""
    span = lines.span(start, end)
    return {
        "startLine": span.start_line,
        "startColumn": span.start_col + 1,
        "endLine": span.end_line,
        "endColumn": span.end_col + 1,
    }


def _sarif_fix(
    description: str, location: dict[str, Any], edits: Sequence[Edit], lines: LineIndex
) -> dict[str, Any]:
    return {
        "description": {"text": description},
        "artifactChanges": [
            {
                "artifactLocation": location,
                "replacements": [
                    {
                        "deletedRegion": _region(lines, e.start, e.end),
                        "insertedContent": {"text": e.text},
                    }
                    for e in edits
                ],
            }
        ],
    }


def _fix_result(
    fix: Fix,
    applied: bool,
    written: bool,
    location: dict[str, Any],
    lines: LineIndex,
    rule_index: dict[str, int],
) -> dict[str, Any]:
    start, end = fix.edits[0].start, fix.edits[-1].end
    return {
        "ruleId": fix.rule,
        **({"ruleIndex": rule_index[fix.rule]} if fix.rule in rule_index else {}),
        "level": "warning" if fix.safety == "safe" else "note",
        "message": {"text": fix.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": _region(lines, start, end),
                }
            }
        ],
        "partialFingerprints": {"fixId/v1": fix.id},
        "fixes": [_sarif_fix(fix.message, location, fix.edits, lines)],
        "properties": {
            "fixId": fix.id,
            "safety": fix.safety,
            "dependsOn": list(fix.depends_on),
            # with --write the change is already in the file: regions refer to the file as it was
            "written": applied and written,
        },
    }


def _diagnostic_result(
    d: Diagnostic, location: dict[str, Any], lines: LineIndex, rule_index: dict[str, int]
) -> dict[str, Any]:
    line = max(d.line, 1)
    result: dict[str, Any] = {
        "ruleId": d.rule,
        **({"ruleIndex": rule_index[d.rule]} if d.rule in rule_index else {}),
        "level": _SEVERITY_LEVEL[d.severity],
        "message": {"text": d.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": {"startLine": line, "startColumn": d.col + 1},
                }
            }
        ],
        "properties": {"severity": d.severity},
    }
    if d.marker is not None:
        result["fixes"] = [
            _sarif_fix(f"add a TODO marker: {d.message}", location, [d.marker], lines)
        ]
    return result
