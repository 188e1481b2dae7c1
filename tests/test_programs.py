"""Whole-program fixtures: a migrated program computes what the pipeline-mode program computed.

Each ``fixtures/programs/<case>/`` holds ``old.py`` (pipeline mode), ``new.py`` (the expected
dynamic-mode migration) and ``data.json``: the synthetic data it reads (see conftest.make_dataset),
``iterations``, and optionally ``random_outputs`` (indices of outputs that depend on random
operators: only their dtype and shape are compared), ``shuffled_epoch_size`` (the migrated reader
shuffles in another order by design: whole epochs are compared as multisets of samples) and
``refused`` (the rule that must refuse the pipeline: new.py is old.py plus one TODO line).

Both programs define ``main(data_dir, iterations)`` returning one tuple of numpy arrays (or of
per-sample lists of arrays) per iteration. They run whole, each in its own subprocess and working
directory, through the harness's whole-program runner (``dali-migrate verify --program --entry
main``) on real DALI (CPU only) on the same data, and are compared: exit status (both 0: a crash,
an abort at exit or a hang fails), standard output, files written, and every returned sample:
dtype, shape and exact values.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from dali_migrate import migrate_source

PROGRAMS = Path(__file__).resolve().parent.parent / "fixtures" / "programs"
CASES = (
    sorted(p.name for p in PROGRAMS.iterdir() if (p / "old.py").is_file())
    if PROGRAMS.is_dir()
    else []
)
TIMEOUT_S = 120
TODO_PREFIX = "# TODO(dali-migrate): "

#: Known migration bugs: case -> {test: reason}; those tests are strict xfails, so a fix shows up.
#: "expected_text": migrate_source(old.py) differs from the correct expected migration in new.py.
#: "migrated_run": the code migrate_source produces does not compute what old.py computes.
#: "order_change_reported": a by-design change of the shuffle order is not reported.
KNOWN_BUGS: dict[str, dict[str, str]] = {}


def _case_params(test: str) -> list:
    params = []
    for case in CASES:
        reason = KNOWN_BUGS.get(case, {}).get(test)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case, marks=marks))
    return params


def _read(case: str, name: str) -> str:
    return (PROGRAMS / case / name).read_text(encoding="utf-8")


def _spec(case: str) -> dict:
    return json.loads(_read(case, "data.json"))


# -- the codemod's text ------------------------------------------------------------------------


@pytest.mark.parametrize("case", _case_params("expected_text"))
def test_migration_gives_expected_text(case: str) -> None:
    assert migrate_source(_read(case, "old.py")).code == _read(case, "new.py")


@pytest.mark.parametrize("case", _case_params("fixed_point"))
def test_expected_is_fixed_point(case: str) -> None:
    new = _read(case, "new.py")
    assert migrate_source(new).code == new


@pytest.mark.parametrize("case", CASES)
def test_expected_does_not_import_dali_migrate(case: str) -> None:
    assert "dali_migrate" not in _read(case, "new.py")


@pytest.mark.parametrize("case", [c for c in CASES if _spec(c).get("refused")])
def test_refused_case_only_gains_a_todo(case: str) -> None:
    spec = _spec(case)
    old, new = _read(case, "old.py").splitlines(), _read(case, "new.py").splitlines()
    todos = [i for i, line in enumerate(new) if line.lstrip().startswith(TODO_PREFIX)]
    assert len(todos) == 1 and new[todos[0]].lstrip().startswith(
        TODO_PREFIX + spec["refused"] + ": "
    )
    assert new[: todos[0]] + new[todos[0] + 1 :] == old


@pytest.mark.parametrize(
    "case",
    [
        p
        for p in _case_params("order_change_reported")
        if _spec(p.values[0]).get("shuffled_epoch_size")
    ],
)
def test_order_change_is_reported(case: str) -> None:
    """Where the migrated reader shuffles in another order by design, the user is told."""
    diagnostics = migrate_source(_read(case, "old.py")).diagnostics
    assert any(d.rule == "DM200" and "shuffl" in d.message for d in diagnostics), diagnostics


# -- running the programs ----------------------------------------------------------------------
# Each side runs whole, as the harness's ``verify --program --entry main`` runs it: its own process
# and working directory, ``main(data_dir, iterations)`` called, then a normal interpreter exit, so
# exit status (a crash, an abort at exit, a hang), standard output and files written are compared.


class _Run:
    """A program run in its own subprocess by the harness (in a thread, so two run side by side)."""

    def __init__(self, program: Path, data_dir: Path, iterations: int, workdir: Path) -> None:
        from dali_migrate.harness.program import ProgramSpec, prepared_root, run_program

        workdir.mkdir(parents=True, exist_ok=True)
        self.program, self.workdir = program, workdir
        device = "gpu" if _has_gpu() else "cpu"  # GPU programs run lowered to the CPU without one
        spec = ProgramSpec(program, "main", [str(data_dir), str(iterations)])
        self.root = prepared_root(spec, device, workdir / "src", [])
        self._run = None
        self._thread = threading.Thread(target=self._go, args=(run_program, spec, device))
        self._thread.start()

    def _go(self, run_program, spec, device) -> None:
        self._run = run_program(
            spec, self.root, self.workdir / "cwd", timeout=TIMEOUT_S, device=device
        )

    def run(self):
        """The harness's ProgramRun, once the program ended with status 0 (else the test fails)."""
        self._thread.join()
        run = self._run
        if run.exit_code != 0:
            pytest.fail(f"{self.program} {run.describe()}:\n{run.stderr[-4000:]}", pytrace=False)
        return run

    def results(self) -> list[list[dict]]:
        return self.run().results

    def wait(self) -> None:
        """Let a run nobody looks at end (it ends on its own, within the timeout)."""
        self._thread.join()


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a test dependency
        return False


