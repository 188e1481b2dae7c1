"""``dali-migrate --write --verify``: what verifies is written, what does not stays as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import dali_migrate.engine as engine
from dali_migrate.cli import main

PROGRAM_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "programs"
PROGRAM = PROGRAM_FIXTURES / "d_random_ops" / "old.py"

pytestmark = pytest.mark.dali


def _copy(tmp_path: Path) -> Path:
    pytest.importorskip("nvidia.dali")
    target = tmp_path / "augment.py"
    shutil.copy(PROGRAM, target)
    return target


def test_verified_migration_is_written(tmp_path: Path) -> None:
    target = _copy(tmp_path)
    result = CliRunner().invoke(
        main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)]
    )
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
        return type(result)(
            result.source,
            result.code.replace("resize_x=32", "resize_x=31"),
            result.fixes,
            result.diagnostics,
            result.applied,
        )

    monkeypatch.setattr(engine, "_migrate", broken)
    result = CliRunner().invoke(
        main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)]
    )
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
    result = CliRunner().invoke(
        main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)]
    )
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
    result = CliRunner().invoke(
        main, ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)]
    )
    assert result.exit_code == 1, result.output
    assert target.read_text() == before


def test_whole_program_check_holds_back_a_file_that_runs_differently(
    tmp_path: Path, synthetic_data
) -> None:
    """Every pipeline of the file verifies, but the program around them prints something else:
    with ``program_args`` (``--write --verify`` of a program) the file is not written."""
    pytest.importorskip("nvidia.dali")
    from dali_migrate import migrate_source
    from dali_migrate.harness.migration import PROGRAM, verify_migration

    case = PROGRAM_FIXTURES / "x_train_val_interleaved"
    old = tmp_path / "train.py"
    shutil.copy(case / "old.py", old)
    result = migrate_source(old.read_text())
    expected = (case / "new.py").read_text()
    data = str(synthetic_data({"kind": "jpeg_folders", "classes": 2, "per_class": 5}))
    options = {"program_args": [data, "2"], "program_entry": "main", "device": "cpu", "samples": 6}
    broken = expected.replace("round {round_}", "round {round_ + 1}")
    for code, verdict in ((expected, "match"), (broken, "mismatch")):
        given = type(result)(result.source, code, result.fixes, result.diagnostics, result.applied)
        vm = verify_migration(old, result=given, **options)
        verdicts = {p.name: p.verdict for p in vm.report.pipelines}
        assert verdicts == {"train_pipe": "match", "val_pipe": "match", PROGRAM: verdict}
        assert vm.changed == (verdict == "match")
        assert (vm.code == code) if verdict == "match" else (vm.code == old.read_text())
    why = "not written: verify found mismatch for the whole file: standard output differs"
    assert any(why in d.message for d in vm.diagnostics)


def test_migrated_code_that_does_not_compile_is_not_written(tmp_path: Path) -> None:
    target = _copy(tmp_path)
    from dali_migrate import migrate_source
    from dali_migrate.harness.migration import verify_migration

    result = migrate_source(target.read_text())
    broken = type(result)(
        result.source,
        result.code + "\ndef oops(:\n",
        result.fixes,
        result.diagnostics,
        result.applied,
    )
    vm = verify_migration(target, result=broken, device="cpu")
    assert not vm.changed and vm.code == target.read_text()
    messages = [d.message for d in vm.diagnostics]
    assert any("not written" in m and "not valid Python" in m for m in messages), messages


def _sized(tmp_path: Path) -> Path:
    """The program with a pipeline argument the harness cannot find a value for by itself."""
    target = _copy(tmp_path)
    text = target.read_text().replace(
        "def augment_pipe(data_dir):", "def augment_pipe(data_dir, size):"
    )
    text = text.replace("resize_x=32, resize_y=32", "resize_x=size, resize_y=size")
    text = text.replace(
        "pipe = augment_pipe(data_dir)", "width = 32\n    pipe = augment_pipe(data_dir, width)"
    )
    target.write_text(text)
    return target


def test_kwargs_give_write_verify_the_arguments_it_cannot_find(tmp_path: Path) -> None:
    target = _sized(tmp_path)
    args = ["--write", "--verify", "--device", "cpu", "-j", "1", str(target)]
    without = CliRunner().invoke(main, args)
    assert "pipeline augment_pipe: not verified" in without.output and "--kwargs" in without.output
    (tmp_path / "again").mkdir()
    target = _sized(tmp_path / "again")
    result = CliRunner().invoke(main, [*args[:-1], "--kwargs", '{"size": 32}', str(target)])
    assert result.exit_code == 0, result.output
    assert "pipeline augment_pipe: verified: outputs match" in result.output


def test_kwargs_need_verify_and_must_be_an_object(tmp_path: Path) -> None:
    alone = CliRunner().invoke(main, ["--write", "--kwargs", "{}", str(tmp_path)])
    assert alone.exit_code == 2 and "--kwargs goes with --write --verify" in alone.output
    pytest.importorskip("nvidia.dali")
    bad = CliRunner().invoke(main, ["--write", "--verify", "--kwargs", "[1]", str(tmp_path)])
    assert bad.exit_code == 2 and "--kwargs" in bad.output and "Traceback" not in bad.output
