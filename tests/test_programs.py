"""Whole-program fixtures: a migrated program computes what the pipeline-mode program computed.

Each ``fixtures/programs/<case>/`` holds ``old.py`` (pipeline mode), ``new.py`` (the expected
dynamic-mode migration) and ``data.json``: the synthetic data it reads (see conftest.make_dataset),
``iterations``, and optionally ``random_outputs`` (indices of outputs that depend on random
operators: only their dtype and shape are compared), ``shuffled_epoch_size`` (the migrated reader
shuffles in another order by design: whole epochs are compared as multisets of samples) and
``refused`` (the rule that must refuse the pipeline: new.py is old.py plus one TODO line) and
``needs_gpu`` (why old.py cannot run lowered to the CPU: those cases run on a GPU machine only).

Both programs define ``main(data_dir, iterations)`` returning one tuple of numpy arrays (or of
per-sample lists of arrays) per iteration. They run each in its own subprocess on real DALI (CPU
only) on the same data and are compared sample by sample: dtype, shape and exact values.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from dali_migrate import migrate_source

PROGRAMS = Path(__file__).resolve().parent.parent / "fixtures" / "programs"
CASES = sorted(p.name for p in PROGRAMS.iterdir() if (p / "old.py").is_file()) if PROGRAMS.is_dir() else []
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
    assert len(todos) == 1 and new[todos[0]].lstrip().startswith(TODO_PREFIX + spec["refused"] + ": ")
    assert new[: todos[0]] + new[todos[0] + 1 :] == old


@pytest.mark.parametrize(
    "case", [p for p in _case_params("order_change_reported") if _spec(p.values[0]).get("shuffled_epoch_size")]
)
def test_order_change_is_reported(case: str) -> None:
    """Where the migrated reader shuffles in another order by design, the user is told."""
    diagnostics = migrate_source(_read(case, "old.py")).diagnostics
    assert any(d.rule == "DM200" and "shuffl" in d.message for d in diagnostics), diagnostics


# -- running the programs ----------------------------------------------------------------------

_RUNNER = r"""
import importlib.util, pickle, sys
import numpy as np

