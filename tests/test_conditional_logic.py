"""``and``/``or``/``not`` on data as values (conditionals): the random operand that DALI evaluates
only where the left operand leaves the answer open draws for exactly those samples, which the
harness proves by replaying the migrated code's random states into the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from dali_migrate import migrate_source

CASE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "programs" / "m_conditional_logic_random"
)

#: the lazy operand of the expected migration, and the same drawn for the whole batch instead
LAZY = """                cond_rest = ndd.random.coin_flip(
                    batch_size=len(rest_), probability=0.7, dtype=types.BOOL, rng=rng
                )
                for i, p in zip(rest_, cond_rest.tensors):
                    holds[i] = bool(np.asarray(p))"""
EAGER = """                cond_rest = ndd.random.coin_flip(
                    batch_size=len(holds), probability=0.7, dtype=types.BOOL, rng=rng
                )
                for i in rest_:
                    holds[i] = bool(np.asarray(cond_rest.tensors[i]))"""


@pytest.mark.dali
def test_lazy_random_operand_matches_and_eager_one_does_not(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.verify import verify

    old = CASE / "old.py"
    new = migrate_source(old.read_text()).code
    assert LAZY in new
    (tmp_path / "new.py").write_text(new)
    (tmp_path / "eager.py").write_text(new.replace(LAZY, EAGER))
    lazy = verify(old, tmp_path / "new.py", device="cpu", iterations=6)
    eager = verify(old, tmp_path / "eager.py", device="cpu", iterations=6)
    (p,) = lazy.pipelines
    assert p.verdict == "match", p.summary()
    assert p.random_ops == 3
    (q,) = eager.pipelines
    assert q.verdict == "mismatch", q.summary()