def _same_run(old: _Run, new: _Run, spec: dict) -> list[str]:
    """Every difference the harness finds between two whole runs (exit status, standard output,
    files written, returned values; the values of ``random_outputs`` are compared by dtype and
    shape only). With ``shuffled_epoch_size`` (the reader shuffles in another order by design)
    values are compared per whole epoch, as multisets of samples."""
    from dali_migrate.harness.compare import Tolerances
    from dali_migrate.harness.program import compare_programs

    epoch = spec.get("shuffled_epoch_size")
    a, b = old.run(), new.run()
    ignored = set(spec.get("random_outputs", []))
    if epoch:
        ignored |= set(range(max((len(it) for it in a.results), default=0)))
    replacements = {str(r.workdir / "cwd"): "<cwd>" for r in (old, new)}
    outcome = compare_programs(
        a,
        b,
        replacements=replacements,
        random_outputs=ignored,
        tolerances=Tolerances.parse(atol=0, rtol=0),
    )
    diffs = [] if outcome.verdict == "match" else [outcome.reason, *outcome.notes]
    if epoch and not diffs:
        streams = [_sample_stream(r.results) for r in (a, b)]
        for e in range(min(len(streams[0]), len(streams[1])) // epoch):
            if sorted(streams[0][e * epoch : (e + 1) * epoch]) != sorted(
                streams[1][e * epoch : (e + 1) * epoch]
            ):
                diffs.append(f"epoch {e}: the samples differ, not only their order")
    return diffs


def _sample_stream(results: list[list[dict]]) -> list[tuple]:
    """All samples of all iterations in order, each as the hashable tuple of its outputs."""
    stream = []
    for outputs in results:
        per_output = [[np.asarray(s) for s in o["samples"]] for o in outputs]
        for i in range(len(per_output[0])):
            stream.append(tuple((s[i].dtype.str, s[i].shape, s[i].tobytes()) for s in per_output))
    return stream


@pytest.fixture(scope="module")
def old_results(synthetic_data, tmp_path_factory):
    """``old_results(case) -> (data_dir, run)``: old.py run once per case."""
    cache: dict[str, tuple[Path, _Run]] = {}

    def get(case: str) -> tuple[Path, _Run]:
        if case not in cache:
            spec = _spec(case)
            data_dir = synthetic_data(spec)
            work = tmp_path_factory.mktemp(f"{case}-old")
            cache[case] = (
                data_dir,
                _Run(PROGRAMS / case / "old.py", data_dir, spec["iterations"], work),
            )
        return cache[case]

    return get


@pytest.mark.dali
@pytest.mark.parametrize("case", _case_params("expected_run"))
def test_expected_computes_the_same(case: str, old_results, tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    spec = _spec(case)
    data_dir, old = old_results(case)
    new = _Run(PROGRAMS / case / "new.py", data_dir, spec["iterations"], tmp_path)
    assert _same_run(old, new, spec) == []


@pytest.mark.dali
@pytest.mark.parametrize("case", _case_params("migrated_run"))
def test_migrated_computes_the_same(case: str, old_results, tmp_path: Path) -> None:
    """What the codemod produces today, run; differs from the test above only for known bugs."""
    pytest.importorskip("nvidia.dali")
    migrated = migrate_source(_read(case, "old.py")).code
    if migrated == _read(case, "new.py"):
        pytest.skip("the migration equals new.py, which test_expected_computes_the_same runs")
    spec = _spec(case)
    data_dir, old = old_results(case)
    program = tmp_path / "migrated.py"
    program.write_text(migrated, encoding="utf-8")
    new = _Run(program, data_dir, spec["iterations"], tmp_path / "run")
    assert _same_run(old, new, spec) == []
