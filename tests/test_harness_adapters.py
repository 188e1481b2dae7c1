"""Hand-written migrations (fixtures/adapters/<case>/new.py, in other styles than the codemod's:
a class, a callable, an iterable; their own RNG handling) verify ``match`` against the program
fixture's old.py through an adapter, with the ``dali_verify`` fixture of the pytest plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dali_migrate.harness.adapters import load_adapter_info

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = sorted(p.name for p in (FIXTURES / "adapters").iterdir() if (p / "adapter.py").is_file())


def test_three_hand_written_migrations() -> None:
    assert len(CASES) >= 3


@pytest.mark.dali
@pytest.mark.parametrize("case", CASES)
def test_hand_written_migration_verifies(case: str, dali_verify, synthetic_data) -> None:
    spec = json.loads((FIXTURES / "programs" / case / "data.json").read_text())
    report = dali_verify(
        FIXTURES / "programs" / case / "old.py",
        FIXTURES / "adapters" / case / "new.py",
        adapter=FIXTURES / "adapters" / case / "adapter.py",
        data=synthetic_data(spec),
        device="cpu",
    )
    (p,) = report.pipelines
    assert p.verdict == "match" and p.iterations >= 2
    if case == "b_shuffle_epochs":  # the new code shuffles with its own seed: aligned, and said so
        assert any("seed 42 of OLD replaced by the new code's 1234" in n for n in p.notes), p.notes


def test_adapter_needs_both_functions() -> None:
    with pytest.raises(ValueError, match="new_batches"):
        load_adapter_info("def build_old(old, **kw):\n    pass\n", "x")
    info = load_adapter_info(
        "NAME = 'n'\nKWARGS = {'a': 1}\ndef build_old(o): pass\ndef new_batches(n): pass\n", "x"
    )
    assert (info.name, info.kwargs) == ("n", {"a": 1})
