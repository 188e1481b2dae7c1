"""``dali-migrate verify --bench``: the throughput of both sides next to the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dali_migrate.harness.cli import verify_command

CASE = Path(__file__).resolve().parent.parent / "fixtures" / "programs" / "a_file_decode_cmn"

pytestmark = pytest.mark.dali


def test_bench_reports_both_rates_and_their_ratio() -> None:
    pytest.importorskip("nvidia.dali")
    args = [
        str(CASE / "old.py"),
        str(CASE / "new.py"),
        "--device",
        "cpu",
        "--bench",
        "8",
        "--format",
        "json",
    ]
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 0, result.output
    (pipeline,) = json.loads(result.output)["pipelines"]
    assert pipeline["verdict"] == "match"
    bench = pipeline["bench"]
    assert bench["old"] > 0 and bench["new"] > 0
    assert bench["ratio"] == pytest.approx(bench["new"] / bench["old"], rel=0.01)


def test_without_bench_there_is_no_timing() -> None:
    pytest.importorskip("nvidia.dali")
    args = [str(CASE / "old.py"), str(CASE / "new.py"), "--device", "cpu", "--format", "json"]
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 0, result.output
    assert "bench" not in json.loads(result.output)["pipelines"][0]
