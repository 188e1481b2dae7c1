"""pytest integration: assert that a migration verifies.

In any test (dali-migrate registers this module as a pytest plugin, so the ``dali_verify``
fixture is there wherever dali-migrate is installed)::

    def test_migration_verifies(dali_verify):
        dali_verify("legacy/train.py", "train.py", data="tests/data/images")

or without the fixture::

    from dali_migrate.harness.testing import assert_verifies
    assert_verifies("legacy/train.py", "train.py", kwargs={"data_dir": "/data"}, iterations=4)

``assert_verifies`` raises ``AssertionError`` with the report unless every verified pipeline
matched and at least one was verified; it returns the :class:`VerifyReport`. Options are those of
:func:`dali_migrate.verify`. The fixture shares synthetic datasets and old-side results within the
test session. When DALI is not installed the fixture skips the test.
"""

from __future__ import annotations

import os

import pytest

from .verify import VerifyReport, verify

__all__ = ["VerificationFailed", "assert_verifies", "dali_verify", "format_report"]


class VerificationFailed(AssertionError):
    def __init__(self, report: VerifyReport) -> None:
        self.report = report
        super().__init__(format_report(report))


def format_report(report: VerifyReport) -> str:
    lines = [
        f"verify {report.old} -> {report.new} on "
        f"{report.device}{' (lowered to CPU)' if report.lowered else ''}:"
    ]
    for p in report.pipelines:
        lines.append(f"  {p.name}: {p.verdict}: {p.summary()}")
        lines.extend(f"    rng: {r}" for r in p.rng[:3])
        lines.extend(f"    note: {n}" for n in p.notes)
        if p.verdict == "error" and p.traceback:
            lines.append("    " + p.traceback.strip().replace("\n", "\n    ")[-2500:])
    if not report.pipelines:
        lines.append("  no pipeline found")
    elif not any(p.verdict == "match" for p in report.pipelines):
        lines.append("  nothing was verified")
    return "\n".join(lines)


def assert_verifies(old: str | os.PathLike, new: str | os.PathLike, **options) -> VerifyReport:
    """Verify and raise :class:`VerificationFailed` unless the migration verifies."""
    report = verify(old, new, **options)
    if not report.ok:
        raise VerificationFailed(report)
    return report


@pytest.fixture(scope="session")
def _dali_verify_dirs(tmp_path_factory):
    return tmp_path_factory.mktemp("dali-verify-data"), tmp_path_factory.mktemp("dali-verify-cache")


@pytest.fixture
def dali_verify(_dali_verify_dirs):
    """``dali_verify(old, new, **options) -> VerifyReport``: :func:`assert_verifies` with the
    session's shared dataset and result caches."""
    pytest.importorskip("nvidia.dali")
    data_dir, cache_dir = _dali_verify_dirs

    def check(old, new, **options) -> VerifyReport:
        options.setdefault("data_dir", data_dir)
        options.setdefault("cache_dir", cache_dir)
        return assert_verifies(old, new, **options)

    return check
