"""``dali-migrate --write --verify``: what verifies is written, what does not stays as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import dali_migrate.engine as engine
from dali_migrate.cli import main

PROGRAM = Path(__file__).resolve().parent.parent / "fixtures" / "programs" / "d_random_ops" / "old.py"

pytestmark = pytest.mark.dali


def _copy(tmp_path: Path) -> Path:
    pytest.importorskip("nvidia.dali")
    target = tmp_path / "augment.py"
    shutil.copy(PROGRAM, target)
    return target


def test_verified_migration_is_written(tmp_path: Path) -> None:
    target = _copy(tmp_path)
    result = CliRunner().invoke(main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)])
    assert result.exit_code == 0, result.output
    assert "ndd.readers.File" in target.read_text()
    assert "pipeline augment_pipe: verified: outputs match" in result.output


def test_migration_that_does_not_verify_is_not_written(tmp_path: Path, monkeypatch) -> None:
    """A codemod bug (simulated: a constant changed in the migrated code) must not reach the file."""
    target = _copy(tmp_path)
    before = target.read_text()
    real = engine._migrate

    def broken(text, path, options, project):
        result = real(text, path, options, project)
        return type(result)(result.source, result.code.replace("resize_x=32", "resize_x=31"), result.fixes, result.diagnostics, result.applied)

    monkeypatch.setattr(engine, "_migrate", broken)
    result = CliRunner().invoke(main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)])
    assert result.exit_code == 1, result.output
    assert target.read_text() == before
    assert "not written: verify found mismatch for pipeline augment_pipe" in result.output


def test_verify_needs_write(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--diff", "--verify", str(tmp_path)])
    assert result.exit_code == 2
    assert "--verify goes with --write" in result.output


def _mixed(tmp_path: Path) -> Path:
    target = _copy(tmp_path)
    text = target.read_text().replace('device="cpu"', 'device="mixed"')
    target.write_text(text)
    return target


def test_device_cpu_writes_a_verified_migration_lowered(tmp_path: Path) -> None:
    target = _mixed(tmp_path)
    result = CliRunner().invoke(main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert 'ndd.decoders.image(jpegs, device="cpu")' in text and '"gpu"' not in text
    assert "lowered to CPU (--device cpu)" in result.output


def test_device_cpu_leaves_a_held_back_pipeline_as_it_was(tmp_path: Path, monkeypatch) -> None:
    """--verify keeps a file whose pipeline does not match exactly as it was: not lowered either."""
    target = _mixed(tmp_path)
    before = target.read_text()
    real = engine._migrate

    def broken(text, path, options, project):
        result = real(text, path, options, project)
        code = result.code.replace("resize_x=32", "resize_x=31")
        return type(result)(result.source, code, result.fixes, result.diagnostics, result.applied)

    monkeypatch.setattr(engine, "_migrate", broken)
    result = CliRunner().invoke(main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)])
    assert result.exit_code == 1, result.output
    assert target.read_text() == before
