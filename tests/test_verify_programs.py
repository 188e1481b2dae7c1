"""Every whole-program fixture (fixtures/programs/<case>/) is verified by the differential
harness: each pipeline of old.py against its counterpart in new.py, on CPU, with the data of the
case's data.json, every output of every batch compared exactly (random outputs included: the
random states new.py draws are replayed into old.py). New cases are picked up automatically.

A case whose pipelines the harness cannot build (a pipeline built inline in ``main``, a
``@pipeline_def`` method) is skipped with the harness's reason; see ``fixtures/adapters/`` for
cases verified through a hand-written adapter instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dali_migrate.harness.testing import format_report
from dali_migrate.harness.verify import verify

PROGRAMS = Path(__file__).resolve().parent.parent / "fixtures" / "programs"
CASES = sorted(
    p.name for p in PROGRAMS.iterdir() if (p / "old.py").is_file() and (p / "new.py").is_file()
)


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    return tmp_path_factory.mktemp("verify-data"), tmp_path_factory.mktemp("verify-cache")


@pytest.mark.dali
@pytest.mark.parametrize("case", CASES)
def test_program_verifies(case: str, synthetic_data, caches) -> None:
    pytest.importorskip("nvidia.dali")
    spec = json.loads((PROGRAMS / case / "data.json").read_text())
    data_dir, cache_dir = caches
    report = verify(
        PROGRAMS / case / "old.py",
        PROGRAMS / case / "new.py",
        data=synthetic_data(spec),
        device="cpu",
        data_dir=data_dir,
        cache_dir=cache_dir,
        timeout=120,
    )
    verdicts = {p.name: p.verdict for p in report.pipelines}
    assert not any(v in ("mismatch", "error") for v in verdicts.values()), format_report(report)
    if "match" not in verdicts.values():
        pytest.skip("; ".join(f"{p.name}: {p.reason}" for p in report.pipelines))
    matched = [p for p in report.pipelines if p.verdict == "match"]
    # every batch compared, and the default crossed an epoch boundary of the data
    for p in matched:
        assert p.comparison is not None and p.comparison.samples_compared > 0
        assert p.iterations >= 2


@pytest.mark.dali
def test_random_outputs_are_compared_exactly(synthetic_data, caches) -> None:
    """The random outputs of d_random_ops are compared by value (record and replay), not only by dtype and shape."""
    pytest.importorskip("nvidia.dali")
    case = PROGRAMS / "d_random_ops"
    if not case.is_dir():
        pytest.skip("no d_random_ops fixture")
    spec = json.loads((case / "data.json").read_text())
    report = verify(
        case / "old.py",
        case / "new.py",
        data=synthetic_data(spec),
        device="cpu",
        iterations=3,
        data_dir=caches[0],
        cache_dir=caches[1],
    )
    (p,) = report.pipelines
    assert p.verdict == "match", format_report(report)
    assert p.random_ops == 2 and not p.rng
    assert p.comparison.samples_compared == 3 * 4 * 4


GPU_CASES = [
    c
    for c in CASES
    if any(
        s in (PROGRAMS / c / "old.py").read_text() for s in ('"mixed"', ".gpu()", 'device="gpu"')
    )
]
MUTATION_BASES = Path(__file__).resolve().parent.parent / "fixtures" / "mutations"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "old,new",
    [pytest.param(PROGRAMS / c / "old.py", PROGRAMS / c / "new.py", id=c) for c in GPU_CASES]
    + [
        pytest.param(
            MUTATION_BASES / "augment" / "old.py",
            MUTATION_BASES / "augment" / "new.py",
            id="mutations-augment",
        )
    ],
)
def test_verifies_on_the_gpu_as_written(old: Path, new: Path, synthetic_data) -> None:
    """On a GPU machine: `mixed` decoding, `.gpu()` and GPU random operators, not lowered.
    Run there with ``python3 -m pytest -m gpu tests/test_verify_programs.py -rA``."""
    from dali_migrate.harness.verify import has_gpu

    pytest.importorskip("nvidia.dali")
    if not has_gpu():
        pytest.skip("no GPU visible")
    spec_file = old.parent / "data.json"
    data = synthetic_data(json.loads(spec_file.read_text())) if spec_file.is_file() else None
    report = verify(old, new, data=data, device="gpu", samples=10, timeout=300)
    assert not report.lowered
    verdicts = [p.verdict for p in report.pipelines]
    assert not any(v in ("mismatch", "error") for v in verdicts), format_report(report)
    if "match" not in verdicts:  # as on the CPU: the programs test runs such programs whole
        pytest.skip("; ".join(f"{p.name}: {p.reason}" for p in report.pipelines))
    assert report.ok and all(v in ("match", "skipped") for v in verdicts), format_report(report)
