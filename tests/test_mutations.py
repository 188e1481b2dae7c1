"""Mutation check: the harness must be able to fail.

``fixtures/mutations/<base>/`` holds a pipeline-mode program (old.py), its correct migration
(new.py, which must verify ``match``) and ``mutants/``: copies of new.py with one deliberate
mistake each (a changed constant, swapped arguments, a dropped op, reordered random ops, a
reader rebuilt per epoch with another seed, a wrong crop window, a dropped mirror, ...). verify
must report ``mismatch`` or ``error`` for every one. A first line ``# verify-options: {...}``
passes options to verify (a short timeout for the mutant that hangs, ...).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dali_migrate.harness.testing import format_report
from dali_migrate.harness.verify import verify

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "mutations"
BASES = sorted(p.name for p in ROOT.iterdir() if (p / "old.py").is_file())
MUTANTS = sorted(f"{p.parent.parent.name}/{p.stem}" for p in ROOT.glob("*/mutants/*.py"))

#: what the report must also say for some mutants (verdict, a substring of summary or rng lines)
EXPECTED = {
    "augment/reordered_random_ops": ("mismatch", "different order"),
    "augment/extra_random_draw": ("mismatch", "drew 3 random state(s)"),
    "branches/missing_advance": ("mismatch", "drew 1 random state(s)"),
    "augment/raises": ("error", "mutant: boom"),
    "augment/hangs": ("error", "Timeout"),
    "augment/memory_blowup": ("error", "Memory"),
    "augment/float16_output": ("mismatch", "dtype float32 before, float16 after"),
    "augment/wrong_layout": ("mismatch", "layout 'CHW' before, 'HWC' after"),
    "augment/swapped_arguments": ("mismatch", "values differ"),
}


def _options(path: Path) -> dict:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    return json.loads(first.split(":", 1)[1]) if first.startswith("# verify-options:") else {}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    pytest.importorskip("nvidia.dali")
    data_dir, cache_dir = (
        tmp_path_factory.mktemp("mutation-data"),
        tmp_path_factory.mktemp("mutation-cache"),
    )

    def go(base: str, new: Path):
        options = {"samples": 10, "timeout": 60, "device": "cpu", **_options(new)}
        return verify(
            ROOT / base / "old.py", new, data_dir=data_dir, cache_dir=cache_dir, **options
        )

    return go


def test_there_are_enough_mutants() -> None:
    assert len(MUTANTS) >= 20, MUTANTS


@pytest.mark.dali
@pytest.mark.parametrize("base", BASES)
def test_correct_migration_matches(base: str, run) -> None:
    """Without this the mutants below would prove nothing."""
    report = run(base, ROOT / base / "new.py")
    assert report.ok and all(p.verdict == "match" for p in report.pipelines), format_report(report)


@pytest.mark.dali
@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_caught(mutant: str, run) -> None:
    base, name = mutant.split("/")
    report = run(base, ROOT / base / "mutants" / f"{name}.py")
    verdicts = [p.verdict for p in report.pipelines]
    assert verdicts and all(v in ("mismatch", "error") for v in verdicts), format_report(report)
    assert report.exit_code == 1
    if mutant in EXPECTED:
        verdict, text = EXPECTED[mutant]
        (p,) = report.pipelines
        assert p.verdict == verdict, format_report(report)
        assert text in p.summary() + "\n".join(p.rng), format_report(report)
