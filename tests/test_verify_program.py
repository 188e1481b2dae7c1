"""Whole-program verification (``dali-migrate verify --program``): OLD and NEW run whole, each in
its own process and working directory, compared by exit status, standard output, files written
and returned values. The first tests use small plain-Python programs (no DALI, fast); the last
run the program and project fixtures with several pipelines on CPU DALI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from dali_migrate.harness.cli import verify_command
from dali_migrate.harness.program import absolute_args, verify_program

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OK = textwrap.dedent("""\
    import os, sys
    print("args", sys.argv[1:])
    with open("out.txt", "w") as f:
        f.write("written\\n")
    """)


def _script(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def _pair(tmp_path: Path, old: str, new: str) -> tuple[Path, Path]:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    return _script(tmp_path / "old" / "train.py", old), _script(tmp_path / "new" / "train.py", new)


def _only(report):
    (entry,) = report.pipelines
    return entry


def test_identical_programs_match(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, OK, OK)
    report = verify_program(old, new, args=["--epochs", "1"], device="cpu", timeout=60)
    entry = _only(report)
    assert report.ok and report.mode == "program", entry.reason
    assert entry.verdict == "match" and "1 line(s) of output, 1 file(s)" in entry.reason


def test_abort_on_one_side_is_a_mismatch(tmp_path: Path) -> None:
    aborts = OK + textwrap.dedent("""\
    import os, sys
    sys.stdout.flush()
    sys.stderr.write("terminate called without an active exception\\n")
    os.abort()
    """)
    old, new = _pair(tmp_path, OK, aborts)
    entry = _only(verify_program(old, new, device="cpu", timeout=60))
    assert entry.verdict == "mismatch" and entry.side == "new"
    assert "NEW was killed by SIGABRT (exit status 134)" in entry.reason
    assert "terminate called without an active exception" in entry.reason
    assert "OLD exited with status 0" in entry.reason


def test_hang_on_one_side_is_a_mismatch(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, OK, OK + "while True:\n    pass\n")
    entry = _only(verify_program(old, new, device="cpu", timeout=2))
    assert entry.verdict == "mismatch" and entry.side == "new"
    assert "NEW did not finish within 2 s" in entry.reason


def test_hang_on_both_sides_is_an_error(tmp_path: Path) -> None:
    hang = "while True:\n    pass\n"
    old, new = _pair(tmp_path, hang, hang)
    entry = _only(verify_program(old, new, device="cpu", timeout=1))
    assert entry.verdict == "error" and entry.side == "both"


def test_crash_on_one_side_is_a_mismatch_with_its_message(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, OK, OK + "raise RuntimeError('Only one capture-mode loop')\n")
    entry = _only(verify_program(old, new, device="cpu", timeout=60))
    assert entry.verdict == "mismatch" and entry.side == "new"
    assert "NEW exited with status 1" in entry.reason
    assert "Only one capture-mode loop" in entry.reason
    assert "RuntimeError" in entry.traceback


def test_the_same_failure_on_both_sides_proves_nothing(tmp_path: Path) -> None:
    fails = "import sys\nsys.exit('no data')\n"
    old, new = _pair(tmp_path, fails, fails)
    report = verify_program(old, new, device="cpu", timeout=60)
    assert _only(report).verdict == "error" and report.exit_code == 1


def test_output_difference_names_the_line(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, "print('a')\nprint('loss 0.5')\n", "print('a')\nprint('loss 0.6')\n")
    entry = _only(verify_program(old, new, device="cpu", timeout=60))
    assert entry.verdict == "mismatch"
    assert entry.reason == "standard output differs at line 2: OLD 'loss 0.5', NEW 'loss 0.6'"


def test_files_written_are_compared(tmp_path: Path) -> None:
    other = OK.replace('"written', '"other') + "open('extra.txt', 'w').close()\n"
    old, new = _pair(tmp_path, OK, other)
    entry = _only(verify_program(old, new, device="cpu", timeout=60))
    assert entry.verdict == "mismatch"
    assert entry.reason == "only NEW wrote extra.txt" and "out.txt differs" in entry.notes


def test_working_directory_and_program_paths_do_not_count(tmp_path: Path) -> None:
    body = "import os\nprint(os.getcwd())\nprint(os.path.dirname(os.path.abspath(__file__)))\n"
    old, new = _pair(tmp_path, body, body)
    assert _only(verify_program(old, new, device="cpu", timeout=60)).verdict == "match"


def test_path_arguments_are_made_absolute(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "data.txt").write_text("42\n")
    monkeypatch.chdir(tmp_path)
    assert absolute_args(["data.txt", "--in=data.txt", "--n", "3", "missing.txt"]) == [
        str(tmp_path / "data.txt"),
        f"--in={tmp_path / 'data.txt'}",
        "--n",
        "3",
        "missing.txt",
    ]
    reads = "import sys\nprint(open(sys.argv[1]).read().strip())\n"
    old, new = _pair(tmp_path, reads, reads)
    entry = _only(verify_program(old, new, args=["data.txt"], device="cpu", timeout=60))
    assert entry.verdict == "match", entry.reason


MAIN = textwrap.dedent("""\
    import numpy as np

    def main(n, scale):
        return [(np.arange(4, dtype=np.int32) * i, np.full(3, scale * i, dtype=np.float32))
                for i in range(n)]
    """)


def test_a_called_entry_compares_what_it_returns(tmp_path: Path) -> None:
    changed = MAIN.replace("np.int32) * i", "np.int32) * i + (i == 2)")
    old, new = _pair(tmp_path, MAIN, changed)
    options = {"entry": "main", "args": ["3", "0.5"], "device": "cpu", "timeout": 60}
    entry = _only(verify_program(old, new, **options))
    assert entry.verdict == "mismatch" and entry.iterations == 3
    assert entry.reason.startswith("returned values differ: iteration 2, output 0, sample 0")
    same = _only(verify_program(old, old, **options))
    assert same.verdict == "match" and "21 returned samples" in same.reason  # 3 x (4 + 3)


def test_random_outputs_are_compared_by_dtype_and_shape(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, MAIN, MAIN.replace("scale * i", "scale * i + 1"))
    entry = _only(
        verify_program(
            old, new, entry="main", args=["2", "1.0"], device="cpu", timeout=60, random_outputs=[1]
        )
    )
    assert entry.verdict == "match", entry.reason


def test_project_folders_run_a_module_or_a_function(tmp_path: Path) -> None:
    for side in ("old", "new"):
        pkg = tmp_path / side / "app"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data.py").write_text("def values():\n    return [1, 2, 3]\n")
        (pkg / "run.py").write_text(
            "from .data import values\n\ndef main(k):\n    print(sum(values()) * k)\n"
            "    return []\n\nif __name__ == '__main__':\n    main(2)\n"
        )
    old, new = tmp_path / "old", tmp_path / "new"
    as_module = _only(verify_program(old, new, entry="app.run", device="cpu", timeout=60))
    assert as_module.verdict == "match" and "1 line(s) of output" in as_module.reason
    as_call = _only(
        verify_program(old, new, entry="app.run:main", args=["5"], device="cpu", timeout=60)
    )
    assert as_call.verdict == "match"


def test_cli_program_mode(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, OK, OK + "import os\nos.abort()\n")
    run = CliRunner().invoke
    result = run(verify_command, ["--program", "--device", "cpu", str(old), str(old), "--", "x"])
    assert result.exit_code == 0, result.output
    result = run(verify_command, ["--program", "--format", "json", str(old), str(new), "--", "x"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert doc["mode"] == "program" and doc["pipelines"][0]["verdict"] == "mismatch"
    assert "SIGABRT" in doc["pipelines"][0]["reason"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["OLD", "NEW", "extra"], "program arguments go with --program"),
        (["--entry", "main", "OLD", "NEW"], "--entry and --random-outputs go with --program"),
        (["--program", "DIR", "NEW"], "a folder; say which module runs it"),
    ],
)
def test_cli_program_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    old, new = _pair(tmp_path, OK, OK)
    names = {"OLD": str(old), "NEW": str(new), "DIR": str(tmp_path / "old")}
    result = CliRunner().invoke(verify_command, [names.get(a, a) for a in args])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


# -- the fixtures with several pipelines, on CPU DALI ---------------------------------------------

SEVERAL = ["x_train_val_interleaved", "y_three_pipelines", "z_gpu_train_val"]


@pytest.mark.dali
@pytest.mark.parametrize("case", SEVERAL)
def test_programs_with_several_pipelines_verify_whole(case: str, synthetic_data) -> None:
    pytest.importorskip("nvidia.dali")
    folder = FIXTURES / "programs" / case
    spec = json.loads((folder / "data.json").read_text())
    args = ["--program", "--entry", "main", "--device", "cpu", "--format", "json"]
    if spec.get("random_outputs"):
        args += ["--random-outputs", ",".join(map(str, spec["random_outputs"]))]
    args += [str(folder / "old.py"), str(folder / "new.py"), "--"]
    args += [str(synthetic_data(spec)), str(spec["iterations"])]
    result = CliRunner().invoke(verify_command, args)
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.output)["pipelines"]
    assert entry["verdict"] == "match" and entry["iterations"] == spec["iterations"]


PROJECTS = sorted(p.name for p in (FIXTURES / "projects").iterdir() if (p / "new").is_dir())


@pytest.mark.dali
@pytest.mark.parametrize("case", PROJECTS)
def test_projects_verify_whole(case: str, synthetic_data) -> None:
    pytest.importorskip("nvidia.dali")
    folder = FIXTURES / "projects" / case
    spec = json.loads((folder / "data.json").read_text())
    args = [str(synthetic_data(spec)), str(spec["iterations"])]
    report = verify_program(
        folder / "old",
        folder / "new",
        entry=f"{spec['main']}:main",
        device="cpu",
        args=args,
        timeout=180,
    )
    entry = _only(report)
    assert entry.verdict == "match", f"{entry.reason}\n{entry.traceback}"


@pytest.mark.dali
def test_two_capture_loops_in_one_program_are_a_mismatch(tmp_path: Path, synthetic_data) -> None:
    """One pipeline per module, both in capture mode, train then validate: NEW raises."""
    pytest.importorskip("nvidia.dali")
    folder = FIXTURES / "projects" / "train_val_modules"
    new = tmp_path / "new"
    shutil.copytree(folder / "new", new)
    val = new / "trainer" / "val_data.py"
    code = val.read_text().replace("batch_size=batch_size)", "batch_size=batch_size, capture=True)")
    val.write_text(code.replace(".evaluate()", ""))
    spec = json.loads((folder / "data.json").read_text())
    report = verify_program(
        folder / "old",
        new,
        entry="trainer.loop:main",
        device="cpu",
        args=[str(synthetic_data(spec)), "3"],
        timeout=180,
    )
    entry = _only(report)
    assert entry.verdict == "mismatch" and entry.side == "new"
    assert "Only one capture-mode loop can be active at a time" in entry.reason


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_lowering_copies_code_not_data_and_never_opens_a_fifo(tmp_path: Path) -> None:
    """A CPU run of code that asks for a GPU runs a lowered copy of the program's modules and
    packages; other entries of its folder (data, a FIFO) are linked, never read or walked."""
    body = 'device = "gpu"\nprint(device, open("data/x.txt").read())\n'
    for side in ("old", "new"):
        folder = tmp_path / side
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "x.txt").write_text("data")
        (folder / "data" / "not_a_module.py").write_text("raise SystemExit('walked')")
        os.mkfifo(folder / "pipe.py")
        (folder / "train.py").write_text(body.replace('"data/', f'"{folder}/data/'))
    code = (
        "from dali_migrate.harness.program import verify_program; import sys; "
        f"r = verify_program({str(tmp_path / 'old' / 'train.py')!r}, "
        f"{str(tmp_path / 'new' / 'train.py')!r}, device='cpu', timeout=60); "
        "print(r.pipelines[0].verdict, r.lowered, len(r.lowering))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["match", "True", "2"], proc.stdout + proc.stderr


def test_a_called_entry_that_returns_none_or_other_values(tmp_path: Path) -> None:
    nothing = "def main():\n    print('done')\n"
    old, new = _pair(tmp_path, nothing, nothing)
    assert (
        _only(verify_program(old, new, entry="main", device="cpu", timeout=60)).verdict == "match"
    )
    other = "def main():\n    return {1, 2}\n"  # not arrays: compared by repr()
    (tmp_path / "b").mkdir()
    changed = _script(tmp_path / "b" / "train.py", other.replace("2}", "3}"))
    _script(old, other)
    entry = _only(verify_program(old, changed, entry="main", device="cpu", timeout=60))
    assert entry.verdict == "mismatch"
    assert entry.reason == "returned values differ: OLD '{1, 2}', NEW '{1, 3}'"
