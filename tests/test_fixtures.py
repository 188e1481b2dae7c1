"""Fixture pairs: ``fixtures/<rule>/<case>.in.py`` must migrate to ``<case>.out.py``.

Every ``.out.py`` must parse, be a fixed point and hold every comment of its ``.in.py`` (but
the trailing comment of a statement deleted on purpose); a case whose ``.out.py`` equals its ``.in.py``
pins code that must stay unchanged. Set ``DALI_MIGRATE_REGEN=1`` to rewrite the ``.out.py``
files from the current rules (then review the diff before committing).
"""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
import pytest

from dali_migrate import migrate_source
from dali_migrate.comments import unexplained_losses
from dali_migrate.registry import rule_ids

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("DM*/*.in.py"))


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name[: -len('.in.py')]}"


def test_fixture_dirs_name_real_rules():
    known = set(rule_ids())
    for d in FIXTURES.glob("DM*"):
        assert d.name in known, f"fixtures/{d.name} names no rule"


def test_every_rule_has_fixtures():
    have = {p.parent.name for p in CASES}
    assert set(rule_ids()) <= have


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture(case: Path):
    source = case.read_text()
    expected_path = case.with_name(case.name.replace(".in.py", ".out.py"))
    result = migrate_source(source, path=str(case))
    if os.environ.get("DALI_MIGRATE_REGEN"):
        expected_path.write_text(result.code)
    expected = expected_path.read_text()
    assert result.code == expected
    assert unexplained_losses(result) == [], "comments of the input are missing from the output"
    cst.parse_module(expected)
    again = migrate_source(expected, path=str(expected_path))
    assert again.code == expected, "migrating the output again changed it"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture_rule_fires(case: Path):
    """The rule a fixture sits under is exercised by it (a fix or a diagnostic of that rule),
    unless the case pins unchanged code or is a ``*suppressed*`` case."""
    source = case.read_text()
    expected = case.with_name(case.name.replace(".in.py", ".out.py")).read_text()
    result = migrate_source(source)
    if expected == source:
        assert not [f for f in result.fixes if f.id in result.applied]
        return
    rule = case.parent.name
    fired = [f for f in result.fixes if f.rule == rule or rule in f.includes]
    fired += [d for d in result.diagnostics if d.rule == rule]
    if "suppressed" in case.name:
        assert not fired, "a suppression comment must stop the rule"
        return
    assert fired, f"{rule} neither fixed nor reported anything in {case.name}"
