"""Multi-file projects: pipelines defined in one module, built and run in another.

Each ``fixtures/projects/<case>/`` holds ``old/`` (a pipeline-mode package), ``new/`` (what
``dali-migrate --write`` must turn it into) and ``data.json`` (the synthetic data, see
conftest.make_dataset, ``iterations`` and ``main``: the module whose ``main(data_dir,
iterations)`` runs the project and returns numpy arrays per iteration). The test migrates a copy
of ``old/`` through the CLI, compares it with ``new/`` file by file, and runs both projects on
CPU DALI in subprocesses, comparing every sample exactly.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dali_migrate.cli import main as cli_main

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"
CASES = (
    sorted(p.name for p in PROJECTS.iterdir() if (p / "old").is_dir()) if PROJECTS.is_dir() else []
)

#: Cases whose modules no pipeline links (the modules that use the data module's loader import
#: a plain function of it): the cross-module plan has nothing to do for them.
UNLINKED = {"loader_returned"}

#: Known migration bugs: case -> {test: reason}; those tests are strict xfails, so a fix shows up.
KNOWN_BUGS: dict[str, dict[str, str]] = {}


def _case_params(test: str) -> list:
    params = []
    for case in CASES:
        reason = KNOWN_BUGS.get(case, {}).get(test)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case, marks=marks))
    return params


RUNNER = """
import importlib, pickle, sys
root, module, data_dir, iterations, out = sys.argv[1:6]
sys.path.insert(0, root)
results = importlib.import_module(module).main(data_dir, int(iterations))
with open(out, "wb") as f:
    pickle.dump(results, f)