path, data_dir, iterations, out = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("program_under_test", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
results = module.main(data_dir, int(iterations))

def check(x, where):
    if isinstance(x, list):
        return [check(s, f"{where} sample {i}") for i, s in enumerate(x)]
    if type(x) is not np.ndarray:
        raise TypeError(f"{where}: main() returned a {type(x).__module__}.{type(x).__qualname__}, not a numpy array")
    return x

if not isinstance(results, list) or not all(isinstance(r, tuple) for r in results):
    raise TypeError("main() must return a list of tuples")
results = [tuple(check(o, f"iteration {i} output {k}") for k, o in enumerate(r)) for i, r in enumerate(results)]
with open(out, "wb") as f:
    pickle.dump(results, f)
"""


class _Run:
    """A program run in its own subprocess (started at once, so that two can run side by side)."""

    def __init__(self, program: Path, data_dir: Path, iterations: int, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.program, self.out = program, workdir / "results.pkl"
        if not _has_gpu():
            # GPU programs (mixed decoding, .gpu()) run lowered to the CPU by the harness's transform
            from dali_migrate.harness.lower import lower_to_cpu

            code = program.read_text(encoding="utf-8")
            lowered = lower_to_cpu(code).code
            if lowered != code:
                program = workdir / f"lowered_{program.name}"
                program.write_text(lowered, encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER, str(program), str(data_dir), str(iterations), str(self.out)],
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._results: list[tuple] | None = None

    def results(self) -> list[tuple]:
        if self._results is None:
            try:
                _, stderr = self.proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
                pytest.fail(f"{self.program} ran longer than {TIMEOUT_S} s", pytrace=False)
            if self.proc.returncode != 0:
                pytest.fail(f"{self.program} failed (exit {self.proc.returncode}):\n{stderr[-4000:]}", pytrace=False)
            with open(self.out, "rb") as f:
                self._results = pickle.load(f)
        return self._results


def _skip_without_gpu(spec: dict) -> None:
    """``needs_gpu``: old.py cannot run lowered to the CPU (``reason`` says why)."""
    if spec.get("needs_gpu") and not _has_gpu():
        pytest.skip(f"needs a GPU: {spec['needs_gpu']}")


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a test dependency
        return False


def _samples(output):
    return list(output) if isinstance(output, list) or output.ndim > 0 else [output]


def _differences(old: list[tuple], new: list[tuple], spec: dict) -> list[str]:
    """Every difference, sample by sample: dtype, shape and values, except the values of the
    outputs that depend on random operators (``random_outputs``). With ``shuffled_epoch_size``
    (the reader shuffles in another order by design) values are compared per whole epoch, as
    multisets of samples."""
    import numpy as np

    random_outputs = set(spec.get("random_outputs", []))
    epoch = spec.get("shuffled_epoch_size")

    diffs = []
    if len(old) != len(new):
        return [f"{len(old)} iterations before, {len(new)} after"]
    for it, (o_out, n_out) in enumerate(zip(old, new)):
        if len(o_out) != len(n_out):
            diffs.append(f"iteration {it}: {len(o_out)} outputs before, {len(n_out)} after")
            continue
        for k, (o, n) in enumerate(zip(o_out, n_out)):
            where = f"iteration {it} output {k}"
            if isinstance(o, list) != isinstance(n, list):
                diffs.append(f"{where}: {type(o).__name__} before, {type(n).__name__} after")
                continue
            o_s, n_s = _samples(o), _samples(n)
            if len(o_s) != len(n_s):
                diffs.append(f"{where}: {len(o_s)} samples before, {len(n_s)} after")
                continue
            for i, (a, b) in enumerate(zip(o_s, n_s) if not epoch else ()):
                if a.dtype != b.dtype or a.shape != b.shape:
                    diffs.append(f"{where} sample {i}: {a.dtype}{a.shape} before, {b.dtype}{b.shape} after")
                elif k not in random_outputs and not np.array_equal(a, b):
                    diffs.append(f"{where} sample {i}: values differ")
    if epoch and not diffs:
        streams = [_sample_stream(side) for side in (old, new)]
        for e in range(min(len(streams[0]), len(streams[1])) // epoch):
            if sorted(streams[0][e * epoch : (e + 1) * epoch]) != sorted(streams[1][e * epoch : (e + 1) * epoch]):
                diffs.append(f"epoch {e}: the samples differ, not only their order")
    return diffs


def _sample_stream(results: list[tuple]) -> list[tuple]:
    """All samples of all iterations in order, each as the hashable tuple of its outputs."""
    stream = []
    for outputs in results:
        per_output = [_samples(o) for o in outputs]
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
            cache[case] = data_dir, _Run(PROGRAMS / case / "old.py", data_dir, spec["iterations"], work)
        return cache[case]

    return get


@pytest.mark.dali
@pytest.mark.parametrize("case", _case_params("expected_run"))
def test_expected_computes_the_same(case: str, old_results, tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    spec = _spec(case)
    _skip_without_gpu(spec)
    data_dir, old = old_results(case)
    new = _Run(PROGRAMS / case / "new.py", data_dir, spec["iterations"], tmp_path)
    assert _differences(old.results(), new.results(), spec) == []


@pytest.mark.dali
@pytest.mark.parametrize("case", _case_params("migrated_run"))
def test_migrated_computes_the_same(case: str, old_results, tmp_path: Path) -> None:
    """What the codemod produces today, run; differs from the test above only for known bugs."""
    pytest.importorskip("nvidia.dali")
    migrated = migrate_source(_read(case, "old.py")).code
    if migrated == _read(case, "new.py"):
        pytest.skip("the migration equals new.py, which test_expected_computes_the_same runs")
    spec = _spec(case)
    _skip_without_gpu(spec)
    data_dir, old = old_results(case)
    program = tmp_path / "migrated.py"
    program.write_text(migrated, encoding="utf-8")
    new = _Run(program, data_dir, spec["iterations"], tmp_path / "run")
    assert _differences(old.results(), new.results(), spec) == []
