"""``dali-migrate verify`` on inputs a first-time user or an attacker gives it: files that are not
Python, a FIFO, nonsense options, a missing ``verify`` extra, relative paths, a batch size that
comes from argparse, and module-level code that raises or never ends (which must never be a
``match``). Also the options dataclass of ``verify()``."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from dali_migrate import migrate_source
from dali_migrate.harness.cli import verify_command
from dali_migrate.harness.verify import InputError, VerifyDependencyError, VerifyOptions, verify

PROGRAMS = Path(__file__).resolve().parent.parent / "fixtures" / "programs"
CASE = PROGRAMS / "c_numpy_arith"


def _one_line_usage_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dali-migrate verify: error: "), result.output
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize(
    "content, words",
    [
        (b"import os\x00\x01\x02\n", ["binary file"]),
        (b"\xff\xfe\x00garbage", ["binary file"]),
        (b"x = '\xe9t\xe9'\n", ["not UTF-8"]),
        (b"def p(:\n    pass\n", ["not valid Python", "line 1"]),
    ],
)
def test_a_file_that_is_not_python_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, words: list[str]
) -> None:
    bad = tmp_path / "bad.py"
    bad.write_bytes(content)
    for args in ([str(bad), str(CASE / "new.py")], [str(CASE / "old.py"), str(bad)]):
        _one_line_usage_error(CliRunner().invoke(verify_command, args), str(bad), *words)
    with pytest.raises(InputError):
        verify(bad, CASE / "new.py")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_new_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "new.py"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "dali_migrate", "verify", str(CASE / "old.py"), str(fifo)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert (
        proc.stderr.strip() == f"dali-migrate verify: error: NEW {fifo}: not a regular file "
        "(verify takes Python files; --program takes folders)"
    )


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_timeout_that_cannot_work_is_refused(timeout: str) -> None:
    args = [str(CASE / "old.py"), str(CASE / "new.py"), "--timeout", timeout]
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 2 and "timeout" in result.output
    with pytest.raises(ValueError, match="timeout"):
        verify(CASE / "old.py", CASE / "new.py", timeout=float(timeout))


def test_without_the_verify_extra_one_line_says_what_to_install(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "numpy" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    result = CliRunner().invoke(verify_command, [str(CASE / "old.py"), str(CASE / "new.py")])
    _one_line_usage_error(result, "numpy", "pip install 'dali-migrate[verify]'", "'.[verify]'")
    with pytest.raises(VerifyDependencyError):
        verify(CASE / "old.py", CASE / "new.py")
    from dali_migrate.harness.migration import verify_migration

    # --write --verify: the engine reports it in one line
    with pytest.raises(VerifyDependencyError):
        verify_migration(CASE / "old.py")


def test_options_are_one_dataclass_and_the_keywords_still_work() -> None:
    names = {f.name for f in dataclasses.fields(VerifyOptions)}
    assert {"pipeline", "kwargs", "device", "timeout", "data", "bench", "extra_sys_path"} <= names
    with pytest.raises(TypeError):
        verify(CASE / "old.py", CASE / "new.py", no_such_option=1)
    with pytest.raises(ValueError, match="device"):
        verify(CASE / "old.py", CASE / "new.py", VerifyOptions(device="tpu"))
    with pytest.raises(ValueError, match="iterations"):  # the keyword wins over the dataclass
        verify(CASE / "old.py", CASE / "new.py", VerifyOptions(iterations=2), iterations=0)


@pytest.mark.dali
def test_a_relative_data_path_is_relative_to_the_current_directory(
    tmp_path: Path, synthetic_data, monkeypatch
) -> None:
    pytest.importorskip("nvidia.dali")
    data = synthetic_data({"kind": "npy", "count": 10, "shape": [6, 5, 3], "dtype": "uint8"})
    monkeypatch.chdir(data.parent)
    args = [
        str(CASE / "old.py"),
        str(CASE / "new.py"),
        "--device",
        "cpu",
        "--data",
        data.name,
        "--iterations",
        "2",
    ]
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 0, result.output
    report = verify(
        CASE / "old.py",
        CASE / "new.py",
        VerifyOptions(device="cpu", iterations=2),
        kwargs={"data_dir": data.name},
    )
    assert report.ok, [p.reason for p in report.pipelines]


ARGPARSE_OLD = textwrap.dedent("""\
    import argparse

    from nvidia.dali import fn, pipeline_def, types


    @pipeline_def
    def volumes(root):
        volume = fn.readers.numpy(file_root=root)
        return fn.cast(volume, dtype=types.FLOAT) * 2


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--data", default="/data")
        parser.add_argument("--batch-size", type=int, default=4)
        args = parser.parse_args()
        pipe = volumes(args.data, batch_size=args.batch_size, num_threads=1, device_id=None)
        pipe.build()
        print(pipe.run())


    if __name__ == "__main__":
        main()
    """)


def _argparse_pair(tmp_path: Path, old_code: str) -> tuple[Path, Path]:
    old, new = tmp_path / "old" / "prog.py", tmp_path / "new" / "prog.py"
    for path, code in ((old, old_code), (new, migrate_source(old_code).code)):
        path.parent.mkdir()
        path.write_text(code)
    return old, new


@pytest.mark.dali
def test_a_batch_size_from_argparse_takes_the_options_default(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    old, new = _argparse_pair(tmp_path, ARGPARSE_OLD)
    report = verify(old, new, device="cpu", samples=6)
    (p,) = report.pipelines
    assert p.verdict == "match", p.reason
    note = (
        "batch_size: 4, the default of the command-line option --batch-size "
        "(OLD passes args.batch_size)"
    )
    assert note in p.notes


@pytest.mark.dali
def test_a_batch_size_without_a_value_names_the_argument_and_the_kwargs(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    old, new = _argparse_pair(tmp_path, ARGPARSE_OLD.replace(", default=4", ""))
    (p,) = verify(old, new, device="cpu").pipelines
    assert p.verdict == "skipped"
    assert p.reason == (
        "no value for batch_size (OLD passes batch_size as `args.batch_size` "
        "where it builds the pipeline); pass it with --kwargs "
        "'{\"batch_size\": <value>}'"
    )
    (p,) = verify(old, new, device="cpu", samples=6, kwargs={"batch_size": 3}).pipelines
    assert p.verdict == "match", p.reason
    # what --write --verify --kwargs calls
    from dali_migrate.harness.migration import verify_migration

    vm = verify_migration(old, kwargs={"batch_size": 3}, device="cpu", samples=6)
    assert [p.verdict for p in vm.report.pipelines] == ["match"] and vm.changed


@pytest.mark.dali
@pytest.mark.parametrize(
    "tail, verdict_words",
    [
        ("raise RuntimeError('module-level failure')\n", "RuntimeError: module-level failure"),
        ("while True:\n    pass\n", "did not finish within 6 s"),
    ],
)
def test_module_level_code_of_new_runs(tmp_path: Path, tail: str, verdict_words: str) -> None:
    """A NEW that raises or never ends when imported is not a match (it was: a false proof)."""
    pytest.importorskip("nvidia.dali")
    new = tmp_path / "new.py"
    new.write_text(CASE.joinpath("new.py").read_text() + "\n" + tail)
    report = verify(CASE / "old.py", new, device="cpu", samples=6, timeout=6)
    (p,) = report.pipelines
    assert p.verdict == "error" and p.side == "new" and verdict_words in p.reason


def test_what_is_not_run_is_reported(tmp_path: Path) -> None:
    from dali_migrate.harness.lower import split_entry_points

    code = textwrap.dedent("""\
        import numpy as np
        from trainer.loop import run
        np.random.seed(0)
        def main():
            pass
        main()
        pipe = make()
        pipe.build()
        run(3)
        raise SystemExit(main())
        if __name__ == "__main__":
            main()
        """).replace("make()", "main()")
    kept, dropped = split_entry_points(code, {"trainer"})
    assert "np.random.seed(0)" in kept and "def main" in kept and "__main__" not in kept
    assert dropped == [
        "line 6: main()",
        "line 7: pipe = main()",
        "line 8: pipe.build()",
        "line 9: run(3)",
        "line 10: raise SystemExit(main())",
    ]


@pytest.mark.dali
def test_calls_into_the_programs_own_modules_are_not_run_on_import(tmp_path: Path) -> None:
    """``from helpers import train; train()`` at module level runs the program: it is left out
    (and reported) also when the sources come from memory, as ``--write --verify`` gives them."""
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.verify import verify_code

    (tmp_path / "helpers.py").write_text("def train():\n    raise SystemExit('the program ran')\n")
    tail = "\nfrom helpers import train\ntrain()\n"
    old, new = (
        CASE.joinpath("old.py").read_text() + tail,
        CASE.joinpath("new.py").read_text() + tail,
    )
    report = verify_code(old, new, base_dir=tmp_path, device="cpu", samples=6, iterations=2)
    assert report.ok, [p.reason for p in report.pipelines]
    last = [
        f"{side} line {len(code.splitlines())}: train()"
        for side, code in (("OLD", old), ("NEW", new))
    ]
    assert report.not_run == last