"""


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def _migrated_copy(case: str, tmp_path: Path) -> Path:
    work = tmp_path / "project"
    shutil.copytree(PROJECTS / case / "old", work)
    result = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(work)])
    assert result.exit_code == 0, result.output
    return work


@pytest.mark.parametrize("case", _case_params("expected_tree"))
def test_project_migrates_to_expected_tree(case: str, tmp_path: Path) -> None:
    work = _migrated_copy(case, tmp_path)
    assert _tree(work) == _tree(PROJECTS / case / "new")
    again = CliRunner().invoke(cli_main, ["--check", "--no-progress", str(work)])
    # (a project whose migration leaves TODOs fails --check for them, changing nothing)
    fixed = again.exit_code == 0 or " 0 would change" in again.output
    assert fixed, "a second run would change the migrated project:\n" + again.output


@pytest.mark.parametrize("case", CASES)
def test_one_module_alone_is_left_alone(case: str, tmp_path: Path) -> None:
    """Without the module that defines its pipelines, a module that runs them is not touched,
    and a module defining pipelines it never runs keeps them (with a TODO)."""
    work = tmp_path / "project"
    shutil.copytree(PROJECTS / case / "old", work)
    spec = json.loads((PROJECTS / case / "data.json").read_text())
    user = work / (spec["main"].replace(".", "/") + ".py")
    before = user.read_text()
    result = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(user)])
    assert result.exit_code == 0, result.output
    assert user.read_text() == before


@pytest.mark.parametrize("case", CASES)
def test_migrated_project_computes_the_same(case: str, tmp_path: Path, synthetic_data) -> None:
    pytest.importorskip("nvidia.dali")
    spec = json.loads((PROJECTS / case / "data.json").read_text())
    data = synthetic_data(spec)
    outputs = {}
    for side, root in (("old", PROJECTS / case / "old"), ("new", _migrated_copy(case, tmp_path))):
        copy = tmp_path / f"run_{side}"
        shutil.copytree(root, copy, dirs_exist_ok=True)
        out = tmp_path / f"{side}.pkl"
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                RUNNER,
                str(copy),
                spec["main"],
                str(data),
                str(spec["iterations"]),
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, f"{side} project failed:\n{proc.stderr[-3000:]}"
        outputs[side] = pickle.loads(out.read_bytes())
    old, new = outputs["old"], outputs["new"]
    assert len(old) == len(new) == spec["iterations"]
    for i, (a, b) in enumerate(zip(old, new)):
        assert len(a) == len(b)
        for k, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype and x.shape == y.shape, f"iteration {i} output {k}"
            np.testing.assert_array_equal(x, y, err_msg=f"iteration {i} output {k}")


@pytest.mark.parametrize("case", CASES)
def test_migrations_done_while_planning_are_reused_not_repeated(case: str, monkeypatch) -> None:
    """The plan migrates linked modules in memory; a module whose final inputs are those of that
    migration is not migrated again, and its result is the one a fresh migration gives."""
    from dali_migrate import engine, project

    calls: list[str] = []
    real = engine._migrate

    def counting(text, path, options, project):
        calls.append(path)
        return real(text, path, options, project)

    monkeypatch.setattr(engine, "_migrate", counting)
    results = {
        fr.path: fr
        for fr in engine.run([PROJECTS / case / "old"], engine.Options(mode="diff", jobs=1))
    }
    linked = [p for p, fr in results.items() if project.linked(fr.project)]
    if case in UNLINKED:
        assert not linked and len(calls) == len(set(calls)), calls
        return
    assert linked, "the case links no modules"
    assert len(calls) < len(set(calls)) + len(linked), (
        f"every linked module was migrated again: {calls}"
    )
    for path in linked:
        fresh = real(
            Path(path).read_text(encoding="utf-8"),
            path,
            engine.Options(mode="diff"),
            results[path].project,
        )
        assert results[path].result.code == fresh.code


@pytest.mark.parametrize("case", CASES)
def test_plan_and_migration_in_worker_processes_give_the_same_tree(case: str, monkeypatch) -> None:
    from dali_migrate import engine

    def codes(jobs: int) -> dict[str, str | None]:
        results = engine.run([PROJECTS / case / "old"], engine.Options(mode="diff", jobs=jobs))
        return {fr.path: (fr.status, fr.result.code if fr.result else None) for fr in results}

    serial = codes(1)
    monkeypatch.setattr(engine, "PARALLEL_THRESHOLD", 1)
    assert codes(2) == serial
    assert any(status == "changed" for status, _ in serial.values())


def test_code_of_a_module_of_the_run_is_seen_and_of_one_outside_it_is_not(tmp_path: Path) -> None:
    """A pipeline calls functions of another module on its data: migrated with that module, the
    calls stay as they are; migrated alone, each gets a TODO saying what it must take and return."""
    work = tmp_path / "project"
    shutil.copytree(PROJECTS / "helper_module" / "old", work)
    inputs = work / "app" / "inputs.py"
    alone = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(inputs)])
    assert alone.exit_code == 0, alone.output
    text = inputs.read_text()
    assert "`shift` (imported from `.shifts`, whose code the tool does not see)" in text
    assert "`shifts.flip_sign` (of `shifts`, imported from `app`" in text
    assert "capture=True" not in text
    shutil.copy(PROJECTS / "helper_module" / "old" / "app" / "inputs.py", inputs)
    whole = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(work)])
    assert whole.exit_code == 0, whole.output
    assert (
        inputs.read_text() == (PROJECTS / "helper_module" / "new" / "app" / "inputs.py").read_text()
    )
    assert "TODO(dali-migrate)" not in inputs.read_text()


@pytest.mark.parametrize(
    ("init", "call", "threads"),
    [
        ("super().__init__(batch_size=bs, num_threads=workers, device_id=None)", "P(8, 6, d)", "6"),
        ("Pipeline.__init__(self, bs, 3, None)", "P(8, 6, d)", "3"),
        ("super().__init__(bs, workers, None)", "P(bs=8, data_dir=d)", "4"),
    ],
)
def test_class_made_in_another_module_sets_the_threads_its_init_hands_the_pipeline(
    init: str, call: str, threads: str, tmp_path: Path
) -> None:
    (tmp_path / "pipes.py").write_text(
        "import nvidia.dali.fn as fn\n"
        "from nvidia.dali.pipeline import Pipeline\n\n\n"
        "class P(Pipeline):\n"
        "    def __init__(self, bs, workers=4, data_dir=None):\n"
        f"        {init}\n"
        "        self.data_dir = data_dir\n\n"
        "    def define_graph(self):\n"
        "        return fn.readers.numpy(file_root=self.data_dir)\n"
    )
    user = tmp_path / "use.py"
    user.write_text(
        f"from pipes import P\n\n\ndef f(d):\n    p = {call}\n    p.build()\n    return p.run()\n"
    )
    result = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = user.read_text()
    assert f"    ndd.set_num_threads({threads})\n    p = {call}\n" in text
    assert "build()" not in text and "next(p)" in text


def test_user_of_a_refused_class_is_left_as_it_is_and_told_nothing_false(tmp_path: Path) -> None:
    """The class another module makes is refused: that module's code stays pipeline mode as it
    was, and no TODO asks to migrate a module the run was given."""
    (tmp_path / "pipes.py").write_text(
        "import nvidia.dali.fn as fn\n"
        "from nvidia.dali.pipeline import Pipeline\n\n\n"
        "class P(Pipeline):\n"
        "    def __init__(self, bs, data_dir, **kwargs):\n"
        "        super().__init__(bs, 2, None, **kwargs)\n"
        "        self.data_dir = data_dir\n\n"
        "    def define_graph(self):\n"
        "        return fn.readers.numpy(file_root=self.data_dir)\n"
    )
    plain = tmp_path / "use.py"
    plain.write_text(
        "from pipes import P\n\n\ndef f(d):\n    p = P(8, d)\n    p.build()\n    return p.run()\n"
    )
    iterated = tmp_path / "loader.py"
    iterated.write_text(
        "from nvidia.dali.plugin.pytorch import DALIGenericIterator\n"
        "from pipes import P\n\n\n"
        "def g(d):\n    p = P(8, d)\n    p.build()\n    return DALIGenericIterator(p, ['x'])\n"
    )
    before = plain.read_text()
    result = CliRunner().invoke(cli_main, ["--write", "--no-progress", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "pipeline not migrated" in (tmp_path / "pipes.py").read_text()
    assert plain.read_text() == before
    text = iterated.read_text()
    assert "in the same run" not in text and "P of pipes, given in this run" in text
